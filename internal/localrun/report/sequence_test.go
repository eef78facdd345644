package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/report/reportpage"
)

// sequenced is a tenant holding two files for its missing number 3, one file refused as a
// duplicate, two done.
func sequenced(onGap string) *TenantReport {
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	start, stop := at.Add(time.Second), at.Add(2*time.Second)
	gap := at.Add(3 * time.Second)
	done := func(key, seq string) FileReport {
		return FileReport{Key: key, Sequence: seq, Status: "SUCCEEDED", ExecutionName: "ov-" + seq, UploadedAt: at, StartedAt: &start, StoppedAt: &stop}
	}
	return &TenantReport{
		Files: []FileReport{
			{Key: "inbox/acme/orders-5.csv", Sequence: "5", Status: StatusHeld, UploadedAt: at},
			done("inbox/acme/orders-1.csv", "1"),
			{Key: "inbox/acme/orders-4.csv", Sequence: "4", Status: StatusHeld, UploadedAt: at},
			done("inbox/acme/orders-2.csv", "2"),
			{Key: "inbox/acme/orders-02.csv", Sequence: "2", Status: StatusRefused, Refusal: "duplicate", ExecutionName: "ov-dup", UploadedAt: at},
		},
		Sequence: &SequenceReport{Kind: "number", OnGap: onGap, Next: "3", Held: 2, HeldFirst: "4", GapSince: &gap},
	}
}

func TestSequenceInProgressAndSummary(t *testing.T) {
	rep := &Report{Tenants: map[string]*TenantReport{"acme": sequenced("hold")}, Violations: []string{}}
	ids := []string{"acme"}
	line := ProgressLine(rep, ids)
	for _, want := range []string{"1 tenant (0 idle): 3/5 files done 2 held 1 refused", "acme 3/5 done 2 held 1 refused (waits for 3)"} {
		if !strings.Contains(line, want) {
			t.Errorf("progress: got %q, want %q in it", line, want)
		}
	}
	if Idle(rep) {
		t.Error("Idle: got true for a tenant holding files, want false")
	}
	if got, want := WaitingOn(rep, ids), "acme its missing number 3 (2 held from 4; onGap hold)"; got != want {
		t.Errorf("waiting on: got %q, want %q", got, want)
	}
	var out bytes.Buffer
	WriteSummary(&out, rep, ids)
	for _, want := range []string{
		"REFUSED", "refused: duplicate", "HELD",
		"sequence acme: next 3, 2 held from 4, 1 refused; waiting for 3 since 12:00:03 (onGap hold)",
		`pipectl sequence skip acme 3 --reason "<why it will not come>"`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary: got\n%s\nwant %q in it", out.String(), want)
		}
	}
}

// Holding is the end of a run's wait, like a halt: files held for a missing number that only the
// file or an operator brings, and nothing else to do.
func TestHolding(t *testing.T) {
	for _, tc := range []struct {
		name string
		tr   func() *TenantReport
		want bool
	}{
		{"a gap under onGap hold", func() *TenantReport { return sequenced("hold") }, true},
		{"a gap under onGap skip ends by itself", func() *TenantReport { return sequenced("skip") }, false},
		{"a file still waiting for its turn to be decided", func() *TenantReport {
			tr := sequenced("hold")
			tr.Files = append(tr.Files, FileReport{Key: "inbox/acme/orders-3.csv", Status: "WAITING"})
			return tr
		}, false},
		{"a message queued", func() *TenantReport { tr := sequenced("hold"); tr.Queued = 1; return tr }, false},
		{"no gap", func() *TenantReport { tr := sequenced("hold"); tr.Sequence.GapSince = nil; return tr }, false},
		{"nothing held", func() *TenantReport { tr := sequenced("hold"); tr.Sequence.Held = 0; return tr }, false},
		{"no sequence", func() *TenantReport { return &TenantReport{} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.tr().Holding(); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWriteHTMLSequence(t *testing.T) {
	rep := &Report{Tenants: map[string]*TenantReport{"acme": sequenced("hold")}, Violations: []string{}}
	var b bytes.Buffer
	if err := WriteHTML(&b, rep, []string{"acme"}, time.Date(2026, 12, 5, 12, 1, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`data-held="2"`, `data-awaits="3"`, "holds 2 · waits for 3",
		`data-kind="held"`, `data-kind="refused"`, `data-refusal="duplicate"`, `data-sequence="5"`, "REFUSED (duplicate)",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("got no %s in the page", want)
		}
	}
	els, lanes := reportpage.Parse(t, b.Bytes())
	if got := len(lanes.Bars["acme"]); got != 5 {
		t.Errorf("got %d bars in acme's lane, want 5", got)
	}
	refusals := map[string]string{}
	for _, row := range reportpage.FileTable(els) {
		refusals[row.Attrs["data-key"]] = row.Attrs["data-refusal"]
	}
	if got := refusals["inbox/acme/orders-02.csv"]; got != "duplicate" || len(refusals) != 5 {
		t.Errorf("got rows %v, want 5 with orders-02.csv refused as a duplicate", refusals)
	}
}
