//go:build e2e || figures

package localrun

// What a tenant gets back from a succeeded file, read as the tenant reads it: the files under
// results/<tenant>/<execution>/ (README, "Results of each file") and the File Processed event
// (README, "The File Processed event"), checked against the source file's bytes and the records the
// core system got. The fixtures are shared with pipectl validate's tests (testdata/results), whose
// --out must write the same rejected files.

import (
	"bytes"
	"context"
	encsv "encoding/csv"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/text/encoding/japanese"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/source"
)

// resultsFixture reads a file of testdata/results.
func resultsFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "testdata", "results", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// resultOf reads one results file of a file execution; ok is false when there is none.
func resultOf(t *testing.T, ctx context.Context, r *Run, tenant, execution, name string) (body []byte, ok bool) {
	t.Helper()
	out, err := r.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(results.Key(r.Tenant(tenant).Owner(), execution, name))})
	if source.Absent(err) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("reading %s: %v", results.Key(r.Tenant(tenant).Owner(), execution, name), err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", results.Key(r.Tenant(tenant).Owner(), execution, name), err)
	}
	return b, true
}

// mustResult is resultOf for a file that must exist.
func mustResult(t *testing.T, ctx context.Context, r *Run, tenant, execution, name string) []byte {
	t.Helper()
	b, ok := resultOf(t, ctx, r, tenant, execution, name)
	if !ok {
		t.Fatalf("%s: absent", results.Key(r.Tenant(tenant).Owner(), execution, name))
	}
	return b
}

// summaryOf reads a file execution's summary.json; ok is false when there is none.
func summaryOf(t *testing.T, ctx context.Context, r *Run, tenant, execution string) (sum results.Summary, ok bool) {
	t.Helper()
	b, ok := resultOf(t, ctx, r, tenant, execution, results.SummaryFile)
	if !ok {
		return sum, false
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatalf("%s: %v", results.Key(r.Tenant(tenant).Owner(), execution, results.SummaryFile), err)
	}
	return sum, true
}

// checkSucceededSummary checks the summary.json of a succeeded file: what the file was, its
// counts, the policy it ran under, and the locations of its rejected files (none, rejected.csv or
// rejected.jsonl, then a CSV file's rejected.jsonl of the rows that are not valid CSV).
func checkSucceededSummary(t *testing.T, ctx context.Context, r *Run, rep *report.Report, tenant string, f report.FileReport, want results.Counts, policy string, rejected ...string) results.Summary {
	t.Helper()
	sum, ok := summaryOf(t, ctx, r, tenant, f.ExecutionName)
	if !ok {
		t.Fatalf("%s: no summary.json", f.Key)
	}
	if sum.Status != pipeline.StatusSucceeded || sum.Tenant != tenant || sum.Execution != f.ExecutionName || sum.Tier != rep.Tenants[tenant].Tier {
		t.Errorf("%s: got summary status %s tenant %s execution %s tier %s, want %s %s %s %s", f.Key, sum.Status, sum.Tenant, sum.Execution, sum.Tier,
			pipeline.StatusSucceeded, tenant, f.ExecutionName, rep.Tenants[tenant].Tier)
	}
	if sum.Source.Key != f.Key || f.VersionID != "" && sum.Source.Version != f.VersionID {
		t.Errorf("%s: got summary source %+v, want the uploaded key %s, version %s", f.Key, sum.Source, f.Key, f.VersionID)
	}
	if got := (results.Counts{Records: sum.Records, Registered: sum.Registered, Rejected: sum.Rejected, Unprocessed: sum.Unprocessed}); got != want {
		t.Errorf("%s: got summary counts %+v, want %+v", f.Key, got, want)
	}
	if sum.OnInvalidRecord != policy {
		t.Errorf("%s: got summary onInvalidRecord %q, want %q", f.Key, sum.OnInvalidRecord, policy)
	}
	wantFiles := results.Files{Summary: results.URI(r.Bucket, results.Key(r.Tenant(tenant).Owner(), f.ExecutionName, results.SummaryFile))}
	for i, name := range rejected {
		uri := results.URI(r.Bucket, results.Key(r.Tenant(tenant).Owner(), f.ExecutionName, name))
		if i == 0 {
			wantFiles.Rejected = uri
		} else {
			wantFiles.RejectedNotCSV = uri
		}
	}
	if sum.Files != wantFiles {
		t.Errorf("%s: got summary files %+v, want %+v", f.Key, sum.Files, wantFiles)
	}
	if sum.Failure != nil {
		t.Errorf("%s: got summary failure %+v, want none", f.Key, sum.Failure)
	}
	return sum
}

// registeredOf are the first registrations of one source key, in order.
func registeredOf(r *Run, tenant, key string) []emulate.SinkRecord {
	var out []emulate.SinkRecord
	for _, rec := range r.Sink.Registered(tenant) {
		if rec.Source == key {
			out = append(out, rec)
		}
	}
	return out
}

func recordNumbers(recs []emulate.SinkRecord) []int64 {
	var out []int64
	for _, rec := range recs {
		out = append(out, rec.RecordNumber)
	}
	return out
}

// rejectedRow is a row a rejected.csv must hold: the record's physical line in the source and its
// record number.
type rejectedRow struct{ line, record int64 }

// checkRejectedCSV checks a rejected.csv against its source, byte for byte where the product
// promises bytes: its header line is "_line,_record,_error," then the source's first line as it
// was; each row is _line, _record and a one-sentence _error, then "," and the source line where
// the rejected record is, as it was. decode turns the file's encoding into UTF-8 (nil for UTF-8)
// to read the columns with encoding/csv; header are the header line's columns, decoded. It
// returns the rows' _error values. The sources here have no record over two lines.
func checkRejectedCSV(t *testing.T, got, src []byte, decode func([]byte) ([]byte, error), header []string, want []rejectedRow) []string {
	t.Helper()
	utf8 := func(b []byte) []byte {
		if decode == nil {
			return b
		}
		d, err := decode(b)
		if err != nil {
			t.Fatalf("decoding %q: %v", b, err)
		}
		return d
	}
	columns := func(b []byte) []string {
		fields, err := encsv.NewReader(bytes.NewReader(utf8(b))).Read()
		if err != nil {
			t.Fatalf("rejected.csv: %q is not CSV: %v", b, err)
		}
		return fields
	}
	srcLines := sourceLines(src)
	lines := bytes.Split(got, []byte("\n"))
	if last := len(lines) - 1; len(lines[last]) != 0 {
		t.Fatalf("rejected.csv %q: want lines that each end in \\n", got)
	}
	lines = lines[:len(lines)-1]
	if len(lines) != 1+len(want) {
		t.Fatalf("rejected.csv %q: got %d lines, want the header and %d rows", got, len(lines), len(want))
	}
	if h := lines[0]; !bytes.HasSuffix(h, srcLines[0]) || string(utf8(h[:len(h)-len(srcLines[0])])) != "_line,_record,_error," {
		t.Errorf("rejected.csv header: got %q, want \"_line,_record,_error,\" then the source's %q", h, srcLines[0])
	}
	if got := columns(lines[0]); !reflect.DeepEqual(got, header) {
		t.Errorf("rejected.csv header: got columns %q, want %q", got, header)
	}
	var errs []string
	for i, w := range want {
		row, orig := lines[i+1], append([]byte(","), srcLines[w.line-1]...)
		if !bytes.HasSuffix(row, orig) {
			t.Errorf("rejected.csv row %d: got %q, want the columns, then line %d of the source as it was, %q", i+1, row, w.line, orig)
			continue
		}
		cols := columns(row[:len(row)-len(orig)])
		if len(cols) != 3 || cols[0] != strconv.FormatInt(w.line, 10) || cols[1] != strconv.FormatInt(w.record, 10) || cols[2] == "" || strings.ContainsAny(cols[2], "\r\n") {
			t.Errorf("rejected.csv row %d: got columns %q before the record, want _line %d, _record %d and a one-sentence _error", i+1, cols, w.line, w.record)
			continue
		}
		errs = append(errs, cols[2])
	}
	return errs
}

// checkRejectedNotCSV checks a CSV file's rejected.jsonl, of the rejected rows that are not valid
// CSV: one object a line, {"line","record","error"} and the source line as it was, byte for byte,
// in "raw" (a string) or "rawBase64".
func checkRejectedNotCSV(t *testing.T, got, src []byte, want []rejectedRow) {
	t.Helper()
	srcLines := sourceLines(src)
	lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
	if len(lines) != len(want) || !strings.HasSuffix(string(got), "\n") {
		t.Fatalf("rejected.jsonl %q: got %d lines, want %d, each ending in \\n", got, len(lines), len(want))
	}
	for i, w := range want {
		var l struct {
			Line, Record int64
			Error        string
			Raw          *string
			RawBase64    []byte
		}
		dec := json.NewDecoder(strings.NewReader(lines[i]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("rejected.jsonl line %q: %v", lines[i], err)
		}
		raw := l.RawBase64
		if l.Raw != nil {
			raw = []byte(*l.Raw)
		}
		if l.Line != w.line || l.Record != w.record || l.Error == "" || (l.Raw != nil) == (l.RawBase64 != nil) || !bytes.Equal(raw, srcLines[w.line-1]) {
			t.Errorf("rejected.jsonl line %d: got %s, want line %d, record %d, an error and line %d of the source as it was, %q", i+1, lines[i], w.line, w.record, w.line, srcLines[w.line-1])
		}
	}
}

// sourceLines are a source's physical lines without their line ends.
func sourceLines(src []byte) [][]byte {
	lines := bytes.Split(src, []byte("\n"))
	for i := range lines {
		lines[i] = bytes.TrimSuffix(lines[i], []byte("\r"))
	}
	return lines
}

// checkFileEvents checks report.json's fileEvents for files: exactly one per file and none other;
// for a file with a summary.json the event's status and counts are the summary's (countsFrom
// "summary"), and its registered is the number of the file's records the core system got.
func checkFileEvents(t *testing.T, ctx context.Context, r *Run, rep *report.Report, files []upload) {
	t.Helper()
	byExecution := map[string][]report.FileEvent{}
	for _, ev := range rep.FileEvents {
		byExecution[ev.Detail.Execution] = append(byExecution[ev.Detail.Execution], ev)
	}
	for _, u := range files {
		f := fileOf(t, rep, u.tenant, u.rel)
		evs := byExecution[f.ExecutionName]
		if len(evs) != 1 {
			t.Errorf("%s: got %d File Processed events, want 1", f.Key, len(evs))
			continue
		}
		d := evs[0].Detail
		if d.Status != f.Status || d.Tenant != u.tenant || d.Source.Key != f.Key {
			t.Errorf("%s: got event status %s tenant %s key %s, want %s %s %s", f.Key, d.Status, d.Tenant, d.Source.Key, f.Status, u.tenant, f.Key)
		}
		sink := int64(len(registeredOf(r, u.tenant, f.Key)))
		sum, ok := summaryOf(t, ctx, r, u.tenant, f.ExecutionName)
		if !ok {
			// No results yet for a failed file: the event cannot say it read them.
			if d.CountsFrom == results.CountsFromSummary {
				t.Errorf("%s: got countsFrom %q without a summary.json", f.Key, d.CountsFrom)
			}
			if d.CountsFrom != results.CountsFromNone && d.Registered != sink {
				t.Errorf("%s: got event registered %d, want %d (the sink's count)", f.Key, d.Registered, sink)
			}
			continue
		}
		got := []any{d.CountsFrom, d.Status, d.Records, d.Registered, d.Rejected, d.Unprocessed}
		want := []any{results.CountsFromSummary, sum.Status, sum.Records, sum.Registered, sum.Rejected, sum.Unprocessed}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got event countsFrom, status, records, registered, rejected, unprocessed %v, want summary.json's %v", f.Key, got, want)
		}
		if d.Registered != sink {
			t.Errorf("%s: got event registered %d, want %d (the sink's count)", f.Key, d.Registered, sink)
		}
	}
	if len(rep.FileEvents) != len(files) {
		t.Errorf("got %d File Processed events, want %d (one per file)", len(rep.FileEvents), len(files))
	}
}

// checkResultsCP932 checks a CP932 skipRecord file (testdata/results/cp932.csv, 10 records with
// Japanese text; records 4, 6 and 8 on lines 5, 7 and 9 malformed): its valid records reach the
// core system in order, with their own numbers, decoded to UTF-8; rejected.csv holds the header
// and the rejected rows as CP932 bytes of the source, byte for byte; the summary counts them.
func checkResultsCP932(t *testing.T, ctx context.Context, r *Run, rep *report.Report, tenant, rel string, src []byte) {
	t.Helper()
	f := fileOf(t, rep, tenant, rel)
	if f.Status != pipeline.StatusSucceeded {
		t.Fatalf("%s: got %s (%s %s), want SUCCEEDED", f.Key, f.Status, f.Error, f.Cause)
	}
	text, err := japanese.ShiftJIS.NewDecoder().Bytes(src)
	if err != nil {
		t.Fatal(err)
	}
	// The valid records as the core system must get them: {header: value} in UTF-8.
	lines := strings.Split(strings.TrimSuffix(string(text), "\r\n"), "\r\n")
	header := strings.Split(lines[0], ",")
	bad := map[int64]bool{4: true, 6: true, 8: true}
	var wantNumbers []int64
	wantRecords := map[int64]map[string]string{}
	for i, line := range lines[1:] {
		n := int64(i + 1)
		if bad[n] {
			continue
		}
		rec := map[string]string{}
		for j, v := range strings.Split(line, ",") {
			rec[header[j]] = v
		}
		wantNumbers, wantRecords[n] = append(wantNumbers, n), rec
	}
	got := registeredOf(r, tenant, f.Key)
	if g := recordNumbers(got); !reflect.DeepEqual(g, wantNumbers) {
		t.Errorf("%s: got records %v, want %v (in order, once each)", f.Key, g, wantNumbers)
	}
	for _, rec := range got {
		var m map[string]string
		if err := json.Unmarshal(rec.Record, &m); err != nil || !reflect.DeepEqual(m, wantRecords[rec.RecordNumber]) {
			t.Errorf("%s: record %d: got %s (%v), want %v", f.Key, rec.RecordNumber, rec.Record, err, wantRecords[rec.RecordNumber])
		}
	}
	if len(got) > 1 && !strings.Contains(string(got[1].Record), `"氏名":"ソニー 花子"`) {
		t.Errorf("%s: got record 2 %s, want 氏名 ソニー 花子 in UTF-8", f.Key, got[1].Record)
	}

	body := mustResult(t, ctx, r, tenant, f.ExecutionName, results.RejectedCSV)
	decode := func(b []byte) ([]byte, error) { return japanese.ShiftJIS.NewDecoder().Bytes(b) }
	checkRejectedCSV(t, body, src, decode, append([]string{"_line", "_record", "_error"}, header...), []rejectedRow{{5, 4}, {9, 8}})
	if want := resultsFixture(t, "cp932.csv.rejected.csv"); !bytes.Equal(body, want) {
		t.Errorf("%s: got rejected.csv %q, want testdata/results/cp932.csv.rejected.csv %q", f.Key, body, want)
	}
	// Record 6 has a stray quote: not CSV, so in rejected.jsonl, its CP932 bytes in base64.
	notCSV := mustResult(t, ctx, r, tenant, f.ExecutionName, results.RejectedJSONL)
	checkRejectedNotCSV(t, notCSV, src, []rejectedRow{{7, 6}})
	if want := resultsFixture(t, "cp932.csv.rejected.jsonl"); !bytes.Equal(notCSV, want) {
		t.Errorf("%s: got rejected.jsonl %q, want testdata/results/cp932.csv.rejected.jsonl %q", f.Key, notCSV, want)
	}
	checkSucceededSummary(t, ctx, r, rep, tenant, f, results.Counts{Records: 10, Registered: 7, Rejected: 3}, pipeline.OnInvalidSkipRecord, results.RejectedCSV, results.RejectedJSONL)
}

// checkResultsJSONL checks a JSON Lines skipRecord file (testdata/results/orders.jsonl: records
// 1 to 5 on lines 1, 2, 4, 5 and 6, line 3 blank; record 2 is not JSON, record 4 not an object):
// records 1, 3 and 5 reach the core system as they were; each line of rejected.jsonl is
// {"line","record","error","value"}, value the line's JSON, or the line as a JSON string when it
// is not JSON (README, "Results of each file").
func checkResultsJSONL(t *testing.T, ctx context.Context, r *Run, rep *report.Report, tenant, rel string, src []byte) {
	t.Helper()
	f := fileOf(t, rep, tenant, rel)
	if f.Status != pipeline.StatusSucceeded {
		t.Fatalf("%s: got %s (%s %s), want SUCCEEDED", f.Key, f.Status, f.Error, f.Cause)
	}
	srcLines := strings.Split(string(src), "\n")
	got := registeredOf(r, tenant, f.Key)
	if g, want := recordNumbers(got), []int64{1, 3, 5}; !reflect.DeepEqual(g, want) {
		t.Errorf("%s: got records %v, want %v (in order, once each)", f.Key, g, want)
	}
	lineOf := map[int64]int{1: 1, 3: 4, 5: 6}
	for _, rec := range got {
		var g, w any
		if json.Unmarshal(rec.Record, &g) != nil || json.Unmarshal([]byte(srcLines[lineOf[rec.RecordNumber]-1]), &w) != nil || !reflect.DeepEqual(g, w) {
			t.Errorf("%s: record %d: got %s, want line %d's object %s", f.Key, rec.RecordNumber, rec.Record, lineOf[rec.RecordNumber], srcLines[lineOf[rec.RecordNumber]-1])
		}
	}

	body := mustResult(t, ctx, r, tenant, f.ExecutionName, results.RejectedJSONL)
	if want := resultsFixture(t, "orders.jsonl.rejected.jsonl"); !bytes.Equal(body, want) {
		t.Errorf("%s: got rejected.jsonl %q, want testdata/results/orders.jsonl.rejected.jsonl %q", f.Key, body, want)
	}
	type rejectedLine struct {
		Line   int64           `json:"line"`
		Record int64           `json:"record"`
		Error  string          `json:"error"`
		Value  json.RawMessage `json:"value"`
	}
	var rows []rejectedLine
	for _, line := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		var row rejectedLine
		if err := dec.Decode(&row); err != nil {
			t.Fatalf("%s: rejected.jsonl line %q: %v", f.Key, line, err)
		}
		rows = append(rows, row)
	}
	notJSON, _ := json.Marshal(srcLines[1])
	want := []rejectedLine{
		{Line: 2, Record: 2, Value: notJSON},                      // not JSON: the line, as a string
		{Line: 5, Record: 4, Value: json.RawMessage(srcLines[4])}, // JSON, not an object: the line's JSON
	}
	if len(rows) != len(want) {
		t.Fatalf("%s: got rejected.jsonl %q, want %d lines", f.Key, body, len(want))
	}
	for i, w := range want {
		g := rows[i]
		if g.Line != w.Line || g.Record != w.Record || !bytes.Equal(g.Value, w.Value) || g.Error == "" || strings.ContainsAny(g.Error, "\r\n") {
			t.Errorf("%s: rejected.jsonl line %d: got %+v (value %s), want line %d, record %d, value %s and a one-sentence error", f.Key, i+1, g, g.Value, w.Line, w.Record, w.Value)
		}
	}
	checkSucceededSummary(t, ctx, r, rep, tenant, f, results.Counts{Records: 5, Registered: 3, Rejected: 2}, pipeline.OnInvalidSkipRecord, results.RejectedJSONL)
}
