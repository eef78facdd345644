package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/s3event"
	"github.com/example/tenantpipeline/internal/source"
)

// Wake-up on the execution's completion event (docs/controller.md).
//
// Step Functions sends a "Step Functions Execution Status Change" event to the default event bus
// when a Standard workflow's execution changes status. Their delivery is best effort: an event can
// be lost or arrive twice
// (https://docs.aws.amazon.com/step-functions/latest/dg/eventbridge-integration.html). So an event
// only shortens a wait, it never decides anything on its own:
//
//   - On each delivery, before it looks the execution up, the controller writes the message's
//     current receipt handle and the execution's name to control/<tenant>/wake.json, then sets the
//     message's visibility to the safety net, then looks the execution up. A completion before the
//     lookup is seen by the lookup; a completion after it emits its event after the state and the
//     long visibility are in place, so the wake-up handler finds the current handle and its
//     visibility change 0 comes after the controller's. No completion falls in between.
//   - The wake-up handler checks that the event's execution is the one in wake.json, records its
//     status in control/<tenant>/wake-done.json, then makes the message visible
//     (ChangeMessageVisibility 0). A recorded SUCCEEDED is final (RedriveExecution restarts only
//     FAILED, TIMED_OUT and ABORTED executions,
//     https://docs.aws.amazon.com/step-functions/latest/apireference/API_RedriveExecution.html),
//     so the woken delivery releases its file on it, without the wake-up state (see "Releasing on
//     the status event" below). Any other status is described as usual: the failure policy needs
//     the execution's details.
//   - A stale receipt handle (the message was received again, or deleted) is rejected by SQS
//     (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ChangeMessageVisibility.html):
//     the delivery that holds the current handle decides. A lost event costs at most the safety
//     net, after which the next delivery describes the execution, as without events.
//
// Releasing on the status event (docs/controller.md). Every DescribeExecution draws on one
// account-wide token bucket, refilled at 15 a second in us-east-1, us-west-2 and eu-west-1 and 10
// elsewhere (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html): one
// describe per released file caps an account at 54,000 files an hour (36,000 elsewhere). So a
// file whose SUCCEEDED event was recorded is released without one, when the record can only be
// the wake-up handler's:
//   - The event. Only AWS services put events whose source begins with "aws." on a bus: "Customer-
//     generated events can have any value here, as long as it doesn't begin with aws."
//     (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-events-structure.html), and
//     PutEvents refuses such an entry with NotAuthorizedForSourceException
//     (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEventsResultEntry.html).
//     The tenant's rule matches source aws.states, the status change detail-type and its own file
//     state machine's ARN on the default bus, where Step Functions sends these events
//     (https://docs.aws.amazon.com/step-functions/latest/dg/eventbridge-integration.html), and
//     Wake checks the source, the detail-type, the state machine and that the execution is the one
//     wake.json names. The rule's permission lets only that rule invoke the function
//     (aws:SourceArn). Whoever else may call lambda:InvokeFunction on the controller
//     (https://docs.aws.amazon.com/lambda/latest/dg/lambda-permissions.html) can already hand it a
//     forged SQS record and start any file out of order: that permission is an operator's.
//   - The record. Wake writes wake-done.json only after those checks. When the bucket's policy
//     denies writes under control/ to everyone but the pipeline's roles and the operators
//     (BucketWriteDeny in constructs/tenantpipeline; an explicit Deny wins over any Allow,
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html),
//     nobody else can write it, and an operator can release a file with pipectl anyway. The
//     construct then sets CONTROL_PREFIX_PROTECTED=true. Without that Deny (a bucket the app
//     imports, whose policy CDK cannot read), the default, the record is an object anyone allowed
//     to write control/ could forge, and one DescribeExecution confirms it before the release.
//   - Even so, a record releases only the file it was written for: the same execution name and
//     ARN, status SUCCEEDED, an event id, and written no earlier than the message was sent. An
//     execution name is reserved for 90 days only
//     (https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html), so
//     a message sent after the record (a replay of an old file, a duplicate event) may start a new
//     execution under the same name: it is described. A skewed clock only makes a record look
//     older, which costs a describe, never a wrong release.
//
// On the happy path a file therefore costs no DescribeExecution: its first delivery calls
// StartExecution and does not describe (lookup), the construct sets no in-process polling with
// wake events (POLL_BUDGET_SECONDS=0), and the woken delivery releases on the record. A file that
// ends before its event is handled, or whose event is lost, is described by the safety-net
// delivery, as without events.

// Step Functions status change events (EventBridge "Events from AWS services").
// https://docs.aws.amazon.com/step-functions/latest/dg/eventbridge-integration.html
const (
	statesEventSource      = "aws.states"
	statusChangeDetailType = "Step Functions Execution Status Change"
)

// statusChange is the detail of a "Step Functions Execution Status Change" event. Only the fields
// the wake-up handler reads are decoded; AWS may add others.
type statusChange struct {
	ExecutionARN    string `json:"executionArn"`
	StateMachineARN string `json:"stateMachineArn"`
	Name            string `json:"name"`
	Status          string `json:"status"`
	// StartDate and StopDate are epoch milliseconds (null while the execution runs). Kept raw:
	// they only feed the head metrics, so a date in another shape never fails the event.
	StartDate json.RawMessage `json:"startDate"`
	StopDate  json.RawMessage `json:"stopDate"`
	// RedriveCount, Input, Output and Error feed the File Processed event (fileevent.go). The
	// event carries them (https://docs.aws.amazon.com/step-functions/latest/dg/cw-events.html);
	// when one is absent the execution is described instead.
	RedriveCount *int    `json:"redriveCount"`
	Input        *string `json:"input"`
	Output       *string `json:"output"`
	Error        *string `json:"error"`
}

// eventDate is an event's epoch-millisecond date; nil when the event has none, or not a number.
func eventDate(raw json.RawMessage) *time.Time {
	var ms float64
	if err := json.Unmarshal(raw, &ms); err != nil || ms <= 0 {
		return nil
	}
	t := time.UnixMilli(int64(ms)).UTC()
	return &t
}

// Invoke is the controller's Lambda entry point. It serves three event shapes: the SQS event of the
// tenant's queue (Handle), a Step Functions status change event from EventBridge (Wake), and the
// reconciler's scheduled input (Reconcile).
// Anything else is a misconfiguration: ERROR and an error, so the function's Errors metric counts it.
func (h *Handler) Invoke(ctx context.Context, payload json.RawMessage) (any, error) {
	return invoke(ctx, h, payload)
}

// target is what invoke hands an event to: a silo tenant's Handler, or a pool's dispatcher (Pool).
type target interface {
	Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)
	Wake(ctx context.Context, ev events.EventBridgeEvent) error
	Reconcile(ctx context.Context) error
	unknownShape(ctx context.Context, err error) error
}

// invoke tells the two event shapes apart and hands the event to t.
func invoke(ctx context.Context, t target, payload json.RawMessage) (any, error) {
	var probe struct {
		Records    json.RawMessage `json:"Records"`
		Source     *string         `json:"source"`
		DetailType *string         `json:"detail-type"`
		Reconcile  *bool           `json:"reconcile"`
	}
	if err := json.Unmarshal(payload, &probe); err != nil {
		return nil, t.unknownShape(ctx, fmt.Errorf("payload is not a JSON object: %w", err))
	}
	switch {
	case probe.Reconcile != nil:
		// The reconciler's schedule (reconcile.go): exactly pipeline.ReconcileInput, nothing else.
		if string(compactJSON(payload)) != pipeline.ReconcileInput {
			return nil, t.unknownShape(ctx, fmt.Errorf("scheduled input %s, want %s", compactJSON(payload), pipeline.ReconcileInput))
		}
		return nil, t.Reconcile(ctx)
	case probe.Records != nil && probe.Source == nil && probe.DetailType == nil:
		var ev events.SQSEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, t.unknownShape(ctx, fmt.Errorf("records are not SQS records: %w", err))
		}
		for i, r := range ev.Records {
			if r.EventSource != "aws:sqs" {
				return nil, t.unknownShape(ctx, fmt.Errorf("record %d has eventSource %q, want aws:sqs", i, r.EventSource))
			}
		}
		return t.Handle(ctx, ev)
	case probe.Records == nil && probe.Source != nil && probe.DetailType != nil:
		var ev events.EventBridgeEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, t.unknownShape(ctx, fmt.Errorf("not an EventBridge event: %w", err))
		}
		if ev.Source != statesEventSource || ev.DetailType != statusChangeDetailType {
			return nil, t.unknownShape(ctx, fmt.Errorf("event source %q, detail-type %q, want %q, %q", ev.Source, ev.DetailType, statesEventSource, statusChangeDetailType))
		}
		return nil, t.Wake(ctx, ev)
	default:
		return nil, t.unknownShape(ctx, errors.New("neither an SQS event (Records), an EventBridge event (source, detail-type) nor the reconciler's schedule (reconcile)"))
	}
}

func (h *Handler) unknownShape(ctx context.Context, err error) error {
	err = fmt.Errorf("controller received an event it does not handle: %w", err)
	h.log.ErrorContext(ctx, "unknown event shape", "tenant", h.cfg.Tenant.ID, "error", err)
	return err
}

// Wake handles one status change event of the tenant's file state machine: if it ends the execution
// the tenant's head message waits for, it records the status and makes the message visible at once.
// A lost, late or duplicated event, or a stale receipt handle, is harmless and never an error
// (see the comment at the top of this file). It returns an error only for an event that cannot be
// this tenant's: a misrouted rule.
func (h *Handler) Wake(ctx context.Context, ev events.EventBridgeEvent) error {
	if h.cfg.executionPrefix == "" || h.cfg.Tenant.ID == "" {
		return errors.New("controller is not configured: build its Config with ConfigFromEnv")
	}
	var sc statusChange
	if err := json.Unmarshal(ev.Detail, &sc); err != nil || sc.ExecutionARN == "" || sc.StateMachineARN == "" || sc.Name == "" || sc.Status == "" {
		return h.unknownShape(ctx, fmt.Errorf("event %s: detail lacks executionArn, stateMachineArn, name or status (%v)", ev.ID, err))
	}
	log := h.log.With("tenant", h.cfg.Tenant.ID, "eventId", ev.ID, "executionName", sc.Name, "status", sc.Status)
	if sc.StateMachineARN != h.cfg.StateMachineARN || sc.ExecutionARN != h.cfg.ExecutionARN(sc.Name) {
		err := fmt.Errorf("event %s is about %s of %s, want an execution of %s", ev.ID, sc.ExecutionARN, sc.StateMachineARN, h.cfg.StateMachineARN)
		log.ErrorContext(ctx, "status event of another state machine: check the tenant's wake-up rule", "error", err)
		return err
	}
	var ms []metrics.Metric
	defer func() {
		if err := h.metrics.Emit(ms...); err != nil {
			log.WarnContext(ctx, "metrics not written", "error", err)
		}
	}()
	count := func(name string) { ms = append(ms, metrics.Count(name, 1)) }

	if !pipeline.TerminalStatus(sc.Status) {
		log.InfoContext(ctx, "status event is not an end; nothing to wake")
		count(metrics.WakeIgnored)
		return nil
	}
	// The event comes from the reserved aws.states source and names this state machine's
	// execution, so a SUCCEEDED end frees the file's running-file slots at once, whatever the
	// wake-up state says (admission.go): SUCCEEDED is final, so even a late event is this run's
	// end. Any other end is left to the delivery it wakes: a stopped file, or one whose last
	// Register attempt's outcome is unknown, keeps its slots until none of its invocations can still
	// write (stopped.go), and a late event of a run before a redrive must not free the redriven
	// run's slots. A failure here is left to the delivery, which releases too.
	if sc.Status == pipeline.StatusSucceeded {
		_ = h.releaseLeases(ctx, log, sc.Name)
	}
	// Announced before the end is recorded: a delivery that releases the file on the record alone
	// knows its event is out (fileevent.go).
	announceErr := h.announceStatusChange(ctx, log, sc)
	if announceErr != nil {
		log.Log(ctx, stateErrorLevel(announceErr), "File Processed event not put; the file's delivery puts it", "error", announceErr)
	}
	st, found, err := h.readWakeState(ctx)
	switch {
	case err != nil:
		log.Log(ctx, stateErrorLevel(err), "wake-up state could not be read; the safety net will look again", "error", err)
		count(metrics.WakeStateErrors)
		return nil
	case !found:
		log.InfoContext(ctx, "no wake-up state; nothing to wake")
		count(metrics.WakeIgnored)
		return nil
	case st.ExecutionName != sc.Name || st.ExecutionARN != sc.ExecutionARN:
		log.InfoContext(ctx, "status event of an execution the head message does not wait for; nothing to wake", "waitingFor", st.ExecutionName)
		count(metrics.WakeIgnored)
		return nil
	case st.QueueURL != h.cfg.QueueURL:
		log.ErrorContext(ctx, "wake-up state names another queue; not woken", "queueUrl", st.QueueURL, "want", h.cfg.QueueURL)
		count(metrics.WakeStateErrors)
		return nil
	}
	log = log.With("messageId", st.MessageID)

	// Recorded before the message is made visible, so the delivery it wakes can read it; not
	// recorded when the end could not be announced, so that delivery describes the execution and
	// announces it.
	if announceErr != nil {
		log.InfoContext(ctx, "execution end not recorded: the woken delivery describes the execution")
	} else if err := h.writeWakeDone(ctx, pipeline.WakeDone{
		Version: pipeline.WakeDoneVersion, ExecutionName: sc.Name, ExecutionARN: sc.ExecutionARN,
		Status: sc.Status, EventID: ev.ID, StartDate: eventDate(sc.StartDate), StopDate: eventDate(sc.StopDate),
		WrittenAt: h.now().UTC(),
	}); err != nil {
		log.Log(ctx, stateErrorLevel(err), "execution end could not be recorded; the woken delivery describes the execution", "error", err)
		count(metrics.WakeStateErrors)
	}
	_, err = h.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl:          aws.String(st.QueueURL),
		ReceiptHandle:     aws.String(st.ReceiptHandle),
		VisibilityTimeout: 0,
	})
	switch {
	case err == nil:
		log.InfoContext(ctx, "execution ended; head message made visible")
		count(metrics.WakeUps)
	case staleReceipt(err):
		// The error code only: SQS quotes the receipt handle in the message.
		log.InfoContext(ctx, "stored receipt handle is no longer current; the current delivery or the safety net decides", "errorCode", errorCode(err))
		count(metrics.WakeStale)
	default:
		log.Log(ctx, stateErrorLevel(err), "head message could not be made visible; the safety net will look again", "error", err)
		count(metrics.WakeStateErrors)
	}
	return nil
}

// staleReceipt reports whether ChangeMessageVisibility rejected a receipt handle that is no longer
// current: the message was deleted, received again, or is not in flight. SQS answers these with
// ReceiptHandleIsInvalid or MessageNotInflight
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ChangeMessageVisibility.html),
// or with the common InvalidParameterValue ("Message does not exist or is not available for
// visibility timeout change")
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/CommonErrors.html).
func staleReceipt(err error) bool {
	var invalid *sqstypes.ReceiptHandleIsInvalid
	var notInflight *sqstypes.MessageNotInflight
	if errors.As(err, &invalid) || errors.As(err, &notInflight) {
		return true
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	// The JSON protocol may prefix query-compatible codes: AWS.SimpleQueueService.MessageNotInflight.
	code := api.ErrorCode()
	for _, c := range []string{"ReceiptHandleIsInvalid", "MessageNotInflight", "InvalidParameterValue"} {
		if code == c || strings.HasSuffix(code, "."+c) {
			return true
		}
	}
	return false
}

func errorCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// stateErrorLevel is WARN for a failure a retry can fix, ERROR for one it cannot (permissions).
func stateErrorLevel(err error) slog.Level {
	if transient(err) {
		return slog.LevelWarn
	}
	return slog.LevelError
}

// arm stores the delivery's wake-up state and then sets the message's visibility to the safety net,
// in that order (see the comment at the top of this file). It runs before the execution is looked
// up. If the state cannot be written, the delivery is not armed: a running execution then waits
// with the growing backoff, as without events.
func (h *Handler) arm(ctx context.Context, d *delivery, name, arn string) {
	body, err := pipeline.EncodeWakeState(pipeline.WakeState{
		Version:       pipeline.WakeStateVersion,
		ExecutionName: name,
		ExecutionARN:  arn,
		MessageID:     d.rec.MessageId,
		ReceiptHandle: d.rec.ReceiptHandle,
		QueueURL:      h.cfg.QueueURL,
		WrittenAt:     h.now().UTC(),
	})
	if err == nil {
		err = h.putControl(ctx, pipeline.WakeStateKey(h.owner()), body)
	}
	if err != nil {
		d.log.Log(ctx, stateErrorLevel(err), "wake-up state not written; waiting with the backoff", "error", err)
		d.count(metrics.WakeStateErrors)
		return
	}
	d.armed = true
	if h.changeVisibility(ctx, d.rec, h.cfg.SafetyNet) {
		d.visibility = h.cfg.SafetyNet
	}
}

// How a recorded SUCCEEDED released a file (wokenSucceeded).
const (
	// releasedOnRecord: the record alone, under a protected control/ prefix.
	releasedOnRecord = "released on the record"
	// releasedConfirmed: the record, confirmed by one DescribeExecution.
	releasedConfirmed = "confirmed"
)

// wokenSucceeded reports whether the wake-up handler recorded that execution arn SUCCEEDED, and
// how the record releases the file (see "Releasing on the status event" at the top of this file):
// on the record alone (releasedOnRecord) when only the pipeline and the operators can write
// control/ and the record was written for this message, else after one DescribeExecution confirms
// it (releasedConfirmed). SUCCEEDED is final, so a confirmed end is the end. The record also
// spares the delivery its wake-up state, its visibility change and a second look. how is "" for
// any other recorded status, none, or a record that cannot be read: the lookup decides, with no
// Step Functions call here. err is a failed DescribeExecution.
func (h *Handler) wokenSucceeded(ctx context.Context, d *delivery, name, arn string) (st *sfn.DescribeExecutionOutput, how string, err error) {
	b, found, err := h.getControl(ctx, pipeline.WakeDoneKey(h.owner()))
	var done pipeline.WakeDone
	if err == nil && found {
		done, err = pipeline.DecodeWakeDone(b)
	}
	if err != nil {
		d.log.Log(ctx, stateErrorLevel(err), "recorded execution end could not be read; describing the execution", "error", err)
		d.count(metrics.WakeStateErrors)
		return nil, "", nil
	}
	if !found || done.ExecutionName != name || done.ExecutionARN != arn || done.Status != pipeline.StatusSucceeded {
		return nil, "", nil
	}
	if h.cfg.ControlPrefixProtected && recordedForMessage(done, d.rec) {
		return &sfn.DescribeExecutionOutput{ExecutionArn: aws.String(arn), Name: aws.String(name),
			Status: sfntypes.ExecutionStatusSucceeded, StartDate: done.StartDate, StopDate: done.StopDate}, releasedOnRecord, nil
	}
	st, err = h.describe(ctx, arn)
	if err != nil {
		return nil, "", fmt.Errorf("confirm the recorded end of %s: %w", arn, err)
	}
	if st.Status != sfntypes.ExecutionStatusSucceeded {
		// Only the wake-up handler writes the record, and only after a SUCCEEDED event of this very
		// execution: a record that Step Functions contradicts was written by someone else, or for
		// an earlier execution of the same name.
		d.log.ErrorContext(ctx, "recorded SUCCEEDED is contradicted by DescribeExecution; the record is ignored (check who may write control/)",
			"executionArn", arn, "status", string(st.Status), "recordEventId", done.EventID)
		d.count(metrics.WakeStateErrors)
		return nil, "", nil
	}
	return st, releasedConfirmed, nil
}

// recordedForMessage reports whether the record can be the end of the execution this message's
// deliveries started: it names a status event, and it was written no earlier than the message was
// sent (SentTimestamp). A record without the event, or a message without its send time, is not.
func recordedForMessage(done pipeline.WakeDone, rec events.SQSMessage) bool {
	sent, ok := sentAt(rec)
	return ok && done.EventID != "" && !done.WrittenAt.Before(sent)
}

func (h *Handler) readWakeState(ctx context.Context) (pipeline.WakeState, bool, error) {
	b, found, err := h.getControl(ctx, pipeline.WakeStateKey(h.owner()))
	if err != nil || !found {
		return pipeline.WakeState{}, found, err
	}
	st, err := pipeline.DecodeWakeState(b)
	return st, err == nil, err
}

func (h *Handler) writeWakeDone(ctx context.Context, done pipeline.WakeDone) error {
	body, err := pipeline.EncodeWakeDone(done)
	if err != nil {
		return err
	}
	return h.putControl(ctx, pipeline.WakeDoneKey(h.owner()), body)
}

func (h *Handler) putControl(ctx context.Context, key string, body []byte) error {
	_, err := h.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket:      aws.String(h.cfg.Bucket),
		Key:         aws.String(key),
		Body:        bytes.NewReader(body),
		ContentType: aws.String("application/json"),
	})
	if err != nil {
		return fmt.Errorf("put s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	return nil
}

// getControl reads a small control object; a missing one is not an error. S3 answers 404 for a
// missing key only to a caller that may list the bucket, otherwise 403
// (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html), so both read as absent
// (source.Absent): absent only ever means "look the execution up", never a release.
func (h *Handler) getControl(ctx context.Context, key string) ([]byte, bool, error) {
	return h.getControlLimited(ctx, key, pipeline.MaxWakeObjectBytes)
}

// getControlLimited is getControl reading at most limit+1 bytes, so that a caller sees an object
// over its limit.
func (h *Handler) getControlLimited(ctx context.Context, key string, limit int64) ([]byte, bool, error) {
	out, err := h.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(h.cfg.Bucket), Key: aws.String(key)})
	if source.Absent(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, limit+1))
	if err != nil {
		return nil, false, fmt.Errorf("read s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	return b, true, nil
}

// lookup finds the file's execution and starts it if it does not exist. With wake-up events, a
// message's first delivery (ApproximateReceiveCount 1) calls StartExecution first: the execution
// almost never exists yet, and StartExecution is idempotent for the name and input of a running
// execution and answers ExecutionAlreadyExists for a closed one, which start then describes
// (https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html). That
// saves the DescribeExecution a new file would cost; StartExecution has its own, larger bucket
// (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html).
//
// A file with no execution under its name may have one under the other idempotency key's name
// (renamed.go); lookup then returns that execution's name and ARN. The wake-up state names the
// first name, so such a delivery is disarmed and waits with the backoff.
func (h *Handler) lookup(ctx context.Context, d *delivery, ev s3event.Event, name, arn string) (string, string, *sfn.DescribeExecutionOutput, error) {
	if h.cfg.WakeEvents && d.attempt == 1 {
		// The first receive of a message: no execution of this delivery's file can exist under the
		// other naming, which only an earlier receive (under the previous configuration) could start.
		st, err := h.start(ctx, d, ev, name, arn)
		return name, arn, st, err
	}
	st, err := h.describe(ctx, arn)
	if !isNotFound(err) {
		return name, arn, st, err
	}
	adopted, adoptedARN, st, err := h.startOrAdopt(ctx, d, ev, name, arn)
	if adopted != name {
		d.armed = false
	}
	return adopted, adoptedARN, st, err
}

// runningWait is how long a delivery whose execution is still running is held: the safety net when
// the wake-up state names this delivery (its completion event will wake it), else the growing
// backoff.
func (h *Handler) runningWait(d *delivery) time.Duration {
	if d.armed {
		return h.cfg.SafetyNet
	}
	return backoff(h.cfg.FirstWait, h.cfg.MaxWait, d.attempt)
}
