package register

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/source"
)

// Under onInvalidRecord skipRecord, the core system may reject one record with a status the tenant
// lists in rejectStatuses: the record is not registered, and registration goes on with the next
// one. Register keeps each rejection with the record's original bytes, and before it returns a
// cursor past them it writes the invocation's rejections to one part under the file's results
// (results.RegisterPartKey), where the file's end assembles rejected.csv or rejected.jsonl.

// maxRejectionMessage bounds the core system's message kept in a rejection.
const maxRejectionMessage = 200

// rejected is one rejection, its line still counted from the start of its chunk's range.
type rejected struct {
	results.Rejection
	chunk      int   // the chunk's index
	chunkStart int64 // the chunk's first byte in the source
}

// chunkRejects collects the rejections of one chunk's records; the DynamoDB sink adds to it from
// several goroutines.
type chunkRejects struct {
	chunk int   // the chunk's index
	start int64 // the chunk's first byte in the source
	mu    sync.Mutex
	list  []rejected
}

// add rejects rec with the status the destination answered and why.
func (c *chunkRejects) add(rec records.Record, status int, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, rejected{Rejection: results.Rejection{
		Line: rec.Line, Record: rec.Number, Error: why, Status: status, Raw: rec.Raw,
	}, chunk: c.chunk, chunkStart: c.start})
}

// before is the chunk's rejections of records numbered below record (all when record is 0), in
// record order: those the cursor passes.
func (c *chunkRejects) before(record int64) []rejected {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.DeleteFunc(slices.Clone(c.list), func(r rejected) bool { return record > 0 && r.Record >= record })
	slices.SortFunc(out, func(a, b rejected) int { return int(a.Record - b.Record) })
	return out
}

// coreRejection is a rejection's sentence for a status the core system answered, with its message
// (answerMessage).
func coreRejection(status int, body []byte) string {
	msg := answerMessage(body)
	if msg == "" {
		return fmt.Sprintf("the core system answered %d", status)
	}
	return fmt.Sprintf("the core system answered %d: %s", status, msg)
}

// answerMessage is the first maxRejectionMessage bytes of the answer's message: its "message" when
// the body is a JSON object that has one, else the body, as valid UTF-8 on one line. It goes to the
// tenant's results only, never to a log or an error, since a core system may echo the record.
func answerMessage(body []byte) string {
	var obj struct {
		Message *string `json:"message"`
	}
	msg := string(bytes.TrimSpace(body))
	if json.Unmarshal(body, &obj) == nil && obj.Message != nil {
		msg = *obj.Message
	}
	return clip(msg)
}

func clip(msg string) string {
	msg = strings.Join(strings.Fields(strings.ToValidUTF8(msg, "?")), " ")
	if len(msg) > maxRejectionMessage {
		msg = msg[:maxRejectionMessage]
		for len(msg) > 0 && !utf8.ValidString(msg) { // only the last character can be cut
			msg = msg[:len(msg)-1]
		}
	}
	return msg
}

// batchAnswer is the body with which the core system rejects records of a batch POST
// (docs/data-path.md, "Batch mode"): HTTP 200 or 207 and, for each rejected record, its 0-based
// index in the batch, its status and a message.
type batchAnswer struct {
	Rejected *[]struct {
		Index   *int   `json:"index"`
		Status  int    `json:"status"`
		Message string `json:"message"`
	} `json:"rejected"`
}

// batchRejections adds the records that a batch POST's answer rejects. A body that is not a JSON
// object, or has no "rejected", rejects none (every record is registered, as for any 2xx). A
// "rejected" that names a record outside the batch, twice, or with a status the tenant does not
// list fails closed: the answer says a record is not registered, and the tenant has not allowed
// skipping it.
func batchRejections(file, what string, t pipeline.Tenant, body []byte, recs []records.Record, into *chunkRejects) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil
	}
	var a batchAnswer
	if err := json.Unmarshal(trimmed, &a); err != nil {
		return &pipeline.PermanentError{Message: fmt.Sprintf("%s: %s: the core system's answer is a JSON object that cannot be read (%v), so which records it rejected is unknown", file, what, jsonReason(err)), Err: err}
	}
	if a.Rejected == nil {
		return nil
	}
	seen := map[int]bool{}
	for _, r := range *a.Rejected {
		switch {
		case r.Index == nil || *r.Index < 0 || *r.Index >= len(recs):
			return &pipeline.PermanentError{Message: fmt.Sprintf("%s: %s: the core system's answer rejects a record with no index in 0..%d", file, what, len(recs)-1)}
		case seen[*r.Index]:
			return &pipeline.PermanentError{Message: fmt.Sprintf("%s: %s: the core system's answer rejects index %d twice", file, what, *r.Index)}
		case !t.RejectsStatus(r.Status):
			return &pipeline.PermanentError{Message: fmt.Sprintf("%s: %s: the core system rejected record %d with status %d, which the tenant's rejectStatuses do not list",
				file, what, recs[*r.Index].Number, r.Status)}
		}
		seen[*r.Index] = true
	}
	for _, r := range *a.Rejected {
		msg := clip(r.Message)
		why := fmt.Sprintf("the core system answered %d", r.Status)
		if msg != "" {
			why += ": " + msg
		}
		into.add(recs[*r.Index], r.Status, why)
	}
	return nil
}

// jsonReason is a decoding error without the bytes it quotes.
func jsonReason(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q is not a %s", te.Field, te.Type)
	}
	return "not JSON"
}

// lineCounter knows the physical line at which a byte offset of a source starts, from one pass over
// the bytes before it; it remembers where it got to, so that the next chunk of the same file on a
// warm execution environment reads only the bytes in between. It serves only an execution whose
// manifest has no lines object (Split ran before it wrote one: chunkLine), and only an invocation
// that has rejections.
type lineCounter struct {
	mu     sync.Mutex
	source pipeline.Source
	offset int64
	lines  int64 // '\n' bytes before offset
}

// lineAt is the line (from 1) at which byte off of the source starts. It counts 0x0A bytes, which
// holds for CP932 too: 0x0A is never the trail byte of a double-byte character.
func (l *lineCounter) lineAt(ctx context.Context, b budget, objects ObjectAPI, src pipeline.Source, off int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.source != src || l.offset > off {
		l.source, l.offset, l.lines = src, 0, 0
	}
	if off > l.offset {
		in, err := source.GetInput(src)
		if err != nil {
			return 0, &pipeline.PermanentError{Message: fmt.Sprintf("%s: %v", b.file, err), Err: err}
		}
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", l.offset, off-1))
		ctx, cancel, err := b.call(ctx, "counting the lines before a rejected record", minCallTime, 0)
		if err != nil {
			return 0, err
		}
		defer cancel()
		out, err := objects.GetObject(ctx, in)
		if err != nil {
			return 0, source.GetError(src, err)
		}
		defer out.Body.Close()
		n, lines, err := countLines(bufio.NewReaderSize(out.Body, 64<<10), off-l.offset)
		if err != nil || n != off-l.offset {
			return 0, &pipeline.RetryableError{Message: fmt.Sprintf("%s: counting the lines before byte %d: got %d of %d bytes (%v)", b.file, off, n, off-l.offset, err), Err: err}
		}
		l.offset, l.lines = off, l.lines+lines
	}
	return l.lines + 1, nil
}

func countLines(r io.Reader, max int64) (int64, int64, error) {
	buf := make([]byte, 64<<10)
	var n, lines int64
	for n < max {
		k, err := r.Read(buf[:min(int64(len(buf)), max-n)])
		lines += int64(bytes.Count(buf[:k], []byte{'\n'}))
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, lines, err
		}
	}
	return n, lines, nil
}

// chunkLine is the physical line at which chunk starts (byte start of the source): its entry of the
// lines object Split wrote beside the manifest, with one ranged GET pinned as the manifest's is;
// without one (an execution Split ran before it wrote lines), counted from the source's first
// byte (lineCounter).
func (h *Handler) chunkLine(ctx context.Context, b budget, objects ObjectAPI, req pipeline.ChunkRequest, chunk int, start int64, mem *memFile) (int64, error) {
	if mem != nil && chunk >= 0 && chunk < len(mem.lines) {
		return mem.lines[chunk], nil // the SmallFile task's: Split counted them a moment before
	}
	loc := req.Manifest.Lines
	if loc == nil {
		return h.lines.lineAt(ctx, b, objects, req.Source, start)
	}
	ctx, cancel, err := b.call(ctx, "reading the chunk's first line", minCallTime, 0)
	if err != nil {
		return 0, err
	}
	defer cancel()
	out, err := objects.GetObject(ctx, pinnedInput(*loc, pipeline.LinesRange(chunk)))
	if err != nil {
		return 0, workReadError(b, "the chunks' first lines", *loc, err)
	}
	entry, err := io.ReadAll(io.LimitReader(out.Body, 9))
	out.Body.Close()
	if err != nil {
		return 0, &pipeline.RetryableError{Message: fmt.Sprintf("%s: reading the chunks' first lines failed: %v", b.file, err), Err: err}
	}
	line, err := pipeline.DecodeLine(entry)
	if err != nil {
		return 0, &pipeline.PermanentError{Message: fmt.Sprintf("%s: the chunks' first lines s3://%s/%s, chunk %d: %v", b.file, loc.Bucket, loc.Key, chunk, err), Err: err}
	}
	return line, nil
}

// writeRejections writes the invocation's rejections, lines made absolute, as its part in the
// ingest bucket, beside the file's other results (results.Dir): a retry
// starts at the same chunk and record, and rewrites the same key.
func (h *Handler) writeRejections(ctx context.Context, req pipeline.ChunkRequest, chunk int, first int64, rej []rejected, mem *memFile) error {
	c, err := h.clientsFor(req.Tenant.ID)
	if err != nil {
		return err
	}
	b := h.budget(ctx, req)
	starts := map[int]int64{} // each chunk's first line, read once per invocation
	var body []byte
	for _, r := range rej {
		line, ok := starts[r.chunk]
		if !ok {
			if line, err = h.chunkLine(ctx, b, c.S3, req, r.chunk, r.chunkStart, mem); err != nil {
				return err
			}
			starts[r.chunk] = line
		}
		r.Line += line - 1
		j, err := json.Marshal(r.Rejection)
		if err != nil {
			return &pipeline.PermanentError{Message: fmt.Sprintf("%s: record %d: encoding its rejection: %v", b.file, r.Record, err), Err: err}
		}
		body = append(append(body, j...), '\n')
	}
	ctx, cancel, err := b.call(ctx, "writing the rejected records", minCallTime, 0)
	if err != nil {
		return err
	}
	defer cancel()
	key := results.RegisterPartKey(h.owner(req), req.ExecutionName, chunk, first)
	if _, err := c.S3.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(req.Source.Bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
		ContentType:   aws.String("application/x-ndjson"),
	}); err != nil {
		return &pipeline.RetryableError{Message: fmt.Sprintf("%s: writing the rejected records to s3://%s/%s failed: %v", b.file, req.Source.Bucket, key, err), Err: err}
	}
	return nil
}
