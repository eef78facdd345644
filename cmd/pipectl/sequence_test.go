package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/sequence"
	"github.com/example/tenantpipeline/spec"
)

var (
	ordered = opsfake.Tenant("ordered", pipeline.OnFailureContinue)
	plain   = opsfake.Tenant("plain", pipeline.OnFailureContinue)
	seqPool = opsfake.Pool("default")
)

// seqWorld: silo ordered (numbers from 1) expects 7 and holds 9, 10 and 12 since an hour ago;
// silo plain has no sequence; pool default's pnum (numbers from 0) has no state yet, and names
// (names) processed 20261130T0900, runs 20261130T1000 and holds two later names.
func seqWorld() *opsfake.World {
	w := opsfake.New(now)
	numbers := func(start int64) *spec.Sequence {
		return &spec.Sequence{Pattern: `^(?P<seq>[0-9]+)\.csv$`, Start: aws.Int64(start)}
	}
	w.SettingsOf["ordered"] = pipeline.Tenant{Tenant: spec.Tenant{Sequence: numbers(1)}}
	w.SettingsOf["pnum"] = pipeline.Tenant{Tenant: spec.Tenant{Sequence: numbers(0)}}
	w.SettingsOf["names"] = pipeline.Tenant{Tenant: spec.Tenant{Sequence: &spec.Sequence{Pattern: `^(?P<seq>[0-9]{8}T[0-9]{4})`, Kind: spec.SequenceName}}}
	w.AddTenant("TenantPipeline-Tenants-1", ordered)
	w.AddTenant("TenantPipeline-Tenants-1", plain)
	w.AddPool("TenantPipeline-Pool-default", seqPool, map[string]string{"pnum": pipeline.OnFailureContinue, "names": pipeline.OnFailureContinue})
	gap := now.Add(-time.Hour)
	w.SetSequence("ingest", "ordered", sequence.State{Version: sequence.StateVersion, Kind: spec.SequenceNumber, Next: 7, GapSince: &gap, Updated: gap})
	for _, n := range []int64{12, 9, 10} {
		w.Hold("ingest", "ordered", spec.SequenceNumber, spec.SequenceValue{Num: n, Text: fmt.Sprint(n)}, fmt.Sprint("ordered-", n))
	}
	w.SetSequence("ingest", "names", sequence.State{Version: sequence.StateVersion, Kind: spec.SequenceName, Last: "20261130T0900",
		Running: &sequence.Entry{Value: "20261130T1000", Execution: "names-10", Key: "pool/default/names/20261130T1000.csv"}, Updated: now})
	for _, v := range []string{"20261130T1200", "20261130T1100"} {
		w.Hold("ingest", "names", spec.SequenceName, spec.SequenceValue{Text: v}, "names-"+v)
	}
	return w
}

// status shows each sequenced tenant's place in one line under the names of its JSON, after the
// table; a tenant without a sequence has no line.
func TestSequenceStatusTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		edit func(w *opsfake.World)
		want []string // the lines after the pools', in order
	}{
		{"every tenant", []string{"status"}, nil, []string{
			"names: sequence.last 20261130T0900, sequence.running 20261130T1000, sequence.held 2 (20261130T1100, 20261130T1200), sequence.gapSince -",
			"ordered: sequence.next 7, sequence.held 3 (9, 10, 12), sequence.gapSince 2026-11-30T11:00:00Z",
			"pnum: sequence.next 0, sequence.held 0, sequence.gapSince -",
		}},
		{"a tenant without a sequence", []string{"status", "plain"}, nil, nil},
		{"more held than listed", []string{"status", "ordered"}, func(w *opsfake.World) {
			for n := int64(100); n < 130; n++ {
				w.Hold("ingest", "ordered", spec.SequenceNumber, spec.SequenceValue{Num: n, Text: fmt.Sprint(n)}, fmt.Sprint("ordered-", n))
			}
		}, []string{"ordered: sequence.next 7, sequence.held 33 (9, 10, 12, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116 and 13 more), sequence.gapSince 2026-11-30T11:00:00Z"}},
		{"a name to quote, before the first", []string{"status", "names"}, func(w *opsfake.World) {
			w.SetSequence("ingest", "names", sequence.State{Version: sequence.StateVersion, Kind: spec.SequenceName})
			w.Hold("ingest", "names", spec.SequenceName, spec.SequenceValue{Text: "20261130T1300 it's"}, "names-13")
		}, []string{`names: sequence.last -, sequence.held 3 (20261130T1100, 20261130T1200, '20261130T1300 it'\''s'), sequence.gapSince -`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := seqWorld()
			if tc.edit != nil {
				tc.edit(w)
			}
			code, stdout, stderr := runIn(t, w, tc.args...)
			if code != 0 {
				t.Fatalf("got exit %d (%s), want 0", code, stderr)
			}
			var got []string
			for _, l := range strings.Split(stdout, "\n") {
				if strings.Contains(l, ": sequence.") {
					got = append(got, l)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got lines\n%s\nwant\n%s\nin\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"), stdout)
			}
		})
	}
}

// status --json: a sequenced tenant's "sequence" object, key for key (next a JSON number for
// kind number, null for names; held as strings), and null for a tenant without one.
func TestSequenceStatusJSON(t *testing.T) {
	code, stdout, stderr := runIn(t, seqWorld(), "status", "--json")
	if code != 0 {
		t.Fatalf("got exit %d (%s), want 0", code, stderr)
	}
	var rep struct {
		Tenants []struct {
			ID       string          `json:"id"`
			Sequence json.RawMessage `json:"sequence"`
		} `json:"tenants"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"names":   `{"kind":"name","next":null,"last":"20261130T0900","running":"20261130T1000","held":["20261130T1100","20261130T1200"],"heldCount":2,"gapSince":null}`,
		"ordered": `{"kind":"number","next":7,"last":null,"running":null,"held":[9,10,12],"heldCount":3,"gapSince":"2026-11-30T11:00:00Z"}`,
		"plain":   `null`,
		"pnum":    `{"kind":"number","next":0,"last":null,"running":null,"held":[],"heldCount":0,"gapSince":null}`,
	}
	if len(rep.Tenants) != len(want) {
		t.Fatalf("got %d tenants, want %d", len(rep.Tenants), len(want))
	}
	for _, r := range rep.Tenants {
		var got bytes.Buffer
		if err := json.Compact(&got, r.Sequence); err != nil {
			t.Fatal(err)
		}
		if got.String() != want[r.ID] {
			t.Errorf("%s: got sequence %s, want %s", r.ID, got.String(), want[r.ID])
		}
	}
}

// sequence skip and set: what they print, the control message they send into the tenant's group
// (both tiers), and every refusal, with its exit status; nothing is sent unless it succeeds.
func TestSequenceCommands(t *testing.T) {
	pnumQueue := seqPool.QueueURL
	for _, tc := range []struct {
		args       []string
		wantCode   int
		wantOut    string // exact stdout; "" for none
		wantErr    string // stderr contains; "" for none
		wantQueue  string // where one message was sent; "" for nowhere
		wantAction string
		wantNumber int64
	}{
		{[]string{"sequence", "skip", "ordered", "8", "--reason", "never sent"}, 0,
			"sequence skip of number 8 requested for ordered, which expects 7 next (request req-1, message msg-1, by arn:aws:sts::123456789012:assumed-role/Operator/alice); " +
				"the controller performs it at the head of ordered's message group, after the files queued before it; the files held after 8 then run in order\n",
			"", ordered.QueueURL, pipeline.ControlSequenceSkip, 8},
		{[]string{"sequence", "set", "pnum", "100", "--reason", "starts mid-stream"}, 0,
			"sequence set of the next number to 100 requested for pnum (request req-1, message msg-1, by arn:aws:sts::123456789012:assumed-role/Operator/alice); " +
				"the controller performs it at the head of pnum's message group, after the files queued before it; pnum then expects 100 next\n",
			"", pnumQueue, pipeline.ControlSequenceSet, 100},
		{[]string{"--json", "sequence", "skip", "pnum", "0", "--reason", "r"}, 0,
			`{
  "tenant": "pnum",
  "action": "sequence-skip",
  "number": 0,
  "next": 0,
  "requestId": "req-1",
  "messageId": "msg-1",
  "requestedBy": "arn:aws:sts::123456789012:assumed-role/Operator/alice",
  "reason": "r",
  "queueUrl": "https://sqs.eu-west-1.amazonaws.com/123456789012/pool-default.fifo",
  "messageGroup": "pnum"
}
`, "", pnumQueue, pipeline.ControlSequenceSkip, 0},
		// Global flags anywhere, as for every command; cobra routes each to sequence's own command.
		{[]string{"sequence", "--json", "set", "ordered", "3", "--reason", "r"}, 0, "", "", ordered.QueueURL, pipeline.ControlSequenceSet, 3},
		{[]string{"sequence", "set", "--reason", "r", "ordered", "3", "--json"}, 0, "", "", ordered.QueueURL, pipeline.ControlSequenceSet, 3},
		{[]string{"--stack-prefix", "TenantPipeline", "sequence", "set", "ordered", "3", "--reason", "r"}, 0, "", "", ordered.QueueURL, pipeline.ControlSequenceSet, 3},
		{[]string{"-stack-prefix", "TenantPipeline", "sequence", "set", "ordered", "3", "--reason", "r"}, 0, "", "", ordered.QueueURL, pipeline.ControlSequenceSet, 3},
		// Refused by the tenant's state or spec: exit 1, naming the tenant.
		{[]string{"sequence", "skip", "ordered", "6", "--reason", "r"}, 1, "", "pipectl: tenant ordered expects number 7 next: 6 is behind it, so there is nothing to skip\n", "", "", 0},
		{[]string{"sequence", "skip", "ordered", "9", "--reason", "r"}, 1, "", "pipectl: tenant ordered holds a file of number 9 already", "", "", 0},
		{[]string{"sequence", "skip", "plain", "9", "--reason", "r"}, 1, "", "pipectl: tenant plain has no sequence", "", "", 0},
		{[]string{"sequence", "set", "plain", "9", "--reason", "r"}, 1, "", "pipectl: tenant plain has no sequence", "", "", 0},
		{[]string{"sequence", "skip", "names", "9", "--reason", "r"}, 1, "", `pipectl: tenant names's sequence is of kind "name"`, "", "", 0},
		{[]string{"sequence", "set", "names", "9", "--reason", "r"}, 1, "", `pipectl: tenant names's sequence is of kind "name"`, "", "", 0},
		{[]string{"sequence", "skip", "ordered", "-1", "--reason", "r"}, 1, "", "pipectl: sequence skip of tenant ordered: number -1 is negative", "", "", 0},
		{[]string{"sequence", "set", "ordered", "--reason", "r", "-20"}, 1, "", "pipectl: sequence set of tenant ordered: number -20 is negative", "", "", 0},
		{[]string{"sequence", "skip", "nobody", "9", "--reason", "r"}, 1, "", `pipectl: tenant "nobody" not found`, "", "", 0},
		// Bad usage: exit 2.
		{[]string{"sequence", "skip", "ordered", "8"}, 2, "", "pipectl: sequence skip ordered: --reason is required: it is the audit record\n", "", "", 0},
		{[]string{"sequence", "set", "ordered", "8", "--reason", " "}, 2, "", "pipectl: sequence set ordered: --reason is required", "", "", 0},
		{[]string{"sequence", "skip", "ordered", "eight", "--reason", "r"}, 2, "", `pipectl: sequence skip ordered: N "eight" is not a whole number`, "", "", 0},
		{[]string{"sequence", "skip", "ordered", "--reason", "r"}, 2, "", "pipectl: usage: pipectl sequence skip TENANT N --reason TEXT", "", "", 0},
		{[]string{"sequence"}, 2, "", "pipectl: sequence needs a subcommand: skip or set", "", "", 0},
		{[]string{"--json", "sequence"}, 2, "", "pipectl: sequence needs a subcommand: skip or set", "", "", 0},
		{[]string{"sequence", "bogus"}, 2, "", `pipectl: unknown command "sequence bogus"`, "", "", 0},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			w := seqWorld()
			code, stdout, stderr := runIn(t, w, tc.args...)
			if code != tc.wantCode {
				t.Errorf("got exit %d, want %d; stderr %q", code, tc.wantCode, stderr)
			}
			if tc.wantOut != "" && stdout != tc.wantOut {
				t.Errorf("got stdout\n%s\nwant\n%s", stdout, tc.wantOut)
			}
			if (tc.wantErr == "") != (stderr == "") || !strings.Contains(stderr, tc.wantErr) {
				t.Errorf("got stderr %q, want it to contain %q", stderr, tc.wantErr)
			}
			for url, q := range w.Queues {
				if url != tc.wantQueue && len(q.Sent) > 0 {
					t.Errorf("got %d messages sent to %s, want none", len(q.Sent), url)
				}
			}
			if tc.wantQueue == "" {
				return
			}
			sent := w.Queues[tc.wantQueue].Sent
			if len(sent) != 1 {
				t.Fatalf("got %d messages sent to %s, want 1", len(sent), tc.wantQueue)
			}
			m, err := pipeline.DecodeControl([]byte(aws.ToString(sent[0].MessageBody)))
			if err != nil {
				t.Fatal(err)
			}
			if m.Version != 3 || m.Action != tc.wantAction || aws.ToInt64(m.Number) != tc.wantNumber || !slices.Contains(tc.args, m.Tenant) ||
				m.RequestedBy != w.CallerARN || m.RequestID != "req-1" || !m.RequestedAt.Equal(now) ||
				aws.ToString(sent[0].MessageGroupId) != m.Tenant || aws.ToString(sent[0].MessageDeduplicationId) != "req-1" {
				t.Errorf("got message %s in group %s, dedup %s; want version 3, %s of %d in the tenant's group, audited, request req-1",
					aws.ToString(sent[0].MessageBody), aws.ToString(sent[0].MessageGroupId), aws.ToString(sent[0].MessageDeduplicationId), tc.wantAction, tc.wantNumber)
			}
		})
	}
}

// A negative number is an argument, not an unknown flag, wherever it stands before "--"; a flag's
// value that looks like one stays the flag's.
func TestNumbersAsArgs(t *testing.T) {
	for _, tc := range []struct{ args, want []string }{
		{[]string{"acme", "8", "--reason", "r"}, []string{"acme", "8", "--reason", "r"}},
		{[]string{"acme", "-1", "--reason", "r"}, []string{"acme", "--reason", "r", "--", "-1"}},
		{[]string{"acme", "--reason", "-1", "-2"}, []string{"acme", "--reason", "-1", "--", "-2"}},
		{[]string{"--json", "-3", "acme", "--reason=-4"}, []string{"--json", "acme", "--reason=-4", "--", "-3"}},
		{[]string{"acme", "-5", "--", "x"}, []string{"acme", "--", "-5", "x"}},
		{[]string{"acme", "--", "-6"}, []string{"acme", "--", "-6"}},
		{[]string{"-1x", "acme"}, []string{"-1x", "acme"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			c, _ := commandNamed("sequence skip")
			fs := flagSetOf(c)
			if got := numbersAsArgs(fs, tc.args); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// files shows the SEQUENCE column for a sequenced tenant's files, and REFUSAL after STATUS when a
// delivery under a listed execution's name was refused; --json has "sequence" and "refusal".
func TestFilesSequence(t *testing.T) {
	w := seqWorld()
	withSeq := func(e *opsfake.Execution, v string) {
		var in pipeline.WorkflowInput
		if err := json.Unmarshal([]byte(e.Input), &in); err != nil {
			t.Fatal(err)
		}
		in.Source.Sequence = v
		b, _ := json.Marshal(in)
		e.Input = string(b)
	}
	withSeq(w.AddExecution(ordered, "ordered-5", sfntypes.ExecutionStatusSucceeded, "inbox/ordered/5.csv", now.Add(-3*time.Minute)), "5")
	b, _ := json.Marshal(results.Summary{Version: 1, Tenant: "ordered", Execution: "ordered-5", Status: results.StatusRefused, Sequence: "5", Refusal: sequence.RefusedDuplicate})
	w.Objects["ingest/"+results.Key(w.OwnerOf("ordered"), "ordered-5", results.SummaryFile)] = &opsfake.Object{Body: string(b)}
	withSeq(w.AddExecution(ordered, "ordered-6", sfntypes.ExecutionStatusRunning, "inbox/ordered/6.csv", now.Add(-time.Minute)), "6")
	w.AddExecution(plain, "plain-1", sfntypes.ExecutionStatusSucceeded, "inbox/plain/a.csv", now.Add(-time.Minute))

	for _, tc := range []struct {
		tenant string
		want   []string
	}{
		{"ordered", []string{
			"KEY                  SEQUENCE  EXECUTION  STATUS     REFUSAL    RECORDS  REGISTERED  REJECTED  START                 STOP                  ERROR",
			"inbox/ordered/6.csv  6         ordered-6  RUNNING    -          -        -           -         2026-11-30T11:59:00Z  -                     -",
			"inbox/ordered/5.csv  5         ordered-5  SUCCEEDED  duplicate  -        -           -         2026-11-30T11:57:00Z  2026-11-30T11:58:00Z  -",
		}},
		{"plain", []string{
			"KEY                EXECUTION  STATUS     RECORDS  REGISTERED  REJECTED  START                 STOP                  ERROR",
			"inbox/plain/a.csv  plain-1    SUCCEEDED  -        -           -         2026-11-30T11:59:00Z  2026-11-30T12:00:00Z  -",
		}},
	} {
		t.Run(tc.tenant, func(t *testing.T) {
			code, stdout, stderr := runIn(t, w, "files", tc.tenant)
			if code != 0 {
				t.Fatalf("got exit %d (%s), want 0", code, stderr)
			}
			got := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			for i := range got {
				got[i] = strings.TrimRight(got[i], " ")
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
	code, stdout, _ := runIn(t, w, "files", "ordered", "--json")
	var rep struct {
		Files []map[string]any `json:"files"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); code != 0 || err != nil || len(rep.Files) != 2 {
		t.Fatalf("got exit %d, %v, %s", code, err, stdout)
	}
	if f := rep.Files[1]; f["sequence"] != "5" || f["refusal"] != "duplicate" || f["status"] != "SUCCEEDED" {
		t.Errorf("got %v, want sequence 5, refusal duplicate, status SUCCEEDED", f)
	}
	if f := rep.Files[0]; f["sequence"] != "6" || f["refusal"] != nil {
		t.Errorf("got %v, want sequence 6, refusal null", f)
	}
}

// flagSetOf is the flag set runCommand parses c's arguments with.
func flagSetOf(c command) *flag.FlagSet {
	var g globals
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.register(fs)
	c.flags(fs)
	return fs
}

// results shows a refused file's sequence value and its refusal, with what the refusal means.
func TestResultsRefused(t *testing.T) {
	w := seqWorld()
	b, _ := json.Marshal(results.Summary{Version: 1, Tenant: "ordered", Tier: "silo", Execution: "ev-0f3a", Status: results.StatusRefused,
		Source: results.Source{Bucket: "ingest", Key: "inbox/ordered/5.csv"}, Sequence: "5", Refusal: sequence.RefusedLate})
	w.Objects["ingest/"+results.Key(w.OwnerOf("ordered"), "ev-0f3a", results.SummaryFile)] = &opsfake.Object{Body: string(b)}
	code, stdout, stderr := runIn(t, w, "results", "ordered", "ev-0f3a")
	if code != 0 {
		t.Fatalf("got exit %d (%s), want 0", code, stderr)
	}
	for _, want := range []string{
		"\nstatus       REFUSED\n",
		"\nsequence     5\n",
		"\nrefusal      late: its value was skipped, or comes after a later one was processed\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("got\n%s\nwant it to contain %q", stdout, want)
		}
	}
}
