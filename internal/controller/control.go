package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// Control messages (pipeline.ControlMessage, docs/operations.md) are operator requests that travel
// through the tenant's FIFO message group. The controller performs one when it reaches the head of
// the group and holds the group until the execution it redrove or started has finished, exactly as
// for a file, so an operation never runs beside another file of the tenant. An invalid control
// message is quarantined like a bad S3 event.
//
// Control messages are rare, so they are not polled in-process: a running redrive or replay is
// looked at again when its message comes back, after the same backoff as a file's.

// redriver is the Step Functions call a redrive request needs. *sfn.Client has it; the controller's
// client is asserted to it, so the handler's wiring does not change.
type redriver interface {
	RedriveExecution(ctx context.Context, in *sfn.RedriveExecutionInput, optFns ...func(*sfn.Options)) (*sfn.RedriveExecutionOutput, error)
}

var _ redriver = (*sfn.Client)(nil)

// Metrics of control messages, beside the file metrics of internal/metrics.
const (
	// metricRedrives counts executions redriven by a control message.
	metricRedrives = "Redrives"
	// metricControlRefused counts redrive requests Step Functions refused (ExecutionNotRedrivable).
	metricControlRefused = "ControlRefused"
)

// control processes a message whose body claims to be a control message.
func (h *Handler) control(ctx context.Context, d *delivery) decision {
	m, err := pipeline.DecodeControl([]byte(d.rec.Body))
	if err == nil {
		err = h.controlBelongs(m)
	}
	if err != nil {
		return h.quarantine(ctx, d, err)
	}
	if pipeline.NeedsRecord(m.Action) {
		switch err := h.checkRecord(ctx, m); {
		case errors.Is(err, pipeline.ErrInvalidControl):
			return h.quarantine(ctx, d, err)
		case err != nil:
			return h.serviceError(ctx, d, "read the request's control record", err)
		}
	}
	// The reason is operator text about the operation, never record data.
	d.log = d.log.With("controlAction", m.Action, "requestId", m.RequestID, "requestedBy", m.RequestedBy, "reason", m.Reason)
	if m.OutOfOrder {
		// The operator runs the file after later files of the tenant on purpose (pipectl
		// --out-of-order): the log line is part of the audit trail.
		d.log = d.log.With("outOfOrder", true)
	}
	switch m.Action {
	case pipeline.ControlRedrive:
		return h.controlRedrive(ctx, d, m)
	case pipeline.ControlReplay:
		return h.controlReplay(ctx, d, m)
	case pipeline.ControlSequenceTick:
		// A tick in the files' group would hold them: it belongs in its own (tickDelivery).
		return h.quarantine(ctx, d, fmt.Errorf("%w: %s in the tenant's files' group, want group %q", pipeline.ErrInvalidControl, m.Action, pipeline.TickGroup(h.cfg.Tenant.ID)))
	}
	return h.sequenceControl(ctx, d, m) // sequence.go
}

// tickDelivery handles a message of the tenant's tick group: only the tick belongs there, so
// that a request that changes the sequence is always performed at the head of the files' group.
func (h *Handler) tickDelivery(ctx context.Context, d *delivery) decision {
	m, err := pipeline.DecodeControl([]byte(d.rec.Body))
	if err == nil {
		err = h.controlBelongs(m)
	}
	if err == nil && m.Action != pipeline.ControlSequenceTick {
		err = fmt.Errorf("%w: %s in the tick group %q: send it to the tenant's files' group", pipeline.ErrInvalidControl, m.Action, d.rec.Attributes["MessageGroupId"])
	}
	if err != nil {
		return h.quarantine(ctx, d, err)
	}
	return h.sequenceTick(ctx, d, m) // sequence.go
}

// checkRecord performs an operator action only as its control record says (pipeline.NeedsRecord):
// the record must exist under control/<tenant>/requests/ and equal the message. A record that is
// absent, or that the controller may not read (S3 answers 403 then, which reads as absent), refuses
// the message: a direct invoke of the controller with a made-up event cannot start a replay.
func (h *Handler) checkRecord(ctx context.Context, m pipeline.ControlMessage) error {
	key := pipeline.ControlRequestKey(pipeline.PoolOwner(h.cfg.KeysPool, m.Tenant), m.RequestID)
	b, found, err := h.getControlLimited(ctx, key, pipeline.MaxControlRecordBytes)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w at s3://%s/%s: an operator action is performed only as the record pipectl writes says",
			pipeline.ErrNoControlRecord, h.cfg.Bucket, key)
	}
	return pipeline.CheckControlRecord(m, b)
}

// controlBelongs checks that a valid control message is about this tenant and its files.
func (h *Handler) controlBelongs(m pipeline.ControlMessage) error {
	if m.Tenant != h.cfg.Tenant.ID {
		return fmt.Errorf("%w: tenant is %q, want %q", pipeline.ErrInvalidControl, m.Tenant, h.cfg.Tenant.ID)
	}
	if m.Action == pipeline.ControlReplay {
		if m.Source.Bucket != h.cfg.Bucket {
			return fmt.Errorf("%w: replay source bucket is %q, want %q", pipeline.ErrInvalidControl, m.Source.Bucket, h.cfg.Bucket)
		}
		if !strings.HasPrefix(m.Source.Key, h.cfg.TenantPrefix) {
			return fmt.Errorf("%w: replay source key is outside the tenant prefix %q", pipeline.ErrInvalidControl, h.cfg.TenantPrefix)
		}
	}
	return nil
}

// controlRedrive redrives the named file execution once, then holds the group until it finishes.
// A redrive reruns only what failed, under the same execution name, so its records keep their
// Idempotency-Keys.
func (h *Handler) controlRedrive(ctx context.Context, d *delivery, m pipeline.ControlMessage) decision {
	name := m.ExecutionName
	arn := h.cfg.ExecutionARN(name)
	d.log = d.log.With("executionName", name)

	st, err := h.describe(ctx, arn)
	if isNotFound(err) {
		return h.quarantine(ctx, d, fmt.Errorf("%w: redrive: the tenant has no execution %q", pipeline.ErrInvalidControl, name))
	}
	if err != nil {
		return h.serviceError(ctx, d, "describe the execution to redrive", err)
	}
	if err := h.ownExecution(name, st); err != nil {
		return h.quarantine(ctx, d, fmt.Errorf("redrive: %w", err))
	}
	if unsuccessful(st.Status) && !redrivenSince(st, h.requestTime(d, m)) {
		// A redrive runs like a file: it takes running-file slots first (admission.go).
		if h.admits() {
			if _, held, ok := h.admitFile(ctx, d, name, true); !ok {
				return held
			}
		}
		next, refused, err := h.redrive(ctx, d, m, arn)
		if refused != nil {
			// Step Functions will never redrive it (older than 14 days, history full, ...): holding
			// the group would block the tenant for nothing.
			d.log.ErrorContext(ctx, "redrive refused by Step Functions; control message released",
				"executionArn", arn, "status", string(st.Status), "error", refused.Error(),
				"redriveStatus", string(st.RedriveStatus), "redriveStatusReason", aws.ToString(st.RedriveStatusReason))
			d.count(metricControlRefused)
			return released
		}
		if err != nil {
			return h.serviceError(ctx, d, "redrive the execution", err)
		}
		st = next
	}
	return h.controlOutcome(ctx, d, name, arn, st, "redriven execution")
}

// controlReplay starts a new execution of the object version under the request's own name, then
// holds the group until it finishes. Every delivery of one request finds the same execution.
func (h *Handler) controlReplay(ctx context.Context, d *delivery, m pipeline.ControlMessage) decision {
	name := m.ReplayExecutionName()
	arn := h.cfg.ExecutionARN(name)
	d.log = d.log.With("key", m.Source.Key, "executionName", name)

	st, err := h.describe(ctx, arn)
	if isNotFound(err) {
		// The workflow input is the one an S3 event of that version would give, with the request id
		// as the event id. A DynamoDB tenant's replay ranks as its original file (replayorder.go).
		in := pipeline.WorkflowInput{
			Tenant: h.cfg.Tenant,
			Source: pipeline.Source{Bucket: m.Source.Bucket, Key: m.Source.Key, VersionID: m.Source.VersionID,
				ETag: m.Source.ETag, Size: m.Source.Size},
			EventID:  m.RequestID,
			Admitted: h.now().UTC().Format(time.RFC3339Nano),
		}
		err = nil
		switch {
		case h.ordered():
			err = h.rankReplay(ctx, d, m, &in.Source)
		case m.Source.OriginalExecution != "":
			// Not read for an order, but still only the tenant's own execution may be named.
			_, _, err = h.originalSource(ctx, m)
		}
		if err == nil && h.admits() {
			// A replay runs like a file: it takes running-file slots first (admission.go).
			if _, held, ok := h.admitFile(ctx, d, name, true); !ok {
				return held
			}
		}
		if err == nil {
			st, err = h.startInput(ctx, d, in, name, arn)
		}
	}
	if errors.Is(err, pipeline.ErrInvalidControl) {
		return h.quarantine(ctx, d, fmt.Errorf("replay: %w", err))
	}
	if err != nil {
		return h.serviceError(ctx, d, "look up or start the replay's execution", err)
	}
	return h.controlOutcome(ctx, d, name, arn, st, "replay execution")
}

// ownExecution refuses an execution that is not this tenant's. Execution names do not carry the
// tenant (naming.go: event ids and hashes of the object version), so the execution's input, the
// pipeline.WorkflowInput the controller started it with, tells. A silo's state machine runs only
// its tenant's files, so there only an input naming another tenant is refused; a pool's state
// machine runs every tenant of the pool, so there an input that names no tenant is refused too.
func (h *Handler) ownExecution(name string, st *sfn.DescribeExecutionOutput) error {
	var in pipeline.WorkflowInput
	err := json.Unmarshal([]byte(aws.ToString(st.Input)), &in)
	switch {
	case err == nil && in.Tenant.ID == h.cfg.Tenant.ID:
		return nil
	case err == nil && in.Tenant.ID != "":
		return fmt.Errorf("%w: execution %q is tenant %q's, not %q's", pipeline.ErrInvalidControl, name, in.Tenant.ID, h.cfg.Tenant.ID)
	case h.cfg.Pool == "":
		return nil
	}
	return fmt.Errorf("%w: execution %q has no input naming its tenant, so it cannot be shown to be tenant %q's on pool %q's shared state machine",
		pipeline.ErrInvalidControl, name, h.cfg.Tenant.ID, h.cfg.Pool)
}

// controlOutcome holds, releases or applies the failure policy, as for a file.
func (h *Handler) controlOutcome(ctx context.Context, d *delivery, name, arn string, st *sfn.DescribeExecutionOutput, what string) decision {
	switch {
	case running(st.Status):
		h.renewLeases(ctx, d, name)
		wait := backoff(h.cfg.FirstWait, h.cfg.MaxWait, d.attempt)
		d.log.InfoContext(ctx, "waiting for the "+what, "status", string(st.Status), "nextWaitSeconds", wait.Seconds())
		d.count(metrics.Waits)
		return h.hold(ctx, d, wait)
	case st.Status == sfntypes.ExecutionStatusSucceeded:
		if err := h.releaseLeases(ctx, d.log, name); err != nil {
			return h.serviceError(ctx, d, "release the "+what+"'s running-file slots", err)
		}
		d.log.InfoContext(ctx, what+" done; control message released", "executionArn", arn, "status", string(st.Status),
			"redriveCount", aws.ToInt32(st.RedriveCount))
		d.count(metrics.Completions)
		return released
	case unsuccessful(st.Status):
		return h.failed(ctx, d, name, arn, st)
	default:
		return h.serviceError(ctx, d, "read the execution status", fmt.Errorf("unknown execution status %q", st.Status))
	}
}

// redrive calls RedriveExecution with the request id as its client token, so a repeated call for
// one request is idempotent. refused is set when Step Functions answers ExecutionNotRedrivable.
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_RedriveExecution.html
func (h *Handler) redrive(ctx context.Context, d *delivery, m pipeline.ControlMessage, arn string) (st *sfn.DescribeExecutionOutput, refused error, err error) {
	r, ok := h.sfn.(redriver)
	if !ok {
		return nil, nil, errors.New("the Step Functions client cannot redrive executions")
	}
	out, err := r.RedriveExecution(ctx, &sfn.RedriveExecutionInput{ExecutionArn: aws.String(arn), ClientToken: aws.String(m.RequestID)})
	var notRedrivable *sfntypes.ExecutionNotRedrivable
	if errors.As(err, &notRedrivable) {
		return nil, err, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("redrive execution %s: %w", arn, err)
	}
	d.log.InfoContext(ctx, "execution redriven", "executionArn", arn)
	d.count(metricRedrives)
	return &sfn.DescribeExecutionOutput{ExecutionArn: aws.String(arn), Status: sfntypes.ExecutionStatusRunning, RedriveDate: out.RedriveDate}, nil, nil
}

// requestTime is when the request entered the queue (SQS SentTimestamp), or the time the operator
// gave if the attribute is missing. A redrive at or after it was made for this request.
func (h *Handler) requestTime(d *delivery, m pipeline.ControlMessage) time.Time {
	if t, ok := sentAt(d.rec); ok {
		return t
	}
	return m.RequestedAt
}

// redrivenSince reports whether the execution was redriven at or after t.
func redrivenSince(st *sfn.DescribeExecutionOutput, t time.Time) bool {
	return st.RedriveDate != nil && !st.RedriveDate.Before(t)
}

func unsuccessful(s sfntypes.ExecutionStatus) bool {
	return s == sfntypes.ExecutionStatusFailed || s == sfntypes.ExecutionStatusTimedOut || s == sfntypes.ExecutionStatusAborted
}
