package localrun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
)

// TestCheckInvariantsOperatorRuns: the run's own checker counts an operator's replay and a
// redrive under continue as the operator's runs, so the orders they produce are no violation,
// and it still flags what breaks order inside or around them.
func TestCheckInvariantsOperatorRuns(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(1_800_000_000, 0).Add(time.Duration(ms) * time.Millisecond) }
	ptr := func(ms int) *time.Time { x := at(ms); return &x }
	file := func(key, exec string, start, stop int, records int64) report.FileReport {
		return report.FileReport{Key: key, VersionID: "v-" + key, ExecutionName: exec, Status: "SUCCEEDED",
			StartedAt: ptr(start), StoppedAt: ptr(stop), Records: records, Expected: records}
	}
	// regs registers records first..last of a file under an execution, one every 10 ms from ms;
	// each is one request.
	type history struct {
		regs []emulate.SinkRecord
		reqs []emulate.SinkRequest
	}
	add := func(h *history, key, exec string, first, last int64, ms int) {
		for n := first; n <= last; n++ {
			when := at(ms + int(n-first)*10)
			k := fmt.Sprintf("%s-%d", exec, n)
			h.regs = append(h.regs, emulate.SinkRecord{Source: key, VersionID: "v-" + key, RecordNumber: n, Key: k, At: when.Add(5 * time.Millisecond)})
			h.reqs = append(h.reqs, emulate.SinkRequest{Source: key, VersionID: "v-" + key, Key: k, RecordNumber: n, Records: 1, Start: when, End: when.Add(5 * time.Millisecond), Status: 200})
		}
	}
	// continue redrive: 1.csv fails after record 14 (its run stops at 200), 2.csv and 3.csv run, the
	// operator's redrive of 1.csv starts at 1000 and registers records 15-20.
	redriven := func() []report.FileReport {
		f1 := file("inbox/c/1.csv", "e1", 0, 1200, 20)
		f1.FirstStop, f1.Redrives = ptr(200), []time.Time{at(1000)}
		return []report.FileReport{f1, file("inbox/c/2.csv", "e2", 300, 500, 3), file("inbox/c/3.csv", "e3", 600, 800, 2)}
	}
	// replay: x, y and z run, then the operator's replay of x registers it anew.
	replayed := []report.FileReport{file("inbox/c/x.csv", "ex", 0, 200, 3), file("inbox/c/y.csv", "ey", 300, 500, 2), file("inbox/c/z.csv", "ez", 600, 800, 2)}
	for _, tc := range []struct {
		name    string
		files   []report.FileReport
		history func(h *history)
		want    []string // substrings of the violations, in order; none when empty
	}{
		{"a redrive under continue after later files", redriven(), func(h *history) {
			add(h, "inbox/c/1.csv", "e1", 1, 14, 10)
			add(h, "inbox/c/2.csv", "e2", 1, 3, 310)
			add(h, "inbox/c/3.csv", "e3", 1, 2, 610)
			add(h, "inbox/c/1.csv", "e1", 15, 20, 1010)
		}, nil},
		{"a replay after later files", replayed, func(h *history) {
			add(h, "inbox/c/x.csv", "ex", 1, 3, 10)
			add(h, "inbox/c/y.csv", "ey", 1, 2, 310)
			add(h, "inbox/c/z.csv", "ez", 1, 2, 610)
			add(h, "inbox/c/x.csv", "rp-req-1", 1, 3, 900)
		}, nil},
		{"a replay out of order", replayed, func(h *history) {
			add(h, "inbox/c/x.csv", "ex", 1, 3, 10)
			add(h, "inbox/c/y.csv", "ey", 1, 2, 310)
			add(h, "inbox/c/z.csv", "ez", 1, 2, 610)
			add(h, "inbox/c/x.csv", "rp-req-1", 1, 1, 900)
			add(h, "inbox/c/x.csv", "rp-req-1", 3, 3, 920)
		}, []string{"inbox/c/x.csv (replay rp-req-1) record 3 registered after record 1"}},
		{"a redrive registering beside another file", redriven(), func(h *history) {
			add(h, "inbox/c/1.csv", "e1", 1, 14, 10)
			add(h, "inbox/c/2.csv", "e2", 1, 3, 310)
			add(h, "inbox/c/3.csv", "e3", 1, 1, 610)
			add(h, "inbox/c/1.csv", "e1", 15, 20, 1010)
			add(h, "inbox/c/3.csv", "e3", 2, 2, 1100)
		}, []string{"inbox/c/1.csv (redrive 1) registered while inbox/c/3.csv was registering", "record 2 of inbox/c/3.csv registered after records of another run"}},
		{"a file's own run after a later file's, without a redrive", []report.FileReport{file("inbox/c/1.csv", "e1", 0, 200, 2), file("inbox/c/2.csv", "e2", 300, 500, 1)}, func(h *history) {
			add(h, "inbox/c/1.csv", "e1", 1, 1, 10)
			add(h, "inbox/c/2.csv", "e2", 1, 1, 310)
			add(h, "inbox/c/1.csv", "e1", 2, 2, 600)
		}, []string{"2.csv's first POST came", "record 2 of inbox/c/1.csv registered after records of a later file"}},
		{"a redrive started while another file ran", func() []report.FileReport {
			fs := redriven()
			fs[0].Redrives = []time.Time{at(700)}
			return fs
		}(), func(h *history) {
			add(h, "inbox/c/1.csv", "e1", 1, 14, 10)
			add(h, "inbox/c/2.csv", "e2", 1, 3, 310)
			add(h, "inbox/c/3.csv", "e3", 1, 2, 610)
			add(h, "inbox/c/1.csv", "e1", 15, 20, 1010)
		}, []string{"inbox/c/1.csv (redrive 1) started while inbox/c/3.csv was running"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h history
			tc.history(&h)
			r := &Run{Sink: emulate.NewSinkWith(map[string][]emulate.SinkRecord{"c": h.regs}, map[string][]emulate.SinkRequest{"c": h.reqs}),
				Tenants: []*Tenant{{ID: "c", Config: map[string]any{"id": "c"}}}}
			rep := &report.Report{Tenants: map[string]*report.TenantReport{"c": {Files: tc.files}}}
			got := r.checkInvariants(rep)
			if len(tc.want) == 0 && len(got) > 0 {
				t.Fatalf("got violations %q, want none", got)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d violations %q, want %d: %q", len(got), got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d: got %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

// TestRedriveHistoryRuns: the runs of a redriven execution come from its history, each with its
// own status and times: the first run to the first stop event, each redrive from its
// ExecutionRedriven event to the next stop (on two pages of history).
func TestRedriveHistoryRuns(t *testing.T) {
	pages := []string{
		`{"events": [{"id": 1, "type": "ExecutionStarted", "timestamp": 1800000000.1},
			{"id": 2, "type": "ExecutionFailed", "timestamp": 1800000000.2, "executionFailedEventDetails": {"error": "RegisterFailed", "cause": "record 15: 400"}},
			{"id": 3, "type": "ExecutionRedriven", "timestamp": 1800000001.0}], "nextToken": "p2"}`,
		`{"events": [{"id": 4, "type": "ExecutionTimedOut", "timestamp": 1800000001.5},
			{"id": 5, "type": "ExecutionRedriven", "timestamp": 1800000002.0},
			{"id": 6, "type": "ExecutionSucceeded", "timestamp": 1800000002.25}]}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var in struct{ NextToken string }
		json.NewDecoder(req.Body).Decode(&in)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		page := pages[0]
		if in.NextToken == "p2" {
			page = pages[1]
		}
		io.WriteString(w, page)
	}))
	defer srv.Close()
	r := &Run{Cloud: &Cloud{sfn: sfn.NewFromConfig(emulate.LocalAWS, func(o *sfn.Options) { o.BaseEndpoint = aws.String(srv.URL) })}}
	at := func(sec float64) *time.Time { x := unixTime(sec); return &x }
	e := sfnExecution{ExecutionArn: "arn:aws:states:us-east-1:000000000000:execution:m:e1", Status: "SUCCEEDED", StartDate: 1800000000.1, RedriveCount: 2}
	got := r.redriveHistory(context.Background(), e)
	want := []report.ExecutionRun{
		{Redrive: 0, Status: "FAILED", StartedAt: *at(1800000000.1), StoppedAt: at(1800000000.2), Error: "RegisterFailed", Cause: "record 15: 400"},
		{Redrive: 1, Status: "TIMED_OUT", StartedAt: *at(1800000001.0), StoppedAt: at(1800000001.5)},
		{Redrive: 2, Status: "SUCCEEDED", StartedAt: *at(1800000002.0), StoppedAt: at(1800000002.25)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d runs %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Redrive != w.Redrive || g.Status != w.Status || g.Error != w.Error || g.Cause != w.Cause ||
			g.StartedAt.UnixMilli() != w.StartedAt.UnixMilli() || g.StoppedAt == nil || g.StoppedAt.UnixMilli() != w.StoppedAt.UnixMilli() {
			t.Errorf("run %d: got %+v, want %+v", i, g, w)
		}
	}
}

// TestCheckInvariantsKeyOrder: for a tenant in key order the checker wants each key's records in
// file order, not the file's: records of two keys interleaved and out of file order pass, a key's
// records out of order are flagged, and the same history in file order is flagged.
func TestCheckInvariantsKeyOrder(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(1_800_000_000, 0).Add(time.Duration(ms) * time.Millisecond) }
	ptr := func(ms int) *time.Time { x := at(ms); return &x }
	f := report.FileReport{Key: "inbox/c/1.csv", VersionID: "v1", ExecutionName: "e1", Status: "SUCCEEDED", StartedAt: ptr(0), StoppedAt: ptr(1000), Records: 4, Expected: 4}
	history := func(order []int64, keys map[int64]string) ([]emulate.SinkRecord, []emulate.SinkRequest) {
		var regs []emulate.SinkRecord
		var reqs []emulate.SinkRequest
		for i, n := range order {
			when := at(10 + 10*i)
			k := fmt.Sprintf("e1-%d", n)
			regs = append(regs, emulate.SinkRecord{Source: f.Key, VersionID: "v1", RecordNumber: n, Key: k, RecordKey: keys[n], At: when})
			reqs = append(reqs, emulate.SinkRequest{Source: f.Key, VersionID: "v1", Key: k, RecordNumber: n, Records: 1, Start: when, End: when.Add(5 * time.Millisecond), Status: 201})
		}
		return regs, reqs
	}
	keyed := map[string]any{"id": "c", "recordOrder": "key", "keyColumns": []any{"customer"}}
	keys := map[int64]string{1: `"a"`, 2: `"b"`, 3: `"a"`, 4: `"b"`}
	for _, tc := range []struct {
		name   string
		config map[string]any
		order  []int64
		want   string // a substring of the one violation; "" for none
	}{
		{"keys interleaved, each in order", keyed, []int64{2, 1, 4, 3}, ""},
		{"one key out of order", keyed, []int64{3, 2, 1, 4}, `record 1 of key "a" registered after record 3 of that key`},
		{"file order wants the file's order", map[string]any{"id": "c"}, []int64{2, 1, 4, 3}, "record 2 registered after record 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			regs, reqs := history(tc.order, keys)
			r := &Run{Sink: emulate.NewSinkWith(map[string][]emulate.SinkRecord{"c": regs}, map[string][]emulate.SinkRequest{"c": reqs}),
				Tenants: []*Tenant{{ID: "c", Config: tc.config}}}
			got := r.checkInvariants(&report.Report{Tenants: map[string]*report.TenantReport{"c": {Files: []report.FileReport{f}}}})
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("got violations %q, want none", got)
			case tc.want != "" && (len(got) == 0 || !strings.Contains(got[0], tc.want)):
				t.Errorf("got violations %q, want the first to contain %q", got, tc.want)
			}
		})
	}
}
