// Package split is the Split Lambda's logic. It streams the exact object version that started a
// file execution, validates every record, and writes one manifest of chunk boundaries that the
// Register tasks read; its results task writes a failed file's results. See docs/data-path.md.
// Command lambdas/split wires it to the AWS clients.
package split

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/deployed"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/source"
)

// ObjectAPI is the part of the S3 client Split uses.
type ObjectAPI interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	// ListObjectsV2 lists an execution's rejection parts for the results task.
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

var _ ObjectAPI = (*s3.Client)(nil)

// Handler splits one file.
type Handler struct {
	S3         ObjectAPI
	WorkBucket string
	Log        *slog.Logger
	// MaxChunks bounds the chunks of one file. Default: pipeline.MaxSegments × pipeline.SegmentChunks.
	MaxChunks int
	// ForTenant, when set, is the client that acts for one tenant, by the id of the execution's
	// input: in a pool, a session of the pool's tenant-scoped role tagged with the tenant
	// (internal/tenantcreds), which may read only that tenant's prefix and write only its work/
	// keys. Nil: S3 serves every request (a silo, whose role is the tenant's own).
	ForTenant func(tenant string) (ObjectAPI, error)
	// Metrics receives the results task's metrics as CloudWatch embedded metric format lines;
	// nil: none. Pool is the pool's name, the metrics' dimension in a pool.
	Metrics io.Writer
	Pool    string
	// KeysPool is the pool its tenants' keys carry (pipeline.EnvKeysPool, pipeline.Owner): Pool
	// under the KeysPerPool layout, else empty.
	KeysPool string
	// Now is the clock of summary.json's stopped time. Default: time.Now.
	Now func() time.Time
	// HTTP posts a file's completion to its core system's completeUrl (complete.go); nil: the
	// completion is recorded as failed.
	HTTP Doer
	// Deployed, when set, gives the settings the function was deployed with: Invoke refuses a
	// request for a tenant it was not deployed for, or whose core system URLs, secret or sink
	// differ, before any session is made or object read (deployed.Check). Nil: not checked.
	Deployed deployed.Settings
	sleep    func(context.Context, time.Duration) error // Default: a timer under the context.
}

// Handle is the Split task. It returns only the *pipeline error types, unwrapped, because the
// Lambda runtime reports the Go type name as errorType and the state machine matches on it.
func (h *Handler) Handle(ctx context.Context, req pipeline.SplitRequest) (pipeline.SplitResult, error) {
	start := time.Now()
	file := source.Name(req.Source)
	out, err := h.split(ctx, req, splitOptions{parts: true, manifest: true})
	res, size := out.Result, out.size
	if err != nil {
		h.Log.Log(ctx, source.LogLevel(err), "split failed", "tenant", req.Tenant.ID, "file", file, "execution", req.ExecutionName,
			"errorType", source.ErrorType(err), "error", err.Error())
		return pipeline.SplitResult{}, err
	}
	h.Log.Info("split done", "tenant", req.Tenant.ID, "file", file, "execution", req.ExecutionName,
		"bytes", size, "records", res.Records, "rejected", res.Rejected, "chunks", res.Chunks, "segments", len(res.Segments),
		"manifest", res.Manifest.Key, "ms", time.Since(start).Milliseconds())
	return res, nil
}

var errTooManyChunks = errors.New("too many chunks")

// splitOptions are what the small-file path changes in a split (Small, Rescan).
type splitOptions struct {
	// parts: write a skipRecord file's rejection parts (the results read them).
	parts bool
	// manifest: write the lines object and the manifest, and pin the result to those writes.
	// Without it neither is written: the result names them by their keys, unpinned, and the
	// chunks' spans come back in memory (smallSplit.Spans).
	manifest bool
	// maxBytes, when positive, makes an object of more bytes a NotSmallError, before it is read.
	maxBytes int64
	// small makes a file of more than one segment (pipeline.SegmentChunks chunks) a
	// NotSmallError, before anything is written.
	small bool
	// keep returns the object's bytes (smallSplit.Data).
	keep bool
}

// SmallSplit is a small file as the SmallFile task splits it: Split's result, with no manifest
// written, and what the manifest would hold in memory.
type SmallSplit struct {
	Result pipeline.SplitResult
	// Spans are the chunks' spans, at most one segment's: the manifest's entries.
	Spans []pipeline.ChunkSpan
	// Lines are the chunks' first physical lines (the lines object's entries), for a tenant whose
	// records the core system can reject; else nil.
	Lines []int64
	// Data is the object's bytes (Small only).
	Data []byte
	size int64 // the object's bytes, as S3 gave its length
}

// Small is the small-file path's split (pipeline.TaskSmallFile): Split's checks for a file of at
// most maxBytes bytes and one segment (any number of chunks up to pipeline.SegmentChunks), which
// writes only a skipRecord file's rejection parts and hands the chunks on in memory; any other
// file is a *pipeline.NotSmallError before anything is written, so that the full path splits it
// from the start.
func (h *Handler) Small(ctx context.Context, req pipeline.SplitRequest, maxBytes int64) (SmallSplit, error) {
	return h.split(ctx, req, splitOptions{parts: true, maxBytes: maxBytes, small: true, keep: true})
}

// Rescan splits a small file again for its results, writing nothing. The controller asks for it
// (through pipeline.ResultsState.SmallFile) when a file failed in the SmallFile task, whose history
// holds no Split result.
func (h *Handler) Rescan(ctx context.Context, req pipeline.SplitRequest) (SmallSplit, error) {
	return h.split(ctx, req, splitOptions{small: true})
}

func (h *Handler) split(ctx context.Context, req pipeline.SplitRequest, o splitOptions) (SmallSplit, error) {
	file := source.Name(req.Source)
	t := req.Tenant
	f, err := records.FormatOf(t)
	if err != nil {
		return SmallSplit{}, &pipeline.PermanentError{Message: fmt.Sprintf("%s: tenant %q configuration: %v", file, t.ID, err)}
	}
	if t.ChunkSize < pipeline.MinChunkSize || t.ChunkSize > pipeline.MaxChunkSize {
		return SmallSplit{}, &pipeline.PermanentError{Message: fmt.Sprintf("%s: tenant %q chunkSize %d is outside %d..%d", file, t.ID, t.ChunkSize, pipeline.MinChunkSize, pipeline.MaxChunkSize)}
	}
	if t.BatchMode() && (t.BatchBytes() < pipeline.MinMaxBatchBytes || t.BatchBytes() > pipeline.MaxMaxBatchBytes) {
		return SmallSplit{}, &pipeline.PermanentError{Message: fmt.Sprintf("%s: tenant %q maxBatchBytes %d is outside %d..%d", file, t.ID, t.MaxBatchBytes, pipeline.MinMaxBatchBytes, pipeline.MaxMaxBatchBytes)}
	}
	switch t.OnInvalidRecord {
	case "", pipeline.OnInvalidFailFile, pipeline.OnInvalidSkipRecord:
	default:
		return SmallSplit{}, &pipeline.PermanentError{Message: fmt.Sprintf("%s: tenant %q onInvalidRecord %q is not %q or %q", file, t.ID, t.OnInvalidRecord, pipeline.OnInvalidFailFile, pipeline.OnInvalidSkipRecord)}
	}
	// Key order: records.FormatOf gave f the keyColumns, so the scan fails the file at a header
	// without one of them (records.NewKeyer: a ValidationError naming keyColumns, before anything
	// is written) and treats a record with an empty key as invalid, under the tenant's
	// onInvalidRecord like any other.
	switch {
	case t.RecordOrder != "" && t.RecordOrder != pipeline.RecordOrderFile && t.RecordOrder != pipeline.RecordOrderKey:
		return SmallSplit{}, &pipeline.PermanentError{Message: fmt.Sprintf("%s: tenant %q recordOrder %q is not %q or %q", file, t.ID, t.RecordOrder, pipeline.RecordOrderFile, pipeline.RecordOrderKey)}
	case t.KeyedOrder() && len(t.KeyColumns) == 0:
		return SmallSplit{}, &pipeline.PermanentError{Message: fmt.Sprintf("%s: tenant %q recordOrder %q has no keyColumns", file, t.ID, t.RecordOrder)}
	}
	if t.ID == "" || req.ExecutionName == "" {
		return SmallSplit{}, &pipeline.PermanentError{Message: fmt.Sprintf("%s: the request has no tenant id or execution name", file)}
	}
	objects := h.S3
	if h.ForTenant != nil {
		if objects, err = h.ForTenant(t.ID); err != nil {
			return SmallSplit{}, &pipeline.PermanentError{Message: fmt.Sprintf("%s: %v", file, err)}
		}
	}
	// The event's key may be raw or form-encoded: Open reads whichever form holds the event's
	// object, and the result carries that key on to Register.
	out, src, err := source.Open(ctx, objects, req.Source, t.Prefix)
	if err != nil {
		return SmallSplit{}, err
	}
	defer out.Body.Close()
	if err := withinSignedBound(file, out); err != nil {
		return SmallSplit{}, err
	}
	if size := aws.ToInt64(out.ContentLength); o.maxBytes > 0 && size > o.maxBytes {
		return SmallSplit{}, &pipeline.NotSmallError{Message: fmt.Sprintf(
			"%s: the object has %d bytes, more than the small-file bound of %d (the event said %d): the full path splits it", file, size, o.maxBytes, req.Source.Size)}
	}
	if src.Key != req.Source.Key {
		file = source.Name(src)
		h.Log.Info("the event's key was form-encoded; read the decoded key", "tenant", t.ID, "eventKey", req.Source.Key, "file", file, "execution", req.ExecutionName)
	}

	maxChunks := h.MaxChunks
	if maxChunks == 0 {
		maxChunks = pipeline.MaxSegments * pipeline.SegmentChunks
	}
	if o.small {
		maxChunks = pipeline.SegmentChunks
	}
	// Batch mode cuts chunks by bytes as well, so chunks hold any number of records and the
	// manifest (version 2) records each chunk's first record; record mode keeps version 1.
	// A tenant whose records the core system can reject gets each chunk's first line counted
	// (the lines object), so that Register finds a rejected record's line without reading the
	// source before its chunk.
	cut := records.Cut{Records: t.ChunkSize, Lines: t.CanReject()}
	if t.BatchMode() {
		cut.Bytes = int64(t.BatchBytes())
	}
	bounds := []pipeline.Boundary{}
	// The file's SHA-256, for the core system's completeUrl: Split reads every byte anyway.
	digest := sha256.New()
	var in io.Reader = io.TeeReader(out.Body, digest)
	var kept bytes.Buffer
	if o.keep {
		// At most maxBytes: the object's length was checked above. Grown once to it, so that the
		// buffer never holds twice the object while it doubles.
		kept.Grow(int(aws.ToInt64(out.ContentLength)))
		in = io.TeeReader(in, &kept)
	}
	// Under skipRecord the whole file is still read before anything is written: Scan returns the
	// invalid records, and fails the file when there are more than maxInvalidRecords.
	sum, invalid, err := records.Scan(in, f, cut, records.PolicyOf(t), func(b pipeline.Boundary) error {
		if len(bounds) > maxChunks {
			return errTooManyChunks
		}
		bounds = append(bounds, b)
		return nil
	})
	var fe *records.Error
	var tooMany *records.TooManyInvalidError
	switch {
	case o.small && errors.Is(err, errTooManyChunks):
		return SmallSplit{}, &pipeline.NotSmallError{Message: fmt.Sprintf(
			"%s: the file has more than one segment (%d chunks of %d records): the full path splits it", file, maxChunks, t.ChunkSize), Err: err}
	case errors.As(err, &tooMany):
		return SmallSplit{}, &pipeline.ValidationError{Message: fmt.Sprintf("%s: %v", file, tooMany)}
	case errors.Is(err, errTooManyChunks):
		return SmallSplit{}, &pipeline.ValidationError{Message: fmt.Sprintf(
			"%s: the file is too large: it has more than %d chunks of %d records, and one file execution runs at most %d segments of %d chunks "+
				"to stay within Step Functions' 25,000 history events and 256 KiB payload; split the file or raise chunkSize (at most %d)",
			file, maxChunks, t.ChunkSize, pipeline.MaxSegments, pipeline.SegmentChunks, pipeline.MaxChunkSize)}
	case errors.As(err, &fe):
		return SmallSplit{}, &pipeline.ValidationError{Message: fmt.Sprintf("%s: %v", file, fe)}
	case err != nil:
		// The object is pinned, so a failed read is the connection, not the data: retry.
		return SmallSplit{}, &pipeline.RetryableError{Message: fmt.Sprintf("%s: reading the object failed: %v", file, err)}
	}

	// Whatever the scan left unread (nothing, when it reads to the end) still counts in the hash.
	if _, err := io.Copy(io.Discard, in); err != nil {
		return SmallSplit{}, &pipeline.RetryableError{Message: fmt.Sprintf("%s: reading the object failed: %v", file, err)}
	}
	fileHash := hex.EncodeToString(digest.Sum(nil))
	if d := t.DynamoDB; d != nil && t.Format == pipeline.FormatCSV && sum.Records > 0 {
		// Every record would fail in Register for want of its key; say so once, before anything is
		// written.
		for _, k := range d.Key {
			if !slices.Contains(sum.Header, k) {
				return SmallSplit{}, &pipeline.ValidationError{Message: fmt.Sprintf(
					"%s: line 1: the header has no column %q, which the tenant's dynamodb.key names", file, k)}
			}
		}
	}
	manifest := pipeline.Location{Bucket: h.WorkBucket, Key: pipeline.ManifestKey(h.owner(t.ID), req.ExecutionName)}
	if o.parts && t.SkipsInvalid() {
		if err := h.writeParts(ctx, objects, req, file, sum, invalid); err != nil {
			return SmallSplit{}, err
		}
	}
	if !o.manifest {
		// In memory: the manifest's entries (one segment at most, small), and the lines object's.
		out := SmallSplit{Result: h.result(src, manifest, sum), size: aws.ToInt64(out.ContentLength)}
		out.Result.SHA256 = fileHash
		if t.BatchMode() {
			out.Result.Manifest.Version = pipeline.ManifestV2
		}
		if sum.Chunks > 0 && len(bounds) == sum.Chunks+1 {
			out.Spans = spansOf(bounds)
			if cut.Lines {
				out.Lines = make([]int64, sum.Chunks)
				for i, b := range bounds[:sum.Chunks] {
					out.Lines[i] = b.Line
				}
			}
		}
		if o.keep {
			out.Data = kept.Bytes()
		}
		return out, nil
	}
	if cut.Lines {
		if manifest.Lines, err = h.writeLines(ctx, objects, req, file, bounds[:sum.Chunks]); err != nil {
			return SmallSplit{}, err
		}
	}
	var body []byte
	if t.BatchMode() {
		manifest.Version = pipeline.ManifestV2
		body = pipeline.EncodeManifestV2(bounds)
	} else {
		offsets := make([]int64, len(bounds))
		for i, b := range bounds {
			offsets[i] = b.Offset
		}
		body = pipeline.EncodeManifest(offsets)
	}
	put, err := objects.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(manifest.Bucket),
		Key:           aws.String(manifest.Key),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
		ContentType:   aws.String("application/octet-stream"),
	})
	if err != nil {
		msg := fmt.Sprintf("%s: writing the manifest s3://%s/%s failed: %v", file, manifest.Bucket, manifest.Key, err)
		if source.HTTPStatus(err) == http.StatusForbidden {
			return SmallSplit{}, &pipeline.PermanentError{Message: msg}
		}
		return SmallSplit{}, &pipeline.RetryableError{Message: msg}
	}
	// Register reads exactly this write (its version id, and its ETag with If-Match), so a manifest
	// written later under the same key is never read in its place.
	manifest.VersionID, manifest.ETag = aws.ToString(put.VersionId), aws.ToString(put.ETag)
	res := h.result(src, manifest, sum)
	res.SHA256 = fileHash
	return SmallSplit{Result: res, size: aws.ToInt64(out.ContentLength)}, nil
}

// spansOf is the chunks' spans between Chunks+1 boundaries, as the manifest would give them.
func spansOf(bounds []pipeline.Boundary) []pipeline.ChunkSpan {
	spans := make([]pipeline.ChunkSpan, len(bounds)-1)
	for i := range spans {
		b, next := bounds[i], bounds[i+1]
		spans[i] = pipeline.ChunkSpan{Start: b.Offset, End: next.Offset, FirstRecord: b.FirstRecord, Records: next.FirstRecord - b.FirstRecord}
	}
	return spans
}

func (h *Handler) result(src pipeline.Source, manifest pipeline.Location, sum records.Summary) pipeline.SplitResult {
	res := pipeline.SplitResult{
		Source:   src,
		Manifest: manifest,
		Records:  sum.Records,
		Chunks:   sum.Chunks,
		Header:   sum.Header,
		Segments: pipeline.Segments(sum.Chunks),
		Rejected: sum.Invalid,
	}
	if len(res.Segments) == 1 {
		// The file execution runs the one segment's Register loop itself, from here.
		res.Cursor = &pipeline.Cursor{Chunk: res.Segments[0].FirstChunk}
	}
	return res
}

// writeLines writes each chunk's first physical line (pipeline.LinesKey) before the manifest, so
// that a manifest whose location has Lines implies it, and returns its location pinned to this
// write as the manifest's is. A retry rewrites the same key with the same bytes: the source is
// pinned.
func (h *Handler) writeLines(ctx context.Context, objects ObjectAPI, req pipeline.SplitRequest, file string, chunks []pipeline.Boundary) (*pipeline.Location, error) {
	lines := make([]int64, len(chunks))
	for i, b := range chunks {
		lines[i] = b.Line
	}
	body := pipeline.EncodeLines(lines)
	loc := &pipeline.Location{Bucket: h.WorkBucket, Key: pipeline.LinesKey(h.owner(req.Tenant.ID), req.ExecutionName)}
	put, err := objects.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(loc.Bucket),
		Key:           aws.String(loc.Key),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
		ContentType:   aws.String("application/octet-stream"),
	})
	if err != nil {
		msg := fmt.Sprintf("%s: writing the chunks' first lines s3://%s/%s failed: %v", file, loc.Bucket, loc.Key, err)
		if source.HTTPStatus(err) == http.StatusForbidden {
			return nil, &pipeline.PermanentError{Message: msg}
		}
		return nil, &pipeline.RetryableError{Message: msg}
	}
	loc.VersionID, loc.ETag = aws.ToString(put.VersionId), aws.ToString(put.ETag)
	return loc, nil
}

// writeParts writes the rejection parts of a skipRecord file, before its manifest so that a
// manifest implies them: results.SplitPart with every rejected record (empty when none) and, for
// CSV, results.HeaderPart with the raw header line, which rejected.csv's header ends with. They go
// to the bucket of the work files, under results/<tenant>/<execution>/; a retry rewrites the same
// keys.
func (h *Handler) writeParts(ctx context.Context, objects ObjectAPI, req pipeline.SplitRequest, file string, sum records.Summary, invalid []records.Invalid) error {
	var part []byte
	for _, v := range invalid {
		part = results.AppendPart(part, results.Rejection{Line: v.Line, Record: v.Record, Error: v.Reason, Raw: v.Raw})
	}
	parts := []struct {
		name string
		body []byte
		typ  string
	}{{results.SplitPart, part, "application/x-ndjson"}}
	if req.Tenant.Format == pipeline.FormatCSV {
		parts = append(parts, struct {
			name string
			body []byte
			typ  string
		}{results.HeaderPart, sum.RawHeader, "application/octet-stream"})
	}
	for _, p := range parts {
		key := results.PartKey(h.owner(req.Tenant.ID), req.ExecutionName, p.name)
		_, err := objects.PutObject(ctx, &s3.PutObjectInput{
			Bucket:        aws.String(h.WorkBucket),
			Key:           aws.String(key),
			Body:          bytes.NewReader(p.body),
			ContentLength: aws.Int64(int64(len(p.body))),
			ContentType:   aws.String(p.typ),
		})
		if err != nil {
			msg := fmt.Sprintf("%s: writing the rejected records s3://%s/%s failed: %v", file, h.WorkBucket, key, err)
			if source.HTTPStatus(err) == http.StatusForbidden {
				return &pipeline.PermanentError{Message: msg}
			}
			return &pipeline.RetryableError{Message: msg}
		}
	}
	return nil
}

// withinSignedBound fails a file larger than the bound its presigned upload URL signed
// (pipeline.MaxBytesMetadata, pipectl upload-url --max-bytes), before anything is registered: S3
// stores any size up to 5 GiB for a URL that signs no exact Content-Length. An object without the
// metadata has no such bound; one whose bound is not a whole number fails closed.
func withinSignedBound(file string, out *s3.GetObjectOutput) error {
	v, ok := out.Metadata[pipeline.MaxBytesMetadata]
	if !ok {
		return nil
	}
	size := aws.ToInt64(out.ContentLength)
	limit, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil || limit < 1:
		return &pipeline.ValidationError{Message: fmt.Sprintf("%s: its upload's x-amz-meta-%s %q is not a number of bytes: nothing is registered", file, pipeline.MaxBytesMetadata, v)}
	case size > limit:
		return &pipeline.ValidationError{Message: fmt.Sprintf(
			"%s: the object has %d bytes, more than the %d its upload URL allowed (x-amz-meta-%s, pipectl upload-url --max-bytes): nothing is registered",
			file, size, limit, pipeline.MaxBytesMetadata)}
	}
	return nil
}
