package controller

import (
	"cmp"
	"context"
	"crypto/md5"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/s3event"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
	"github.com/example/tenantpipeline/internal/testfake"
)

// Test fixtures shared by the handler tests.
const (
	testStateMachine = "arn:aws:states:eu-west-1:123456789012:stateMachine:acme-files"
	testExecPrefix   = "arn:aws:states:eu-west-1:123456789012:execution:acme-files:"
	testSegmentSM    = "arn:aws:states:eu-west-1:123456789012:stateMachine:acme-segments"
	testSegPrefix    = "arn:aws:states:eu-west-1:123456789012:execution:acme-segments:"
	testQueueURL     = "https://sqs.eu-west-1.amazonaws.com/123456789012/acme.fifo"
	testBucket       = "ingest"
	evID1            = "6f1c2a3b-0d4e-4f5a-8b6c-7d8e9fa0b1c2"
	evID2            = "7a2d3b4c-1e5f-4a6b-9c7d-8e9fa0b1c2d3"
	evID3            = "8b3e4c5d-2f6a-4b7c-ad8e-9fa0b1c2d3e4"
)

var testStart = time.Date(2024, 5, 1, 9, 0, 0, 0, time.UTC)

func baseEnv() map[string]string {
	return map[string]string{
		pipeline.EnvStateMachineARN:   testStateMachine,
		pipeline.EnvQueueURL:          testQueueURL,
		pipeline.EnvTenant:            `{"id":"acme","format":"csv","encoding":"utf-8","chunkSize":100,"maxFieldBytes":65536}`,
		pipeline.EnvTenantPrefix:      "inbox/acme/",
		pipeline.EnvBucket:            testBucket,
		pipeline.EnvMaxWaitSeconds:    "60",
		pipeline.EnvHaltWaitSeconds:   "900",
		pipeline.EnvFirstWaitMillis:   "1000",
		pipeline.EnvPollBudgetSeconds: "0",
		// A stopped file waits 20 s + the 30 s margin after the later stop date.
		pipeline.EnvRegisterTimeoutSeconds: "20",
		pipeline.EnvSegmentStateMachineARN: testSegmentSM,
	}
}

func mustConfig(t *testing.T, overrides map[string]string) Config {
	t.Helper()
	env := baseEnv()
	maps.Copy(env, overrides)
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("test config: %v", err)
	}
	return cfg
}

// noJitter replaces the throttle backoff's random draw by the plain backoff, so that tests of other
// paths see fixed waits (TestThrottleWait tests the jitter).
func noJitter(cfg Config) retry.BackoffDelayer {
	return retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) {
		return backoff(cfg.FirstWait, cfg.MaxWait, attempt), nil
	})
}

// throttled is what the SDK returns once its retryer gave up on a throttled call.
func throttled() error {
	return &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded"}
}

func accessDenied() error {
	return &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized"}
}

type fakeExec struct {
	status       sfntypes.ExecutionStatus
	input        string
	errName      string
	redriveCount int32
	redriveDate  *time.Time
	stopDate     *time.Time
	history      []sfntypes.HistoryEvent // oldest first, as Step Functions records them
}

// startDate is when the execution started: the test's start, as the head-metric tests expect, unless
// it stopped before that, when it started an hour before its stop.
func (e *fakeExec) startDate() time.Time {
	if e.stopDate != nil && e.stopDate.Before(testStart) {
		return e.stopDate.Add(-time.Hour)
	}
	return testStart
}

// stoppedLongAgo is the stop date set gives a finished execution: far beyond any release bound.
var stoppedLongAgo = testStart.Add(-time.Hour)

// fakeSFN behaves like Step Functions for one state machine: names are unique, and StartExecution
// with the name and input of a running execution succeeds without starting another.
type fakeSFN struct {
	mu           sync.Mutex
	execs        map[string]*fakeExec // by execution ARN
	created      []string             // ARNs of executions created, in order
	describes    int
	starts       int
	describeErrs []error // returned in order before normal answers
	startErrs    []error
	// loseStartResponse creates the execution but returns an error, as if the response was lost.
	loseStartResponse bool
	// afterStart runs after an execution was created (e.g. to kill the invocation).
	afterStart func()
	// onDescribe runs under the lock before each answer, with the number of describes so far.
	onDescribe func(n int, f *fakeSFN)
	// raceGate, if set, holds the first two DescribeExecution answers until both were computed.
	raceGate *sync.WaitGroup

	historyCalls []sfn.GetExecutionHistoryInput
	historyErrs  []error // returned in order before normal answers
	stops        []string
	stopErrs     []error
	// now is the clock StopExecution stamps the stop date with.
	now func() time.Time
}

func newFakeSFN() *fakeSFN {
	return &fakeSFN{execs: map[string]*fakeExec{}, now: func() time.Time { return testStart }}
}

// set gives the execution arn the status; a finished one stopped at stoppedLongAgo unless
// setStopped says otherwise.
func (f *fakeSFN) set(arn string, status sfntypes.ExecutionStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.execs[arn]
	if !ok {
		e = &fakeExec{errName: "States.TaskFailed"}
		f.execs[arn] = e
	}
	e.status = status
	switch {
	case e.stopDate != nil, status == sfntypes.ExecutionStatusRunning, status == sfntypes.ExecutionStatusPendingRedrive:
	case status == sfntypes.ExecutionStatusSucceeded:
		e.stopDate = aws.Time(testStart) // the head metrics count from a start at testStart
	default:
		e.stopDate = aws.Time(stoppedLongAgo)
	}
}

// setStopped gives the execution arn a finished status and its stop date.
func (f *fakeSFN) setStopped(arn string, status sfntypes.ExecutionStatus, stopDate time.Time) {
	f.set(arn, status)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execs[arn].stopDate = aws.Time(stopDate)
}

// setHistory records events (oldest first) as the history of the execution arn, numbering them.
func (f *fakeSFN) setHistory(arn string, events ...sfntypes.HistoryEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range events {
		events[i].Id = int64(i + 1)
		events[i].PreviousEventId = int64(i)
		events[i].Timestamp = aws.Time(testStart.Add(-2 * time.Hour).Add(time.Duration(i) * time.Second))
	}
	f.execs[arn].history = events
}

// GetExecutionHistory pages through the recorded history as Step Functions does: maxResults
// events per page (default 100), newest first with reverseOrder, and a nextToken while more remain.
func (f *fakeSFN) GetExecutionHistory(ctx context.Context, in *sfn.GetExecutionHistoryInput, _ ...func(*sfn.Options)) (*sfn.GetExecutionHistoryOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.historyCalls = append(f.historyCalls, *in)
	if len(f.historyErrs) > 0 {
		err := f.historyErrs[0]
		f.historyErrs = f.historyErrs[1:]
		return nil, err
	}
	e, ok := f.execs[aws.ToString(in.ExecutionArn)]
	if !ok {
		return nil, &sfntypes.ExecutionDoesNotExist{Message: in.ExecutionArn}
	}
	events := slices.Clone(e.history)
	if in.ReverseOrder {
		slices.Reverse(events)
	}
	from := 0
	if in.NextToken != nil {
		n, err := strconv.Atoi(aws.ToString(in.NextToken))
		if err != nil {
			return nil, &sfntypes.InvalidToken{Message: in.NextToken}
		}
		from = n
	}
	size := int(in.MaxResults)
	if size == 0 {
		size = 100
	}
	to := min(from+size, len(events))
	out := &sfn.GetExecutionHistoryOutput{Events: events[from:to]}
	if to < len(events) {
		out.NextToken = aws.String(strconv.Itoa(to))
	}
	return out, nil
}

// StopExecution aborts a running execution at f.now.
func (f *fakeSFN) StopExecution(ctx context.Context, in *sfn.StopExecutionInput, _ ...func(*sfn.Options)) (*sfn.StopExecutionOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	arn := aws.ToString(in.ExecutionArn)
	f.stops = append(f.stops, arn)
	if len(f.stopErrs) > 0 {
		err := f.stopErrs[0]
		f.stopErrs = f.stopErrs[1:]
		return nil, err
	}
	e, ok := f.execs[arn]
	if !ok {
		return nil, &sfntypes.ExecutionDoesNotExist{Message: in.ExecutionArn}
	}
	now := f.now()
	if e.status == sfntypes.ExecutionStatusRunning || e.status == sfntypes.ExecutionStatusPendingRedrive {
		e.status, e.stopDate = sfntypes.ExecutionStatusAborted, aws.Time(now)
	}
	return &sfn.StopExecutionOutput{StopDate: aws.Time(now)}, nil
}

func (f *fakeSFN) DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, _ ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out, n, err := f.answerDescribe(aws.ToString(in.ExecutionArn))
	if f.raceGate != nil && n <= 2 {
		f.raceGate.Done()
		f.raceGate.Wait()
	}
	return out, err
}

func (f *fakeSFN) answerDescribe(arn string) (*sfn.DescribeExecutionOutput, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.describes++
	n := f.describes
	if f.onDescribe != nil {
		f.onDescribe(n, f)
	}
	if len(f.describeErrs) > 0 {
		err := f.describeErrs[0]
		f.describeErrs = f.describeErrs[1:]
		return nil, n, err
	}
	e, ok := f.execs[arn]
	if !ok {
		return nil, n, &sfntypes.ExecutionDoesNotExist{Message: aws.String("Execution Does Not Exist: '" + arn + "'")}
	}
	out := &sfn.DescribeExecutionOutput{ExecutionArn: aws.String(arn), Status: e.status, StartDate: aws.Time(e.startDate()), StopDate: e.stopDate,
		RedriveCount: aws.Int32(e.redriveCount), RedriveDate: e.redriveDate, Input: aws.String(e.input)}
	if e.status == sfntypes.ExecutionStatusFailed {
		out.Error = aws.String(e.errName)
		out.Cause = aws.String("record 7: customer Yamada Taro rejected") // must never be logged
	}
	return out, n, nil
}

func (f *fakeSFN) StartExecution(ctx context.Context, in *sfn.StartExecutionInput, _ ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out, err := f.start(in)
	if err == nil && f.afterStart != nil {
		f.afterStart()
	}
	if err == nil && f.loseStartResponse {
		return nil, errors.New("read tcp: connection reset by peer")
	}
	return out, err
}

func (f *fakeSFN) start(in *sfn.StartExecutionInput) (*sfn.StartExecutionOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts++
	if len(f.startErrs) > 0 {
		err := f.startErrs[0]
		f.startErrs = f.startErrs[1:]
		return nil, err
	}
	if aws.ToString(in.StateMachineArn) != testStateMachine {
		return nil, &sfntypes.StateMachineDoesNotExist{Message: in.StateMachineArn}
	}
	arn := testExecPrefix + aws.ToString(in.Name)
	if e, ok := f.execs[arn]; ok {
		if e.status == sfntypes.ExecutionStatusRunning && e.input == aws.ToString(in.Input) {
			return &sfn.StartExecutionOutput{ExecutionArn: aws.String(arn), StartDate: aws.Time(testStart)}, nil
		}
		return nil, &sfntypes.ExecutionAlreadyExists{Message: aws.String("Execution Already Exists: '" + arn + "'")}
	}
	f.execs[arn] = &fakeExec{status: sfntypes.ExecutionStatusRunning, input: aws.ToString(in.Input), errName: "States.TaskFailed"}
	f.created = append(f.created, arn)
	return &sfn.StartExecutionOutput{ExecutionArn: aws.String(arn), StartDate: aws.Time(testStart)}, nil
}

func (f *fakeSFN) input(t *testing.T, arn string) pipeline.WorkflowInput {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.execs[arn]
	if !ok {
		t.Fatalf("got no execution %s, want one", arn)
	}
	var in pipeline.WorkflowInput
	if err := json.Unmarshal([]byte(e.input), &in); err != nil {
		t.Fatalf("execution input %q: %v", e.input, err)
	}
	return in
}

type visibilityChange struct {
	Receipt string
	Seconds int32
}

type fakeSQS struct {
	url     string // the queue's URL; empty means testQueueURL
	mu      sync.Mutex
	changes []visibilityChange
	err     error
	// sent are the messages sent (SendMessage), in order; a deduplication id sent before is
	// accepted and dropped, as SQS does within its five-minute interval.
	sent  []*sqs.SendMessageInput
	dedup map[string]bool
}

func (f *fakeSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if want := cmp.Or(f.url, testQueueURL); aws.ToString(in.QueueUrl) != want {
		return nil, errors.New("wrong queue " + aws.ToString(in.QueueUrl))
	}
	if in.MessageGroupId == nil || in.MessageDeduplicationId == nil {
		return nil, &smithy.GenericAPIError{Code: "MissingParameter", Message: "a FIFO queue needs MessageGroupId and, without content-based deduplication here, MessageDeduplicationId"}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dedup == nil {
		f.dedup = map[string]bool{}
	}
	id := aws.ToString(in.MessageGroupId) + "|" + aws.ToString(in.MessageDeduplicationId)
	if !f.dedup[id] {
		f.dedup[id] = true
		f.sent = append(f.sent, in)
	}
	return &sqs.SendMessageOutput{MessageId: aws.String(fmt.Sprintf("sent-%d", len(f.sent)))}, nil
}

func (f *fakeSQS) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if want := cmp.Or(f.url, testQueueURL); aws.ToString(in.QueueUrl) != want {
		return nil, errors.New("wrong queue " + aws.ToString(in.QueueUrl))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	f.changes = append(f.changes, visibilityChange{aws.ToString(in.ReceiptHandle), in.VisibilityTimeout})
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// fakeS3 keeps objects with S3's ETag (the body's MD5, quoted) and honours PutObject's If-Match
// and If-None-Match as S3 does: 412 PreconditionFailed when the condition does not hold
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).
type fakeS3 struct {
	mu       sync.Mutex
	objects  map[string]string // "bucket/key" → body
	keysPool string            // the pool the tenants' keys carry, a pool rig's (recordControl)
	putErr   error
	getErr   error
	// noListBucket: the role lacks s3:ListBucket, so S3 answers a missing key with 403
	// AccessDenied instead of 404 NoSuchKey
	// (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, "Permissions").
	noListBucket bool
	// keyGetErrs and keyPutErrs are returned, in order, for one "bucket/key" before normal answers.
	keyGetErrs map[string][]error
	keyPutErrs map[string][]error
	// beforePut runs before a put of "bucket/key" is decided (e.g. another writer coming first).
	beforePut func(key string)
	puts      map[string]int
	// listErr fails ListObjectsV2; lists counts the calls.
	listErr error
	lists   int
}

// ListObjectsV2 lists the keys under the prefix, in key order; a role without s3:ListBucket
// (noListBucket) is denied.
func (f *fakeS3) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, _ ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.listErr != nil {
		return nil, f.listErr
	}
	if f.noListBucket {
		return nil, sourcetest.APIError("ListObjectsV2", 403, "AccessDenied")
	}
	var keys []string
	for k := range f.objects {
		bucket, key, _ := strings.Cut(k, "/")
		if bucket == aws.ToString(in.Bucket) && strings.HasPrefix(key, aws.ToString(in.Prefix)) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	if n := int(aws.ToInt32(in.MaxKeys)); n > 0 && len(keys) > n {
		keys = keys[:n]
	}
	out := &s3.ListObjectsV2Output{KeyCount: aws.Int32(int32(len(keys)))}
	for _, k := range keys {
		out.Contents = append(out.Contents, s3types.Object{Key: aws.String(k)})
	}
	return out, nil
}

func (f *fakeS3) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, _ ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.objects, aws.ToString(in.Bucket)+"/"+aws.ToString(in.Key))
	return &s3.DeleteObjectOutput{}, nil
}

func newFakeS3() *fakeS3 {
	return &fakeS3{objects: map[string]string{}, keyGetErrs: map[string][]error{}, keyPutErrs: map[string][]error{}, puts: map[string]int{}}
}

func etagOf(body string) string { return fmt.Sprintf("%q", fmt.Sprintf("%x", md5.Sum([]byte(body)))) }

func popErr(m map[string][]error, k string) error {
	if len(m[k]) == 0 {
		return nil
	}
	err := m[k][0]
	m[k] = m[k][1:]
	return err
}

func (f *fakeS3) PutObject(ctx context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if f.putErr != nil {
		return nil, f.putErr
	}
	b, err := io.ReadAll(in.Body)
	if err != nil {
		return nil, err
	}
	k := aws.ToString(in.Bucket) + "/" + aws.ToString(in.Key)
	if f.beforePut != nil {
		f.beforePut(k)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := popErr(f.keyPutErrs, k); err != nil {
		return nil, err
	}
	old, exists := f.objects[k]
	if (in.IfNoneMatch != nil && exists) || (in.IfMatch != nil && (!exists || etagOf(old) != aws.ToString(in.IfMatch))) {
		return nil, &smithy.GenericAPIError{Code: "PreconditionFailed", Message: "At least one of the pre-conditions you specified did not hold"}
	}
	f.objects[k] = string(b)
	f.puts[k]++
	return &s3.PutObjectOutput{ETag: aws.String(etagOf(string(b)))}, nil
}

func (f *fakeS3) GetObject(ctx context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	if f.getErr != nil {
		return nil, f.getErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k := aws.ToString(in.Bucket) + "/" + aws.ToString(in.Key)
	if err := popErr(f.keyGetErrs, k); err != nil {
		return nil, err
	}
	b, ok := f.objects[k]
	if !ok && f.noListBucket {
		return nil, sourcetest.APIError("GetObject", 403, "AccessDenied")
	}
	if !ok {
		return nil, &s3types.NoSuchKey{Message: aws.String("The specified key does not exist.")}
	}
	return &s3.GetObjectOutput{Body: io.NopCloser(strings.NewReader(b)), ContentLength: aws.Int64(int64(len(b))),
		VersionId: aws.String("3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY"), ETag: aws.String(etagOf(b))}, nil
}

// rig is a Handler wired to fakes, a fake clock and captured logs and metrics.
type rig struct {
	h      *Handler
	sfn    *fakeSFN
	sqs    *fakeSQS
	s3     *fakeS3
	out    *testfake.Logs
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newRig(t *testing.T, env map[string]string) *rig {
	t.Helper()
	r := &rig{sfn: newFakeSFN(), sqs: &fakeSQS{}, s3: newFakeS3(), out: &testfake.Logs{}, now: testStart}
	cfg := mustConfig(t, env)
	logger := slog.New(slog.NewJSONHandler(r.out, nil))
	r.h = newHandler(cfg, r.sfn, r.sqs, r.s3, logger, metrics.New(r.out, cfg.MetricsNamespace, cfg.Tenant.ID).WithClock(r.clock))
	r.h.now = r.clock
	r.sfn.now = r.clock
	r.h.throttleBackoff = noJitter(cfg)
	r.h.sleep = func(ctx context.Context, d time.Duration) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.sleeps = append(r.sleeps, d)
		r.now = r.now.Add(d)
		return ctx.Err()
	}
	return r
}

func (r *rig) clock() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.now
}

// logs are the slog lines (those with a level).
func (r *rig) logs(t *testing.T) []map[string]any {
	var out []map[string]any
	for _, d := range r.out.Lines(t) {
		if _, ok := d["level"]; ok {
			out = append(out, d)
		}
	}
	return out
}

func (r *rig) countLevel(t *testing.T, level string) int {
	n := 0
	for _, l := range r.logs(t) {
		if l["level"] == level {
			n++
		}
	}
	return n
}

// metricSums adds up every EMF value per metric name, checking each line's structure.
func (r *rig) metricSums(t *testing.T) map[string]float64 {
	t.Helper()
	sums := map[string]float64{}
	for _, d := range r.out.Lines(t) {
		aws, ok := d["_aws"].(map[string]any)
		if !ok {
			continue
		}
		if _, hasLevel := d["level"]; hasLevel {
			t.Errorf("got an EMF line with a level field, want none (it would match the ERROR filter): %v", d)
		}
		if d[metrics.DimensionTenant] != "acme" {
			t.Errorf("got EMF Tenant %v, want acme", d[metrics.DimensionTenant])
		}
		for _, dir := range aws["CloudWatchMetrics"].([]any) {
			for _, m := range dir.(map[string]any)["Metrics"].([]any) {
				name := m.(map[string]any)["Name"].(string)
				sums[name] += d[name].(float64)
			}
		}
	}
	return sums
}

// findLog returns the first log line at level whose msg contains msg.
func (r *rig) findLog(t *testing.T, level, msg string) map[string]any {
	t.Helper()
	for _, l := range r.logs(t) {
		if l["level"] == level && strings.Contains(l["msg"].(string), msg) {
			return l
		}
	}
	t.Fatalf("got no %s log containing %q; logs:\n%v", level, msg, r.logs(t))
	return nil
}

func (r *rig) failures(resp events.SQSEventResponse) []string {
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// eventBody is the EventBridge event S3 sends for one new object version under the tenant prefix.
func eventBody(t *testing.T, id, key string) string {
	t.Helper()
	ev := s3event.ObjectCreated(id, testStart.Add(-2*time.Minute), testBucket, s3event.Object{
		Key: key, Size: 1234, ETag: "9b2cf535f27731c974343645a3985328", VersionID: "v-" + id[:8], Sequencer: "0062E99A88DC407460",
	})
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// message is an SQS record as the event source mapping delivers it: sent 90 s before testStart.
func message(id, body string, receiveCount int) events.SQSMessage {
	return events.SQSMessage{
		MessageId:     id,
		ReceiptHandle: "rh-" + id,
		Body:          body,
		Attributes: map[string]string{
			"ApproximateReceiveCount": strconv.Itoa(receiveCount),
			"SentTimestamp":           strconv.FormatInt(testStart.Add(-90*time.Second).UnixMilli(), 10),
			"MessageGroupId":          "acme",
		},
		EventSource: "aws:sqs",
	}
}
