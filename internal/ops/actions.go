package ops

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/s3event"
)

// RedriveWindow is how long after it stopped an execution can be redriven: "Restarts unsuccessful
// executions of Standard workflows that didn't complete successfully in the last 14 days."
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_RedriveExecution.html
const RedriveWindow = 14 * 24 * time.Hour

// FilesReport is `pipectl files --json`: the tenant's recent files, newest first.
type FilesReport struct {
	Tenant string `json:"tenant"`
	Files  []File `json:"files"`
}

// File is one execution of the tenant's file state machine. Records is the count Split made, null
// before Split finished (or if the history cannot tell). Error is Step Functions' error name;
// ErrorType and ErrorMessage say what failed and why (pipeline.FailureOf); all three are null for a file
// that did not fail.
type File struct {
	Key           string     `json:"key"`
	ExecutionName string     `json:"executionName"`
	Status        string     `json:"status"`
	Records       *int64     `json:"records"`
	Start         *time.Time `json:"start"`
	Stop          *time.Time `json:"stop"`
	Error         *string    `json:"error"`
	ErrorType     *string    `json:"errorType"`
	ErrorMessage  *string    `json:"errorMessage"`
	// Registered and Rejected are the counts of the file's summary.json
	// (results/<tenant>/<execution>/summary.json); null while it has none of this run and status
	// (a redrive still running), or it cannot be read.
	Registered *int64 `json:"registered"`
	Rejected   *int64 `json:"rejected"`
	// Sequence is the file's value in a sequenced tenant's sequence (its execution input's, or
	// its summary's); null for a tenant without a sequence. Refusal is why a refused file (status
	// REFUSED, which started no execution: ExecutionName is the name it would have had) was not
	// registered: "unmatched", "duplicate" or "late"; null otherwise.
	Sequence *string `json:"sequence"`
	Refusal  *string `json:"refusal"`
}

// Files lists the tenant's newest limit executions (1–1000, one ListExecutions page).
func (o *Ops) Files(ctx context.Context, id string, limit int) (FilesReport, error) {
	t, err := o.Tenant(ctx, id)
	if err != nil {
		return FilesReport{}, err
	}
	execs, err := o.executions(ctx, t, "", limit)
	if err != nil {
		return FilesReport{}, fmt.Errorf("list executions: %w", err)
	}
	rep := FilesReport{Tenant: t.ID, Files: []File{}}
	for _, e := range execs {
		d, err := o.describe(ctx, aws.ToString(e.ExecutionArn))
		if err != nil {
			return FilesReport{}, err
		}
		f := File{Key: inputKey(d), ExecutionName: aws.ToString(e.Name), Status: string(e.Status), Start: e.StartDate, Stop: e.StopDate, Error: d.Error}
		if d.Error != nil || d.Cause != nil {
			errType, msg := pipeline.FailureOf(aws.ToString(d.Error), aws.ToString(d.Cause))
			f.ErrorType, f.ErrorMessage = &errType, &msg
		}
		if p := o.progress(ctx, aws.ToString(e.ExecutionArn), 0, false); p != nil {
			f.Records = &p.Records
		}
		if in, ok := workflowInput(d); ok && in.Source.Sequence != "" {
			f.Sequence = aws.String(in.Source.Sequence)
		}
		// A summary that cannot be read leaves the counts unknown; the listing goes on. A summary of
		// another run or status (an earlier end of a redriven execution) is not this file's now.
		sum, err := o.summary(ctx, t, f.ExecutionName)
		if err == nil && sum != nil && sum.Sequence != "" && f.Sequence == nil {
			f.Sequence = aws.String(sum.Sequence)
		}
		switch {
		case err != nil || sum == nil:
		case sum.Status == results.StatusRefused:
			// A refusal under the name of an execution that exists: the execution keeps its status,
			// and the refusal says what the summary says became of the file.
			f.Refusal = aws.String(sum.Refusal)
		case sum.Status == f.Status && sum.RedriveCount == int(aws.ToInt32(d.RedriveCount)):
			f.Registered, f.Rejected = &sum.Registered, &sum.Rejected
			if f.Records == nil && sum.Records > 0 {
				// A small file that failed in the SmallFile task: its history counts no records,
				// its results do.
				f.Records = &sum.Records
			}
		}
		rep.Files = append(rep.Files, f)
	}
	return o.withRefusals(ctx, t, rep, limit)
}

// withRefusals adds a sequenced tenant's newest refused files (from the index the controller
// keeps: one LIST and a GET each) to its files, newest first, and keeps the newest limit. A
// refused file starts no execution, so the listing of executions cannot find it.
func (o *Ops) withRefusals(ctx context.Context, t pipeline.TenantOutput, rep FilesReport, limit int) (FilesReport, error) {
	r, err := o.sequenceRule(ctx, t)
	if err != nil || r == nil {
		return rep, err
	}
	rs, err := o.sequenceStore(t, *r).Refusals(ctx, limit)
	if err != nil {
		return FilesReport{}, fmt.Errorf("tenant %s: its refused files: %w", t.ID, err)
	}
	for _, x := range rs {
		at := x.At
		f := File{Key: x.Key, ExecutionName: x.Execution, Status: results.StatusRefused, Stop: &at, Refusal: aws.String(x.Refusal)}
		if x.Sequence != "" {
			f.Sequence = aws.String(x.Sequence)
		}
		rep.Files = append(rep.Files, f)
	}
	when := func(f File) time.Time {
		if f.Start != nil {
			return *f.Start
		}
		if f.Stop != nil {
			return *f.Stop
		}
		return time.Time{}
	}
	slices.SortStableFunc(rep.Files, func(a, b File) int { return when(b).Compare(when(a)) })
	if len(rep.Files) > limit {
		rep.Files = rep.Files[:limit]
	}
	return rep, nil
}

// MappingResult is the outcome of pause and resume.
type MappingResult struct {
	Tenant string `json:"tenant"`
	// UUID is the controller's event source mapping; a pooled tenant's is its pool's, which pause
	// leaves enabled.
	UUID string `json:"eventSourceMappingUuid"`
	// State is the mapping's for a silo tenant. For a pooled tenant it is the tenant's message
	// group's: "Disabled" while its pause marker exists, "Enabled" otherwise.
	State string `json:"state"`
	// Changed is false when the tenant already was as asked.
	Changed bool   `json:"changed"`
	Tier    string `json:"tier"`
	// A pooled tenant's pause: the pool, the marker (s3://Bucket/MarkerKey), its version and who
	// wrote it (pause); Released is true when resume made the held message visible at once.
	Pool        string `json:"pool,omitempty"`
	Bucket      string `json:"bucket,omitempty"`
	MarkerKey   string `json:"markerKey,omitempty"`
	VersionID   string `json:"versionId,omitempty"`
	RequestedBy string `json:"requestedBy,omitempty"`
	Released    bool   `json:"released,omitempty"`
}

// SetPaused disables (pause) or enables (resume) the controller's event source mapping. While it
// is disabled Lambda reads nothing from the queue: files keep queuing, for the queue's retention.
// https://docs.aws.amazon.com/lambda/latest/api/API_UpdateEventSourceMapping.html
//
// A pooled tenant shares its pool's queue and mapping with the other tenants of the pool:
// disabling the mapping would pause them all, so its pause holds its message group instead
// (setPooledPaused). reason goes into a pooled tenant's pause record; a silo tenant's pause is
// recorded by CloudTrail (UpdateEventSourceMapping), which has no place for it. A silo tenant
// whose queue another tenant's descriptor also names is refused.
func (o *Ops) SetPaused(ctx context.Context, id string, paused bool, reason string) (MappingResult, error) {
	all, err := o.Tenants(ctx)
	if err != nil {
		return MappingResult{}, err
	}
	t, err := o.pick(all, id)
	if err != nil {
		return MappingResult{}, err
	}
	if t.Pool != "" {
		return o.setPooledPaused(ctx, t, paused, reason)
	}
	var sharing []string
	for _, u := range all {
		if u.ID != t.ID && u.QueueARN == t.QueueARN {
			sharing = append(sharing, u.ID)
		}
	}
	if len(sharing) > 0 {
		verb := map[bool]string{true: "pause", false: "resume"}[paused]
		return MappingResult{}, fmt.Errorf("tenant %s shares its queue %s with %d other tenant(s) (%s): it is a pooled tenant, and to %s its event source mapping would %s the whole pool; pausing one pooled tenant is not supported",
			id, t.QueueARN, len(sharing), strings.Join(sharing, ", "), verb, verb)
	}
	uuid, state, found, err := o.mapping(ctx, t)
	if err != nil {
		return MappingResult{}, err
	}
	if !found {
		return MappingResult{}, fmt.Errorf("tenant %s: no event source mapping of %s reads %s", id, t.ControllerFunction, t.QueueARN)
	}
	res := MappingResult{Tenant: id, UUID: uuid, State: state, Tier: tier(t)}
	isPaused := state == "Disabled" || state == "Disabling"
	if isPaused == paused {
		return res, nil
	}
	out, err := o.Lambda.UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{UUID: aws.String(uuid), Enabled: aws.Bool(!paused)})
	if err != nil {
		return res, fmt.Errorf("update event source mapping %s: %w", uuid, err)
	}
	res.State, res.Changed = aws.ToString(out.State), true
	return res, nil
}

// SkipResult is the outcome of skip.
type SkipResult struct {
	Tenant        string `json:"tenant"`
	ExecutionName string `json:"executionName"`
	Bucket        string `json:"bucket"`
	MarkerKey     string `json:"markerKey"`
	VersionID     string `json:"versionId"`
	RequestedBy   string `json:"requestedBy"`
}

// Skip writes the skip marker of the tenant's blocking execution. The body is the audit record:
// the reason on its first line (the controller logs its first 256 bytes), then who and when. The
// ingest bucket is versioned and CloudTrail records the write.
func (o *Ops) Skip(ctx context.Context, id, execution, reason string) (SkipResult, error) {
	if strings.TrimSpace(reason) == "" {
		return SkipResult{}, refuse("skip needs --reason: it is the audit record")
	}
	t, err := o.Tenant(ctx, id)
	if err != nil {
		return SkipResult{}, err
	}
	if t.Policy != pipeline.OnFailureHalt {
		return SkipResult{}, refuse("tenant %s has policy %s: a failed file never blocks it, nothing to skip", id, t.Policy)
	}
	st, err := o.state(ctx, t)
	if err != nil {
		return SkipResult{}, err
	}
	if st.blocking == nil {
		return SkipResult{}, refuse("tenant %s is not blocked: skip only releases the tenant's blocking execution", id)
	}
	if name := aws.ToString(st.blocking.Name); name != execution {
		return SkipResult{}, refuse("execution %s is not tenant %s's blocking execution (%s is)", execution, id, name)
	}
	who, err := o.caller(ctx)
	if err != nil {
		return SkipResult{}, err
	}
	now := o.Now().UTC()
	key := skipMarkerKey(t.Owner(), execution)
	body := fmt.Sprintf("%s\nrequested-by: %s\nrequested-at: %s\n", oneLine(reason), who, now.Format(time.RFC3339))
	out, err := o.S3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(t.Bucket), Key: aws.String(key), Body: strings.NewReader(body),
		ContentType: aws.String("text/plain; charset=utf-8"),
		Metadata:    map[string]string{"requested-by": who, "requested-at": now.Format(time.RFC3339)},
	})
	if err != nil {
		return SkipResult{}, fmt.Errorf("put s3://%s/%s: %w", t.Bucket, key, err)
	}
	return SkipResult{Tenant: id, ExecutionName: execution, Bucket: t.Bucket, MarkerKey: key, VersionID: aws.ToString(out.VersionId), RequestedBy: who}, nil
}

// RedriveResult is the outcome of redrive.
type RedriveResult struct {
	Tenant        string `json:"tenant"`
	ExecutionName string `json:"executionName"`
	// Mode is "redriven" (halt: RedriveExecution now) or "queued" (continue: a control message).
	Mode      string `json:"mode"`
	RequestID string `json:"requestId,omitempty"`
	MessageID string `json:"messageId,omitempty"`
	// DuplicatesAccepted is the accept-duplicates marker written (RedriveOptions.AcceptDuplicates).
	DuplicatesAccepted string `json:"duplicatesAccepted,omitempty"`
	// OutOfOrder is true when the file runs after later files of the tenant (--out-of-order); Later
	// names them (at most MaxLaterListed) and AuditKey is the audit record in its results folder.
	OutOfOrder bool        `json:"outOfOrder,omitempty"`
	Later      []LaterFile `json:"later,omitempty"`
	AuditKey   string      `json:"auditKey,omitempty"`
	// LaterCount and Queued are how many later files ran and how many are queued ahead of it.
	LaterCount int `json:"laterCount,omitempty"`
	Queued     int `json:"queued,omitempty"`
}

// RedriveOptions are redrive's flags.
type RedriveOptions struct {
	// Reason goes into the control message and the audit record.
	Reason string
	// Force also redrives a file that failed validation.
	Force bool
	// OutOfOrder allows a redrive that registers the file's records after later files' (the order
	// guard, orderguard.go); Reason is then required.
	OutOfOrder bool
	// AcceptDuplicates re-sends records first sent longer ago than the core system's
	// idempotencyRetention when it has no lookupUrl (--accept-duplicates): it writes the marker
	// Register reads (horizon.go).
	AcceptDuplicates bool
}

// Redrive is RedriveWith without an out-of-order permission.
func (o *Ops) Redrive(ctx context.Context, id, execution, reason string, force bool) (RedriveResult, error) {
	return o.RedriveWith(ctx, id, execution, RedriveOptions{Reason: reason, Force: force})
}

// RedriveWith resumes a failed file from its failed segment, never beside another file of the
// tenant. Under halt it redrives the blocking execution, which is the only one that may run. Under
// continue it sends a control message through the tenant's FIFO group; the controller redrives at
// the head. It refuses what Step Functions would refuse: an execution that is not redrivable, or
// that stopped more than 14 days ago; and one whose manifest or source version is gone. Unless
// Force is set, it also refuses a file that failed validation, which a redrive reads again and
// fails the same way. Unless OutOfOrder is set, it refuses a file that later files of the tenant
// passed (a continue tenant's failed file, a halt tenant's skipped one), naming them: its records
// would be registered after theirs. A halt tenant's file that is not its blocking one is redriven,
// when it may be, through the tenant's FIFO group as under continue.
func (o *Ops) RedriveWith(ctx context.Context, id, execution string, opt RedriveOptions) (RedriveResult, error) {
	t, err := o.Tenant(ctx, id)
	if err != nil {
		return RedriveResult{}, err
	}
	st, err := o.state(ctx, t)
	if err != nil {
		return RedriveResult{}, err
	}
	// direct: the halted tenant's blocking execution, redriven now; nothing started after it, as
	// the controller holds the tenant's group at it.
	direct := false
	if t.Policy == pipeline.OnFailureHalt {
		switch {
		case st.blocking == nil && execution == "":
			return RedriveResult{}, refuse("tenant %s is not blocked: under halt only the blocking execution is redriven", id)
		case st.blocking == nil:
			// A skipped (or otherwise passed) file of a halt tenant: the order guard decides.
		case execution != "" && execution != aws.ToString(st.blocking.Name):
			return RedriveResult{}, refuse("execution %s is not tenant %s's blocking execution (%s is); redriving it would run beside the tenant's order", execution, id, aws.ToString(st.blocking.Name))
		default:
			execution, direct = aws.ToString(st.blocking.Name), true
		}
	} else if execution == "" {
		for _, e := range st.recent {
			if unsuccessful(e.Status) {
				execution = aws.ToString(e.Name)
				break
			}
		}
		if execution == "" {
			return RedriveResult{}, refuse("tenant %s has no failed execution among its %d newest; name the execution", id, recentExecutions)
		}
	}
	arn := executionARN(t.StateMachineARN, execution)
	d, err := o.StepFunctions.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
	if _, nf := errorsAs[*sfntypes.ExecutionDoesNotExist](err); nf {
		return RedriveResult{}, refuse("tenant %s has no execution %s", id, execution)
	}
	if err != nil {
		return RedriveResult{}, fmt.Errorf("describe execution %s: %w", arn, err)
	}
	if err := ownExecution(t, d, execution); err != nil {
		return RedriveResult{}, err
	}
	if err := o.redrivable(d, execution); err != nil {
		return RedriveResult{}, err
	}
	if !opt.Force {
		if err := failedValidation(t, d, execution); err != nil {
			return RedriveResult{}, err
		}
	}
	if err := o.workFilesPresent(ctx, id, arn, execution); err != nil {
		return RedriveResult{}, err
	}
	res := RedriveResult{Tenant: id, ExecutionName: execution}
	var p passed
	if !direct {
		p, err = o.checkOrder(ctx, t, st, "redrive", execution, aws.ToTime(d.StartDate), OutOfOrder{Allowed: opt.OutOfOrder, Reason: opt.Reason})
		if err != nil {
			return RedriveResult{}, err
		}
	}
	// The idempotency horizon (horizon.go): refused, or the accepted duplicates' marker written.
	if res.DuplicatesAccepted, err = o.checkHorizon(ctx, t, execution, opt.Reason, opt.AcceptDuplicates); err != nil {
		return RedriveResult{}, err
	}
	res.RequestID = o.NewRequestID()
	if direct {
		_, err := o.StepFunctions.RedriveExecution(ctx, &sfn.RedriveExecutionInput{ExecutionArn: aws.String(arn), ClientToken: aws.String(res.RequestID)})
		if nr, ok := errorsAs[*sfntypes.ExecutionNotRedrivable](err); ok {
			return RedriveResult{}, refuse("Step Functions refuses to redrive %s: %s", execution, aws.ToString(nr.Message))
		}
		if err != nil {
			return RedriveResult{}, fmt.Errorf("redrive execution %s: %w", arn, err)
		}
		res.Mode = "redriven"
		return res, nil
	}
	m := pipeline.ControlMessage{Action: pipeline.ControlRedrive, ExecutionName: execution}
	if p.any() {
		rec, err := o.outOfOrderRecord(ctx, "redrive", execution, res.RequestID, opt.Reason, p)
		if err != nil {
			return RedriveResult{}, err
		}
		if err := o.writeOutOfOrder(ctx, t, rec); err != nil {
			return RedriveResult{}, err
		}
		m.OutOfOrder = true
		res.OutOfOrder, res.Later, res.AuditKey = true, p.later, results.Key(t.Owner(), execution, results.OutOfOrderFile)
		res.LaterCount, res.Queued = p.count, p.queued
	}
	res.MessageID, err = o.sendControl(ctx, t, &m, res.RequestID, opt.Reason)
	if err != nil {
		return RedriveResult{}, err
	}
	res.Mode = "queued"
	return res, nil
}

// redrivable refuses an execution Step Functions would not redrive.
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html#StepFunctions-DescribeExecution-response-redriveStatus
func (o *Ops) redrivable(d *sfn.DescribeExecutionOutput, name string) error {
	if !unsuccessful(d.Status) {
		return refuse("execution %s is %s: only FAILED, TIMED_OUT or ABORTED executions can be redriven", name, d.Status)
	}
	if d.RedriveStatus == sfntypes.ExecutionRedriveStatusNotRedrivable {
		return refuse("execution %s is not redrivable: %s", name, aws.ToString(d.RedriveStatusReason))
	}
	if d.StopDate != nil && o.Now().Sub(*d.StopDate) > RedriveWindow {
		return refuse("execution %s stopped %s, more than 14 days ago: Step Functions no longer redrives it", name, d.StopDate.UTC().Format(time.RFC3339))
	}
	return nil
}

// failedValidation refuses a redrive of a file that failed validation (pipeline.ValidationError):
// the redrive reads the same object version with the same rules and fails again, holding a halt
// tenant for nothing.
func failedValidation(t pipeline.TenantOutput, d *sfn.DescribeExecutionOutput, name string) error {
	errType, msg := pipeline.FailureOf(aws.ToString(d.Error), aws.ToString(d.Cause))
	if errType != pipeline.ErrValidation && aws.ToString(d.Error) != pipeline.ErrValidation {
		return nil
	}
	return validationRefusal(t, name, msg)
}

// ReplayResult is the outcome of replay.
type ReplayResult struct {
	Tenant        string `json:"tenant"`
	Key           string `json:"key,omitempty"`
	VersionID     string `json:"versionId,omitempty"`
	RequestID     string `json:"requestId,omitempty"`
	ExecutionName string `json:"executionName,omitempty"`
	// OriginalExecution is the execution that registered the version first, whose order the replay
	// takes (DynamoDB sink); empty when none was found, and the replay then only fills keys no item
	// holds.
	OriginalExecution string `json:"originalExecution,omitempty"`
	MessageID         string `json:"messageId,omitempty"`
	// Resent is the number of events re-sent from the dead-letter queue (--from-dlq).
	Resent int `json:"resent"`
	// Skipped counts dead-letter messages that were not S3 events of the tenant; they stay there.
	Skipped int `json:"skipped"`
	// OutOfOrder is true when the replay runs after later files of the tenant (--out-of-order),
	// which Later names (at most MaxLaterListed).
	OutOfOrder bool        `json:"outOfOrder,omitempty"`
	Later      []LaterFile `json:"later,omitempty"`
	LaterCount int         `json:"laterCount,omitempty"`
	Queued     int         `json:"queued,omitempty"`
}

// Replay is ReplayWith without an out-of-order permission.
func (o *Ops) Replay(ctx context.Context, id, key, versionID, reason string) (ReplayResult, error) {
	return o.ReplayWith(ctx, id, key, versionID, reason, false)
}

// ReplayWith registers an object version again, behind whatever is queued now, under a new
// execution name (so new Idempotency-Keys). Without versionID it pins the key's current version.
// Unless outOfOrder is set, it refuses when later files of the tenant ran after the version's
// original execution (or after the version was written, when none is found): the replay would
// register its records after theirs (orderguard.go).
func (o *Ops) ReplayWith(ctx context.Context, id, key, versionID, reason string, outOfOrder bool) (ReplayResult, error) {
	t, err := o.Tenant(ctx, id)
	if err != nil {
		return ReplayResult{}, err
	}
	if !strings.HasPrefix(key, t.Prefix) {
		return ReplayResult{}, refuse("key %s is outside tenant %s's prefix %s", key, id, t.Prefix)
	}
	in := &s3.HeadObjectInput{Bucket: aws.String(t.Bucket), Key: aws.String(key)}
	if versionID != "" {
		in.VersionId = aws.String(versionID)
	}
	obj, err := o.S3.HeadObject(ctx, in)
	if err != nil {
		return ReplayResult{}, headProblem(t.Bucket, key, versionID, err)
	}
	src := &pipeline.ControlSource{Bucket: t.Bucket, Key: key, VersionID: aws.ToString(obj.VersionId), ETag: aws.ToString(obj.ETag), Size: aws.ToInt64(obj.ContentLength)}
	if src.VersionID == "" {
		src.VersionID = versionID
	}
	if obj.LastModified != nil {
		src.LastModified = obj.LastModified.UTC().Format(time.RFC3339Nano)
	}
	if src.OriginalExecution, err = o.originalExecution(ctx, t, *src, obj.LastModified); err != nil {
		return ReplayResult{}, err
	}
	// The files that started after the version's original execution (itself not counted), or
	// after the version was written.
	since := aws.ToTime(obj.LastModified)
	if src.OriginalExecution != "" {
		d, err := o.describe(ctx, executionARN(t.StateMachineARN, src.OriginalExecution))
		if err != nil {
			return ReplayResult{}, err
		}
		since = aws.ToTime(d.StartDate)
	}
	st, err := o.state(ctx, t)
	if err != nil {
		return ReplayResult{}, err
	}
	p, err := o.checkOrder(ctx, t, st, "replay", key, since, OutOfOrder{Allowed: outOfOrder, Reason: reason})
	if err != nil {
		return ReplayResult{}, err
	}
	m := pipeline.ControlMessage{Action: pipeline.ControlReplay, Source: src}
	res := ReplayResult{Tenant: id, Key: key, VersionID: src.VersionID, RequestID: o.NewRequestID(), OriginalExecution: src.OriginalExecution}
	if p.any() {
		rec, err := o.outOfOrderRecord(ctx, "replay", pipeline.ReplayExecutionPrefix+res.RequestID, res.RequestID, reason, p)
		if err != nil {
			return ReplayResult{}, err
		}
		if err := o.writeOutOfOrder(ctx, t, rec); err != nil {
			return ReplayResult{}, err
		}
		m.OutOfOrder = true
		res.OutOfOrder, res.Later, res.LaterCount, res.Queued = true, p.later, p.count, p.queued
	}
	res.MessageID, err = o.sendControl(ctx, t, &m, res.RequestID, reason)
	if err != nil {
		return ReplayResult{}, err
	}
	res.ExecutionName = m.ReplayExecutionName()
	return res, nil
}

// headProblem says what a failed HeadObject of the object to replay means for the operator. A HEAD
// response has no body, so the SDK sees only the status: 404 for a missing key or an unknown
// version (NoSuchKey, NoSuchVersion), 400 for a version id S3 cannot read (InvalidArgument,
// "Invalid version id specified").
// https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html#ErrorCodeList
// https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html
func headProblem(bucket, key, versionID string, err error) error {
	_, notFound := errorsAs[*s3types.NotFound](err)
	if _, noKey := errorsAs[*s3types.NoSuchKey](err); noKey {
		notFound = true
	}
	status := 0
	if re, ok := errorsAs[*awshttp.ResponseError](err); ok {
		status = re.HTTPStatusCode()
	}
	list := fmt.Sprintf("aws s3api list-object-versions --bucket %s --prefix %s", bucket, key)
	switch {
	case (notFound || status == http.StatusNotFound) && versionID == "":
		return fmt.Errorf("no such object: s3://%s/%s", bucket, key)
	case notFound || status == http.StatusNotFound:
		return fmt.Errorf("no such object version: s3://%s/%s has no version %s (S3 answers 404); its versions: %s", bucket, key, versionID, list)
	case status == http.StatusBadRequest && versionID != "":
		return fmt.Errorf("version id %s is not valid for s3://%s/%s (S3 answers 400 InvalidArgument); its versions: %s", versionID, bucket, key, list)
	}
	return fmt.Errorf("head s3://%s/%s: %w", bucket, key, err)
}

// MaxOriginalSearch bounds the executions replay describes to find a version's original execution.
const MaxOriginalSearch = 1000

// originalExecution finds the tenant's oldest execution that registered the object version: the
// controller gives the replay that execution's order (docs/data-path.md, "Replays"). ListExecutions
// answers newest first, and an execution of the version started after the version was written, so
// the search stops at the first execution started more than a minute (clock skew) before
// written, or after MaxOriginalSearch descriptions. "" when none matches.
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_ListExecutions.html
func (o *Ops) originalExecution(ctx context.Context, t pipeline.TenantOutput, src pipeline.ControlSource, written *time.Time) (string, error) {
	var found string
	var token *string
	described := 0
	for {
		out, err := o.StepFunctions.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: aws.String(t.StateMachineARN), MaxResults: 100, NextToken: token})
		if err != nil {
			return "", fmt.Errorf("list executions to find the original of s3://%s/%s: %w", src.Bucket, src.Key, err)
		}
		for _, e := range out.Executions {
			if written != nil && e.StartDate != nil && e.StartDate.Before(written.Add(-time.Minute)) {
				return found, nil
			}
			if described == MaxOriginalSearch {
				return found, nil
			}
			described++
			d, err := o.describe(ctx, aws.ToString(e.ExecutionArn))
			if err != nil {
				return "", err
			}
			if in, ok := inputSource(d); ok && src.IsVersionOf(in) {
				found = aws.ToString(e.Name)
			}
		}
		if out.NextToken == nil {
			return found, nil
		}
		token = out.NextToken
	}
}

// dlqVisibility hides the dead-letter messages being re-sent from other readers meanwhile.
const (
	dlqVisibility = 300
	maxDLQ        = 10_000
)

// ReplayFromDLQ re-sends the S3 events on the EventBridge target's dead-letter queue to the tenant's
// queue, oldest event first, and deletes each from the dead-letter queue once it is sent. The event
// goes as EventBridge would have delivered it (MessageGroupId = tenant, MessageDeduplicationId = the
// event id), so the controller names its execution as for the original delivery.
// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html
func (o *Ops) ReplayFromDLQ(ctx context.Context, id string) (ReplayResult, error) {
	t, err := o.Tenant(ctx, id)
	if err != nil {
		return ReplayResult{}, err
	}
	if t.DLQURL == "" {
		return ReplayResult{}, refuse("tenant %s's stack names no dead-letter queue for its rule target", id)
	}
	type dead struct {
		msg sqstypes.Message
		ev  s3event.Event
	}
	var events []dead
	res := ReplayResult{Tenant: id}
	for len(events)+res.Skipped < maxDLQ {
		out, err := o.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(t.DLQURL), MaxNumberOfMessages: 10, VisibilityTimeout: dlqVisibility, WaitTimeSeconds: 1,
		})
		if err != nil {
			return res, fmt.Errorf("receive from %s: %w", t.DLQURL, err)
		}
		if len(out.Messages) == 0 {
			break
		}
		for _, m := range out.Messages {
			ev, err := s3event.Parse([]byte(aws.ToString(m.Body)))
			if err != nil || ev.Detail.Bucket.Name != t.Bucket || !strings.HasPrefix(ev.Detail.Object.Key, t.Prefix) {
				res.Skipped++
				continue
			}
			events = append(events, dead{m, ev})
		}
	}
	slices.SortStableFunc(events, func(a, b dead) int { return arrivalOrder(a.ev, b.ev) })
	for _, d := range events {
		// Into a pool, each event goes through the tenant's bound, as the router sends it (backlog.go).
		if _, _, err := o.sendCounted(ctx, t, aws.ToString(d.msg.Body), dedupID(d.ev.ID)); err != nil {
			return res, fmt.Errorf("send event %s to %s (%d re-sent before it): %w", d.ev.ID, t.QueueURL, res.Resent, err)
		}
		res.Resent++
		if _, err := o.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(t.DLQURL), ReceiptHandle: d.msg.ReceiptHandle}); err != nil {
			return res, fmt.Errorf("delete event %s from the dead-letter queue after re-sending it: %w", d.ev.ID, err)
		}
	}
	return res, nil
}

// arrivalOrder orders S3 events as they arrived: by event time, then by S3 sequencer, compared as
// AWS says, left-padded to equal length (pipeline.CompareSequencers). AWS defines the sequencer's
// order for events of one key only; using it for every pair keeps the comparison a strict weak
// ordering, which a sort needs (comparing it for one key only would make "unordered"
// intransitive: a~b and b~c with a<c). Events equal on both keep the order they were received in.
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html
func arrivalOrder(a, b s3event.Event) int {
	if c := a.Time.Compare(b.Time); c != 0 {
		return c
	}
	return pipeline.CompareSequencers(a.Detail.Object.Sequencer, b.Detail.Object.Sequencer)
}

// sendControl fills in the control message's common fields and sends it through the tenant's FIFO
// group, deduplicated by its request id.
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html
func (o *Ops) sendControl(ctx context.Context, t pipeline.TenantOutput, m *pipeline.ControlMessage, requestID, reason string) (string, error) {
	who, err := o.caller(ctx)
	if err != nil {
		return "", err
	}
	m.Type, m.Version, m.Tenant = pipeline.ControlType, pipeline.ControlVersion, t.ID
	if m.OutOfOrder {
		m.Version = pipeline.ControlVersionOutOfOrder
	}
	m.RequestedBy, m.Reason, m.RequestedAt, m.RequestID = who, oneLine(reason), o.Now().UTC(), requestID
	body, err := pipeline.EncodeControl(*m)
	if err != nil {
		return "", err
	}
	if pipeline.NeedsRecord(m.Action) {
		if body, err = o.recordControl(ctx, t, body, requestID); err != nil {
			return "", err
		}
	}
	var id string
	if m.Action == pipeline.ControlReplay {
		// A replay is a file: into a pool it goes through the tenant's bound (backlog.go).
		id, _, err = o.sendCounted(ctx, t, string(body), requestID)
	} else {
		id, err = o.send(ctx, t, string(body), requestID)
	}
	if err != nil {
		return "", fmt.Errorf("send control message to %s: %w", t.QueueURL, err)
	}
	return id, nil
}

// send puts a message on the tenant's queue in its message group.
func (o *Ops) send(ctx context.Context, t pipeline.TenantOutput, body, dedupID string) (string, error) {
	out, err := o.SQS.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(t.QueueURL), MessageBody: aws.String(body),
		MessageGroupId: aws.String(t.ID), MessageDeduplicationId: aws.String(dedupID),
	})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.MessageId), nil
}

// caller is the ARN of the identity pipectl runs as, asked once per Ops (a bulk action audits
// every tenant's action with it).
// https://docs.aws.amazon.com/STS/latest/APIReference/API_GetCallerIdentity.html
func (o *Ops) caller(ctx context.Context) (string, error) {
	o.found.mu.Lock()
	who := o.found.caller
	o.found.mu.Unlock()
	if who != "" {
		return who, nil
	}
	out, err := o.STS.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", fmt.Errorf("get caller identity: %w", err)
	}
	o.found.mu.Lock()
	o.found.caller = aws.ToString(out.Arn)
	o.found.mu.Unlock()
	return aws.ToString(out.Arn), nil
}

// executionARN is the ARN of the state machine's execution called name.
func executionARN(stateMachineARN, name string) string {
	return strings.Replace(stateMachineARN, ":stateMachine:", ":execution:", 1) + ":" + name
}

// dedupID fits an event id into SQS's 128-character deduplication id.
func dedupID(id string) string {
	if len(id) > 128 {
		return id[:128]
	}
	return id
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
