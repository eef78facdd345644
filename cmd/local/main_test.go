package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
)

// Bad flags fail at once with exit 2 and the flag's name, before synth or any emulator starts.
func TestBadFlagsFailFast(t *testing.T) {
	work := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"extra argument", []string{"demo"}, `unexpected argument "demo"`},
		{"missing inbox", []string{"--inbox", filepath.Join(work, "nope")}, "--inbox"},
		{"inbox folder of an unknown tenant", []string{"--inbox", "testdata/inbox-unknown"}, `folder "nosuch" is not a tenant`},
		{"unknown flag", []string{"--sevre"}, "sevre"},
		{"serve without env file", []string{"--serve"}, "--env-file"},
		{"env file without serve", []string{"--env-file", "x"}, "--env-file"},
		{"bad key form", []string{"--event-key-form", "plus"}, "--event-key-form"},
		{"bad sequencers", []string{"--sequencers", "sorted"}, `--sequencers "sorted": want per-key or global`},
		{"negative client timeout", []string{"--register-client-timeout", "-1s"}, "--register-client-timeout -1s: want 0 or more"},
		{"negative lost starts", []string{"--lose-child-start-answers", "-2"}, "--lose-child-start-answers -2: want 0 or more"},
		{"zero retry scale", []string{"--retry-interval-scale", "0"}, "--retry-interval-scale 0: want more than 0"},
		{"zero async retry scale", []string{"--async-retry-scale", "0"}, "--async-retry-scale 0: want more than 0"},
		{"zero schedule scale", []string{"--schedule-scale", "0"}, "--schedule-scale 0: want more than 0"},
		{"negative lambda concurrency", []string{"--lambda-concurrency", "-1"}, "--lambda-concurrency -1: want 0 (unlimited) or more"},
		{"negative sink cap", []string{"--sink-max-in-flight", "-3"}, "--sink-max-in-flight -3: want 0 (no cap) or more"},
		{"sink cap with an external endpoint", []string{"--sink-max-in-flight", "6", "--register-url", "http://127.0.0.1:9/records"}, "--sink-max-in-flight is for the embedded sink"},
		{"sink outage without FOR", []string{"--sink-outage", "30s"}, `"30s": want AT:FOR, two durations such as 30s:5m`},
		{"sink outage of nothing", []string{"--sink-outage", "30s:0s"}, `FOR "0s": want a duration above 0`},
		{"sink 5xx above 1", []string{"--sink-5xx", "1.5"}, "--sink-5xx 1.5: want a fraction from 0 to 1"},
		{"negative sink key ttl", []string{"--sink-key-ttl", "-1s"}, "--sink-key-ttl -1s: want 0 (keys kept for ever) or more"},
		{"sink lookups with an external endpoint", []string{"--sink-lookup", "--register-url", "http://127.0.0.1:9/records"}, "--sink-key-ttl and --sink-lookup are for the embedded sink"},
		{"zero setup timeout", []string{"--setup-timeout", "0s"}, "--setup-timeout 0s: want more than 0"},
		{"negative timeout", []string{"--timeout", "-1m"}, "--timeout -1m0s: want more than 0"},
		{"missing tenants file", []string{"--tenants", filepath.Join(work, "none.json")}, "--tenants"},
		{"unknown upload order", []string{"--upload-order", "random"}, `--upload-order "random": want lexical, shuffle or reverse`},
		{"bad withhold glob", []string{"--inbox", "testdata/inbox-seq", "--withhold", "acme/orders-[.csv"}, `"acme/orders-[.csv" for flag -withhold: syntax error in pattern`},
		{"withhold glob that matches nothing", []string{"--inbox", "testdata/inbox-seq", "--withhold", "acme/order-3.csv"},
			`--withhold "acme/order-3.csv" matches no file: globs are matched against <tenant>/<relative path>, such as acme/orders-1.csv`},
		{"withhold without an inbox", []string{"--serve", "--env-file", filepath.Join(work, "env"), "--withhold", "acme/*"}, "--withhold keeps back files of --inbox, and there is none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errs bytes.Buffer
			code := run(context.Background(), append(tc.args, "--work", work), &out, &errs)
			// Failing fast is failing before the run writes anything: no run.log, no cdk.out.
			if entries, _ := os.ReadDir(work); len(entries) > 0 {
				t.Errorf("got %s in the work directory, want it empty (nothing started)", entries[0].Name())
			}
			if code != exitUsage {
				t.Errorf("got exit %d, want %d", code, exitUsage)
			}
			if !strings.Contains(errs.String(), tc.want) {
				t.Errorf("got stderr %q, want it to name %q", errs.String(), tc.want)
			}
			if strings.Contains(out.String(), "phase") {
				t.Errorf("got %q on stdout, want nothing started", out.String())
			}
		})
	}
	if _, err := os.Stat(filepath.Join(work, "cdk.out")); err == nil {
		t.Error("got a cdk.out in the work directory, want no synth")
	}
}

// TestBadFlagSyntaxPointsToHelp: a mistyped flag or value prints its error and one line pointing
// to --help, not the description of every flag; --help prints them on stdout and exits 0.
func TestBadFlagSyntaxPointsToHelp(t *testing.T) {
	for _, args := range [][]string{{"--sevre"}, {"--timeout", "soon"}, {"--drop-status-events"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out, errs bytes.Buffer
			code := run(context.Background(), args, &out, &errs)
			want := "local: run it with --help for the flags\n"
			lines := strings.SplitAfter(strings.TrimSuffix(errs.String(), "\n"), "\n")
			if code != exitUsage || len(lines) != 2 || !strings.HasPrefix(lines[0], "local: ") || lines[1]+"\n" != want || out.Len() != 0 {
				t.Errorf("got exit %d, stdout %q, stderr %q; want %d, nothing, and the error then %q", code, out.String(), errs.String(), exitUsage, want)
			}
		})
	}
	var out, errs bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &out, &errs); code != exitOK || !strings.Contains(out.String(), "-event-key-form") || errs.Len() != 0 {
		t.Errorf("--help: got exit %d, stdout %q, stderr %q; want 0 and the flags on stdout", code, out.String(), errs.String())
	}
}

func TestParseAcceptsKnownTenantInbox(t *testing.T) {
	var errs bytes.Buffer
	o, err := parse([]string{"--inbox", "testdata/inbox-ok"}, &errs)
	if err != nil {
		t.Fatalf("got %v, want no error", err)
	}
	if len(o.files) != 1 || o.files[0].tenant != "acme" {
		t.Errorf("got files %+v, want acme/a.csv", o.files)
	}
}

// The inbox's files in upload order, and the files withheld, as "<tenant>/<relative path>".
func uploadNames(o *options) (uploads, withheld []string) {
	for _, f := range o.files {
		uploads = append(uploads, f.tenant+"/"+f.rel)
	}
	for _, f := range o.withheld {
		withheld = append(withheld, f.tenant+"/"+f.rel)
	}
	return uploads, withheld
}

func TestParseUploadOrderAndWithhold(t *testing.T) {
	acme := func(ns ...int) []string {
		var out []string
		for _, n := range ns {
			out = append(out, fmt.Sprintf("acme/orders-%d.csv", n))
		}
		return out
	}
	globex := []string{"globex/orders-1.csv", "globex/orders-2.csv", "globex/orders-3.csv"}
	for _, tc := range []struct {
		name         string
		args         []string
		wantUploads  []string // nil: not checked (a shuffle: TestParseShuffleSeed)
		wantWithheld []string
		wantWarning  string
	}{
		{"lexical by default", nil, append(acme(1, 2, 3, 4, 5, 6), globex...), nil, ""},
		{"reverse, per tenant", []string{"--upload-order", "reverse"},
			append(acme(6, 5, 4, 3, 2, 1), "globex/orders-3.csv", "globex/orders-2.csv", "globex/orders-1.csv"), nil, ""},
		{"a seed without shuffle is a warning", []string{"--upload-seed", "3"}, append(acme(1, 2, 3, 4, 5, 6), globex...), nil, "--upload-seed 3 has no effect with --upload-order lexical"},
		{"withhold two globs", []string{"--withhold", "acme/orders-3.csv", "--withhold", "*/orders-1.csv"},
			append(acme(2, 4, 5, 6), "globex/orders-2.csv", "globex/orders-3.csv"), []string{"acme/orders-1.csv", "acme/orders-3.csv", "globex/orders-1.csv"},
			"--withhold without --serve"},
		{"withhold then shuffle the rest", []string{"--withhold", "acme/orders-[45].csv", "--upload-order", "shuffle", "--upload-seed", "11"},
			nil, acme(4, 5), "--withhold without --serve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parse(append([]string{"--inbox", "testdata/inbox-seq"}, tc.args...), io.Discard)
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			uploads, withheld := uploadNames(o)
			if tc.wantUploads != nil && !slices.Equal(uploads, tc.wantUploads) {
				t.Errorf("uploads: got %v, want %v", uploads, tc.wantUploads)
			}
			if !slices.Equal(withheld, tc.wantWithheld) {
				t.Errorf("withheld: got %v, want %v", withheld, tc.wantWithheld)
			}
			if tc.wantWarning == "" && len(o.warnings) > 0 || tc.wantWarning != "" && !strings.Contains(strings.Join(o.warnings, "\n"), tc.wantWarning) {
				t.Errorf("warnings: got %q, want %q", o.warnings, tc.wantWarning)
			}
			for _, w := range withheld {
				if slices.Contains(uploads, w) {
					t.Errorf("%s is both withheld and uploaded", w)
				}
			}
		})
	}
}

// A shuffle's seed is drawn when none is given and repeats the order when given back.
func TestParseShuffleSeed(t *testing.T) {
	drawn, err := parse([]string{"--inbox", "testdata/inbox-seq", "--upload-order", "shuffle"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	again, err := parse([]string{"--inbox", "testdata/inbox-seq", "--upload-order", "shuffle", "--upload-seed", fmt.Sprint(drawn.uploadSeed)}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := uploadNames(drawn)
	b, _ := uploadNames(again)
	if !slices.Equal(a, b) {
		t.Errorf("seed %d drawn gave %v, given back %v; want the same order", drawn.uploadSeed, a, b)
	}
	if len(drawn.warnings) > 0 {
		t.Errorf("got warnings %q, want none", drawn.warnings)
	}
	if line, want := uploadOrderLine(drawn), fmt.Sprintf("--upload-seed %d)", drawn.uploadSeed); !strings.HasSuffix(line, want) {
		t.Errorf("got %q, want the seed printed to repeat the run: %q", line, want)
	}
}

// Every flag of the emulated services and of the core system fills one field of its service's
// options, which go to localrun.Config as they are.
func TestServiceFlagsFillTheirService(t *testing.T) {
	for _, tc := range []struct {
		args []string
		got  func(o *options) any
		want any
	}{
		{[]string{"--event-key-form", "form"}, func(o *options) any { return o.s3.EventKeyForm }, "form"},
		{[]string{"--sequencers", "global"}, func(o *options) any { return o.s3.Sequencers }, "global"},
		{[]string{"--s3-missing-key-403"}, func(o *options) any { return o.s3.MissingKeyForbidden }, true},
		{[]string{"--drop-status-events", "0.5"}, func(o *options) any { return o.eventBridge.StatusEvents.Drop }, 0.5},
		{[]string{"--duplicate-status-events"}, func(o *options) any { return o.eventBridge.StatusEvents.Duplicate }, true},
		{[]string{"--schedule-scale", "0.5"}, func(o *options) any { return o.eventBridge.ScheduleScale }, 0.5},
		{[]string{"--async-retry-scale", "0.5"}, func(o *options) any { return o.lambda.AsyncRetryScale }, 0.5},
		{[]string{"--lambda-concurrency", "7"}, func(o *options) any { return o.lambda.Concurrency }, 7},
		{[]string{"--throttle-describe", "0.25"}, func(o *options) any { return o.stepFunctions.Throttle.DescribeExecution }, 0.25},
		{[]string{"--throttle-start", "0.25"}, func(o *options) any { return o.stepFunctions.Throttle.StartExecution }, 0.25},
		{[]string{"--register-client-timeout", "3s"}, func(o *options) any { return o.stepFunctions.LambdaClientTimeout[registerSource] }, 3 * time.Second},
		{[]string{"--register-client-timeout", "0s"}, func(o *options) any { return len(o.stepFunctions.LambdaClientTimeout) }, 0},
		{[]string{"--lose-child-start-answers", "2"}, func(o *options) any { return o.stepFunctions.LoseChildStartAnswers }, 2},
		{[]string{"--retry-interval-scale", "0.1"}, func(o *options) any { return o.stepFunctions.RetryIntervalScale }, 0.1},
		{[]string{"--fault-seed", "9"}, func(o *options) any { return [2]uint64{o.eventBridge.StatusEvents.Seed, o.stepFunctions.Throttle.Seed} }, [2]uint64{9, 9}},
		{[]string{"--sink-max-in-flight", "4"}, func(o *options) any { return o.core.MaxInFlight }, 4},
		{[]string{"--sink-outage", "30s:5m"}, func(o *options) any { return o.core.Outages }, []emulate.Outage{{At: 30 * time.Second, For: 5 * time.Minute}}},
		{[]string{"--sink-5xx", "0.1"}, func(o *options) any { return o.core.Rate5xx }, 0.1},
		{[]string{"--sink-key-ttl", "1m"}, func(o *options) any { return o.core.KeyTTL }, time.Minute},
		{[]string{"--sink-lookup"}, func(o *options) any { return o.core.Lookup }, true},
		{[]string{"--sink-latency", "10ms"}, func(o *options) any { return o.core.Latency }, 10 * time.Millisecond},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, err := parse(append([]string{"--inbox", "testdata/inbox-seq"}, tc.args...), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.got(o); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestExportLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"AWS_ENDPOINT_URL_S3=http://127.0.0.1:1234", "export AWS_ENDPOINT_URL_S3='http://127.0.0.1:1234'"},
		{"X=it's", `export X='it'\''s'`},
	} {
		if got := exportLine(tc.in); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestExitStatus(t *testing.T) {
	ok := &report.Report{Violations: []string{}, Tenants: map[string]*report.TenantReport{
		"acme": {Files: []report.FileReport{{Key: "a.csv", Status: "SUCCEEDED"}}}}}
	failed := &report.Report{Violations: []string{}, Tenants: map[string]*report.TenantReport{
		"acme": {Files: []report.FileReport{{Key: "a.csv", Status: "SUCCEEDED"}, {Key: "bad.csv", Status: "FAILED"}}}}}
	violated := &report.Report{Violations: []string{"acme: x"}, Tenants: map[string]*report.TenantReport{}}
	for _, tc := range []struct {
		name     string
		rep      *report.Report
		waitErr  error
		timedOut bool
		o        options
		want     int
	}{
		{"drained", ok, nil, false, options{}, 0},
		{"a failed file, default", failed, nil, false, options{}, 0},
		{"a failed file, --fail-on-failed-files", failed, nil, false, options{failOnFailed: true}, 1},
		{"every file failed is not OK with the flag", &report.Report{Violations: []string{}, Tenants: map[string]*report.TenantReport{
			"acme": {Files: []report.FileReport{{Key: "bad.csv", Status: "FAILED"}}}}}, nil, false, options{failOnFailed: true}, 1},
		{"a refused file, --fail-on-failed-files", &report.Report{Violations: []string{}, Tenants: map[string]*report.TenantReport{
			"acme": {Files: []report.FileReport{{Key: "a.csv", Status: "SUCCEEDED"}, {Key: "a-again.csv", Status: report.StatusRefused}}}}}, nil, false, options{failOnFailed: true}, 1},
		{"violation", violated, nil, false, options{}, 1},
		{"halted", failed, &localrun.HaltedError{Tenants: []string{"acme"}}, false, options{}, 4},
		{"holding files for a missing number", ok, &localrun.HaltedError{Holding: []string{"acme"}}, false, options{}, 4},
		{"timeout", ok, errors.New("not drained: context deadline exceeded"), true, options{timeout: time.Minute}, 3},
		{"serve, interrupted", ok, errors.New("not drained: context canceled"), false, options{serve: true}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := exitStatus(tc.rep, tc.waitErr, tc.timedOut, &tc.o)
			if got != tc.want {
				t.Errorf("got %d (%s), want %d", got, msg, tc.want)
			}
		})
	}
}

func TestWriteReportsBesideEachOther(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rep := &report.Report{Tenants: map[string]*report.TenantReport{
		"acme": {Files: []report.FileReport{{Key: "inbox/acme/a.csv", Status: "WAITING", UploadedAt: at}}},
	}, Violations: []string{}}
	dir = filepath.Join(dir, "not", "yet")
	if err := writeReports(filepath.Join(dir, "report.json"), rep, []string{"acme"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.json")); err != nil {
		t.Errorf("JSON report: %v", err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatalf("HTML report: got %v, want report.html beside report.json", err)
	}
	if !strings.Contains(string(page), `data-tenant="acme"`) || !strings.Contains(string(page), `data-key="inbox/acme/a.csv"`) {
		t.Errorf("report.html: got no lane or bar of acme's file")
	}
}

// withhold matches each glob against <tenant>/<relative path> as path.Match does, keeps the inbox
// order on both sides, and names a glob that matches nothing.
func TestWithhold(t *testing.T) {
	files := []inboxFile{{"acme", "orders-1.csv", "p1"}, {"acme", "orders-10.csv", "p2"}, {"acme", "sub/orders-2.csv", "p3"}, {"globex", "orders-1.csv", "p4"}}
	names := func(fs []inboxFile) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.tenant+"/"+f.rel)
		}
		return out
	}
	for _, tc := range []struct {
		name               string
		globs              []string
		wantHeld, wantSent []string
		wantErr            string
	}{
		{"one file", []string{"acme/orders-1.csv"}, []string{"acme/orders-1.csv"},
			[]string{"acme/orders-10.csv", "acme/sub/orders-2.csv", "globex/orders-1.csv"}, ""},
		{"* stops at a slash", []string{"acme/*"}, []string{"acme/orders-1.csv", "acme/orders-10.csv"},
			[]string{"acme/sub/orders-2.csv", "globex/orders-1.csv"}, ""},
		{"every tenant's number 1, two globs on one file", []string{"*/orders-1.csv", "acme/orders-?.csv"}, []string{"acme/orders-1.csv", "globex/orders-1.csv"},
			[]string{"acme/orders-10.csv", "acme/sub/orders-2.csv"}, ""},
		{"a glob that matches nothing", []string{"acme/orders-1.csv", "acme/orders-3.csv"}, nil, nil, `"acme/orders-3.csv" matches no file`},
		{"a relative path alone matches nothing", []string{"orders-1.csv"}, nil, nil, `"orders-1.csv" matches no file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent, held, err := withhold(files, tc.globs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("got error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names(held), tc.wantHeld) || !slices.Equal(names(sent), tc.wantSent) {
				t.Errorf("got withheld %v, sent %v; want %v, %v", names(held), names(sent), tc.wantHeld, tc.wantSent)
			}
		})
	}
}
