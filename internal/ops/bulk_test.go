package ops_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"golang.org/x/time/rate"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// bulkWorld has silo tenants h1 and h2 (halt, halted), ok1 (halt, not halted) and c1 (continue,
// a failed file and nothing after it), and pool p's tenants ph (halt, halted) and pc (continue).
// h1 and ph register into core system erp, h2 into ledger.
func bulkWorld(now time.Time) *opsfake.World {
	w := opsfake.New(now)
	w.CoreSystemOf["h1"] = &pipeline.CoreSystem{Name: "erp", MaxRunningFiles: 4}
	w.CoreSystemOf["ph"] = &pipeline.CoreSystem{Name: "erp", MaxRunningFiles: 4}
	w.CoreSystemOf["h2"] = &pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 4}
	fail := func(e *opsfake.Execution) {
		// A core system's failure: a redrive may fix it.
		e.Error, e.Cause = pipeline.ErrPermanent, `{"errorMessage":"core system answered 503","errorType":"PermanentError"}`
	}
	for _, id := range []string{"h1", "h2", "ok1", "c1"} {
		policy := pipeline.OnFailureHalt
		if id == "c1" {
			policy = pipeline.OnFailureContinue
		}
		t := opsfake.Tenant(id, policy)
		w.AddTenant("TenantPipeline-Tenants-1", t)
		status := sfntypes.ExecutionStatusFailed
		if id == "ok1" {
			status = sfntypes.ExecutionStatusSucceeded
		}
		e := w.AddExecution(t, id+"-1", status, "inbox/"+id+"/a.csv", now.Add(-time.Hour))
		if status == sfntypes.ExecutionStatusFailed {
			fail(e)
		}
		w.Queues[t.QueueURL].Visible = 1
	}
	pooled := w.AddPool("TenantPipeline-Pool-p", opsfake.Pool("p"), map[string]string{"ph": pipeline.OnFailureHalt, "pc": pipeline.OnFailureContinue})
	fail(w.AddExecution(pooled["ph"], "ph-1", sfntypes.ExecutionStatusFailed, "pool/p/ph/a.csv", now.Add(-time.Hour)))
	w.AddExecution(pooled["pc"], "pc-1", sfntypes.ExecutionStatusSucceeded, "pool/p/pc/a.csv", now.Add(-time.Hour))
	return w
}

func bulkOps(w *opsfake.World, now time.Time) *ops.Ops {
	o := ops.New(w.Clients(), "TenantPipeline")
	o.Now = func() time.Time { return now }
	o.HTTP = w.HTTPClient()
	return o
}

func TestSelect(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		sel     ops.Selector
		want    []string
		wantErr string
	}{
		{name: "all halted, both tiers", sel: ops.Selector{AllHalted: true}, want: []string{"h1", "h2", "ph"}},
		{name: "halted of one core system, both tiers", sel: ops.Selector{AllHalted: true, CoreSystem: "erp"}, want: []string{"h1", "ph"}},
		{name: "a core system", sel: ops.Selector{CoreSystem: "ledger"}, want: []string{"h2"}},
		{name: "a pool", sel: ops.Selector{Pool: "p"}, want: []string{"pc", "ph"}},
		{name: "a list intersected with halted", sel: ops.Selector{Tenants: []string{"ok1", "h2"}, AllHalted: true}, want: []string{"h2"}},
		{name: "a list intersected with a pool: none", sel: ops.Selector{Tenants: []string{"h1"}, Pool: "p"}, want: nil},
		{name: "a list none of whose tenants names a known core system: none", sel: ops.Selector{Tenants: []string{"ok1"}, CoreSystem: "erp"}, want: nil},
		{name: "a list naming an unknown tenant", sel: ops.Selector{Tenants: []string{"h1", "nope"}}, wantErr: "no stack describes: nope"},
		{name: "an unknown pool", sel: ops.Selector{Pool: "q"}, wantErr: "no pool named q: the stacks describe p"},
		{name: "an unknown core system", sel: ops.Selector{CoreSystem: "crm"}, wantErr: "no tenant names core system crm; the tenants' core systems: erp, ledger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := bulkWorld(now)
			got, err := bulkOps(w, now).Select(context.Background(), tc.sel)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, x := range got.Tenants {
				ids = append(ids, x.ID)
			}
			if !slices.Equal(ids, tc.want) || got.Of != 6 {
				t.Errorf("got %v of %d, want %v of 6", ids, got.Of, tc.want)
			}
		})
	}
}

func TestReadTenantList(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
		wantErr  string
	}{
		{"ids, blank lines and comments", "# tenants of erp\nacme\n\n  globex  # moved\nacme\n", []string{"acme", "globex"}, ""},
		{"empty", "\n# none\n", []string{}, ""},
		{"not an id", "acme\nGlobex Inc\n", nil, `line 2: "Globex Inc" is no tenant id`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ops.ReadTenantList(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestBulk: each tenant's action is the single-tenant one (a redrive, a skip marker, a pause),
// a refusal skips the tenant with its reason, an error fails it, and a dry run does nothing.
func TestBulk(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	type want struct{ done, skipped, failed, planned int }
	for _, tc := range []struct {
		name     string
		sel      ops.Selector
		opt      ops.BulkOptions
		setup    func(w *opsfake.World)
		want     want
		outcomes map[string]string // tenant → outcome
		check    func(t *testing.T, w *opsfake.World, rep ops.BulkReport)
	}{
		{name: "redrive every halted tenant", sel: ops.Selector{AllHalted: true}, opt: ops.BulkOptions{Action: ops.BulkRedrive},
			want: want{done: 3}, outcomes: map[string]string{"h1": "done", "h2": "done", "ph": "done"},
			check: func(t *testing.T, w *opsfake.World, _ ops.BulkReport) {
				var got []string
				for _, r := range w.Redrives {
					got = append(got, aws.ToString(r.ExecutionArn)[strings.LastIndexByte(aws.ToString(r.ExecutionArn), ':')+1:])
				}
				slices.Sort(got)
				if !slices.Equal(got, []string{"h1-1", "h2-1", "ph-1"}) {
					t.Errorf("got redrives of %v, want h1-1, h2-1, ph-1", got)
				}
			}},
		{name: "dry run: planned, nothing done", sel: ops.Selector{AllHalted: true}, opt: ops.BulkOptions{Action: ops.BulkRedrive, DryRun: true},
			want: want{planned: 3}, outcomes: map[string]string{"h1": "planned", "h2": "planned", "ph": "planned"},
			check: func(t *testing.T, w *opsfake.World, rep ops.BulkReport) {
				if len(w.Redrives) != 0 || rep.Tenants[0].Detail != "would redrive h1-1" {
					t.Errorf("got %d redrives, detail %q; want none, would redrive h1-1", len(w.Redrives), rep.Tenants[0].Detail)
				}
			}},
		{name: "redrive: a tenant not halted is skipped with the reason", sel: ops.Selector{Tenants: []string{"h1", "ok1"}}, opt: ops.BulkOptions{Action: ops.BulkRedrive},
			want: want{done: 1, skipped: 1}, outcomes: map[string]string{"h1": "done", "ok1": "skipped"}},
		{name: "redrive: an AWS error fails the tenant, the others go on", sel: ops.Selector{AllHalted: true}, opt: ops.BulkOptions{Action: ops.BulkRedrive},
			setup: func(w *opsfake.World) { w.Err["RedriveExecution"] = errors.New("ThrottlingException: rate exceeded") },
			want:  want{failed: 3}, outcomes: map[string]string{"h1": "failed", "h2": "failed", "ph": "failed"}},
		{name: "skip each halted head", sel: ops.Selector{Tenants: []string{"h1", "ok1", "ph"}}, opt: ops.BulkOptions{Action: ops.BulkSkip, Reason: "ERP lost the batch"},
			want: want{done: 2, skipped: 1}, outcomes: map[string]string{"h1": "done", "ok1": "skipped", "ph": "done"},
			check: func(t *testing.T, w *opsfake.World, _ ops.BulkReport) {
				for _, k := range []string{"control/h1/skip/h1-1", "control/pool.p/ph/skip/ph-1"} {
					if body, ok := w.Body("ingest", k); !ok || !strings.HasPrefix(body, "ERP lost the batch\n") {
						t.Errorf("skip marker %s: got %q, %v; want the reason first", k, body, ok)
					}
				}
			}},
		{name: "pause a pool's tenants", sel: ops.Selector{Pool: "p"}, opt: ops.BulkOptions{Action: ops.BulkPause, Reason: "ERP maintenance"},
			want: want{done: 2}, outcomes: map[string]string{"pc": "done", "ph": "done"},
			check: func(t *testing.T, w *opsfake.World, _ ops.BulkReport) {
				if _, ok := w.Body("ingest", pipeline.PauseMarkerKey(w.OwnerOf("ph"))); !ok {
					t.Errorf("got no pause marker for ph")
				}
			}},
		{name: "pause silo tenants of a core system", sel: ops.Selector{CoreSystem: "erp"}, opt: ops.BulkOptions{Action: ops.BulkPause},
			want: want{done: 2}, outcomes: map[string]string{"h1": "done", "ph": "done"},
			check: func(t *testing.T, w *opsfake.World, _ ops.BulkReport) {
				if len(w.Updates) != 1 || aws.ToString(w.Updates[0].UUID) != "esm-h1" || aws.ToBool(w.Updates[0].Enabled) {
					t.Errorf("got mapping updates %+v, want esm-h1 disabled", w.Updates)
				}
			}},
		{name: "resume a tenant that is not paused: skipped", sel: ops.Selector{Tenants: []string{"h1"}}, opt: ops.BulkOptions{Action: ops.BulkResume},
			want: want{skipped: 1}, outcomes: map[string]string{"h1": "skipped"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := bulkWorld(now)
			if tc.setup != nil {
				tc.setup(w)
			}
			o := bulkOps(w, now)
			sel, err := o.Select(context.Background(), tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := o.Bulk(context.Background(), tc.sel, sel.Tenants, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if got := (want{rep.Done, rep.Skipped, rep.Failed, rep.Planned}); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			got := map[string]string{}
			for _, it := range rep.Tenants {
				got[it.Tenant] = it.Outcome
				if it.Outcome == ops.OutcomeSkipped && it.Reason == "" || it.Outcome == ops.OutcomeFailed && it.Error == "" {
					t.Errorf("%s: got %s without a reason or error", it.Tenant, it.Outcome)
				}
			}
			if len(got) != len(tc.outcomes) {
				t.Errorf("got outcomes %v, want %v", got, tc.outcomes)
			}
			for id, o := range tc.outcomes {
				if got[id] != o {
					t.Errorf("%s: got %q, want %q", id, got[id], o)
				}
			}
			if tc.check != nil {
				tc.check(t, w, rep)
			}
		})
	}
}

// TestBulkProgress: a line every ProgressEvery tenants, and one at the end.
func TestBulkProgress(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		every     int
		wantLines int
	}{{1, 3}, {2, 2}, {10, 1}} {
		w := bulkWorld(now)
		o := bulkOps(w, now)
		sel, err := o.Select(context.Background(), ops.Selector{AllHalted: true})
		if err != nil {
			t.Fatal(err)
		}
		var progress bytes.Buffer
		if _, err := o.Bulk(context.Background(), ops.Selector{AllHalted: true}, sel.Tenants,
			ops.BulkOptions{Action: ops.BulkRedrive, DryRun: true, Progress: &progress, ProgressEvery: tc.every, ProgressInterval: time.Hour}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
		if len(lines) != tc.wantLines || lines[len(lines)-1] != "pipectl: redrive: 3/3 tenants (3 planned, 0 skipped, 0 failed)" {
			t.Errorf("every %d: got %q, want %d lines ending with 3/3", tc.every, progress.String(), tc.wantLines)
		}
	}
}

// TestLimitGuardsEveryCall: after Limit, every call to Step Functions, SQS, Lambda and S3 waits
// for a token first; a limiter that never has one fails each of them before it is made.
func TestLimitGuardsEveryCall(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	w := bulkWorld(now)
	o := bulkOps(w, now)
	o.Limit(rate.NewLimiter(0, 0))
	ctx := context.Background()
	calls := map[string]func() error{
		"ListExecutions": func() error { _, err := o.StepFunctions.ListExecutions(ctx, &sfn.ListExecutionsInput{}); return err },
		"DescribeExecution": func() error {
			_, err := o.StepFunctions.DescribeExecution(ctx, &sfn.DescribeExecutionInput{})
			return err
		},
		"RedriveExecution": func() error {
			_, err := o.StepFunctions.RedriveExecution(ctx, &sfn.RedriveExecutionInput{})
			return err
		},
		"GetExecutionHistory": func() error {
			_, err := o.StepFunctions.GetExecutionHistory(ctx, &sfn.GetExecutionHistoryInput{})
			return err
		},
		"GetQueueAttributes": func() error { _, err := o.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{}); return err },
		"SendMessage":        func() error { _, err := o.SQS.SendMessage(ctx, &sqs.SendMessageInput{}); return err },
		"ReceiveMessage":     func() error { _, err := o.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{}); return err },
		"DeleteMessage":      func() error { _, err := o.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{}); return err },
		"ChangeMessageVisibility": func() error {
			_, err := o.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{})
			return err
		},
		"ListEventSourceMappings": func() error {
			_, err := o.Lambda.ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{})
			return err
		},
		"UpdateEventSourceMapping": func() error {
			_, err := o.Lambda.UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{})
			return err
		},
		"GetFunction":   func() error { _, err := o.Lambda.GetFunction(ctx, &lambda.GetFunctionInput{}); return err },
		"PutObject":     func() error { _, err := o.S3.PutObject(ctx, &s3.PutObjectInput{}); return err },
		"HeadObject":    func() error { _, err := o.S3.HeadObject(ctx, &s3.HeadObjectInput{}); return err },
		"GetObject":     func() error { _, err := o.S3.GetObject(ctx, &s3.GetObjectInput{}); return err },
		"DeleteObject":  func() error { _, err := o.S3.DeleteObject(ctx, &s3.DeleteObjectInput{}); return err },
		"ListObjectsV2": func() error { _, err := o.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{}); return err },
	}
	for name, call := range calls {
		if err := call(); err == nil || !strings.Contains(err.Error(), "exceeds limiter's burst") {
			t.Errorf("%s: got %v, want the limiter's refusal", name, err)
		}
	}
	if len(w.Redrives) != 0 || len(w.Updates) != 0 {
		t.Errorf("got %d redrives and %d mapping updates through a closed limiter, want none", len(w.Redrives), len(w.Updates))
	}
}

// TestBulkDryRunOrderGuard: a dry run of a bulk redrive shows a continue tenant whose failed file
// later files passed as skipped, with the order guard's reason, unless --out-of-order.
func TestBulkDryRunOrderGuard(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		outOfOrder bool
		want       string
	}{{false, ops.OutcomeSkipped}, {true, ops.OutcomePlanned}} {
		w := bulkWorld(now)
		c1 := opsfake.Tenant("c1", pipeline.OnFailureContinue)
		w.AddExecution(c1, "c1-2", sfntypes.ExecutionStatusSucceeded, "inbox/c1/b.csv", now.Add(-time.Minute))
		o := bulkOps(w, now)
		sel, err := o.Select(context.Background(), ops.Selector{Tenants: []string{"c1"}})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := o.Bulk(context.Background(), ops.Selector{}, sel.Tenants, ops.BulkOptions{Action: ops.BulkRedrive, DryRun: true, OutOfOrder: tc.outOfOrder, Reason: "r"})
		if err != nil {
			t.Fatal(err)
		}
		if it := rep.Tenants[0]; it.Outcome != tc.want || !tc.outOfOrder && !strings.Contains(it.Reason, "inbox/c1/b.csv (c1-2, SUCCEEDED)") {
			t.Errorf("out of order %v: got %+v, want %s", tc.outOfOrder, it, tc.want)
		}
	}
}
