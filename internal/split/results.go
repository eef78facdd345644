package split

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/deployed"
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/source"
)

// The transfer manager's parts for the unprocessed file: 8 MiB (S3's least part is 5 MiB,
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html), two uploads at once, so at
// most 24 MiB of the function's memory.
const (
	uploadPartBytes   = 8 << 20
	uploadConcurrency = 2
)

// MetricResultsFailed counts results tasks that failed an attempt. The state machine retries the
// task and then lets the file end as it would have: the file's status never depends on its
// results.
const MetricResultsFailed = "ResultsFailed"

// Invoke is the function's entry point: the results task when the request's kind says so
// (pipeline.TaskResults), else the Split task.
func (h *Handler) Invoke(ctx context.Context, in json.RawMessage) (any, error) {
	var k struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(in, &k); err != nil {
		return nil, &pipeline.PermanentError{Message: "the request is not a JSON object: " + pipeline.JSONProblem(err, "")}
	}
	if k.Kind == pipeline.TaskResults {
		var req pipeline.ResultsRequest
		if err := json.Unmarshal(in, &req); err != nil {
			return nil, &pipeline.PermanentError{Message: "the results request: " + pipeline.JSONProblem(err, "")}
		}
		if err := h.resolveDeployed(&req.State.Tenant, req.State.Source, req.ExecutionName); err != nil {
			return nil, err
		}
		return struct{}{}, h.Results(ctx, req)
	}
	var req pipeline.SplitRequest
	if err := json.Unmarshal(in, &req); err != nil {
		return nil, &pipeline.PermanentError{Message: "the split request: " + pipeline.JSONProblem(err, "")}
	}
	if err := h.resolveDeployed(&req.Tenant, req.Source, req.ExecutionName); err != nil {
		return nil, err
	}
	return h.Handle(ctx, req)
}

// resolveDeployed completes the request's tenant from the deployed settings (Deployed), and
// refuses, and logs, a request that is not theirs (deployed.Resolve).
func (h *Handler) resolveDeployed(t *pipeline.Tenant, src pipeline.Source, execution string) error {
	err := deployed.Resolve(h.Deployed, t, src)
	if err != nil {
		h.Log.Error("request refused", "tenant", t.ID, "execution", execution, "errorType", source.ErrorType(err), "error", err.Error())
	}
	return err
}

// Results writes a file execution's results under results/<tenant>/<execution>/: the rejected
// file assembled from the parts, the unprocessed file when the file fails after Split, and
// summary.json last, so that a summary implies the files it names exist. Every write has a
// deterministic key, so a retry or a redrive's run overwrites the same files. A failure is logged
// at ERROR with MetricResultsFailed and returned as a RetryableError.
func (h *Handler) Results(ctx context.Context, req pipeline.ResultsRequest) error {
	err := h.results(ctx, req)
	if err != nil {
		h.Log.Error("results not written", "tenant", req.State.Tenant.ID, "execution", req.ExecutionName,
			"status", req.Status, "errorType", source.ErrorType(err), "error", err.Error())
		h.emit(req.State.Tenant.ID, metrics.Count(MetricResultsFailed, 1))
		return err
	}
	return nil
}

func (h *Handler) results(ctx context.Context, req pipeline.ResultsRequest) error {
	st := req.State
	t := st.Tenant
	if t.ID == "" || req.ExecutionName == "" {
		return &pipeline.PermanentError{Message: "the results request has no tenant id or execution name"}
	}
	objects := h.S3
	if h.ForTenant != nil {
		var err error
		if objects, err = h.ForTenant(t.ID); err != nil {
			return &pipeline.RetryableError{Message: err.Error(), Err: err}
		}
	}
	w := resultsWriter{h: h, objects: objects, owner: h.owner(t.ID), execution: req.ExecutionName}
	sum := h.summary(req)

	// Only a skipRecord file has rejection parts (Split's and Register's): under failFile the first
	// invalid record fails the file and the core system's answers are never rejections, so its
	// results list nothing (one S3 LIST, $0.005 per 1,000 files, saved).
	var rejected []results.Rejection
	var rawHeader []byte
	if t.SkipsRecords() {
		var err error
		if rejected, rawHeader, err = w.parts(ctx); err != nil {
			return err
		}
	}
	f, ferr := records.FormatOf(t)
	if ferr != nil {
		f = records.Format{Kind: t.Format, Encoding: t.Encoding, Delimiter: ','}
	}
	for _, file := range results.RejectedFiles(t.Format, rejected, rawHeader, f.Delimiter, f.Encoding) {
		uri, err := w.put(ctx, file.Name, file.Body)
		if err != nil {
			return err
		}
		file.Record(&sum.Files, uri)
	}

	if st.Split == nil && st.SmallFile {
		// The file failed in the SmallFile task, which split it in memory: split it again, writing
		// nothing. A file that does not split (it failed on its format) counts nothing, as below.
		ss, err := h.Rescan(ctx, pipeline.SplitRequest{Tenant: t, Source: st.Source, ExecutionName: req.ExecutionName})
		if err == nil {
			st.Split, w.spans = &ss.Result, ss.Spans
		} else {
			h.Log.Info("the small file does not split again; its results count no records", "tenant", t.ID, "execution", req.ExecutionName,
				"errorType", source.ErrorType(err), "error", err.Error())
		}
	}
	if sp := st.Split; sp != nil {
		// A success registered every record: no progress is read, so a halted run's list of
		// records registered past its stop cannot outlive the run that completed the file.
		next := sp.Records + 1
		var after []pipeline.RecordRange
		if req.Status != pipeline.StatusSucceeded {
			pos, err := w.firstUnsent(ctx, *sp)
			if err != nil {
				return err
			}
			if pos.chunk < sp.Chunks {
				if next, after, err = w.writeUnprocessed(ctx, t, f, *sp, pos, &sum); err != nil {
					return err
				}
			}
		}
		c, ranges := results.CountsAfterHalt(sp.Records, rejected, next, after)
		sum.Records, sum.Registered, sum.Rejected, sum.Unprocessed = c.Records, c.Registered, c.Rejected, c.Unprocessed
		sum.RegisteredAfterHalt = ranges
	} else {
		// Split never returned, so the file's records are unknown: every count is 0. Split writes
		// its parts only on its way to success, so there are none to count either (a part left by
		// an earlier attempt that then failed is counted, as written).
		sum.Rejected = int64(len(rejected))
	}

	sum.Complete = h.complete(ctx, req, objects)
	body, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return &pipeline.PermanentError{Message: "encoding summary.json: " + err.Error()}
	}
	if _, err := w.put(ctx, results.SummaryFile, append(body, '\n')); err != nil {
		return err
	}
	h.Log.Info("results written", "tenant", t.ID, "execution", req.ExecutionName, "status", sum.Status,
		"records", sum.Records, "registered", sum.Registered, "rejected", sum.Rejected, "unprocessed", sum.Unprocessed)
	return nil
}

// summary fills in what the request itself says.
func (h *Handler) summary(req pipeline.ResultsRequest) results.Summary {
	st := req.State
	src := st.Source
	if st.Split != nil {
		src = st.Split.Source // the key Split actually read
	}
	tier := "silo"
	if h.ForTenant != nil {
		tier = "pool"
	}
	stopped := parseTime(req.StopTime)
	if stopped == nil {
		// The state machine's results task is the execution's last state: its end follows within
		// one state transition.
		now := h.now().UTC()
		stopped = &now
	}
	sum := results.Summary{
		Version:      results.SummaryVersion,
		Sequence:     st.Source.Sequence,
		Tenant:       st.Tenant.ID,
		Tier:         tier,
		Execution:    req.ExecutionName,
		RedriveCount: req.RedriveCount,
		ExecutionARN: req.ExecutionARN,
		Source:       results.Source{Bucket: src.Bucket, Key: src.Key, Version: src.VersionID},
		Status:       req.Status,
		Timings: results.Timings{
			// The S3 event's time: when the object was written, just before the file was queued.
			Queued:   parseTime(src.EventTime),
			Admitted: parseTime(st.Admitted),
			Started:  parseTime(req.StartTime),
			Stopped:  stopped,
		},
		OnInvalidRecord: cmp.Or(st.Tenant.OnInvalidRecord, pipeline.OnInvalidFailFile),
		Files:           results.Files{Summary: s3URI(h.WorkBucket, results.Key(h.owner(st.Tenant.ID), req.ExecutionName, results.SummaryFile))},
	}
	if e := st.Error; e != nil {
		typ, msg := pipeline.FailureOf(e.Error, e.Cause)
		sum.Failure = &results.Failure{Type: typ, Message: msg, Line: results.LineOf(msg)}
	}
	return sum
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

func parseTime(s string) *time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil
	}
	t = t.UTC()
	return &t
}

func s3URI(bucket, key string) string { return "s3://" + bucket + "/" + key }

// owner is whose keys tenant's are: in the handler's pool, "" in a silo.
func (h *Handler) owner(tenant string) pipeline.Owner { return pipeline.PoolOwner(h.KeysPool, tenant) }

func (h *Handler) emit(tenant string, ms ...metrics.Metric) {
	if h.Metrics == nil {
		return
	}
	e := metrics.New(h.Metrics, pipeline.DefaultMetricsNamespace, tenant)
	if h.Pool != "" {
		e = e.InPool(h.Pool)
	}
	if err := e.Emit(ms...); err != nil {
		h.Log.Warn("metric not written", "tenant", tenant, "error", err.Error())
	}
}

// resultsWriter reads and writes one execution's results folder.
type resultsWriter struct {
	h         *Handler
	objects   ObjectAPI
	owner     pipeline.Owner
	execution string
	// spans, when set, are the chunks' spans in memory (a small file split again: Rescan), which
	// has no manifest to read them from.
	spans []pipeline.ChunkSpan
}

func (w resultsWriter) put(ctx context.Context, name string, body []byte) (string, error) {
	bucket, key := w.h.WorkBucket, results.Key(w.owner, w.execution, name)
	return w.putReader(ctx, name, bytes.NewReader(body), int64(len(body)), bucket, key)
}

// putReader writes body, of size bytes, to bucket/key. A body that is not an io.ReadSeeker (the
// unprocessed tail, streamed from the source) goes through the SDK's transfer manager, which
// buffers it in parts: the SDK cannot sign or checksum an unseekable PutObject body without TLS
// and a trailing checksum, and one PutObject takes at most 5 GB
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/upload-objects.html), where a multipart
// upload takes up to 5 TB. The manager holds at most uploadConcurrency+1 parts of
// uploadPartBytes in memory. Its parts are written under s3:PutObject, which covers the multipart
// calls; the role has no s3:AbortMultipartUpload, so the parts of an upload that failed are
// removed by the bucket's lifecycle rule on results/ (AbortIncompleteMultipartUpload, 7 days), and
// a retry writes the whole file again.
func (w resultsWriter) putReader(ctx context.Context, name string, body io.Reader, size int64, bucket, key string) (string, error) {
	ct := "text/csv"
	switch {
	case strings.HasSuffix(name, ".json"):
		ct = "application/json"
	case strings.HasSuffix(name, ".jsonl"):
		ct = "application/jsonl"
	}
	var err error
	if _, seekable := body.(io.ReadSeeker); seekable {
		_, err = w.objects.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(bucket), Key: aws.String(key), Body: body, ContentLength: aws.Int64(size), ContentType: aws.String(ct),
		})
	} else if client, ok := w.objects.(transfermanager.S3APIClient); ok {
		_, err = transfermanager.New(client, func(o *transfermanager.Options) {
			o.PartSizeBytes, o.MultipartUploadThreshold, o.Concurrency = uploadPartBytes, uploadPartBytes, uploadConcurrency
		}).UploadObject(ctx, &transfermanager.UploadObjectInput{
			Bucket: aws.String(bucket), Key: aws.String(key), Body: body, ContentLength: aws.Int64(size), ContentType: aws.String(ct),
		})
	} else {
		// A client without the multipart calls (a test's): the body in memory, at most one part.
		var b []byte
		if b, err = io.ReadAll(io.LimitReader(body, uploadPartBytes+1)); err == nil && int64(len(b)) > uploadPartBytes {
			err = fmt.Errorf("%d bytes or more, and the client has no multipart upload", uploadPartBytes+1)
		}
		if err == nil {
			_, err = w.objects.PutObject(ctx, &s3.PutObjectInput{
				Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(b), ContentLength: aws.Int64(int64(len(b))), ContentType: aws.String(ct),
			})
		}
	}
	if err != nil {
		return "", &pipeline.RetryableError{Message: fmt.Sprintf("writing s3://%s/%s failed: %v", bucket, key, err), Err: err}
	}
	return s3URI(bucket, key), nil
}

func (w resultsWriter) get(ctx context.Context, in *s3.GetObjectInput) ([]byte, error) {
	out, err := w.objects.GetObject(ctx, in)
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

// parts reads every part of the execution, merged in record order, and the CSV header part.
func (w resultsWriter) parts(ctx context.Context) ([]results.Rejection, []byte, error) {
	bucket, prefix := w.h.WorkBucket, results.PartsPrefix(w.owner, w.execution)
	var all [][]results.Rejection
	var header []byte
	p := s3.NewListObjectsV2Paginator(w.objects, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, nil, &pipeline.RetryableError{Message: fmt.Sprintf("listing s3://%s/%s failed: %v", bucket, prefix, err), Err: err}
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			name := strings.TrimPrefix(key, prefix)
			if name != results.HeaderPart && !strings.HasSuffix(name, ".jsonl") {
				continue
			}
			b, err := w.get(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
			if err != nil {
				return nil, nil, &pipeline.RetryableError{Message: fmt.Sprintf("reading s3://%s/%s failed: %v", bucket, key, err), Err: err}
			}
			if name == results.HeaderPart {
				header = b
				continue
			}
			rs, err := results.DecodePart(b)
			if err != nil {
				return nil, nil, &pipeline.PermanentError{Message: fmt.Sprintf("s3://%s/%s: %v", bucket, key, err)}
			}
			all = append(all, rs)
		}
	}
	return results.Merge(all...), header, nil
}

// position is a place in a file: chunk, and the record within it (0: its first), in the segment
// whose last chunk is lastChunk; registered are the records past it that the segment's progress
// lists as registered already (a keyed file's, pipeline.Progress.Registered).
type position struct {
	chunk      int
	record     int64
	lastChunk  int
	registered []pipeline.RecordRange
}

// firstUnsent is where the file stopped: the first segment not done, at its stored progress
// (Register writes it after every successful invocation and at the failed record of a permanent
// failure), or at its first chunk when it has none. Progress that cannot be read as a record of
// the segment counts as none: the results then list more records as unprocessed, never fewer.
// Every segment done: position{chunk: Chunks}.
func (w resultsWriter) firstUnsent(ctx context.Context, sp pipeline.SplitResult) (position, error) {
	for _, seg := range sp.Segments {
		key := pipeline.ProgressKey(w.owner, w.execution, seg.Index)
		b, err := w.get(ctx, &s3.GetObjectInput{Bucket: aws.String(sp.Manifest.Bucket), Key: aws.String(key)})
		if source.Absent(err) {
			return position{chunk: seg.FirstChunk, lastChunk: seg.LastChunk}, nil
		}
		if err != nil {
			return position{}, &pipeline.RetryableError{Message: fmt.Sprintf("reading the progress s3://%s/%s failed: %v", sp.Manifest.Bucket, key, err), Err: err}
		}
		p, err := pipeline.DecodeProgress(b)
		if err != nil || p.Next < seg.FirstChunk || p.Next > seg.LastChunk+1 {
			return position{chunk: seg.FirstChunk, lastChunk: seg.LastChunk}, nil
		}
		if p.Next <= seg.LastChunk {
			return position{chunk: p.Next, record: p.Record, lastChunk: seg.LastChunk, registered: p.Registered}, nil
		}
	}
	return position{chunk: sp.Chunks}, nil
}

// registeredPast is what of pos.registered the results may trust, next being the first record
// never sent: all of it when the file ran in key order and every range lies after next, within
// pipeline.MaxKeyedLead records of it (Register sends no further ahead) and inside the segment;
// else none, so that a list that does not fit lists more records as unprocessed, never fewer.
func (w resultsWriter) registeredPast(ctx context.Context, sp pipeline.SplitResult, t pipeline.Tenant, pos position, next int64) ([]pipeline.RecordRange, error) {
	rs := pos.registered
	if len(rs) == 0 || !t.KeyedOrder() {
		return nil, nil
	}
	last, err := w.chunkSpan(ctx, sp, t, pos.lastChunk)
	if err != nil {
		return nil, err
	}
	end := min(last.FirstRecord+last.Records-1, sp.Records)
	prev := next
	for _, r := range rs {
		// DecodeProgress checked the ranges against the progress's record, which is 0 when the
		// mark is its chunk's first record: check them against next.
		if r.First <= prev || r.Last < r.First || r.Last > end || r.Last > next+pipeline.MaxKeyedLead {
			return nil, nil
		}
		prev = r.Last + 1
	}
	return rs, nil
}

// chunkSpan reads chunk i's span from the manifest, either version.
func (w resultsWriter) chunkSpan(ctx context.Context, sp pipeline.SplitResult, t pipeline.Tenant, i int) (pipeline.ChunkSpan, error) {
	if w.spans != nil {
		if i < 0 || i >= len(w.spans) {
			return pipeline.ChunkSpan{}, &pipeline.PermanentError{Message: fmt.Sprintf("chunk %d is not one of the small file's %d", i, len(w.spans))}
		}
		return w.spans[i], nil
	}
	m := sp.Manifest
	rng := pipeline.ManifestRange(i)
	if m.Version == pipeline.ManifestV2 {
		rng = pipeline.ManifestRangeV2(i)
	}
	in := &s3.GetObjectInput{Bucket: aws.String(m.Bucket), Key: aws.String(m.Key), Range: aws.String(rng)}
	if m.VersionID != "" {
		in.VersionId = aws.String(m.VersionID)
	}
	b, err := w.get(ctx, in)
	if err != nil {
		return pipeline.ChunkSpan{}, &pipeline.RetryableError{Message: fmt.Sprintf("reading the manifest s3://%s/%s failed: %v", m.Bucket, m.Key, err), Err: err}
	}
	if m.Version == pipeline.ManifestV2 {
		s, err := pipeline.DecodeChunkSpan(b)
		if err != nil {
			return pipeline.ChunkSpan{}, &pipeline.PermanentError{Message: fmt.Sprintf("the manifest s3://%s/%s: %v", m.Bucket, m.Key, err)}
		}
		return s, nil
	}
	start, end, err := pipeline.DecodeChunkRange(b)
	if err != nil {
		return pipeline.ChunkSpan{}, &pipeline.PermanentError{Message: fmt.Sprintf("the manifest s3://%s/%s: %v", m.Bucket, m.Key, err)}
	}
	first := int64(i)*int64(t.ChunkSize) + 1
	return pipeline.ChunkSpan{Start: start, End: end, FirstRecord: first, Records: min(int64(t.ChunkSize), sp.Records-first+1)}, nil
}

// writeUnprocessed writes the unprocessed file: the bytes before the file's first record (a
// CSV's header line, and a byte order mark if the file has one), then the file from the first
// record never sent to its end, byte for byte, less the records registered past it
// (registeredPast). It returns that record's number and those records.
func (w resultsWriter) writeUnprocessed(ctx context.Context, t pipeline.Tenant, f records.Format, sp pipeline.SplitResult, pos position, sum *results.Summary) (int64, []pipeline.RecordRange, error) {
	first, err := w.chunkSpan(ctx, sp, t, 0)
	if err != nil {
		return 0, nil, err
	}
	span, err := w.chunkSpan(ctx, sp, t, pos.chunk)
	if err != nil {
		return 0, nil, err
	}
	src := sp.Source
	lead, err := w.sourceRange(ctx, src, 0, first.Start)
	if err != nil {
		return 0, nil, err
	}
	next := span.FirstRecord
	if pos.record > span.FirstRecord && pos.record < span.FirstRecord+span.Records {
		next = pos.record
	}
	after, err := w.registeredPast(ctx, sp, t, pos, next)
	if err != nil {
		return 0, nil, err
	}
	// The records whose offsets cut the tail: next when it lies inside its chunk, then each
	// registered range's first record and the record after its last.
	var want []int64
	if next > span.FirstRecord {
		want = append(want, next)
	}
	for _, r := range after {
		want = append(want, r.First, r.Last+1)
	}
	at, err := w.recordOffsets(ctx, src, lead, f, t.SkipsRecords(), span, want)
	if err != nil {
		return 0, nil, err
	}
	off := span.Start
	if next > span.FirstRecord {
		off, at = at[0], at[1:]
	}
	kept, length := keptSpans(off, src.Size, at)

	in, err := source.GetInput(src)
	if err != nil {
		return 0, nil, &pipeline.PermanentError{Message: err.Error()}
	}
	in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, src.Size-1))
	out, err := w.objects.GetObject(ctx, in)
	if err != nil {
		return 0, nil, source.GetError(src, err)
	}
	defer out.Body.Close()
	name := results.UnprocessedName(t.Format)
	bucket, key := w.h.WorkBucket, results.Key(w.owner, w.execution, name)
	body := io.MultiReader(bytes.NewReader(lead), &spanReader{r: out.Body, at: off, spans: kept})
	uri, err := w.putReader(ctx, name, body, int64(len(lead))+length, bucket, key)
	if err != nil {
		return 0, nil, err
	}
	sum.Files.Unprocessed = uri
	return next, after, nil
}

// recordOffsets streams the source from chunk's start and returns the offset where each record
// of want (ascending, from the chunk's first on) begins, found by cutting lead and the stream into
// one-record chunks as Split does, so quoted line breaks and blank lines count as Split counted
// them (and, when skips, invalid records as Split skipped them). The record after the file's last
// begins where that record ends. The scan stops at the last record wanted: it holds one record
// and the read buffers, whatever the file's size.
func (w resultsWriter) recordOffsets(ctx context.Context, src pipeline.Source, lead []byte, f records.Format, skips bool, chunk pipeline.ChunkSpan, want []int64) ([]int64, error) {
	if len(want) == 0 {
		return nil, nil
	}
	in, err := source.GetInput(src)
	if err != nil {
		return nil, &pipeline.PermanentError{Message: err.Error()}
	}
	in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", chunk.Start, src.Size-1))
	out, err := w.objects.GetObject(ctx, in)
	if err != nil {
		return nil, source.GetError(src, err)
	}
	defer out.Body.Close()
	var skip records.Skip
	if skips {
		skip = func(records.Invalid) error { return nil }
	}
	at := make([]int64, 0, len(want))
	_, err = records.SplitCutSkip(io.MultiReader(bytes.NewReader(lead), out.Body), f, records.Cut{Records: 1}, func(b pipeline.Boundary) error {
		if n := chunk.FirstRecord + b.FirstRecord - 1; n == want[len(at)] {
			at = append(at, chunk.Start+b.Offset-int64(len(lead)))
			if len(at) == len(want) {
				return errFound
			}
		}
		return nil
	}, skip)
	if len(at) == len(want) {
		return at, nil
	}
	var fe *records.Error
	switch {
	case err == nil:
		err = &pipeline.PermanentError{Message: fmt.Sprintf("%s: the file has no record %d", source.Name(src), want[len(at)])}
	case errors.As(err, &fe):
		err = &pipeline.PermanentError{Message: fmt.Sprintf("%s: finding record %d: %v", source.Name(src), want[len(at)], err)}
	default: // reading the source
		err = source.GetError(src, err)
	}
	return nil, err
}

var errFound = errors.New("found")

// span is the bytes [start, end) of the source.
type span struct{ start, end int64 }

// keptSpans are the bytes of the unprocessed tail from off to size, less the registered
// records: cuts holds, per registered range, the offsets where its first record begins and
// where the record after its last begins. It returns them and their length.
func keptSpans(off, size int64, cuts []int64) ([]span, int64) {
	var out []span
	var n int64
	from := off
	for i := 0; i+1 < len(cuts); i += 2 {
		out = append(out, span{from, cuts[i]})
		n += cuts[i] - from
		from = cuts[i+1]
	}
	out = append(out, span{from, size})
	return out, n + size - from
}

// spanReader reads the spans (ascending, at or after at) of a stream that starts at offset at,
// and drops the bytes between them.
type spanReader struct {
	r     io.Reader
	at    int64
	spans []span
}

func (s *spanReader) Read(p []byte) (int, error) {
	for len(s.spans) > 0 && s.at >= s.spans[0].end {
		s.spans = s.spans[1:]
	}
	if len(s.spans) == 0 {
		return 0, io.EOF
	}
	sp := s.spans[0]
	if gap := sp.start - s.at; gap > 0 {
		n, err := io.CopyN(io.Discard, s.r, gap)
		s.at += n
		if err != nil {
			return 0, noEOF(err)
		}
	}
	if rest := sp.end - s.at; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := s.r.Read(p)
	s.at += int64(n)
	if err == io.EOF {
		if s.at < sp.end {
			return n, io.ErrUnexpectedEOF
		}
		err = nil
	}
	return n, err
}

// noEOF is err, an io.EOF being unexpected.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// sourceRange reads [start, end) of the exact source version; an empty range reads nothing.
func (w resultsWriter) sourceRange(ctx context.Context, src pipeline.Source, start, end int64) ([]byte, error) {
	if end <= start {
		return nil, nil
	}
	in, err := source.GetInput(src)
	if err != nil {
		return nil, &pipeline.PermanentError{Message: err.Error()}
	}
	in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", start, end-1))
	b, err := w.get(ctx, in)
	if err != nil {
		return nil, source.GetError(src, err)
	}
	return b, nil
}
