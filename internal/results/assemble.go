package results

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// Parts are the rejections found before a file's end, one JSON Lines object of Rejection per
// record in record order, under results/<tenant>/<execution>/parts/: Split writes SplitPart (and,
// for CSV, HeaderPart: the file's raw header line without its line ending) before the manifest,
// Register one RegisterPart per invocation's range. The results task assembles them into the
// rejected file; nothing deletes them (they expire with the results).
const (
	PartsDir   = "parts"
	SplitPart  = "split.jsonl"
	HeaderPart = "header"
)

// PartsPrefix is the key prefix of an execution's parts.
func PartsPrefix(o pipeline.Owner, execution string) string {
	return Dir(o, execution) + PartsDir + "/"
}

// PartKey is the key of one part.
func PartKey(o pipeline.Owner, execution, name string) string {
	return path.Join(pipeline.ResultsDir(o), execution, PartsDir, name)
}

// RegisterPart is the name of the part of one Register invocation's range: deterministic, so a
// retry of the invocation overwrites it.
func RegisterPart(chunk int, firstRecord int64) string {
	return fmt.Sprintf("register-%06d-%012d.jsonl", chunk, firstRecord)
}

// DecodePart reads one part. An empty line is skipped; anything else that is not a Rejection is
// an error naming the line, never its contents.
func DecodePart(b []byte) ([]Rejection, error) {
	var out []Rejection
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var r Rejection
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("line %d is not a rejection: %w", n, err)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// Merge puts the rejections of every part in record order, one per record: ranges of a resumed
// invocation may overlap an earlier one's, and a record rejected twice is one rejection (the later
// part's, in the order given).
func Merge(parts ...[]Rejection) []Rejection {
	var all []Rejection
	for _, p := range parts {
		all = append(all, p...)
	}
	slices.SortStableFunc(all, func(a, b Rejection) int { return cmpInt(a.Record, b.Record) })
	out := all[:0]
	for _, r := range all {
		if n := len(out); n > 0 && out[n-1].Record == r.Record {
			out[n-1] = r
			continue
		}
		out = append(out, r)
	}
	return out
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// File is one results file to write: its name in the execution's folder and its body.
type File struct {
	Name string
	Body []byte
	// notCSV: a CSV file's rejected.jsonl, of the rows that are not valid CSV.
	notCSV bool
}

// Record puts the file's s3:// URI in the field of a summary's Files that names it.
func (f File) Record(files *Files, uri string) {
	if f.notCSV {
		files.RejectedNotCSV = uri
	} else {
		files.Rejected = uri
	}
}

// RejectedFiles renders the rejected files of a format from rejections in record order. JSON
// Lines: rejected.jsonl, one line per rejection. CSV: rejected.csv, its header line (the extra
// columns and the file's own, rawHeader) then one row per rejection that is valid CSV, and
// rejected.jsonl for the others (AppendNotCSV). A file with no line is not written: no
// rejections, no file.
func RejectedFiles(format string, rs []Rejection, rawHeader []byte, delimiter rune, encoding string) []File {
	if len(rs) == 0 {
		return nil
	}
	if format == pipeline.FormatJSONL {
		var b []byte
		for _, r := range rs {
			b = AppendJSONL(b, r)
		}
		return []File{{Name: RejectedJSONL, Body: b}}
	}
	var rows, notCSV []byte
	for _, r := range rs {
		var ok bool
		if rows, ok = AppendCSV(rows, r, delimiter, encoding); !ok {
			notCSV = AppendNotCSV(notCSV, r, encoding)
		}
	}
	var out []File
	if rows != nil {
		out = append(out, File{Name: RejectedCSV, Body: append(CSVHeader(nil, rawHeader, delimiter, encoding), rows...)})
	}
	if notCSV != nil {
		out = append(out, File{Name: RejectedJSONL, Body: notCSV, notCSV: true})
	}
	return out
}

// Counts are a file's counts in summary.json.
type Counts struct {
	Records, Registered, Rejected, Unprocessed int64
}

// CountsOf works a file's counts out from the records in it, its rejections (Merge's) and next,
// the first record never sent (records+1 when every record was; 1 when none was). A record before
// next was registered unless rejected; from next on, a rejected record (Split's validation
// rejects records anywhere in the file) is rejected, the rest are unprocessed. So records =
// registered + rejected + unprocessed always holds.
func CountsOf(records int64, rejected []Rejection, next int64) Counts {
	c, _ := CountsAfterHalt(records, rejected, next, nil)
	return c
}

// CountsAfterHalt is CountsOf for a file that also registered records past next before it
// stopped (a keyed file, whose other keys ran ahead of its first failed record): after, ascending
// and not touching, as a segment's progress lists them (pipeline.Progress.Registered). Those
// records count as registered, not unprocessed, unless rejected. It returns them as the summary
// lists them (Summary.RegisteredAfterHalt): clipped to the records from next+1 to the file's last,
// less the rejected ones; nil when none are left.
func CountsAfterHalt(records int64, rejected []Rejection, next int64, after []pipeline.RecordRange) (Counts, []pipeline.RecordRange) {
	next = max(1, min(next, records+1))
	var before int64
	var past []int64 // rejected records from next on
	for _, r := range rejected {
		if r.Record < next {
			before++
		} else {
			past = append(past, r.Record)
		}
	}
	slices.Sort(past)
	ranges := registeredAfter(after, next+1, records, past)
	c := Counts{Records: records, Rejected: int64(len(rejected))}
	c.Registered = max(0, next-1-before)
	for _, r := range ranges {
		c.Registered += r.Last - r.First + 1
	}
	c.Unprocessed = max(0, records-c.Registered-c.Rejected)
	return c, ranges
}

// registeredAfter is rs clipped to [lo, hi], with the records of rejected (ascending) cut out.
func registeredAfter(rs []pipeline.RecordRange, lo, hi int64, rejected []int64) []pipeline.RecordRange {
	var out []pipeline.RecordRange
	add := func(first, last int64) {
		if first <= last {
			out = append(out, pipeline.RecordRange{First: first, Last: last})
		}
	}
	for _, r := range rs {
		first, last := max(r.First, lo), min(r.Last, hi)
		i, _ := slices.BinarySearch(rejected, first)
		for ; i < len(rejected) && rejected[i] <= last; i++ {
			add(first, rejected[i]-1)
			first = rejected[i] + 1
		}
		add(first, last)
	}
	return out
}
