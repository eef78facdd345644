package register

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
)

// ItemAPI is the part of the DynamoDB client Register uses (the DynamoDB sink).
// GetItem and UpdateItem read and move an adaptive core system's limit (admission.LimitStore) in the
// core system's admission table.
type ItemAPI interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ ItemAPI = (*dynamodb.Client)(nil)

// DynamoDBMaxAttempts is how often the SDK tries one PutItem. The standard retryer retries
// throttling (ProvisionedThroughputExceededException, ThrottlingException, …), 5xx and connection
// errors with jittered exponential backoff
// (https://docs.aws.amazon.com/sdk-for-go/v2/developer-guide/configure-retries-timeouts.html);
// its default of 3 attempts gives up within about a second of throttling, which a table scaling
// on demand can outlast. The budget (deadline guard) still bounds the whole chunk.
const DynamoDBMaxAttempts = 10

// NewDynamoDB is the sink's client: the standard retryer with DynamoDBMaxAttempts, a 5 s backoff
// cap and no client-side retry quota, so that 16 concurrent writers throttled together keep
// retrying instead of exhausting the shared token bucket ("retry quota exceeded").
func NewDynamoDB(cfg aws.Config, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	opts := append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = DynamoDBMaxAttempts
			so.MaxBackoff = 5 * time.Second
			so.RateLimiter = ratelimit.None
		})
	}}, optFns...)
	return dynamodb.NewFromConfig(cfg, opts...)
}

// conditionExpression keeps an item only if it is new or older than the write: DynamoDB compares
// strings by their UTF-8 bytes, and _seq is fixed-width (pipeline.SeqOf).
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html
const conditionExpression = "attribute_not_exists(#pk) OR #seq < :seq"

// item is one record as a PutItem: its attributes, and its key as one string for the per-key
// queues.
type item struct {
	record int64
	key    string
	attrs  map[string]types.AttributeValue
	seq    string
	rec    records.Record // for its rejection
}

// buildItem turns a record into an item: a CSV record's fields are strings, a JSON Lines record
// keeps its JSON types (numbers as DynamoDB numbers with their exact digits, booleans, null,
// nested maps and lists). The key fields are always strings (a JSON number key is stored as its
// digits), so the table's key schema is string-typed whatever the format. Errors name the record
// and the field, never a value.
func buildItem(rec records.Record, header, keys []string, src pipeline.Source, executionName string) (item, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("record %d: %s", rec.Number, fmt.Sprintf(format, a...))
	}
	attrs := map[string]types.AttributeValue{}
	keyText := map[string]string{}
	if rec.Fields != nil {
		if len(rec.Fields) != len(header) {
			return item{}, bad("has %d fields, the header has %d", len(rec.Fields), len(header))
		}
		for i, name := range header {
			attrs[name] = &types.AttributeValueMemberS{Value: rec.Fields[i]}
			keyText[name] = rec.Fields[i]
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(rec.JSON))
		dec.UseNumber()
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			return item{}, bad("is not a JSON object")
		}
		for name, v := range obj {
			attrs[name] = attributeOf(v)
			switch v := v.(type) {
			case string:
				keyText[name] = v
			case json.Number:
				keyText[name] = v.String()
			}
		}
	}
	for _, reserved := range []string{pipeline.SeqAttribute, pipeline.MetaAttribute} {
		if _, ok := attrs[reserved]; ok {
			return item{}, bad("has a field named %q, which the DynamoDB sink writes itself", reserved)
		}
	}
	var id []byte
	for _, k := range keys {
		if _, ok := attrs[k]; !ok {
			return item{}, bad("has no key field %q", k)
		}
		v, ok := keyText[k]
		if !ok {
			return item{}, bad("key field %q is not a string or a number", k)
		}
		if v == "" {
			return item{}, bad("key field %q is empty", k)
		}
		attrs[k] = &types.AttributeValueMemberS{Value: v}
		id = strconv.AppendQuote(id, v)
	}
	seq, err := pipeline.SeqOf(src, rec.Number)
	if err != nil {
		return item{}, bad("%v", err)
	}
	attrs[pipeline.SeqAttribute] = &types.AttributeValueMemberS{Value: seq}
	attrs[pipeline.MetaAttribute] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"executionName": &types.AttributeValueMemberS{Value: executionName},
		"recordNumber":  &types.AttributeValueMemberN{Value: strconv.FormatInt(rec.Number, 10)},
	}}
	return item{record: rec.Number, key: string(id), attrs: attrs, seq: seq}, nil
}

// attributeOf converts a value decoded with UseNumber.
func attributeOf(v any) types.AttributeValue {
	switch v := v.(type) {
	case string:
		return &types.AttributeValueMemberS{Value: v}
	case json.Number:
		return &types.AttributeValueMemberN{Value: v.String()}
	case bool:
		return &types.AttributeValueMemberBOOL{Value: v}
	case map[string]any:
		m := make(map[string]types.AttributeValue, len(v))
		for k, e := range v {
			m[k] = attributeOf(e)
		}
		return &types.AttributeValueMemberM{Value: m}
	case []any:
		l := make([]types.AttributeValue, len(v))
		for i, e := range v {
			l[i] = attributeOf(e)
		}
		return &types.AttributeValueMemberL{Value: l}
	default: // nil
		return &types.AttributeValueMemberNULL{Value: true}
	}
}

// dynamoSink is the DynamoDB sink: one conditional PutItem per record into the tenant's table.
// Under skipRecord it rejects into rejects a record whose write the table refused for the item
// itself (itemRejection), and writes the next ones.
type dynamoSink struct {
	api     ItemAPI
	pace    *pace // the tenant's core system's rate limit, one token per item
	rejects *chunkRejects
}

// Write writes a chunk's records to the tenant's table. Records of different keys are
// written concurrently, at most dynamodb.concurrency at once; records of one key are written one
// after another in file order (one queue per key, in the order keys first appear), so a key's
// last write is its last record. The condition makes every write idempotent: a retried or
// redriven chunk, or a replayed older file, finds an equal or newer _seq and leaves it.
//
// It returns how many records were written (or found newer) and, on failure, the error of the
// first failed record in file order: after a failure no queue starts a record numbered above it,
// but every record below it is still tried, so the record reported is the same on every retry.
// With concurrency 1, or one key, that is Sink's contract to the letter; with more, a record of
// another key numbered above the failure may already be written, which its _seq makes harmless.
func (s *dynamoSink) Write(ctx context.Context, b budget, req pipeline.ChunkRequest, recs []records.Record) (int64, error) {
	d := req.Tenant.DynamoDB
	var queues [][]item
	index := map[string]int{}
	for _, rec := range recs {
		it, err := buildItem(rec, req.Header, d.Key, req.Source, req.ExecutionName)
		if err != nil {
			return 0, &WriteError{Record: rec.Number, Kind: RejectedRecord,
				Err: &pipeline.ValidationError{Message: fmt.Sprintf("%s: chunk %d: %v", b.file, req.Chunk, err), Err: err}}
		}
		i, ok := index[it.key]
		if !ok {
			i = len(queues)
			index[it.key] = i
			queues = append(queues, nil)
		}
		it.rec = rec
		queues[i] = append(queues[i], it)
	}
	ctx, cancel, err := b.call(ctx, "writing to DynamoDB", minCallTime, 0)
	if err != nil {
		return 0, &WriteError{Record: recs[0].Number, Kind: Stopped, Err: err}
	}
	defer cancel()
	conc := d.Concurrency
	if conc <= 0 {
		conc = pipeline.DefaultDynamoDBConcurrency
	}
	var (
		mu      sync.Mutex
		written int64
		done    = map[int64]bool{} // the records written
		failed  error
		failRec int64
		wg      sync.WaitGroup
		slots   = make(chan struct{}, conc)
	)
	fail := func(rec int64, err error) {
		mu.Lock()
		defer mu.Unlock()
		if failed == nil || rec < failRec {
			failed, failRec = err, rec
		}
	}
	after := func(rec int64) bool { // a failed record comes before rec
		mu.Lock()
		defer mu.Unlock()
		return failed != nil && failRec < rec
	}
	for _, q := range queues {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			for _, it := range q {
				if ctx.Err() != nil || after(it.record) {
					return
				}
				if err := s.pace.take(ctx, b, fmt.Sprintf("record %d", it.record), 1, minCallTime); err != nil {
					fail(it.record, err)
					return
				}
				err := s.putItem(ctx, b, req, it)
				var ir *itemRejection
				if errors.As(err, &ir) {
					s.rejects.add(it.rec, ir.status, ir.why)
					err = nil
				}
				if err != nil {
					if err != errStopped {
						fail(it.record, err)
					}
					return
				}
				mu.Lock()
				written++
				done[it.record] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		return written, &WriteError{Record: failRec, Kind: rejection(failed, 0), Err: failed}
	}
	if ctx.Err() != nil && written < int64(len(recs)) {
		// The budget's context ended before every queue finished.
		first := recs[0].Number
		for _, rec := range recs {
			if !done[rec.Number] {
				first = rec.Number
				break
			}
		}
		return written, &WriteError{Record: first, Kind: Stopped,
			Err: b.stopped(fmt.Sprintf("writing to DynamoDB (%d of %d records written)", written, len(recs)))}
	}
	return written, nil
}

// itemRejection is a record the table refused for what the item holds, under skipRecord.
type itemRejection struct {
	status int
	why    string
}

func (r *itemRejection) Error() string { return r.why }

// rejectedItem is the rejection of a ValidationException (a key of the wrong type, an empty or
// invalid value, an item over 400 KB) when the tenant's rejectStatuses list its HTTP status, 400
// (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/CommonErrors.html); nil for any
// other error, which fails as it always did.
func rejectedItem(t pipeline.Tenant, err error) *itemRejection {
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" || !t.RejectsStatus(http.StatusBadRequest) {
		return nil
	}
	return &itemRejection{status: http.StatusBadRequest, why: "DynamoDB answered 400 (ValidationException): the item is not valid for the table (a key of the wrong type, an empty or invalid value, or an item over 400 KB)"}
}

// notOlder decides a failed condition under skipRecord from the stored item (ALL_OLD, or a
// consistent read when the answer did not carry it): a stored _seq at or above the record's is a
// replay or an older write, success; a stored item of the key without a _seq (or with one that
// is not a string) was not written by the pipeline, and the record is rejected rather than
// counted registered. A _seq below the record's cannot fail the condition; it is taken for a
// replay too.
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_PutItem.html#DDB-PutItem-request-ReturnValuesOnConditionCheckFailure
func (s *dynamoSink) notOlder(ctx context.Context, b budget, req pipeline.ChunkRequest, it item, stored map[string]types.AttributeValue) error {
	d := req.Tenant.DynamoDB
	if stored == nil {
		key := map[string]types.AttributeValue{}
		for _, k := range d.Key {
			key[k] = it.attrs[k]
		}
		out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.Table), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return itemError(b.file, d.Table, req.Chunk, it.record, err)
		}
		if out.Item == nil {
			// Gone since the write: the condition held against a newer item that was deleted.
			return &pipeline.RetryableError{Message: fmt.Sprintf("%s: chunk %d: record %d: DynamoDB table %s: the item that failed the condition is gone; the record is written again", b.file, req.Chunk, it.record, d.Table)}
		}
		stored = out.Item
	}
	if seq, ok := stored[pipeline.SeqAttribute].(*types.AttributeValueMemberS); ok && seq.Value != "" {
		return nil
	}
	return &itemRejection{status: http.StatusBadRequest, why: fmt.Sprintf(
		"DynamoDB answered 400 (ConditionalCheckFailedException): the table holds an item with this key that the pipeline did not write (it has no %s), so the record was not written",
		pipeline.SeqAttribute)}
}

// errStopped is a write cut short because the invocation's context ended.
var errStopped = errors.New("stopped")

// putItem writes one item. A failed condition means an equal or newer version of the key is
// stored already: success. Under skipRecord (Tenant.CanReject) that is checked on the stored item, and a
// record the table refused for the item itself is an *itemRejection (rejectedItem).
func (s *dynamoSink) putItem(ctx context.Context, b budget, req pipeline.ChunkRequest, it item) error {
	d := req.Tenant.DynamoDB
	table, chunk, pk := d.Table, req.Chunk, d.Key[0]
	in := &dynamodb.PutItemInput{
		TableName:                 aws.String(table),
		Item:                      it.attrs,
		ConditionExpression:       aws.String(conditionExpression),
		ExpressionAttributeNames:  map[string]string{"#pk": pk, "#seq": pipeline.SeqAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{":seq": &types.AttributeValueMemberS{Value: it.seq}},
	}
	skip := req.Tenant.CanReject()
	if skip {
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	_, err := s.api.PutItem(ctx, in)
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if !skip {
			return nil
		}
		return s.notOlder(ctx, b, req, it, ccf.Item)
	}
	if skip && ctx.Err() == nil {
		if r := rejectedItem(req.Tenant, err); r != nil {
			return r
		}
	}
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return b.stopped(fmt.Sprintf("writing record %d to DynamoDB", it.record))
		}
		return errStopped // the invocation ended: Write decides
	}
	return itemError(b.file, table, chunk, it.record, err)
}

// itemError classifies a PutItem failure that the SDK's retryer gave up on. Messages name the
// record and the error code, never DynamoDB's message, which may quote a value (a number that is
// not one, for instance).
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_PutItem.html#API_PutItem_Errors
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/CommonErrors.html
func itemError(file, table string, chunk int, record int64, err error) error {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return &pipeline.RetryableError{Message: fmt.Sprintf("%s: chunk %d: record %d: DynamoDB did not answer: %v", file, chunk, record, err), Err: err}
	}
	code := ae.ErrorCode()
	switch code {
	case "ValidationException":
		return &pipeline.ValidationError{Message: fmt.Sprintf(
			"%s: chunk %d: record %d: DynamoDB table %s rejected the item (ValidationException): a key of the wrong type, an empty or invalid value, or an item over 400 KB; the message is not shown, as it may quote the record",
			file, chunk, record, table), Err: err}
	case "ResourceNotFoundException", "AccessDeniedException", "UnrecognizedClientException", "ItemCollectionSizeLimitExceededException":
		return &pipeline.PermanentError{Message: fmt.Sprintf("%s: chunk %d: record %d: DynamoDB table %s: %s", file, chunk, record, table, code), Err: err}
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() >= 400 && re.HTTPStatusCode() < 500 && !retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err).Bool() &&
		re.HTTPStatusCode() != http.StatusRequestTimeout {
		return &pipeline.PermanentError{Message: fmt.Sprintf("%s: chunk %d: record %d: DynamoDB table %s: %s", file, chunk, record, table, code), Err: err}
	}
	return &pipeline.RetryableError{Message: fmt.Sprintf("%s: chunk %d: record %d: DynamoDB table %s: %s after %d attempts", file, chunk, record, table, code, DynamoDBMaxAttempts), Err: err}
}
