package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// StatusReport is `pipectl status --json`. Fields that do not apply are null.
type StatusReport struct {
	Tenants []TenantStatus `json:"tenants"`
	// Pools are the pools of the pooled tenants reported, by name.
	Pools []PoolStatus `json:"pools"`
	// CoreSystems are the core systems the reported tenants name, by name (coresystems.go).
	CoreSystems []CoreSystemStatus `json:"coreSystems"`
}

// TenantStatus is one tenant's row.
type TenantStatus struct {
	ID string `json:"id"`
	// Tier is "silo" (the tenant's own stack) or "pool"; Pool is the pool's name, null for silo.
	Tier   string  `json:"tier"`
	Pool   *string `json:"pool"`
	Policy string  `json:"policy"`
	// Paused is, for a silo tenant, true while the controller's event source mapping is disabled
	// (or disabling), null if the mapping was not found; for a pooled tenant, true while its pause
	// marker exists (pipeline.PauseMarkerKey).
	Paused *bool `json:"paused"`
	// Blocked is true when a halt tenant stopped at a failed file that is neither redriven nor
	// skipped. A continue tenant is never blocked.
	Blocked     bool        `json:"blocked"`
	Queue       *QueueDepth `json:"queue"`
	Head        *Head       `json:"head"`
	LastFailure *Failure    `json:"lastFailure"`
	// Parked is, for a pooled tenant of a pool with a bound (maxQueuedFilesPerTenant), how many of
	// its files wait outside the pool queue under control/<tenant>/parked/, and QueuedFiles how many
	// of its messages the bound counts in the queue (docs/operations.md, "Parked files"); null
	// otherwise.
	Parked      *int64 `json:"parked"`
	QueuedFiles *int   `json:"queuedFiles"`
	// Next are the pipectl commands that release a blocked tenant (FailedFileCommands, the ones
	// the local run prints at a halt); null when the tenant is not blocked.
	Next []string `json:"next"`
	// Sequence is a sequenced tenant's place in its sequence (sequence.go); null for a tenant
	// without a sequence.
	Sequence *SequenceStatus `json:"sequence"`
}

// QueueDepth is the queue's approximate message counts (GetQueueAttributes). A pooled tenant is one
// message group of its pool's queue, and SQS counts no group: Visible is null, and InFlight is 1
// when the controller is known to hold the tenant's head message (its file runs, it is blocked, or
// it is paused with a held message), null otherwise.
type QueueDepth struct {
	Visible  *int64 `json:"visible"`
	InFlight *int64 `json:"inFlight"`
}

// PoolStatus is one pool of the report.
type PoolStatus struct {
	Name      string   `json:"name"`
	Stack     string   `json:"stack"`
	Tenants   int      `json:"tenants"`
	TenantIDs []string `json:"tenantIds"`
	// Queue is the pool queue's counts, every tenant's messages together.
	Queue QueueDepth `json:"queue"`
	// OldestMessageAgeSeconds is a lower bound of the age of the pool queue's oldest message: the
	// oldest head file, since its upload, among the pool's tenants in the report whose head the
	// controller holds. pipectl reads no CloudWatch; the pool's ApproximateAgeOfOldestMessage is on
	// its dashboard and alarm. Null when no head is held.
	OldestMessageAgeSeconds *float64 `json:"oldestMessageAgeSeconds"`
	// MaxRunningFiles, RunningFiles and WaitingTenants are the pool gate's limit, the files
	// holding a lease in it, and the tenants waiting for it; null when the pool has no gate.
	MaxRunningFiles *int `json:"maxRunningFiles"`
	RunningFiles    *int `json:"runningFiles"`
	WaitingTenants  *int `json:"waitingTenants"`
	// UnroutedObjects counts the events on the pool's dead-letter queue of objects in its bucket
	// that no tenant's prefix holds, and UnroutedKeys names the newest of their keys, newest first
	// (at most 5); replay --from-dlq re-sends none of them. Both are null when the pool's stack
	// names no dead-letter queue.
	UnroutedObjects *int     `json:"unroutedObjects"`
	UnroutedKeys    []string `json:"unroutedKeys"`
}

// Head is the file (or replay/redrive) the tenant is working on or blocked at.
type Head struct {
	Key           string `json:"key"`
	ExecutionName string `json:"executionName"`
	Status        string `json:"status"`
	// QueuedSeconds is the time since the file's object version was written (its arrival); null if
	// S3 cannot tell.
	QueuedSeconds *float64 `json:"queuedSeconds"`
	// RunningSeconds is the time since the execution started or was last redriven; null unless running.
	RunningSeconds *float64 `json:"runningSeconds"`
	// Progress is shown in the table; the JSON shape has no field for it.
	Progress *Progress `json:"-"`
}

// Failure is the newest execution of the tenant that did not succeed.
type Failure struct {
	Key           string `json:"key"`
	ExecutionName string `json:"executionName"`
	// Status is shown in the table; the JSON shape has no field for it.
	Status string `json:"-"`
	// Error and Cause are Step Functions' own (DescribeExecution), kept as they are for tools that
	// read them; a Lambda's cause is its JSON error response.
	Error string `json:"error"`
	Cause string `json:"cause"`
	// ErrorType and ErrorMessage are what failed and why, read out of that response when the
	// cause is one (pipeline.FailureOf), else the error and the cause.
	ErrorType    string `json:"errorType"`
	ErrorMessage string `json:"errorMessage"`
}

// recentExecutions is how many of the newest executions status reads. Executions of one tenant
// run one at a time, so the blocking one is always the newest.
const recentExecutions = 20

// tenantState is what status, skip and redrive derive their answers from.
type tenantState struct {
	t        pipeline.TenantOutput
	queue    QueueDepth
	running  *sfntypes.ExecutionListItem // the tenant's running execution, if any
	recent   []sfntypes.ExecutionListItem
	blocking *sfntypes.ExecutionListItem // halt tenants only
}

// Status reports the given tenants, or every tenant if ids is empty; no tenant at all is an error.
func (o *Ops) Status(ctx context.Context, ids []string) (StatusReport, error) {
	all, err := o.Tenants(ctx)
	if err != nil {
		return StatusReport{}, err
	}
	var ts []pipeline.TenantOutput
	if len(ids) == 0 {
		if len(all) == 0 {
			// An empty table would read as "all is well".
			return StatusReport{}, &NoTenantsError{StackPrefix: o.StackPrefix}
		}
		ts = all
	}
	for _, id := range ids {
		t, err := o.pick(all, id)
		if err != nil {
			return StatusReport{}, err
		}
		ts = append(ts, t)
	}
	// Tenants are read side by side, a few at a time, each row in its place; the first error (in
	// tenant order) is reported.
	rows := make([]TenantStatus, len(ts))
	errs := make([]error, len(ts))
	pools := o.poolsOf(ts)
	poolRows := make([]PoolStatus, len(pools))
	poolErrs := make([]error, len(pools))
	for i, p := range pools {
		poolRows[i], poolErrs[i] = o.poolStatus(ctx, p)
	}
	sem := make(chan struct{}, statusParallelism)
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			rows[i], errs[i] = o.tenantStatus(ctx, t)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return StatusReport{}, fmt.Errorf("tenant %s: %w", ts[i].ID, err)
		}
	}
	for i, err := range poolErrs {
		if err != nil {
			return StatusReport{}, fmt.Errorf("pool %s: %w", pools[i].out.Pool, err)
		}
		for _, r := range rows {
			if r.Pool == nil || *r.Pool != poolRows[i].Name || r.Head == nil || r.Head.QueuedSeconds == nil {
				continue
			}
			if a := poolRows[i].OldestMessageAgeSeconds; a == nil || *r.Head.QueuedSeconds > *a {
				poolRows[i].OldestMessageAgeSeconds = r.Head.QueuedSeconds
			}
		}
	}
	cores, err := o.coreSystems(ctx, ts)
	if err != nil {
		return StatusReport{}, err
	}
	return StatusReport{Tenants: append([]TenantStatus{}, rows...), Pools: append([]PoolStatus{}, poolRows...), CoreSystems: cores}, nil
}

// poolStatus reads the pool queue's counts.
func (o *Ops) poolStatus(ctx context.Context, p poolInfo) (PoolStatus, error) {
	ids := poolTenantIDs(p)
	ps := PoolStatus{Name: p.out.Pool, Stack: p.stack, Tenants: len(ids), TenantIDs: ids}
	q, err := o.queueDepth(ctx, p.out.QueueURL)
	ps.Queue = q
	if err != nil {
		return ps, err
	}
	if p.out.DLQURL != "" && p.settings != nil {
		n, keys, err := o.unrouted(ctx, p)
		if err != nil {
			return ps, err
		}
		ps.UnroutedObjects, ps.UnroutedKeys = &n, append([]string{}, keys...)
	}
	return ps, o.poolGate(ctx, p, &ps)
}

// queueDepth reads a queue's approximate counts.
func (o *Ops) queueDepth(ctx context.Context, url string) (QueueDepth, error) {
	qa, err := o.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		return QueueDepth{}, fmt.Errorf("get queue attributes: %w", err)
	}
	visible, _ := strconv.ParseInt(qa.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)], 10, 64)
	inFlight, _ := strconv.ParseInt(qa.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)], 10, 64)
	return QueueDepth{Visible: &visible, InFlight: &inFlight}, nil
}

// statusParallelism is how many tenants status reads at once (each costs about eight API calls,
// and a sequenced tenant one GET and one LIST page per 1,000 held files more).
const statusParallelism = 8

func (o *Ops) tenantStatus(ctx context.Context, t pipeline.TenantOutput) (TenantStatus, error) {
	row := TenantStatus{ID: t.ID, Tier: tier(t), Policy: t.Policy}
	if t.Pool != "" {
		row.Pool = aws.String(t.Pool)
		paused, err := o.exists(ctx, t.Bucket, pipeline.PauseMarkerKey(t.Owner()))
		if err != nil {
			return row, err
		}
		row.Paused = &paused
		if err := o.backlogState(ctx, t, &row); err != nil {
			return row, err
		}
	} else {
		_, state, found, err := o.mapping(ctx, t)
		if err != nil {
			return row, err
		}
		if found {
			paused := state == "Disabled" || state == "Disabling"
			row.Paused = &paused
		}
	}
	st, err := o.state(ctx, t)
	if err != nil {
		return row, err
	}
	if t.Pool != "" && st.running == nil && st.blocking == nil && row.Paused != nil && *row.Paused {
		// A paused tenant's head, if it has one, is held with the wake state naming it.
		if ws, ok, err := o.wakeState(ctx, t); err != nil {
			return row, err
		} else if ok && ws.Paused {
			st.queue.InFlight = aws.Int64(1)
		}
	}
	row.Queue = &st.queue
	row.Blocked = st.blocking != nil
	switch {
	case st.running != nil:
		row.Head, err = o.head(ctx, t, *st.running, true)
	case st.blocking != nil:
		row.Head, err = o.head(ctx, t, *st.blocking, false)
	}
	if err != nil {
		return row, err
	}
	for _, e := range st.recent {
		if unsuccessful(e.Status) {
			d, err := o.describe(ctx, aws.ToString(e.ExecutionArn))
			if err != nil {
				return row, err
			}
			f := &Failure{Key: inputKey(d), ExecutionName: aws.ToString(e.Name), Status: string(d.Status),
				Error: aws.ToString(d.Error), Cause: aws.ToString(d.Cause)}
			f.ErrorType, f.ErrorMessage = pipeline.FailureOf(f.Error, f.Cause)
			row.LastFailure = f
			break
		}
	}
	if row.Blocked && row.Head != nil {
		// The blocking execution is the newest, so the last failure is its own.
		var errType string
		if f := row.LastFailure; f != nil && f.ExecutionName == row.Head.ExecutionName {
			errType = f.ErrorType
		}
		row.Next = FailedFileCommands(t.ID, t.Policy, row.Head.ExecutionName, errType)
	}
	r, err := o.sequenceRule(ctx, t)
	if err != nil || r == nil {
		return row, err
	}
	row.Sequence, err = o.sequenceStatus(ctx, t, *r)
	return row, err
}

// state reads the queue depth and the newest executions, and works out the blocking execution.
// ListExecutions is eventually consistent, which an operator's view can live with.
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_ListExecutions.html
func (o *Ops) state(ctx context.Context, t pipeline.TenantOutput) (tenantState, error) {
	st := tenantState{t: t}
	if t.Pool == "" {
		q, err := o.queueDepth(ctx, t.QueueURL)
		if err != nil {
			return st, err
		}
		st.queue = q
	}

	run, err := o.executions(ctx, t, sfntypes.ExecutionStatusRunning, 10)
	if err != nil {
		return st, fmt.Errorf("list running executions: %w", err)
	}
	if len(run) > 0 {
		st.running = &run[0]
	}
	all, err := o.executions(ctx, t, "", recentExecutions)
	if err != nil {
		return st, fmt.Errorf("list executions: %w", err)
	}
	st.recent = all

	// A halt tenant is blocked when nothing runs, its newest execution did not succeed, its message
	// is still queued, and no skip marker releases it. A pooled tenant's messages are not counted:
	// under halt the controller holds a failed file's message until it is redriven or skipped.
	queued := t.Pool != "" || *st.queue.Visible+*st.queue.InFlight > 0
	if t.Policy != pipeline.OnFailureHalt || st.running != nil || len(st.recent) == 0 || !unsuccessful(st.recent[0].Status) || !queued {
		if t.Pool != "" && st.running != nil {
			st.queue.InFlight = aws.Int64(1) // the controller holds the running file's message
		}
		return st, nil
	}
	newest := st.recent[0]
	skipped, err := o.exists(ctx, t.Bucket, skipMarkerKey(t.Owner(), aws.ToString(newest.Name)))
	if err != nil {
		return st, err
	}
	if !skipped {
		st.blocking = &newest
		if t.Pool != "" {
			st.queue.InFlight = aws.Int64(1) // the controller holds the failed file's message
		}
	}
	return st, nil
}

// head describes the execution at the head of the tenant.
func (o *Ops) head(ctx context.Context, t pipeline.TenantOutput, e sfntypes.ExecutionListItem, isRunning bool) (*Head, error) {
	d, err := o.describe(ctx, aws.ToString(e.ExecutionArn))
	if err != nil {
		return nil, err
	}
	h := &Head{Key: inputKey(d), ExecutionName: aws.ToString(e.Name), Status: string(d.Status)}
	now := o.Now()
	if isRunning && d.StartDate != nil {
		since := *d.StartDate
		if d.RedriveDate != nil && d.RedriveDate.After(since) {
			since = *d.RedriveDate
		}
		h.RunningSeconds = seconds(now.Sub(since).Seconds())
	}
	chunkSize := pipeline.DefaultChunkSize
	if in, ok := workflowInput(d); ok && in.Tenant.ChunkSize > 0 {
		chunkSize = in.Tenant.ChunkSize
	}
	h.Progress = o.progress(ctx, aws.ToString(e.ExecutionArn), chunkSize, true)
	if src, ok := inputSource(d); ok {
		in := &s3.HeadObjectInput{Bucket: aws.String(src.Bucket), Key: aws.String(src.Key)}
		if src.VersionID != "" {
			in.VersionId = aws.String(src.VersionID)
		}
		// Best effort: a form-encoded key from the event, or a deleted version, leaves it unknown.
		if obj, err := o.S3.HeadObject(ctx, in); err == nil && obj.LastModified != nil {
			h.QueuedSeconds = seconds(now.Sub(*obj.LastModified).Seconds())
		}
	}
	return h, nil
}

// mapping finds the controller's event source mapping for the tenant's queue.
// https://docs.aws.amazon.com/lambda/latest/api/API_ListEventSourceMappings.html
func (o *Ops) mapping(ctx context.Context, t pipeline.TenantOutput) (uuid, state string, found bool, err error) {
	in := &lambda.ListEventSourceMappingsInput{FunctionName: aws.String(t.ControllerFunction), EventSourceArn: aws.String(t.QueueARN)}
	for {
		out, err := o.Lambda.ListEventSourceMappings(ctx, in)
		if err != nil {
			return "", "", false, fmt.Errorf("list event source mappings of %s: %w", t.ControllerFunction, err)
		}
		for _, m := range out.EventSourceMappings {
			if t.EventSourceMappingUUID == "" || aws.ToString(m.UUID) == t.EventSourceMappingUUID {
				return aws.ToString(m.UUID), aws.ToString(m.State), true, nil
			}
		}
		if aws.ToString(out.NextMarker) == "" {
			return "", "", false, nil
		}
		in.Marker = out.NextMarker
	}
}

// describe describes an execution; a closed one is described once per Ops (a pooled tenant's look
// describes its pool's executions to find its own).
func (o *Ops) describe(ctx context.Context, arn string) (*sfn.DescribeExecutionOutput, error) {
	o.found.mu.Lock()
	d, ok := o.found.described[arn]
	o.found.mu.Unlock()
	if ok {
		return d, nil
	}
	d, err := o.StepFunctions.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
	if err != nil {
		return nil, fmt.Errorf("describe execution %s: %w", arn, err)
	}
	if d.Status != sfntypes.ExecutionStatusRunning && d.Status != sfntypes.ExecutionStatusPendingRedrive {
		o.found.mu.Lock()
		if o.found.described == nil {
			o.found.described = map[string]*sfn.DescribeExecutionOutput{}
		}
		o.found.described[arn] = d
		o.found.mu.Unlock()
	}
	return d, nil
}

// exists reports whether an object exists. S3 answers 404 for a missing key only to a caller that
// may list the bucket, 403 otherwise.
// https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html
func (o *Ops) exists(ctx context.Context, bucket, key string) (bool, error) {
	_, err := o.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if _, nf := errorsAs[*s3types.NotFound](err); nf {
		return false, nil
	}
	if _, nk := errorsAs[*s3types.NoSuchKey](err); nk {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("head s3://%s/%s: %w", bucket, key, err)
	}
	return true, nil
}

// workflowInput reads an execution's input (pipeline.WorkflowInput).
func workflowInput(d *sfn.DescribeExecutionOutput) (pipeline.WorkflowInput, bool) {
	var in pipeline.WorkflowInput
	if d.Input == nil || json.Unmarshal([]byte(*d.Input), &in) != nil {
		return pipeline.WorkflowInput{}, false
	}
	return in, true
}

// inputSource reads the file source from an execution's input.
func inputSource(d *sfn.DescribeExecutionOutput) (pipeline.Source, bool) {
	in, ok := workflowInput(d)
	return in.Source, ok && in.Source.Key != ""
}

func inputKey(d *sfn.DescribeExecutionOutput) string {
	src, _ := inputSource(d)
	return src.Key
}

func unsuccessful(s sfntypes.ExecutionStatus) bool {
	return s == sfntypes.ExecutionStatusFailed || s == sfntypes.ExecutionStatusTimedOut || s == sfntypes.ExecutionStatusAborted
}

func seconds(s float64) *float64 {
	s = float64(int64(s*10)) / 10 // tenths are enough for an operator
	return &s
}
