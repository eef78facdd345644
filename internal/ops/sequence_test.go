package ops_test

import (
	"github.com/aws/smithy-go"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/sequence"
	"github.com/example/tenantpipeline/spec"
)

var seqNow = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// seqWorld: silo acme (numbers from 1) and globex (no sequence); pool default with numb (numbers
// from 0), hooli (names) and wayne (no sequence). acme expects 7, runs nothing, and holds 9, 10
// and 12 since an hour ago; hooli processed 20261201T0900 and holds two later names; numb has no
// state yet.
func seqWorld() *opsfake.World {
	w := opsfake.New(seqNow)
	numbers := func(start int64) *spec.Sequence {
		return &spec.Sequence{Pattern: `^(?P<seq>[0-9]+)\.csv$`, Start: aws.Int64(start)}
	}
	w.SettingsOf["acme"] = pipeline.Tenant{Tenant: spec.Tenant{Sequence: numbers(1)}}
	w.SettingsOf["numb"] = pipeline.Tenant{Tenant: spec.Tenant{Sequence: numbers(0)}}
	w.SettingsOf["hooli"] = pipeline.Tenant{Tenant: spec.Tenant{Sequence: &spec.Sequence{Pattern: `^(?P<seq>[0-9]{8}T[0-9]{4})`, Kind: spec.SequenceName}}}
	w.AddTenant("TenantPipeline-Tenants-1", opsfake.Tenant("acme", pipeline.OnFailureContinue))
	w.AddTenant("TenantPipeline-Tenants-1", opsfake.Tenant("globex", pipeline.OnFailureContinue))
	w.AddPool("TenantPipeline-Pool-default", opsfake.Pool("default"),
		map[string]string{"numb": pipeline.OnFailureContinue, "hooli": pipeline.OnFailureContinue, "wayne": pipeline.OnFailureContinue})

	gap := seqNow.Add(-time.Hour)
	w.SetSequence("ingest", "acme", sequence.State{Version: sequence.StateVersion, Kind: spec.SequenceNumber, Next: 7, GapSince: &gap, Updated: gap,
		Skipped: []sequence.Skip{{From: 20, To: 22, At: gap, By: "arn:aws:sts::123456789012:assumed-role/Operator/bob", Reason: "never sent"}}})
	for _, n := range []int64{12, 9, 10} {
		w.Hold("ingest", "acme", spec.SequenceNumber, spec.SequenceValue{Num: n, Text: fmt.Sprint(n)}, fmt.Sprintf("acme-%d", n))
	}
	w.SetSequence("ingest", "hooli", sequence.State{Version: sequence.StateVersion, Kind: spec.SequenceName, Last: "20261201T0900",
		Running: &sequence.Entry{Value: "20261201T1000", Execution: "hooli-10", Key: "pool/default/hooli/20261201T1000.csv"}, Updated: seqNow})
	for _, v := range []string{"20261201T1200", "20261201T1100"} {
		w.Hold("ingest", "hooli", spec.SequenceName, spec.SequenceValue{Text: v}, "hooli-"+v)
	}
	return w
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func seqOps(w *opsfake.World) *ops.Ops {
	o := ops.New(w.Clients(), "TenantPipeline")
	o.Now, o.HTTP, o.NewRequestID = func() time.Time { return seqNow }, w.HTTPClient(), func() string { return "req-1" }
	return o
}

// status shows a sequenced tenant's next number (or last name), its held values oldest first,
// how many it holds and since when a gap holds it, under the exact keys of the JSON; a tenant
// without a sequence has "sequence": null.
func TestStatusSequence(t *testing.T) {
	tests := []struct {
		name   string
		tenant string
		edit   func(w *opsfake.World)
		want   string // the row's "sequence", as JSON
	}{
		{"silo, numbers, a gap", "acme", nil,
			`{"kind":"number","next":7,"last":null,"running":null,"held":[9,10,12],"heldCount":3,"gapSince":"2026-12-02T11:00:00Z"}`},
		{"pooled, numbers, no state yet: the spec's start", "numb", nil,
			`{"kind":"number","next":0,"last":null,"running":null,"held":[],"heldCount":0,"gapSince":null}`},
		{"pooled, names: the last name, no next", "hooli", nil,
			`{"kind":"name","next":null,"last":"20261201T0900","running":"20261201T1000","held":["20261201T1100","20261201T1200"],"heldCount":2,"gapSince":null}`},
		{"silo without a sequence", "globex", nil, `null`},
		{"pooled without a sequence", "wayne", nil, `null`},
		{"more held than listed: the first 20 and the count", "acme", func(w *opsfake.World) {
			for n := int64(100); n < 1600; n++ {
				w.Hold("ingest", "acme", spec.SequenceNumber, spec.SequenceValue{Num: n, Text: fmt.Sprint(n)}, fmt.Sprint("acme-", n))
			}
		}, `{"kind":"number","next":7,"last":null,"running":null,"held":[9,10,12,100,101,102,103,104,105,106,107,108,109,110,111,112,113,114,115,116],"heldCount":1503,"gapSince":"2026-12-02T11:00:00Z"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := seqWorld()
			if tc.edit != nil {
				tc.edit(w)
			}
			rep, err := seqOps(w).Status(context.Background(), []string{tc.tenant})
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(rep.Tenants[0])
			if err != nil {
				t.Fatal(err)
			}
			if want := `"sequence":` + tc.want + `}`; !strings.HasSuffix(string(b), want) {
				t.Errorf("got row %s, want it to end with %s", b, want)
			}
		})
	}
}

// status's cost for a sequenced tenant: one GET (its state) and one LIST page per 1,000 held
// files, whatever it holds; none for a tenant without a sequence.
func TestStatusSequenceCost(t *testing.T) {
	for _, tc := range []struct {
		tenant    string
		held      int
		wantLists int
		wantGets  int
	}{
		{"acme", 0, 1, 1},
		{"acme", 997, 1, 1}, // with the 3 held already: 1,000 keys, one page
		{"acme", 998, 2, 1},
		{"acme", 2500, 3, 1},
		{"globex", 0, 0, 0},
	} {
		t.Run(fmt.Sprintf("%s holding %d more", tc.tenant, tc.held), func(t *testing.T) {
			w := seqWorld()
			for i := range tc.held {
				n := int64(1000 + i)
				w.Hold("ingest", tc.tenant, spec.SequenceNumber, spec.SequenceValue{Num: n, Text: fmt.Sprint(n)}, fmt.Sprint("x-", n))
			}
			if _, err := seqOps(w).Status(context.Background(), []string{tc.tenant}); err != nil {
				t.Fatal(err)
			}
			gets := 0
			for _, k := range w.Gets {
				if strings.HasPrefix(k, sequence.Prefix(w.OwnerOf(tc.tenant))) {
					gets++
				}
			}
			lists := 0
			for _, l := range w.Lists {
				if strings.HasPrefix(aws.ToString(l.Prefix), sequence.Prefix(w.OwnerOf(tc.tenant))) {
					lists++
				}
			}
			if gets != tc.wantGets || lists != tc.wantLists {
				t.Errorf("got %d GETs and %d LISTs of the sequence's objects, want %d and %d", gets, lists, tc.wantGets, tc.wantLists)
			}
		})
	}
}

// A sequence state that cannot be read fails status for the tenant, saying why; it is never shown
// as a fresh sequence.
func TestStatusSequenceErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(w *opsfake.World)
		want string
	}{
		{"the state refused", func(w *opsfake.World) {
			w.Err["GetObject"] = &smithy.GenericAPIError{Code: "AccessDenied", Message: "Access Denied"}
		}, "tenant acme: get s3://ingest/control/acme/sequence/state.json"},
		{"not a state", func(w *opsfake.World) {
			w.Objects["ingest/"+sequence.StateKey(w.OwnerOf("acme"))].Body = `{"version":9}`
		}, "tenant acme: s3://ingest/control/acme/sequence/state.json is not a sequence state of version 1"},
		{"the listing fails", func(w *opsfake.World) {
			w.Err["ListObjectsV2"] = errors.New("SlowDown")
		}, "tenant acme: list s3://ingest/control/acme/sequence/held/: SlowDown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := seqWorld()
			tc.edit(w)
			_, err := seqOps(w).Status(context.Background(), []string{"acme"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// sequence skip and set send a version 3 control message with the number into the tenant's FIFO
// group, audited (who, why, when, the request id as the deduplication id), in both tiers.
func TestSequenceSkipAndSet(t *testing.T) {
	pool := opsfake.Pool("default")
	acme := opsfake.Tenant("acme", pipeline.OnFailureContinue)
	for _, tc := range []struct {
		name     string
		set      bool
		tenant   string
		n        int64
		queue    string
		wantNext *int64
	}{
		{"skip, silo: the missing number", false, "acme", 8, acme.QueueURL, aws.Int64(7)},
		{"skip, silo: the next number itself", false, "acme", 7, acme.QueueURL, aws.Int64(7)},
		{"skip, pooled: a number ahead, no state yet", false, "numb", 3, pool.QueueURL, aws.Int64(0)},
		{"set, silo: mid-stream", true, "acme", 1000, acme.QueueURL, nil},
		{"set, silo: back below next", true, "acme", 2, acme.QueueURL, nil},
		{"set, pooled: zero", true, "numb", 0, pool.QueueURL, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := seqWorld()
			o := seqOps(w)
			do, action := o.SequenceSkip, pipeline.ControlSequenceSkip
			if tc.set {
				do, action = o.SequenceSet, pipeline.ControlSequenceSet
			}
			res, err := do(context.Background(), tc.tenant, tc.n, "  the file\nwas never sent ")
			if err != nil {
				t.Fatal(err)
			}
			sent := w.Queues[tc.queue].Sent
			if len(sent) != 1 {
				t.Fatalf("got %d messages sent to %s, want 1", len(sent), tc.queue)
			}
			in := sent[0]
			if g, d := aws.ToString(in.MessageGroupId), aws.ToString(in.MessageDeduplicationId); g != tc.tenant || d != "req-1" {
				t.Errorf("got group %q, deduplication id %q, want %q and req-1", g, d, tc.tenant)
			}
			m, err := pipeline.DecodeControl([]byte(aws.ToString(in.MessageBody)))
			if err != nil {
				t.Fatal(err)
			}
			want := pipeline.ControlMessage{Type: pipeline.ControlType, Version: pipeline.ControlVersion, Action: action, Tenant: tc.tenant, Number: aws.Int64(tc.n),
				RequestedBy: w.CallerARN, Reason: "the file was never sent", RequestedAt: seqNow, RequestID: "req-1"}
			if g, x := jsonOf(t, m), jsonOf(t, want); g != x || m.Version != 3 {
				t.Errorf("got message %s, want %s (version 3)", g, x)
			}
			wantRes := ops.SequenceResult{Tenant: tc.tenant, Action: action, Number: tc.n, Next: tc.wantNext, RequestID: "req-1", MessageID: "msg-1",
				RequestedBy: w.CallerARN, Reason: "the file was never sent", QueueURL: tc.queue, MessageGroup: tc.tenant}
			if g, x := jsonOf(t, res), jsonOf(t, wantRes); g != x {
				t.Errorf("got result %s, want %s", g, x)
			}
		})
	}
}

// What skip and set cannot do is refused before anything is sent, naming the tenant: a tenant
// without a sequence or with names, a negative number, no reason; and for skip a number the tenant
// has passed, or whose file is held, runs or was skipped already.
func TestSequenceRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		set    bool
		tenant string
		n      int64
		reason string
		edit   func(w *opsfake.World)
		want   string
	}{
		{"skip: no sequence", false, "globex", 3, "r", nil, "tenant globex has no sequence"},
		{"set: no sequence, pooled", true, "wayne", 3, "r", nil, "tenant wayne has no sequence"},
		{"skip: names", false, "hooli", 3, "r", nil, `tenant hooli's sequence is of kind "name": names have no numbers to skip`},
		{"set: names", true, "hooli", 3, "r", nil, `tenant hooli's sequence is of kind "name": names have no numbers to set`},
		{"skip: negative", false, "acme", -1, "r", nil, "sequence skip of tenant acme: number -1 is negative"},
		{"set: negative", true, "acme", -5, "r", nil, "sequence set of tenant acme: number -5 is negative"},
		{"skip: no reason", false, "acme", 8, " \n", nil, "sequence skip of tenant acme needs --reason: it is the audit record"},
		{"set: no reason", true, "acme", 8, "", nil, "sequence set of tenant acme needs --reason"},
		{"skip: below next", false, "acme", 6, "r", nil, "tenant acme expects number 7 next: 6 is behind it, so there is nothing to skip"},
		{"skip: held", false, "acme", 9, "r", nil, "tenant acme holds a file of number 9 already (inbox/acme/9.csv, execution acme-9)"},
		{"skip, pooled: negative", false, "numb", -1, "r", nil, "sequence skip of tenant numb: number -1 is negative"},
		{"skip: running", false, "acme", 7, "r", func(w *opsfake.World) {
			w.SetSequence("ingest", "acme", sequence.State{Version: sequence.StateVersion, Kind: spec.SequenceNumber, Next: 7,
				Running: &sequence.Entry{Value: "7", Num: 7, Execution: "acme-7", Key: "inbox/acme/7.csv"}})
		}, "tenant acme's file of number 7 runs now (execution acme-7)"},
		{"skip: woken", false, "acme", 7, "r", func(w *opsfake.World) {
			w.SetSequence("ingest", "acme", sequence.State{Version: sequence.StateVersion, Kind: spec.SequenceNumber, Next: 7,
				Woken: &sequence.Entry{Value: "7", Num: 7, Execution: "acme-7", Key: "inbox/acme/7.csv"}})
		}, "tenant acme's file of number 7 was sent back to run (execution acme-7)"},
		{"skip: skipped already", false, "acme", 21, "r", nil,
			"tenant acme's number 21 is skipped already (20 to 22, by arn:aws:sts::123456789012:assumed-role/Operator/bob at 2026-12-02T11:00:00Z: never sent)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := seqWorld()
			if tc.edit != nil {
				tc.edit(w)
			}
			o := seqOps(w)
			do := o.SequenceSkip
			if tc.set {
				do = o.SequenceSet
			}
			_, err := do(context.Background(), tc.tenant, tc.n, tc.reason)
			var refused *ops.RefusedError
			if !errors.As(err, &refused) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want a refusal containing %q", err, tc.want)
			}
			for url, q := range w.Queues {
				if len(q.Sent) > 0 {
					t.Errorf("got %d messages sent to %s, want none", len(q.Sent), url)
				}
			}
		})
	}
}

// skip fails closed: a state or a held file that cannot be read sends nothing, and is an error,
// not a refusal; a tenant no stack describes is not found.
func TestSequenceSkipFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tenant string
		edit   func(w *opsfake.World)
		want   string
	}{
		// S3 answers 403 for a missing key only to a caller without s3:ListBucket: never a fresh state.
		{"state refused", "acme", func(w *opsfake.World) {
			w.Err["GetObject"] = &smithy.GenericAPIError{Code: "AccessDenied", Message: "Access Denied"}
		}, "tenant acme: read its sequence state: get s3://ingest/control/acme/sequence/state.json"},
		{"GET fails", "acme", func(w *opsfake.World) { w.Err["GetObject"] = errors.New("InternalError") }, "tenant acme: read its sequence state: get s3://ingest/control/acme/sequence/state.json: InternalError"},
		{"no such tenant", "nobody", nil, `tenant "nobody" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := seqWorld()
			if tc.edit != nil {
				tc.edit(w)
			}
			_, err := seqOps(w).SequenceSkip(context.Background(), tc.tenant, 8, "r")
			var refused *ops.RefusedError
			if err == nil || errors.As(err, &refused) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error (not a refusal) containing %q", err, tc.want)
			}
			for url, q := range w.Queues {
				if len(q.Sent) > 0 {
					t.Errorf("got %d messages sent to %s, want none", len(q.Sent), url)
				}
			}
		})
	}
}

// set reads no state (the controller reads it at the head): a state pipectl cannot read does not
// stop the request.
func TestSequenceSetReadsNoState(t *testing.T) {
	w := seqWorld()
	w.SetSequence("ingest", "acme", sequence.State{Version: sequence.StateVersion, Kind: spec.SequenceName})
	if _, err := seqOps(w).SequenceSet(context.Background(), "acme", 40, "restart"); err != nil {
		t.Fatalf("got %v, want the request sent", err)
	}
	for _, k := range w.Gets {
		if strings.HasPrefix(k, sequence.Prefix(w.OwnerOf("acme"))) {
			t.Errorf("got a GET of %s, want none", k)
		}
	}
}

// files shows each file's sequence value (its execution input's, else its summary's) and, when a
// delivery under the execution's name was refused, the refusal, keeping the execution's status.
func TestFilesSequenceAndRefusal(t *testing.T) {
	w := seqWorld()
	acme := opsfake.Tenant("acme", pipeline.OnFailureContinue)
	withSeq := func(e *opsfake.Execution, v string) {
		var in pipeline.WorkflowInput
		if err := json.Unmarshal([]byte(e.Input), &in); err != nil {
			t.Fatal(err)
		}
		in.Source.Sequence = v
		b, _ := json.Marshal(in)
		e.Input = string(b)
	}
	summary := func(exec string, s results.Summary) {
		b, _ := json.Marshal(s)
		w.Objects["ingest/"+results.Key(w.OwnerOf("acme"), exec, results.SummaryFile)] = &opsfake.Object{Body: string(b)}
	}
	e5 := w.AddExecution(acme, "acme-5", sfntypes.ExecutionStatusSucceeded, "inbox/acme/5.csv", seqNow.Add(-3*time.Minute))
	withSeq(e5, "5")
	summary("acme-5", results.Summary{Version: 1, Tenant: "acme", Execution: "acme-5", Status: "REFUSED", Sequence: "5", Refusal: sequence.RefusedDuplicate})
	w.AddExecution(acme, "acme-6", sfntypes.ExecutionStatusSucceeded, "inbox/acme/6.csv", seqNow.Add(-2*time.Minute))
	summary("acme-6", results.Summary{Version: 1, Tenant: "acme", Execution: "acme-6", Status: "SUCCEEDED", Sequence: "6", Records: 1, Registered: 1})
	withSeq(w.AddExecution(acme, "acme-7", sfntypes.ExecutionStatusRunning, "inbox/acme/7.csv", seqNow.Add(-time.Minute)), "7")

	// Two refused files, which started no execution: the controller's index of refusals names them.
	for _, r := range []sequence.Refused{
		{Key: "inbox/acme/5-again.csv", Sequence: "5", Refusal: sequence.RefusedDuplicate, Execution: "acme-r1", At: seqNow.Add(-90 * time.Second)},
		{Key: "inbox/acme/readme.txt", Refusal: sequence.RefusedUnmatched, Execution: "acme-r2", At: seqNow.Add(-10 * time.Minute)},
	} {
		b, _ := json.Marshal(r)
		w.Objects["ingest/"+sequence.RefusedKey(w.OwnerOf("acme"), r.At, r.Execution)] = &opsfake.Object{Body: string(b)}
	}
	files := func(limit int) []string {
		rep, err := seqOps(w).Files(context.Background(), "acme", limit)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range rep.Files {
			b, _ := json.Marshal(map[string]any{"status": f.Status, "sequence": f.Sequence, "refusal": f.Refusal, "registered": f.Registered})
			got = append(got, f.ExecutionName+" "+string(b))
		}
		return got
	}
	want := []string{
		`acme-7 {"refusal":null,"registered":null,"sequence":"7","status":"RUNNING"}`,
		`acme-r1 {"refusal":"duplicate","registered":null,"sequence":"5","status":"REFUSED"}`,
		`acme-6 {"refusal":null,"registered":1,"sequence":"6","status":"SUCCEEDED"}`,
		`acme-5 {"refusal":"duplicate","registered":null,"sequence":"5","status":"SUCCEEDED"}`,
		`acme-r2 {"refusal":"unmatched","registered":null,"sequence":null,"status":"REFUSED"}`,
	}
	if got := files(10); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := files(2); fmt.Sprint(got) != fmt.Sprint(want[:2]) {
		t.Errorf("limit 2: got\n%s\nwant the newest two", strings.Join(got, "\n"))
	}
	rep, err := seqOps(w).Files(context.Background(), "acme", 10)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rep.Files[0])
	for _, key := range []string{`"sequence":"7"`, `"refusal":null`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("got %s, want it to hold %s", b, key)
		}
	}
}
