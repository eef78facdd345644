// Package opsfake is an in-memory stand-in for the AWS calls pipectl makes (internal/ops), for
// tests. It answers as the services do for the inputs pipectl sends: paging, not-found errors,
// filters; it is not an emulator of anything else.
package opsfake

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/example/tenantpipeline/spec"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// Execution is one execution of a state machine.
type Execution struct {
	Name, StateMachineARN string
	Status                sfntypes.ExecutionStatus
	Input                 string
	Error, Cause          string
	Start                 time.Time
	Stop, Redrive         *time.Time
	RedriveStatus         sfntypes.ExecutionRedriveStatus
	RedriveReason         string
	// History is the execution's history, oldest first.
	History []sfntypes.HistoryEvent
}

// ARN is the execution's ARN.
func (e *Execution) ARN() string {
	return strings.Replace(e.StateMachineARN, ":stateMachine:", ":execution:", 1) + ":" + e.Name
}

// Object is one S3 object version (the current one).
type Object struct {
	VersionID, ETag string
	Body            string
	LastModified    time.Time
	Metadata        map[string]string
}

// Queue is an SQS queue's counts and what was sent to it.
type Queue struct {
	Visible, InFlight int64
	Sent              []sqs.SendMessageInput
	// Messages are waiting to be received (dead-letter queues); receiving hides them.
	Messages []sqstypes.Message
	Deleted  []string // receipt handles
}

// World is every fake service at once.
type World struct {
	mu         sync.Mutex
	tickets    int64             // AddWaiter's last ticket
	poolOf     map[string]string // the pool AddPool's tenants' keys carry, by tenant id
	Stacks     []cftypes.Stack
	Queues     map[string]*Queue // by URL
	Executions []*Execution      // in start order
	Mappings   []lambdatypes.EventSourceMappingConfiguration
	Updates    []lambda.UpdateEventSourceMappingInput
	Objects    map[string]*Object // by bucket/key
	Puts       []s3.PutObjectInput
	// Gets are the keys GetObject read, and Lists the ListObjectsV2 calls, in call order.
	Gets      []string
	Lists     []s3.ListObjectsV2Input
	Redrives  []sfn.RedriveExecutionInput
	CallerARN string
	Now       time.Time
	// Code are the functions' deployment packages (zip), by function name (GetFunction).
	Code map[string][]byte
	// Visibility are the ChangeMessageVisibility calls.
	Visibility []sqs.ChangeMessageVisibilityInput
	// Err, if set, is returned by the named operation ("ListExecutions", ...).
	Err map[string]error
	// Env are the functions' environment variables, by function name (GetFunction). AddTenant and
	// AddPool give each controller one; a silo controller's TENANT holds its tenant's id.
	Env map[string]map[string]string
	// CoreSystemOf is the core system a tenant added afterwards names, by tenant id: AddTenant puts
	// it in the controller's TENANT, AddPool in the tenant's row of the settings file.
	CoreSystemOf map[string]*pipeline.CoreSystem
	// SettingsOf are the settings a tenant added afterwards has (format, encoding, policy...), by
	// tenant id: AddTenant puts them in the controller's TENANT, AddPool in the tenant's row of the
	// settings file. Their id is the tenant's, their core system CoreSystemOf's when it names one.
	SettingsOf map[string]pipeline.Tenant
	// Tables are the admission tables' items, by table name (dynamodb.go).
	Tables map[string][]map[string]ddbtypes.AttributeValue
	// InsightReports are the Contributor Insights reports' contributors by rule name, and
	// InsightRequests the GetInsightRuleReport calls (cloudwatch.go).
	InsightReports  map[string][]cwtypes.InsightRuleContributor
	InsightRequests []cloudwatch.GetInsightRuleReportInput
	// Creds are the operator's credentials (Retrieve), and AssumeRoles the AssumeRole calls
	// (upload.go).
	Creds       aws.Credentials
	AssumeRoles []sts.AssumeRoleInput
	// BucketKeys are the buckets' customer-managed keys (GetBucketEncryption), by bucket name; a
	// bucket without one is encrypted with S3's keys (SSE-S3), as every bucket is by default.
	BucketKeys map[string]string
}

// New returns an empty world whose clock is now.
func New(now time.Time) *World {
	return &World{poolOf: map[string]string{}, Queues: map[string]*Queue{}, Objects: map[string]*Object{}, Now: now, Err: map[string]error{}, Code: map[string][]byte{},
		Env: map[string]map[string]string{}, CoreSystemOf: map[string]*pipeline.CoreSystem{}, SettingsOf: map[string]pipeline.Tenant{},
		CallerARN: "arn:aws:sts::123456789012:assumed-role/Operator/alice",
		Creds:     aws.Credentials{AccessKeyID: "AKIAOPERATOR", SecretAccessKey: "secret", Source: "opsfake"}}
}

// Clients returns the world as ops.Clients.
func (w *World) Clients() ops.Clients {
	return ops.Clients{CloudFormation: w, SQS: (*sqsFake)(w), StepFunctions: (*sfnFake)(w), Lambda: w, S3: w, STS: w, DynamoDB: (*dynamoFake)(w), CloudWatch: (*cloudWatchFake)(w),
		Credentials: w, Presigner: presigner}
}

func (w *World) fail(op string) error { return w.Err[op] }

// DescribeStacks returns one stack per page, to exercise paging.
func (w *World) DescribeStacks(_ context.Context, in *cloudformation.DescribeStacksInput, _ ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.fail("DescribeStacks"); err != nil {
		return nil, err
	}
	i := 0
	if in.NextToken != nil {
		i, _ = strconv.Atoi(*in.NextToken)
	}
	out := &cloudformation.DescribeStacksOutput{}
	if i < len(w.Stacks) {
		out.Stacks = []cftypes.Stack{w.Stacks[i]}
	}
	if i+1 < len(w.Stacks) {
		out.NextToken = aws.String(strconv.Itoa(i + 1))
	}
	return out, nil
}

type sqsFake World

func (f *sqsFake) queue(url *string) (*Queue, error) {
	q, ok := f.Queues[aws.ToString(url)]
	if !ok {
		return nil, &sqstypes.QueueDoesNotExist{Message: url}
	}
	return q, nil
}

func (f *sqsFake) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q, err := f.queue(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		"ApproximateNumberOfMessages":           strconv.FormatInt(q.Visible, 10),
		"ApproximateNumberOfMessagesNotVisible": strconv.FormatInt(q.InFlight, 10),
	}}, nil
}

func (f *sqsFake) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := (*World)(f).fail("SendMessage"); err != nil {
		return nil, err
	}
	q, err := f.queue(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(aws.ToString(in.QueueUrl), ".fifo") && (in.MessageGroupId == nil || in.MessageDeduplicationId == nil) {
		return nil, fmt.Errorf("fifo queue: MessageGroupId and MessageDeduplicationId are required")
	}
	q.Sent = append(q.Sent, *in)
	q.Visible++
	return &sqs.SendMessageOutput{MessageId: aws.String(fmt.Sprintf("msg-%d", len(q.Sent)))}, nil
}

func (f *sqsFake) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q, err := f.queue(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	n := min(int(in.MaxNumberOfMessages), len(q.Messages))
	out := &sqs.ReceiveMessageOutput{Messages: q.Messages[:n]}
	q.Messages = q.Messages[n:]
	return out, nil
}

func (f *sqsFake) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q, err := f.queue(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	q.Deleted = append(q.Deleted, aws.ToString(in.ReceiptHandle))
	return &sqs.DeleteMessageOutput{}, nil
}

type sfnFake World

// ListExecutions lists newest first, as Step Functions does, filtered by status.
func (f *sfnFake) ListExecutions(_ context.Context, in *sfn.ListExecutionsInput, _ ...func(*sfn.Options)) (*sfn.ListExecutionsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := (*World)(f).fail("ListExecutions"); err != nil {
		return nil, err
	}
	out := &sfn.ListExecutionsOutput{}
	limit := int(in.MaxResults)
	if limit == 0 {
		limit = 100
	}
	for i := len(f.Executions) - 1; i >= 0 && len(out.Executions) < limit; i-- {
		e := f.Executions[i]
		if e.StateMachineARN != aws.ToString(in.StateMachineArn) || (in.StatusFilter != "" && in.StatusFilter != e.Status) {
			continue
		}
		out.Executions = append(out.Executions, sfntypes.ExecutionListItem{
			ExecutionArn: aws.String(e.ARN()), Name: aws.String(e.Name), Status: e.Status,
			StartDate: aws.Time(e.Start), StopDate: e.Stop, RedriveDate: e.Redrive, StateMachineArn: aws.String(e.StateMachineARN),
		})
	}
	return out, nil
}

func (f *sfnFake) find(arn *string) (*Execution, error) {
	for _, e := range f.Executions {
		if e.ARN() == aws.ToString(arn) {
			return e, nil
		}
	}
	return nil, &sfntypes.ExecutionDoesNotExist{Message: aws.String("Execution Does Not Exist: '" + aws.ToString(arn) + "'")}
}

func (f *sfnFake) DescribeExecution(_ context.Context, in *sfn.DescribeExecutionInput, _ ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, err := f.find(in.ExecutionArn)
	if err != nil {
		return nil, err
	}
	out := &sfn.DescribeExecutionOutput{
		ExecutionArn: in.ExecutionArn, Name: aws.String(e.Name), Status: e.Status, Input: aws.String(e.Input),
		StartDate: aws.Time(e.Start), StopDate: e.Stop, RedriveDate: e.Redrive, RedriveStatus: e.RedriveStatus,
	}
	if e.Error != "" {
		out.Error, out.Cause = aws.String(e.Error), aws.String(e.Cause)
	}
	if e.RedriveReason != "" {
		out.RedriveStatusReason = aws.String(e.RedriveReason)
	}
	return out, nil
}

func (f *sfnFake) RedriveExecution(_ context.Context, in *sfn.RedriveExecutionInput, _ ...func(*sfn.Options)) (*sfn.RedriveExecutionOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Redrives = append(f.Redrives, *in)
	if err := (*World)(f).fail("RedriveExecution"); err != nil {
		return nil, err
	}
	e, err := f.find(in.ExecutionArn)
	if err != nil {
		return nil, err
	}
	if e.RedriveStatus == sfntypes.ExecutionRedriveStatusNotRedrivable {
		return nil, &sfntypes.ExecutionNotRedrivable{Message: aws.String(e.RedriveReason)}
	}
	e.Status, e.Redrive = sfntypes.ExecutionStatusRunning, aws.Time(f.Now)
	return &sfn.RedriveExecutionOutput{RedriveDate: aws.Time(f.Now)}, nil
}

// GetExecutionHistory pages through the history, oldest first, maxResults a page (default 100).
func (f *sfnFake) GetExecutionHistory(_ context.Context, in *sfn.GetExecutionHistoryInput, _ ...func(*sfn.Options)) (*sfn.GetExecutionHistoryOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, err := f.find(in.ExecutionArn)
	if err != nil {
		return nil, err
	}
	from := 0
	if in.NextToken != nil {
		from, _ = strconv.Atoi(*in.NextToken)
	}
	size := int(in.MaxResults)
	if size == 0 {
		size = 100
	}
	to := min(from+size, len(e.History))
	out := &sfn.GetExecutionHistoryOutput{Events: e.History[from:to]}
	if to < len(e.History) {
		out.NextToken = aws.String(strconv.Itoa(to))
	}
	return out, nil
}

// ListEventSourceMappings filters by function name and event source ARN.
func (w *World) ListEventSourceMappings(_ context.Context, in *lambda.ListEventSourceMappingsInput, _ ...func(*lambda.Options)) (*lambda.ListEventSourceMappingsOutput, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := &lambda.ListEventSourceMappingsOutput{}
	for _, m := range w.Mappings {
		if (in.FunctionName == nil || strings.HasSuffix(aws.ToString(m.FunctionArn), ":function:"+aws.ToString(in.FunctionName))) &&
			(in.EventSourceArn == nil || aws.ToString(m.EventSourceArn) == aws.ToString(in.EventSourceArn)) {
			out.EventSourceMappings = append(out.EventSourceMappings, m)
		}
	}
	return out, nil
}

// UpdateEventSourceMapping answers Disabling/Enabling, as Lambda does while the change takes effect.
func (w *World) UpdateEventSourceMapping(_ context.Context, in *lambda.UpdateEventSourceMappingInput, _ ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Updates = append(w.Updates, *in)
	for i, m := range w.Mappings {
		if aws.ToString(m.UUID) != aws.ToString(in.UUID) {
			continue
		}
		state := "Enabling"
		if !aws.ToBool(in.Enabled) {
			state = "Disabling"
		}
		w.Mappings[i].State = aws.String(state)
		return &lambda.UpdateEventSourceMappingOutput{UUID: m.UUID, State: aws.String(state)}, nil
	}
	return nil, &lambdatypes.ResourceNotFoundException{Message: aws.String("The resource you requested does not exist.")}
}

func (w *World) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.fail("PutObject"); err != nil {
		return nil, err
	}
	if _, exists := w.Objects[aws.ToString(in.Bucket)+"/"+aws.ToString(in.Key)]; exists && aws.ToString(in.IfNoneMatch) == "*" {
		// https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-requests.html
		return nil, &smithy.GenericAPIError{Code: "PreconditionFailed", Message: "At least one of the pre-conditions you specified did not hold"}
	}
	b, err := io.ReadAll(in.Body)
	if err != nil {
		return nil, err
	}
	v := fmt.Sprintf("v%d", len(w.Puts)+1)
	w.Puts = append(w.Puts, *in)
	w.Objects[aws.ToString(in.Bucket)+"/"+aws.ToString(in.Key)] = &Object{VersionID: v, Body: string(b), LastModified: w.Now, Metadata: in.Metadata}
	return &s3.PutObjectOutput{VersionId: aws.String(v)}, nil
}

// HeadObject answers NotFound for a missing key or version, as S3 does to a caller that may list.
func (w *World) HeadObject(_ context.Context, in *s3.HeadObjectInput, _ ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.fail("HeadObject"); err != nil {
		return nil, err
	}
	o, ok := w.Objects[aws.ToString(in.Bucket)+"/"+aws.ToString(in.Key)]
	if !ok || (in.VersionId != nil && aws.ToString(in.VersionId) != o.VersionID) {
		return nil, &s3types.NotFound{Message: aws.String("Not Found")}
	}
	return &s3.HeadObjectOutput{VersionId: aws.String(o.VersionID), ETag: aws.String(o.ETag), ContentLength: aws.Int64(int64(len(o.Body))),
		LastModified: aws.Time(o.LastModified), Metadata: o.Metadata}, nil
}

func (w *World) GetCallerIdentity(context.Context, *sts.GetCallerIdentityInput, ...func(*sts.Options)) (*sts.GetCallerIdentityOutput, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.fail("GetCallerIdentity"); err != nil {
		return nil, err
	}
	return &sts.GetCallerIdentityOutput{Arn: aws.String(w.CallerARN), Account: aws.String("123456789012"), UserId: aws.String("AROAEXAMPLE:alice")}, nil
}

// Body reads an object's body (for assertions).
func (w *World) Body(bucket, key string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.Objects[bucket+"/"+key]
	if !ok {
		return "", false
	}
	return o.Body, true
}

// Tenant is a tenant descriptor as a tenant stack would output it, in account 123456789012.
func Tenant(id, policy string) pipeline.TenantOutput {
	return pipeline.TenantOutput{
		Version: pipeline.TenantOutputVersion, ID: id, Policy: policy, IdempotencyKey: pipeline.IdempotencyEventID,
		Bucket: "ingest", Prefix: "inbox/" + id + "/",
		QueueURL:               "https://sqs.eu-west-1.amazonaws.com/123456789012/" + id + ".fifo",
		QueueARN:               "arn:aws:sqs:eu-west-1:123456789012:" + id + ".fifo",
		StateMachineARN:        "arn:aws:states:eu-west-1:123456789012:stateMachine:" + id + "-files",
		SegmentStateMachineARN: "arn:aws:states:eu-west-1:123456789012:stateMachine:" + id + "-segments",
		ControllerFunction:     id + "-controller",
		EventSourceMappingUUID: "esm-" + id,
	}
}

// AddTenant adds the tenant's output to the stack (created if new), its queue (and dead-letter
// queue) and its enabled event source mapping.
func (w *World) AddTenant(stack string, t pipeline.TenantOutput) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, err := json.Marshal(t)
	if err != nil {
		panic(err)
	}
	out := cftypes.Output{OutputKey: aws.String(pipeline.TenantOutputKey(t.ID)), OutputValue: aws.String(string(v))}
	found := false
	for i := range w.Stacks {
		if aws.ToString(w.Stacks[i].StackName) == stack {
			w.Stacks[i].Outputs = append(w.Stacks[i].Outputs, out)
			found = true
		}
	}
	if !found {
		w.Stacks = append(w.Stacks, cftypes.Stack{StackName: aws.String(stack), Outputs: []cftypes.Output{out}})
	}
	if w.Env[t.ControllerFunction] == nil {
		settings, _ := json.Marshal(w.settingsOf(t.ID))
		w.Env[t.ControllerFunction] = map[string]string{pipeline.EnvTenant: string(settings)}
	}
	w.Queues[t.QueueURL] = &Queue{}
	if t.DLQURL != "" {
		w.Queues[t.DLQURL] = &Queue{}
	}
	w.Mappings = append(w.Mappings, lambdatypes.EventSourceMappingConfiguration{
		UUID: aws.String(t.EventSourceMappingUUID), State: aws.String("Enabled"), EventSourceArn: aws.String(t.QueueARN),
		FunctionArn: aws.String("arn:aws:lambda:eu-west-1:123456789012:function:" + t.ControllerFunction),
	})
}

// settingsOf is the settings of tenant id as AddTenant and AddPool deploy them.
func (w *World) settingsOf(id string) pipeline.Tenant {
	s := w.SettingsOf[id]
	s.ID = id
	if cs := w.CoreSystemOf[id]; cs != nil {
		s.CoreSystem = cs
	}
	return s
}

// AddExecution adds an execution of the tenant's file state machine for the key, started at start,
// and the key's object (written a minute earlier). A finished status stops it a minute after start;
// an unsuccessful one failed validation.
func (w *World) AddExecution(t pipeline.TenantOutput, name string, status sfntypes.ExecutionStatus, key string, start time.Time) *Execution {
	w.mu.Lock()
	defer w.mu.Unlock()
	in, err := json.Marshal(pipeline.WorkflowInput{Tenant: pipeline.Tenant{Tenant: spec.Tenant{ID: t.ID}}, Source: pipeline.Source{Bucket: t.Bucket, Key: key, VersionID: "v-" + name}})
	if err != nil {
		panic(err)
	}
	e := &Execution{Name: name, StateMachineARN: t.StateMachineARN, Status: status, Input: string(in), Start: start,
		RedriveStatus: sfntypes.ExecutionRedriveStatusNotRedrivable}
	if status != sfntypes.ExecutionStatusRunning {
		e.Stop = aws.Time(start.Add(time.Minute))
	}
	if status == sfntypes.ExecutionStatusFailed || status == sfntypes.ExecutionStatusTimedOut || status == sfntypes.ExecutionStatusAborted {
		e.RedriveStatus = sfntypes.ExecutionRedriveStatusRedrivable
		// As Step Functions records a Lambda task's failure: the cause is the function's JSON
		// error response.
		e.Error, e.Cause = "ValidationError", `{"errorMessage":"inbox/`+t.ID+`/bad.csv line 3: 2 fields, want 3","errorType":"ValidationError"}`
	}
	w.Executions = append(w.Executions, e)
	w.Objects[t.Bucket+"/"+key] = &Object{VersionID: "v-" + name, ETag: `"etag-` + name + `"`, Body: "id,name\n1,a\n", LastModified: start.Add(-time.Minute)}
	return e
}

// SmallFileHistory is the history of a small file's execution that succeeded in the SmallFile task
// (workflows.StateSmallFile) with records records: the FileSize choice, then the task, which
// leaves the records at $.split.records.
func SmallFileHistory(records int64) []sfntypes.HistoryEvent {
	out, err := json.Marshal(map[string]any{"split": map[string]int64{"records": records}})
	if err != nil {
		panic(err)
	}
	h := []sfntypes.HistoryEvent{
		{Type: sfntypes.HistoryEventTypeExecutionStarted},
		{Type: sfntypes.HistoryEventTypeChoiceStateEntered, StateEnteredEventDetails: &sfntypes.StateEnteredEventDetails{Name: aws.String("FileSize")}},
		{Type: sfntypes.HistoryEventTypeChoiceStateExited, StateExitedEventDetails: &sfntypes.StateExitedEventDetails{Name: aws.String("FileSize")}},
		{Type: sfntypes.HistoryEventTypeTaskStateEntered, StateEnteredEventDetails: &sfntypes.StateEnteredEventDetails{Name: aws.String("SmallFile")}},
		{Type: sfntypes.HistoryEventTypeLambdaFunctionScheduled},
		{Type: sfntypes.HistoryEventTypeLambdaFunctionStarted},
		{Type: sfntypes.HistoryEventTypeLambdaFunctionSucceeded},
		{Type: sfntypes.HistoryEventTypeTaskStateExited, StateExitedEventDetails: &sfntypes.StateExitedEventDetails{Name: aws.String("SmallFile"), Output: aws.String(string(out))}},
		{Type: sfntypes.HistoryEventTypeExecutionSucceeded},
	}
	for i := range h {
		h[i].Id = int64(i + 1)
	}
	return h
}

// OneSegmentHistory is the history of a file execution of one segment, which runs the segment's
// Register loop itself (workflows.StateOneSegment): Split's exit, then invocations Register tasks,
// each leaving its cursor at $.split.cursor, the last of which is done when done is set.
func OneSegmentHistory(records int64, invocations int, done bool) []sfntypes.HistoryEvent {
	h := SplitHistory(records, 1, 0)
	for i := range invocations {
		const name = "Register"
		out, err := json.Marshal(map[string]any{"split": pipeline.SplitResult{Records: records, Segments: make([]pipeline.Segment, 1),
			Cursor: &pipeline.Cursor{Chunk: i + 1, Done: done && i == invocations-1}}})
		if err != nil {
			panic(err)
		}
		h = append(h,
			sfntypes.HistoryEvent{Type: sfntypes.HistoryEventTypeTaskStateEntered, StateEnteredEventDetails: &sfntypes.StateEnteredEventDetails{Name: aws.String(name)}},
			sfntypes.HistoryEvent{Type: sfntypes.HistoryEventTypeLambdaFunctionSucceeded},
			sfntypes.HistoryEvent{Type: sfntypes.HistoryEventTypeTaskStateExited, StateExitedEventDetails: &sfntypes.StateExitedEventDetails{Name: aws.String(name), Output: aws.String(string(out))}})
	}
	for i := range h {
		h[i].Id = int64(i + 1)
	}
	return h
}

// SplitHistory is the history of a file execution that split records into segments of the default
// chunk size and registered done of them: Split's exit, then done MapIterationSucceeded events,
// padded with other events so that it spans several pages.
func SplitHistory(records int64, segments, done int) []sfntypes.HistoryEvent {
	segs := make([]pipeline.Segment, segments)
	out, err := json.Marshal(map[string]any{"split": pipeline.SplitResult{Records: records, Segments: segs}})
	if err != nil {
		panic(err)
	}
	h := []sfntypes.HistoryEvent{
		{Type: sfntypes.HistoryEventTypeExecutionStarted},
		{Type: sfntypes.HistoryEventTypeTaskStateEntered},
		{Type: sfntypes.HistoryEventTypeLambdaFunctionSucceeded},
		{Type: sfntypes.HistoryEventTypeTaskStateExited, StateExitedEventDetails: &sfntypes.StateExitedEventDetails{Name: aws.String("Split"), Output: aws.String(string(out))}},
	}
	for range done {
		for range 700 {
			h = append(h, sfntypes.HistoryEvent{Type: sfntypes.HistoryEventTypeTaskSubmitted})
		}
		h = append(h, sfntypes.HistoryEvent{Type: sfntypes.HistoryEventTypeMapIterationSucceeded})
	}
	for i := range h {
		h[i].Id = int64(i + 1)
	}
	return h
}
