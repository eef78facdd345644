package ops

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/spec"
)

// Reconcile (pipectl reconcile, docs/operations.md): proof of what arrived. Per file since a date,
// what the pipeline's results say (sent, acknowledged, rejected, unprocessed) and, with the core
// system's lookupUrl, what the core system says of a sample of the records (or all), each looked
// up by its Idempotency-Key. Every disagreement is listed.

// Lookup modes of Reconcile.
const (
	LookupSample = "sample"
	LookupAll    = "all"
	LookupNone   = "none"
	// DefaultReconcileSample is how many records of each file a sample looks up.
	DefaultReconcileSample = 20
	// maxReconcileFiles bounds the files one reconcile reads (one ListExecutions page of a silo).
	maxReconcileFiles = 1000
	// maxRejectedBytes bounds a rejected file read for its record numbers.
	maxRejectedBytes = 64 << 20
)

// ReconcileOptions are Reconcile's choices.
type ReconcileOptions struct {
	Since time.Time
	// Lookup is LookupSample (default), LookupAll or LookupNone.
	Lookup string
	// Sample is how many records of each file a sample looks up. Default: DefaultReconcileSample.
	Sample int
}

// ReconcileReport is what Reconcile found, as written to the tenant's results area.
type ReconcileReport struct {
	Tenant string    `json:"tenant"`
	Since  time.Time `json:"since"`
	At     time.Time `json:"at"`
	// Lookup is the mode used: "none" when the core system has no lookupUrl.
	Lookup     string `json:"lookup"`
	CoreSystem string `json:"coreSystem,omitempty"`
	// Written is the s3:// URI of this report.
	Written string          `json:"written"`
	Files   []ReconcileFile `json:"files"`
	// Differences is the number of differences over all files.
	Differences int `json:"differences"`
}

// ReconcileFile is one file execution's account.
type ReconcileFile struct {
	File      results.Source `json:"file"`
	Execution string         `json:"execution"`
	Status    string         `json:"status"`
	// The results' counts: records in the file; sent (records - unprocessed: every record that
	// reached the core system or was rejected before it); acknowledged by the core system
	// (registered); rejected; unprocessed (never sent).
	Records      int64 `json:"records"`
	Sent         int64 `json:"sent"`
	Acknowledged int64 `json:"acknowledged"`
	Rejected     int64 `json:"rejected"`
	Unprocessed  int64 `json:"unprocessed"`
	// LookedUp records were looked up in the core system; Found of them are registered there.
	LookedUp int `json:"lookedUp"`
	Found    int `json:"found"`
	// Differences lists each disagreement, one sentence each.
	Differences []string `json:"differences"`
}

// Reconcile accounts for the tenant's files since o.Since and writes the report to
// results/<tenant>/reconcile/<time>.json in the tenant's bucket.
func (o *Ops) Reconcile(ctx context.Context, id string, opt ReconcileOptions) (ReconcileReport, error) {
	switch opt.Lookup {
	case "":
		opt.Lookup = LookupSample
	case LookupSample, LookupAll, LookupNone:
	default:
		return ReconcileReport{}, refuse("--lookup %q must be sample, all or none", opt.Lookup)
	}
	if opt.Sample <= 0 {
		opt.Sample = DefaultReconcileSample
	}
	t, err := o.Tenant(ctx, id)
	if err != nil {
		return ReconcileReport{}, err
	}
	settings, err := o.settingsOf(ctx, t)
	if err != nil {
		return ReconcileReport{}, err
	}
	rep := ReconcileReport{Tenant: t.ID, Since: opt.Since.UTC(), At: o.Now().UTC(), Lookup: opt.Lookup, Files: []ReconcileFile{}}
	var look *lookup
	if settings != nil && settings.CoreSystem != nil {
		rep.CoreSystem = settings.CoreSystem.Name
		if settings.CoreSystem.LookupURL != "" && opt.Lookup != LookupNone && !settings.BatchMode() {
			look = &lookup{url: settings.CoreSystem.LookupURL, http: o.lookupClient()}
		}
	}
	if look == nil {
		rep.Lookup = LookupNone
	}
	execs, err := o.executions(ctx, t, "", maxReconcileFiles)
	if err != nil {
		return ReconcileReport{}, fmt.Errorf("list executions: %w", err)
	}
	for _, e := range execs {
		if e.StartDate != nil && e.StartDate.Before(opt.Since) {
			continue
		}
		name := aws.ToString(e.Name)
		f := ReconcileFile{Execution: name, Status: string(e.Status), Differences: []string{}}
		sum, err := o.summary(ctx, t, name)
		if err != nil {
			return ReconcileReport{}, err
		}
		if sum == nil {
			if e.StopDate != nil {
				f.Differences = append(f.Differences, "the execution ended but wrote no summary.json: its records are unaccounted for")
			}
			rep.Files = append(rep.Files, f)
			continue
		}
		f.File, f.Status = sum.Source, sum.Status
		f.Records, f.Acknowledged, f.Rejected, f.Unprocessed = sum.Records, sum.Registered, sum.Rejected, sum.Unprocessed
		f.Sent = sum.Records - sum.Unprocessed
		if f.Sent != f.Acknowledged+f.Rejected {
			f.Differences = append(f.Differences, fmt.Sprintf("%d records sent, but %d acknowledged and %d rejected", f.Sent, f.Acknowledged, f.Rejected))
		}
		if look != nil && sum.Records > 0 {
			rejected, err := o.rejectedRecords(ctx, t, sum)
			if err != nil {
				return ReconcileReport{}, err
			}
			o.lookUpFile(ctx, look, &f, sum, rejected, opt)
		}
		rep.Differences += len(f.Differences)
		rep.Files = append(rep.Files, f)
	}
	key := fmt.Sprintf("%sreconcile/%s.json", pipeline.ResultsDir(t.Owner()), rep.At.Format("20060102T150405Z"))
	rep.Written = results.URI(t.Bucket, key)
	body, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return rep, err
	}
	if _, err := o.S3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(t.Bucket), Key: aws.String(key), Body: bytes.NewReader(body),
		ContentType: aws.String("application/json"),
	}); err != nil {
		return rep, fmt.Errorf("put %s: %w", rep.Written, err)
	}
	return rep, nil
}

// lookup asks the core system whether it holds a key.
type lookup struct {
	url  string
	http *http.Client
}

// has GETs the lookupUrl for key: 200 true, 404 false, anything else an error.
func (l *lookup) has(ctx context.Context, key string) (bool, error) {
	u := spec.CoreSystem{LookupURL: l.url}.LookupFor(key)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	resp, err := l.http.Do(req)
	if err != nil {
		return false, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound:
		return false, nil
	}
	return false, fmt.Errorf("the lookup answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
}

func (o *Ops) lookupClient() *http.Client {
	if o.HTTP != nil {
		return o.HTTP
	}
	return &http.Client{Timeout: 10 * time.Second}
}

// maxListedPerFile bounds the records named in one file's differences.
const maxListedPerFile = 20

// lookUpFile looks up the sampled (or all) records of the file and lists those whose presence in
// the core system disagrees with the results: acknowledged but absent, or never acknowledged
// (rejected or unprocessed) but present.
func (o *Ops) lookUpFile(ctx context.Context, look *lookup, f *ReconcileFile, sum *results.Summary, rejected map[int64]bool, opt ReconcileOptions) {
	// The unprocessed records are the file's tail from the first record never sent, less the
	// records registered after it (key order).
	var after int64
	for _, r := range sum.RegisteredAfterHalt {
		after += r.Last - r.First + 1
	}
	firstUnsent := sum.Records - sum.Unprocessed - after + 1
	var absent, present, failed []string
	for _, n := range sampleRecords(sum.Records, opt) {
		acked := !rejected[n] && (sum.Unprocessed == 0 || n < firstUnsent || pipeline.Contains(sum.RegisteredAfterHalt, n))
		has, err := look.has(ctx, keyOf(sum.Execution, n))
		if err != nil {
			failed = append(failed, fmt.Sprintf("%d (%v)", n, err))
			continue
		}
		f.LookedUp++
		if has {
			f.Found++
		}
		switch {
		case acked && !has:
			absent = append(absent, strconv.FormatInt(n, 10))
		case !acked && has:
			present = append(present, strconv.FormatInt(n, 10))
		}
	}
	list := func(ns []string) string {
		if len(ns) > maxListedPerFile {
			return strings.Join(ns[:maxListedPerFile], ", ") + fmt.Sprintf(" and %d more", len(ns)-maxListedPerFile)
		}
		return strings.Join(ns, ", ")
	}
	if len(absent) > 0 {
		f.Differences = append(f.Differences, fmt.Sprintf("%d acknowledged records not found in the core system: %s", len(absent), list(absent)))
	}
	if len(present) > 0 {
		f.Differences = append(f.Differences, fmt.Sprintf("%d records found in the core system that the results do not count as registered: %s", len(present), list(present)))
	}
	if len(failed) > 0 {
		f.Differences = append(f.Differences, fmt.Sprintf("%d lookups failed, records %s", len(failed), list(failed)))
	}
}

// keyOf is a record's Idempotency-Key (register.IdempotencyKey).
func keyOf(execution string, n int64) string { return execution + "-" + strconv.FormatInt(n, 10) }

// sampleRecords are the record numbers (1-based) of a file of n records to look up: all of them,
// or opt.Sample spread evenly from the first to the last.
func sampleRecords(n int64, opt ReconcileOptions) []int64 {
	k := int64(opt.Sample)
	if opt.Lookup == LookupAll || n <= k {
		k = n
	}
	out := make([]int64, 0, k)
	for i := range k {
		r := int64(1)
		if k > 1 {
			r = 1 + i*(n-1)/(k-1)
		}
		if len(out) == 0 || out[len(out)-1] != r {
			out = append(out, r)
		}
	}
	return out
}

// rejectedRecords reads the record numbers of the file's rejected records from its results
// (rejected.jsonl's "record", rejected.csv's _record).
func (o *Ops) rejectedRecords(ctx context.Context, t pipeline.TenantOutput, sum *results.Summary) (map[int64]bool, error) {
	out := map[int64]bool{}
	if sum.Rejected == 0 {
		return out, nil
	}
	for _, uri := range []string{sum.Files.Rejected, sum.Files.RejectedNotCSV} {
		bucket, k, ok := strings.Cut(strings.TrimPrefix(uri, "s3://"), "/")
		if uri == "" || !ok || bucket != t.Bucket {
			continue
		}
		got, err := o.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
		if err != nil {
			return nil, fmt.Errorf("get %s: %w", uri, err)
		}
		b, err := io.ReadAll(io.LimitReader(got.Body, maxRejectedBytes))
		got.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", uri, err)
		}
		if strings.HasSuffix(k, ".jsonl") {
			dec := json.NewDecoder(bytes.NewReader(b))
			for {
				var line struct {
					Record int64 `json:"record"`
				}
				if err := dec.Decode(&line); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					return nil, fmt.Errorf("%s: %w", uri, err)
				}
				out[line.Record] = true
			}
			continue
		}
		r := csv.NewReader(bytes.NewReader(b))
		r.FieldsPerRecord, r.LazyQuotes = -1, true
		rows, err := r.ReadAll()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", uri, err)
		}
		col := -1
		for i, row := range rows {
			if i == 0 {
				col = slices.Index(row, "_record")
				continue
			}
			if col >= 0 && col < len(row) {
				if n, err := strconv.ParseInt(row[col], 10, 64); err == nil {
					out[n] = true
				}
			}
		}
	}
	return out, nil
}
