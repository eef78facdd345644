package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/s3event"
	"github.com/example/tenantpipeline/internal/sequence"
)

// The small slices of the SDK clients the controller uses.
type (
	stepFunctions interface {
		DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, optFns ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error)
		StartExecution(ctx context.Context, in *sfn.StartExecutionInput, optFns ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error)
		GetExecutionHistory(ctx context.Context, in *sfn.GetExecutionHistoryInput, optFns ...func(*sfn.Options)) (*sfn.GetExecutionHistoryOutput, error)
		StopExecution(ctx context.Context, in *sfn.StopExecutionInput, optFns ...func(*sfn.Options)) (*sfn.StopExecutionOutput, error)
	}
	queue interface {
		ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	}
	objectStore interface {
		PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
		GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	}
)

var (
	_ stepFunctions = (*sfn.Client)(nil)
	_ queue         = (*sqs.Client)(nil)
	_ objectStore   = (*s3.Client)(nil)
)

const (
	// deadlineMargin is the time the handler keeps in hand before the invocation deadline: in-process
	// polling stops this early, leaving room to change visibility and return.
	deadlineMargin = 5 * time.Second
	// maxPollInterval caps the in-process polling interval.
	maxPollInterval = 5 * time.Second
)

// Handler is the controller: it holds each file's message in flight until that file's execution has
// finished, which keeps the tenant's FIFO message group locked (docs/controller.md).
type Handler struct {
	cfg     Config
	sfn     stepFunctions
	sqs     queue
	s3      objectStore
	log     *slog.Logger
	metrics *metrics.Emitter
	now     func() time.Time
	sleep   func(context.Context, time.Duration) error
	// throttleBackoff draws the wait of a throttled delivery (throttle.go).
	throttleBackoff retry.BackoffDelayer
	// admission decides when a file may start (admission.go); nil: no admission.
	admission admitter
	// coreMetrics is the emitter of a core system's gate metrics; nil: none.
	coreMetrics func(coreSystem string) *metrics.Emitter
	// events puts the File Processed events (fileevent.go); nil: none.
	events eventBus
	// results invokes the results task of a failed file (results.go); nil: none.
	results functionInvoker
	// head is the tenant's last health line (headmetrics.go); nil: every line is written.
	head *headLine
	// fileSender sends a file's message back to the tenant's group (sequence.go); nil: SendMessage
	// on the tenant's queue. A pool with a bounded backlog counts it there.
	fileSender func(ctx context.Context, dedupID, body string) error
}

// newHandler wires a Handler. cfg must come from ConfigFromEnv.
func newHandler(cfg Config, sf stepFunctions, q queue, s objectStore, log *slog.Logger, m *metrics.Emitter) *Handler {
	return &Handler{cfg: cfg, sfn: sf, sqs: q, s3: s, log: log, metrics: m, now: time.Now, sleep: sleepContext,
		throttleBackoff: retry.NewExponentialJitterBackoff(cfg.MaxWait), head: &headLine{}}
}

// Handle processes the records in order. On the first record that must wait or could not be
// processed, it reports that record and every later one as batch item failures, so nothing
// overtakes the tenant's head file. A wait is never an error: the returned error is non-nil only
// for a fault of the controller itself.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	if h.cfg.executionPrefix == "" || h.cfg.Tenant.ID == "" {
		return resp, errors.New("controller is not configured: build its Config with ConfigFromEnv")
	}
	pollUntil := h.pollDeadline(ctx)
	ctx = withInvoked(ctx, h.now())
	for i, rec := range ev.Records {
		d := h.process(ctx, rec, pollUntil)
		if d.release {
			continue
		}
		for _, r := range ev.Records[i:] {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
		// Later records of the group come back no earlier than the head, so the group stays in order
		// and is not held locked by a message nobody looked at.
		for _, r := range ev.Records[i+1:] {
			h.log.InfoContext(ctx, "held behind an earlier message", "tenant", h.cfg.Tenant.ID, "messageId", r.MessageId,
				"headMessageId", rec.MessageId, "nextWaitSeconds", d.wait.Seconds())
			h.changeVisibility(ctx, r, d.wait)
		}
		break
	}
	return resp, nil
}

// decision is what happens to one record: released (the event source mapping deletes it) or kept
// in flight for wait.
type decision struct {
	release bool
	wait    time.Duration
}

var released = decision{release: true}

// delivery is one record being processed, with the context every log line of it carries.
type delivery struct {
	rec     events.SQSMessage
	attempt int
	log     *slog.Logger
	metrics []metrics.Metric
	exec    *sfn.DescribeExecutionOutput // the file's execution, once known (headMetrics)
	// armed: the wake-up state names this delivery (wake.go). visibility: the visibility timeout
	// already set on it, if any. started: this delivery started the file's execution.
	armed      bool
	visibility time.Duration
	started    bool
	// admitted: the file holds its running-file slots (admission.go).
	admitted bool
	// received is the latest the message can have been received (receivedAt): a hold is counted
	// from it.
	received time.Time
	// sequence is a sequenced tenant's file whose turn it is (sequence.go): its release moves the
	// tenant's sequence on. tick: the delivery is the tenant's sequence tick.
	sequence *sequence.Entry
	tick     bool
}

func (d *delivery) count(name string) { d.metrics = append(d.metrics, metrics.Count(name, 1)) }

// owner is whose keys the handler reads and writes: its tenant, in its pool.
func (h *Handler) owner() pipeline.Owner { return pipeline.PoolOwner(h.cfg.KeysPool, h.cfg.Tenant.ID) }

func (h *Handler) process(ctx context.Context, rec events.SQSMessage, pollUntil time.Time) decision {
	d := &delivery{
		rec:     rec,
		attempt: receiveCount(rec),
		log:     h.log.With("tenant", h.cfg.Tenant.ID, "messageId", rec.MessageId),
		tick:    strings.HasSuffix(rec.Attributes["MessageGroupId"], pipeline.TickGroupSuffix),
	}
	d.received = receivedAt(ctx, rec, d.attempt, h.now())
	d.log = d.log.With("attempt", d.attempt)
	defer func() {
		if !d.tick {
			d.metrics = append(d.metrics, h.headMetrics(d)...)
		}
		if err := h.metrics.Emit(d.metrics...); err != nil {
			d.log.WarnContext(ctx, "metrics not written", "error", err)
		}
	}()
	dec := h.decide(ctx, d, pollUntil)
	if dec.release && d.sequence != nil {
		// A sequenced tenant's file is released only once its sequence moved on, so that the next
		// held file is never left waiting for a release that happened.
		if err := h.sequenceDone(ctx, d.log, *d.sequence); err != nil {
			return h.serviceError(ctx, d, "move the tenant's sequence on", err)
		}
	}
	return dec
}

// decide is what becomes of one delivery.
func (h *Handler) decide(ctx context.Context, d *delivery, pollUntil time.Time) decision {
	rec := d.rec
	if d.tick {
		return h.tickDelivery(ctx, d)
	}

	// A pooled tenant's pause holds what would start something. With admission, a file's pause is
	// read just before its start (admitFile), so a waiting file reads nothing and a running one
	// goes on renewing its slots.
	isControl := pipeline.IsControl([]byte(rec.Body))
	if !h.admits() || isControl {
		if held, ok := h.pausedHold(ctx, d); ok { // paused.go
			return held
		}
	}
	if isControl {
		return h.control(ctx, d) // control.go
	}
	ev, err := s3event.Parse([]byte(rec.Body))
	if err == nil {
		err = h.belongs(ev)
	}
	if err != nil {
		return h.quarantine(ctx, d, err)
	}

	name := executionName(h.cfg.IdempotencyKey, ev)
	arn := h.cfg.ExecutionARN(name)
	d.log = d.log.With("key", ev.Detail.Object.Key, "executionName", name)
	if dec, done := h.sequenceFile(ctx, d, ev, name, arn); done {
		return dec
	}

	var st *sfn.DescribeExecutionOutput
	if h.admits() {
		dec, held, ok := h.admitFile(ctx, d, name, d.attempt == 1)
		switch {
		case !ok:
			return held
		case dec.Unknown || dec.Held:
			// The file's execution may exist: look it up as usual.
		default:
			// Admitted now: no delivery started it before (see admission.go).
			if h.cfg.WakeEvents {
				h.arm(ctx, d, name, arn)
			}
			st, err = h.start(ctx, d, ev, name, arn)
			return h.afterLookup(ctx, d, name, arn, st, err, pollUntil)
		}
	}
	if h.cfg.WakeEvents {
		st, how, err := h.wokenSucceeded(ctx, d, name, arn)
		if err != nil {
			return h.serviceError(ctx, d, "confirm the recorded end of the file's execution", err)
		}
		if how != "" {
			if err := h.releaseLeases(ctx, d.log, name); err != nil {
				return h.serviceError(ctx, d, "release the file's running-file slots", err)
			}
			// A record alone is written only once the end was announced (fileevent.go).
			if how == releasedConfirmed {
				if err := h.announceEnd(ctx, d, name, arn, st); err != nil {
					return h.serviceError(ctx, d, "announce the file's end", err)
				}
			}
			d.exec = st
			d.log.InfoContext(ctx, "file done (recorded from its status event, "+how+")", "executionArn", arn, "status", string(st.Status),
				"executionSeconds", runSeconds(st))
			d.count(metrics.Completions)
			d.count(metrics.WakeReleases)
			return released
		}
		h.arm(ctx, d, name, arn)
	}
	name, arn, st, err = h.lookup(ctx, d, ev, name, arn)
	return h.afterLookup(ctx, d, name, arn, st, err, pollUntil)
}

// afterLookup decides on the file once its execution has been looked up or started.
func (h *Handler) afterLookup(ctx context.Context, d *delivery, name, arn string, st *sfn.DescribeExecutionOutput, err error, pollUntil time.Time) decision {
	if held, ok := admissionHeldOf(err); ok {
		return held
	}
	// With wake-up events, only the delivery that started the execution polls: every describe
	// counts against the account's DescribeExecution quota (docs/controller.md, "Call budget").
	if err == nil && (!h.cfg.WakeEvents || d.started) {
		st, err = h.poll(ctx, d, arn, st, pollUntil)
	}
	if err != nil {
		return h.serviceError(ctx, d, "look up or start the file's execution", err)
	}
	d.exec = st

	switch st.Status {
	case sfntypes.ExecutionStatusRunning, sfntypes.ExecutionStatusPendingRedrive:
		if !d.started {
			h.renewLeases(ctx, d, name)
		}
		wait := h.runningWait(d)
		d.log.InfoContext(ctx, "waiting for the file's execution", "status", string(st.Status), "nextWaitSeconds", wait.Seconds())
		d.count(metrics.Waits)
		return h.hold(ctx, d, wait)
	case sfntypes.ExecutionStatusSucceeded:
		if err := h.releaseLeases(ctx, d.log, name); err != nil {
			return h.serviceError(ctx, d, "release the file's running-file slots", err)
		}
		if err := h.announceEnd(ctx, d, name, arn, st); err != nil {
			return h.serviceError(ctx, d, "announce the file's end", err)
		}
		d.log.InfoContext(ctx, "file done", "executionArn", arn, "status", string(st.Status), "executionSeconds", runSeconds(st))
		d.count(metrics.Completions)
		return released
	case sfntypes.ExecutionStatusFailed, sfntypes.ExecutionStatusTimedOut, sfntypes.ExecutionStatusAborted:
		return h.failed(ctx, d, name, arn, st)
	default:
		return h.serviceError(ctx, d, "read the execution status", fmt.Errorf("unknown execution status %q", st.Status))
	}
}

// belongs checks that an event is about this tenant's files. Anything else reached this queue by
// mistake and can never be processed here.
func (h *Handler) belongs(ev s3event.Event) error {
	if b := ev.Detail.Bucket.Name; b != h.cfg.Bucket {
		return fmt.Errorf("event is for bucket %q, want %q", b, h.cfg.Bucket)
	}
	if k := ev.Detail.Object.Key; !strings.HasPrefix(k, h.cfg.TenantPrefix) {
		return fmt.Errorf("object key %q is outside the tenant prefix %q", k, h.cfg.TenantPrefix)
	}
	return nil
}

// describe returns the execution's description; a missing execution is an error isNotFound accepts.
func (h *Handler) describe(ctx context.Context, arn string) (*sfn.DescribeExecutionOutput, error) {
	return h.sfn.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
}

// errNotYetVisible is a name StartExecution calls taken that DescribeExecution does not find yet.
var errNotYetVisible = errors.New("execution name is taken but the execution cannot be described yet")

func isNotFound(err error) bool {
	var nf *sfntypes.ExecutionDoesNotExist
	return errors.As(err, &nf)
}

// start starts the file's execution. A name that is already taken is answered by describing that
// execution, never by assuming how it went. StartExecution with the name and input of a running
// execution succeeds without starting another one, so a repeated start is harmless.
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html
//
// A DynamoDB tenant's file takes the tenant's next order first (order.go): only here, when the
// execution is not known to exist, so a delivery that finds it never takes another.
func (h *Handler) start(ctx context.Context, d *delivery, ev s3event.Event, name, arn string) (*sfn.DescribeExecutionOutput, error) {
	if h.admits() && !d.admitted {
		if dec, held, ok := h.admitFile(ctx, d, name, true); !ok {
			return nil, &admissionWaitError{dec: dec, held: held}
		}
	}
	in := h.fileInput(ev)
	in.Admitted = h.now().UTC().Format(time.RFC3339Nano)
	if d.sequence != nil {
		in.Source.Sequence = d.sequence.Value
	}
	if h.ordered() {
		order, err := h.nextOrder(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("take the tenant's next order: %w", err)
		}
		in.Source.Order = order
		d.log.InfoContext(ctx, "order taken", "order", order)
	}
	return h.startInput(ctx, d, in, name, arn)
}

// fileInput is the workflow input of the file the event is about.
func (h *Handler) fileInput(ev s3event.Event) pipeline.WorkflowInput {
	o := ev.Detail.Object
	return pipeline.WorkflowInput{
		Tenant: h.cfg.Tenant,
		Source: pipeline.Source{
			Bucket:    ev.Detail.Bucket.Name,
			Key:       o.Key,
			VersionID: o.VersionID,
			ETag:      o.ETag,
			Size:      o.Size,
			Sequencer: o.Sequencer,
			EventTime: eventTime(ev),
		},
		EventID: ev.ID,
	}
}

// startInput starts the execution name with the input.
func (h *Handler) startInput(ctx context.Context, d *delivery, in pipeline.WorkflowInput, name, arn string) (*sfn.DescribeExecutionOutput, error) {
	if h.cfg.InputWithoutURLs {
		in.Tenant = in.Tenant.WithoutURLs()
	}
	input, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encode workflow input: %w", err)
	}
	out, err := h.sfn.StartExecution(ctx, &sfn.StartExecutionInput{
		StateMachineArn: aws.String(h.cfg.StateMachineARN),
		Name:            aws.String(name),
		Input:           aws.String(string(input)),
	})
	var exists *sfntypes.ExecutionAlreadyExists
	switch {
	case errors.As(err, &exists):
		d.log.InfoContext(ctx, "execution name already used; continuing from its status", "executionArn", arn)
		st, err := h.describe(ctx, arn)
		if isNotFound(err) {
			return nil, fmt.Errorf("execution %s: %w", arn, errNotYetVisible)
		}
		return st, err
	case err != nil:
		return nil, fmt.Errorf("start execution %s: %w", arn, err)
	}
	d.log.InfoContext(ctx, "execution started", "executionArn", aws.ToString(out.ExecutionArn))
	d.count(metrics.Starts)
	d.started = true
	return &sfn.DescribeExecutionOutput{ExecutionArn: out.ExecutionArn, Status: sfntypes.ExecutionStatusRunning, StartDate: out.StartDate}, nil
}

// poll describes a running execution until it finishes or until is reached, so that a short
// workflow's next file starts without a round trip through the queue.
func (h *Handler) poll(ctx context.Context, d *delivery, arn string, st *sfn.DescribeExecutionOutput, until time.Time) (*sfn.DescribeExecutionOutput, error) {
	interval := min(h.cfg.FirstWait, maxPollInterval)
	for running(st.Status) && !h.now().Add(interval).After(until) {
		if err := h.sleep(ctx, interval); err != nil {
			return st, nil // the invocation is ending: hand the message back as a normal wait
		}
		next, err := h.describe(ctx, arn)
		if throttledErr(err) {
			// The execution was RUNNING a moment ago: stop polling and wait for it as usual.
			d.log.WarnContext(ctx, "Step Functions throttled the call; polling stopped", "call", "DescribeExecution", "error", err)
			d.count(metrics.Throttles)
			return st, nil
		}
		if err != nil {
			return nil, fmt.Errorf("describe execution %s: %w", arn, err)
		}
		st = next
		interval = min(2*interval, maxPollInterval)
	}
	return st, nil
}

func running(s sfntypes.ExecutionStatus) bool {
	return s == sfntypes.ExecutionStatusRunning || s == sfntypes.ExecutionStatusPendingRedrive
}

// pollDeadline is when in-process polling must stop: after the poll budget, and never later than
// deadlineMargin before the invocation's deadline.
func (h *Handler) pollDeadline(ctx context.Context) time.Time {
	until := h.now().Add(h.cfg.PollBudget)
	if dl, ok := ctx.Deadline(); ok {
		if limit := h.now().Add(time.Until(dl) - deadlineMargin); limit.Before(until) {
			until = limit
		}
	}
	return until
}

// failed applies the tenant's failure policy to a file whose execution FAILED, TIMED_OUT or was
// ABORTED. A stopped file, and a failed one whose last Register attempt had an unknown outcome or
// whose segment execution still runs, is released only once none of its invocations can still run
// (stopped).
func (h *Handler) failed(ctx context.Context, d *delivery, name, arn string, st *sfn.DescribeExecutionOutput) decision {
	// The error name only: the cause is free text from the workflow and could quote record data.
	attrs := []any{"executionArn", arn, "status", string(st.Status), "executionError", aws.ToString(st.Error), "policy", h.cfg.OnFailure}
	if err := h.announceEnd(ctx, d, name, arn, st); err != nil {
		return h.serviceError(ctx, d, "announce the file's end", err)
	}
	// A file whose Register invocation may still be running (stopped, or its last attempt's outcome
	// unknown) keeps its slots until nothing of it can write to the core system any more
	// (stopped.go); then its slots go to the next file, of this tenant or another, also while a
	// halted tenant waits for its operator.
	if h.cfg.OnFailure == pipeline.OnFailureContinue {
		if held, ok := h.stopped(ctx, d, arn, st); ok {
			return held
		}
		if err := h.releaseLeases(ctx, d.log, name); err != nil {
			return h.serviceError(ctx, d, "release the file's running-file slots", err)
		}
		d.log.ErrorContext(ctx, "file failed; the tenant moves on to its next file", attrs...)
		d.count(metrics.FailedFiles)
		return released
	}
	if h.haltedMayStillWrite(st) {
		// Kept, and renewed on each recheck, so that the reconciler does not take it for lost.
		h.renewLeases(ctx, d, name)
	} else if err := h.releaseLeases(ctx, d.log, name); err != nil {
		return h.serviceError(ctx, d, "release the file's running-file slots", err)
	}
	return h.halted(ctx, d, name, arn, st, attrs)
}

// haltedMayStillWrite reports whether a halted tenant's failed file may still have a Register
// invocation running, without the look into its history that the operator's skip makes
// (stopped): a TIMED_OUT or ABORTED file's segment may run on, so its slots are kept until the
// operator's skip or redrive; a FAILED file whose error can come from its segment, or from a
// Register attempt of its own of unknown outcome (the SmallFile task, the Register loop of a file
// of one segment), keeps them until its last invocation has certainly ended (the stop plus the
// Register timeout plus the margin). The rare failed file whose segment runs on after a failed
// start is seen only at the skip.
func (h *Handler) haltedMayStillWrite(st *sfn.DescribeExecutionOutput) bool {
	switch {
	case st.Status == sfntypes.ExecutionStatusTimedOut || st.Status == sfntypes.ExecutionStatusAborted:
		return true
	case !segmentTaskError(aws.ToString(st.Error)) && !slices.Contains(outcomeUnknownErrors, aws.ToString(st.Error)):
		return false
	case st.StopDate == nil:
		return true
	}
	return h.now().Before(st.StopDate.Add(h.cfg.RegisterTimeout + releaseMargin))
}

// halted keeps a halt tenant's failed file until an operator redrives it or writes its skip marker.
func (h *Handler) halted(ctx context.Context, d *delivery, name, arn string, st *sfn.DescribeExecutionOutput, attrs []any) decision {
	markerKey := skipMarkerKey(h.owner(), name)
	attrs = append(attrs, "skipMarkerKey", markerKey)
	marker, found, err := h.skipMarker(ctx, markerKey)
	if err != nil {
		attrs = append(attrs, "error", err, "nextWaitSeconds", h.cfg.HaltWait.Seconds())
		d.log.ErrorContext(ctx, "tenant halted; the skip marker could not be read", attrs...)
		d.count(metrics.Blocked)
		return h.hold(ctx, d, h.cfg.HaltWait)
	}
	if marker.denied {
		attrs = append(attrs, "skipMarkerRead", "403 AccessDenied, read as no marker: S3 answers 403 for a missing key unless the role may "+
			"s3:ListBucket; if a marker was written, check the role's s3:GetObject on it")
	}
	if found {
		if held, ok := h.stopped(ctx, d, arn, st); ok {
			return held
		}
		if err := h.releaseLeases(ctx, d.log, name); err != nil {
			return h.serviceError(ctx, d, "release the file's running-file slots", err)
		}
		d.log.WarnContext(ctx, "file skipped by an operator; the tenant moves on", append(attrs,
			"skipMarkerVersionId", marker.versionID, "reason", marker.reason, "reasonBytes", marker.size)...)
		d.count(metrics.Skipped)
		return released
	}
	d.log.ErrorContext(ctx, "tenant halted: redrive the execution or write the skip marker", append(attrs, "nextWaitSeconds", h.cfg.HaltWait.Seconds())...)
	d.count(metrics.Blocked)
	return h.hold(ctx, d, h.cfg.HaltWait)
}

// serviceError keeps a message after a Step Functions or S3 call failed even after the SDK's own
// retries. Nothing is lost: the message comes back, and the deterministic execution name means
// nothing is started twice. Throttling and other transient errors log WARN; errors no retry can
// fix (permissions, a wrong ARN) log ERROR so the alarm fires.
func (h *Handler) serviceError(ctx context.Context, d *delivery, what string, err error) decision {
	if throttledErr(err) {
		return h.throttled(ctx, d, what, err)
	}
	wait := backoff(h.cfg.FirstWait, h.cfg.MaxWait, d.attempt)
	level := slog.LevelError
	if transient(err) {
		level = slog.LevelWarn
	}
	d.log.Log(ctx, level, "could not "+what+"; message kept", "error", err, "nextWaitSeconds", wait.Seconds())
	d.count(metrics.ServiceErrors)
	return h.hold(ctx, d, wait)
}

// transient reports whether err is one the SDK's standard retryer treats as retryable (throttling,
// 5xx, connection errors), or a timeout.
func transient(err error) bool {
	var maxAttempts *retry.MaxAttemptsError
	if errors.As(err, &maxAttempts) || errors.Is(err, errNotYetVisible) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	return retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary
}

func accessDeniedError(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && (api.ErrorCode() == "AccessDenied" || api.ErrorCode() == "Forbidden")
}

// hold keeps the record in flight for wait: it will be reported as a batch item failure, and
// its visibility is set so that it returns after wait.
func (h *Handler) hold(ctx context.Context, d *delivery, wait time.Duration) decision {
	wait = h.holdable(d, wait)
	if d.visibility != wait && h.changeVisibility(ctx, d.rec, wait) {
		d.visibility = wait
	}
	return decision{wait: wait}
}

// changeVisibility sets when a kept record becomes visible again. If it fails, the record still
// comes back, after the queue's visibility timeout. It reports whether the change was made.
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ChangeMessageVisibility.html
func (h *Handler) changeVisibility(ctx context.Context, rec events.SQSMessage, wait time.Duration) bool {
	if err := setVisibility(ctx, h.sqs, h.cfg.QueueURL, rec, wait); err != nil {
		h.log.WarnContext(ctx, "could not change the message visibility; it returns after the queue's visibility timeout",
			"tenant", h.cfg.Tenant.ID, "messageId", rec.MessageId, "error", err)
		return false
	}
	return true
}

// setVisibility sets the visibility timeout of the record to wait, rounded up to whole seconds and
// at most maxVisibility.
func setVisibility(ctx context.Context, q queue, queueURL string, rec events.SQSMessage, wait time.Duration) error {
	secs := int32(min(math.Ceil(wait.Seconds()), maxVisibility.Seconds()))
	_, err := q.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl:          aws.String(queueURL),
		ReceiptHandle:     aws.String(rec.ReceiptHandle),
		VisibilityTimeout: secs,
	})
	return err
}

// backoff is the wait before the attempt'th delivery is looked at again: first, doubling per
// delivery, at most limit, rounded up to the whole seconds a visibility timeout takes.
func backoff(first, limit time.Duration, attempt int) time.Duration {
	d := first
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return time.Duration(math.Ceil(max(d.Seconds(), 1))) * time.Second
}

// receiveCount is the record's ApproximateReceiveCount: 1 on the first delivery.
func receiveCount(rec events.SQSMessage) int {
	n, err := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"])
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// sentAt is the record's SentTimestamp (epoch milliseconds).
func sentAt(rec events.SQSMessage) (time.Time, bool) {
	ms, err := strconv.ParseInt(rec.Attributes["SentTimestamp"], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

func runSeconds(st *sfn.DescribeExecutionOutput) float64 {
	if st.StartDate == nil || st.StopDate == nil {
		return 0
	}
	return st.StopDate.Sub(*st.StartDate).Seconds()
}

func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// eventTime is the event's time, RFC 3339; "" when absent.
func eventTime(ev s3event.Event) string {
	if ev.Time.IsZero() {
		return ""
	}
	return ev.Time.UTC().Format(time.RFC3339Nano)
}
