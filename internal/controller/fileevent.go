package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/source"
)

// The File Processed event (README, "The File Processed event").
//
// Each end of a file execution (its first run, and each redrive) is announced once on the event
// bus with the detail results.Event, whose eventId is "<execution name>/<redrive count>".
// PutEvents takes no idempotency token and "EventBridge assigns each event a unique ID"
// (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevents.html): a call retried
// after a lost answer puts a second event, and a refused entry is reported in the answer, not as
// an error ("Handling failures with PutEvents", same page). The guarantee is therefore at least
// once, with a stable eventId for consumers to drop duplicates by:
//
//   - The controller announces an end where it first learns of it: the wake-up handler, on the
//     status change event (wake.go), and every delivery that finds the execution ended (handler.go),
//     so a lost status event, or the configuration without wake-up events, still announces it.
//   - Before PutEvents it reads the marker results/<tenant>/<execution>/event-<redrive>.json; after
//     PutEvents succeeded it writes the marker with If-None-Match: "*"
//     (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html). A retried
//     status event, a duplicated one, and every later delivery of a halted file then find the
//     marker and put nothing.
//   - A duplicate is left only when two announcers both read no marker (the status event and a
//     delivery at the same moment), or when PutEvents succeeded and the marker could not be
//     written: both carry the same eventId.
//   - A status event can arrive late: after the execution was redriven, the FAILED, TIMED_OUT or
//     ABORTED event of an earlier run. The wake-up handler announces only the end DescribeExecution
//     tells, and only when it is the event's run: terminal, with the event's status and redrive
//     count (sameRun). Otherwise the event announces nothing: the redriven run's end is announced
//     once, when it ends, and not while it runs (which would also leave its marker for an end that
//     has not happened). The earlier run's end is announced by the delivery that found it (a
//     delivery holds or releases a failed file only once its end is out); an end no delivery saw
//     before the redrive (a redrive outside pipectl, within the safety net) is not announced.
//   - A delivery releases its file only once the end is announced (or its marker found), so an
//     end is never lost while EventBridge refuses the call; the wake-up handler records the end in
//     wake-done.json only once it announced it, so the delivery that releases on the record alone
//     knows the event is out.
//
// The counts come from summary.json when it describes this end (same execution and status), else
// from the execution's output, else they are 0 and the event says countsFrom "none".

// eventBus is the slice of the EventBridge client the controller uses.
type eventBus interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

var _ eventBus = (*eventbridge.Client)(nil)

// maxSummaryBytes bounds the summary.json the controller reads: a summary is a few hundred bytes.
const maxSummaryBytes = 1 << 20

// fileEnd is one end of a file execution, as the status change event or DescribeExecution tells it.
type fileEnd struct {
	Name, ARN, Status string
	RedriveCount      int
	// Input and Output are the execution's input and output JSON; "" when not known.
	Input, Output string
	// Error and Cause are the execution's error name and cause, if it failed.
	Error, Cause string
	// Start and Stop are the execution's start (its first run's, as $$.Execution.StartTime, which
	// the state machine's results task reads) and its run's stop; nil when not known.
	Start, Stop *time.Time
}

// endOf is the fileEnd a DescribeExecution answer tells.
func endOf(st *sfn.DescribeExecutionOutput) fileEnd {
	return fileEnd{
		Name: aws.ToString(st.Name), ARN: aws.ToString(st.ExecutionArn), Status: string(st.Status),
		RedriveCount: int(aws.ToInt32(st.RedriveCount)), Input: aws.ToString(st.Input), Output: aws.ToString(st.Output),
		Error: aws.ToString(st.Error), Cause: aws.ToString(st.Cause), Start: st.StartDate, Stop: st.StopDate,
	}
}

// announceStatusChange announces the end a status change event tells; the execution is described
// when the event lacks its redrive count or input. A late event of an earlier run announces nothing
// (see the comment at the top of this file).
func (h *Handler) announceStatusChange(ctx context.Context, log *slog.Logger, sc statusChange) error {
	if h.events == nil || h.cfg.EventBus == "" {
		return nil
	}
	// A failed end is described: its results need the cause and dates (results.go), and failures
	// are few. A SUCCEEDED event with its redrive count needs no check: SUCCEEDED is final, so it
	// tells the execution's last run (RedriveExecution restarts only FAILED, TIMED_OUT and ABORTED
	// executions, https://docs.aws.amazon.com/step-functions/latest/apireference/API_RedriveExecution.html).
	if sc.RedriveCount == nil || sc.Input == nil || sc.Status != pipeline.StatusSucceeded {
		st, err := h.describe(ctx, sc.ExecutionARN)
		if err != nil {
			return fmt.Errorf("describe the execution for its File Processed event: %w", err)
		}
		end := endOf(st)
		end.Name, end.ARN = sc.Name, sc.ExecutionARN
		if !sameRun(sc, end) {
			return h.earlierRun(ctx, log, sc, end)
		}
		return h.announce(ctx, log, end)
	}
	return h.announce(ctx, log, fileEnd{Name: sc.Name, ARN: sc.ExecutionARN, Status: sc.Status, RedriveCount: *sc.RedriveCount,
		Input: aws.ToString(sc.Input), Output: aws.ToString(sc.Output), Error: aws.ToString(sc.Error)})
}

// sameRun reports whether end, as DescribeExecution tells it now, is the run the status event sc
// tells: terminal, with the event's status and, when the event carries it, its redrive count.
// DescribeExecution's redriveCount is "only updated if you successfully redrive an execution"
// (https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html), so
// an execution redriven since the event counts higher, and a redriven run still going is not
// terminal.
func sameRun(sc statusChange, end fileEnd) bool {
	if !pipeline.TerminalStatus(end.Status) || end.Status != sc.Status {
		return false
	}
	return sc.RedriveCount == nil || *sc.RedriveCount == end.RedriveCount
}

// earlierRun handles a status event that DescribeExecution does not confirm as the execution's
// current end: nothing is announced. Only a SUCCEEDED record releases a file on its own
// (wokenSucceeded), so a contradicted SUCCEEDED event returns an error, and the wake-up handler
// records nothing: the woken delivery describes the execution and announces what it finds. Any
// other late event is an earlier run's, and its record is harmless.
func (h *Handler) earlierRun(ctx context.Context, log *slog.Logger, sc statusChange, end fileEnd) error {
	eventRun := -1
	if sc.RedriveCount != nil {
		eventRun = *sc.RedriveCount
	}
	if sc.Status == pipeline.StatusSucceeded {
		return fmt.Errorf("status event SUCCEEDED (run %d) is contradicted by DescribeExecution: %s, run %d", eventRun, end.Status, end.RedriveCount)
	}
	log.InfoContext(ctx, "status event of an earlier run of the execution; no File Processed event (the current run's end is announced when it ends)",
		"eventRedriveCount", eventRun, "executionStatus", end.Status, "executionRedriveCount", end.RedriveCount)
	return nil
}

// announceEnd announces the end DescribeExecution told a delivery of the file name, arn.
func (h *Handler) announceEnd(ctx context.Context, d *delivery, name, arn string, st *sfn.DescribeExecutionOutput) error {
	end := endOf(st)
	end.Name, end.ARN = name, arn
	return h.announce(ctx, d.log, end)
}

// announce puts the File Processed event of one end of a run, unless its marker says it was put
// already. It returns an error only when the event could not be put (or its marker read): the
// caller then retries. With no event bus configured it only has a failed end's results written.
//
// Before the event, a failed end's results are written (results.go), so that the event counts
// from its summary.
func (h *Handler) announce(ctx context.Context, log *slog.Logger, end fileEnd) error {
	if h.events == nil || h.cfg.EventBus == "" {
		h.writeResults(ctx, log, end)
		return nil
	}
	marker := results.EventMarkerKey(h.owner(), end.Name, end.RedriveCount)
	_, found, err := h.getControl(ctx, marker)
	if err != nil {
		h.countEvent(ctx, log, metrics.FileEventErrors)
		return fmt.Errorf("read the File Processed marker: %w", err)
	}
	if found {
		return nil
	}
	h.writeResults(ctx, log, end)
	ev := h.fileEvent(ctx, log, end)
	detail, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode the File Processed event: %w", err)
	}
	out, err := h.events.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		EventBusName: aws.String(h.cfg.EventBus),
		Source:       aws.String(results.EventSource),
		DetailType:   aws.String(results.EventDetailType),
		Detail:       aws.String(string(detail)),
		Resources:    []string{end.ARN},
	}}})
	if err == nil && out.FailedEntryCount > 0 && len(out.Entries) > 0 {
		// A refused entry carries its ErrorCode and ErrorMessage
		// (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEventsResultEntry.html).
		e := out.Entries[0]
		err = fmt.Errorf("entry refused: %s: %s", aws.ToString(e.ErrorCode), aws.ToString(e.ErrorMessage))
	} else if err == nil && out.FailedEntryCount > 0 {
		err = errors.New("entry refused without a reason")
	}
	if err != nil {
		h.countEvent(ctx, log, metrics.FileEventErrors)
		return fmt.Errorf("put the File Processed event on %s: %w", h.cfg.EventBus, err)
	}
	h.countEvent(ctx, log, metrics.FileEvents)
	log.InfoContext(ctx, "File Processed event put", "fileEventId", ev.EventID, "fileStatus", ev.Status, "countsFrom", ev.CountsFrom)
	body, _ := json.Marshal(map[string]string{"eventId": ev.EventID, "status": ev.Status})
	_, err = h.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(h.cfg.Bucket), Key: aws.String(marker), Body: strings.NewReader(string(body)),
		ContentType: aws.String("application/json"), IfNoneMatch: aws.String("*"),
	})
	if err != nil && !conditionFailed(err) {
		// The event is out; a later announcer may put it again, under the same eventId.
		log.WarnContext(ctx, "File Processed marker not written; the event may be put again", "fileEventId", ev.EventID, "error", err)
	}
	return nil
}

func (h *Handler) countEvent(ctx context.Context, log *slog.Logger, name string) {
	if err := h.metrics.Emit(metrics.Count(name, 1)); err != nil {
		log.WarnContext(ctx, "metrics not written", "error", err)
	}
}

// fileEvent is the detail of the File Processed event of end.
func (h *Handler) fileEvent(ctx context.Context, log *slog.Logger, end fileEnd) results.Event {
	tenant := h.cfg.Tenant.ID
	ev := results.Event{
		EventID:      results.EventID(end.Name, end.RedriveCount),
		Tenant:       tenant,
		Tier:         h.tier(),
		Status:       end.Status,
		Summary:      results.URI(h.cfg.Bucket, results.Key(h.owner(), end.Name, results.SummaryFile)),
		Execution:    end.Name,
		ExecutionARN: end.ARN,
		CountsFrom:   results.CountsFromNone,
	}
	var in pipeline.WorkflowInput
	if json.Unmarshal([]byte(end.Input), &in) == nil {
		ev.Source = results.Source{Bucket: in.Source.Bucket, Key: in.Source.Key, Version: in.Source.VersionID}
		ev.Sequence = in.Source.Sequence
	}
	if end.Error != "" {
		// The error name only: the cause is free text from the workflow and could quote record data.
		ev.Failure = &results.Failure{Type: end.Error}
	}
	if s, ok := h.readSummary(ctx, log, end); ok {
		ev.Records, ev.Registered, ev.Rejected, ev.Unprocessed = s.Records, s.Registered, s.Rejected, s.Unprocessed
		ev.Sequence, ev.Refusal = s.Sequence, s.Refusal
		if s.Source.Key != "" {
			ev.Source = s.Source
		}
		if s.Failure != nil {
			ev.Failure = s.Failure
		}
		ev.CountsFrom = results.CountsFromSummary
		return ev
	}
	var out struct {
		Records, Registered, Rejected, Unprocessed *int64
	}
	if json.Unmarshal([]byte(end.Output), &out) == nil && (out.Records != nil || out.Registered != nil) {
		ev.Records, ev.Registered = aws.ToInt64(out.Records), aws.ToInt64(out.Registered)
		ev.Rejected, ev.Unprocessed = aws.ToInt64(out.Rejected), aws.ToInt64(out.Unprocessed)
		ev.CountsFrom = results.CountsFromExecution
	}
	return ev
}

// readSummary reads the file's summary.json; ok only when it describes end: the same execution,
// run and status (a summary of an earlier run of a redriven execution does not).
func (h *Handler) readSummary(ctx context.Context, log *slog.Logger, end fileEnd) (results.Summary, bool) {
	key := results.Key(h.owner(), end.Name, results.SummaryFile)
	out, err := h.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(h.cfg.Bucket), Key: aws.String(key)})
	if err != nil {
		if !source.Absent(err) {
			log.WarnContext(ctx, "summary.json could not be read; the event's counts come from the execution", "error", err)
		}
		return results.Summary{}, false
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, maxSummaryBytes))
	var s results.Summary
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil || s.Execution != end.Name || s.Status != end.Status || s.RedriveCount != end.RedriveCount {
		return results.Summary{}, false
	}
	return s, true
}

// tier is "pool" for a pool's tenant, else "silo".
func (h *Handler) tier() string {
	if h.cfg.Pool != "" {
		return "pool"
	}
	return "silo"
}
