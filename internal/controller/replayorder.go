package controller

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// A replay must never outrank a newer file, so a DynamoDB tenant's replay carries its original
// file's order (docs/data-path.md, "Replays"). The control message only names the original
// execution (pipectl finds it); the order itself comes from that execution's input, which the
// controller wrote when it started the file, and only if that execution registered the same object
// version. It is clamped to the tenant's counter (orderLimit), so even a forged input cannot rank
// a replay above the files to come. An original started before the controller took orders ranks
// the replay by its own event time and sequencer, exactly as its records were written.
//
// When there is no original to read (none named, expired: Step Functions keeps a closed execution
// for 90 days, run by the tenant's state machine before a move, or another version's), the replay
// is unordered: its records rank below every stored item, so it only writes keys no item holds.

// rankReplay sets src's order (or event time and sequencer, or Unordered) for replay m.
func (h *Handler) rankReplay(ctx context.Context, d *delivery, m pipeline.ControlMessage, src *pipeline.Source) error {
	orig, why, err := h.originalSource(ctx, m)
	if err != nil {
		return err
	}
	switch {
	case why != "":
	case orig.Order > 0:
		limit, err := h.orderLimit(ctx)
		if err != nil {
			return fmt.Errorf("read the tenant's order counter: %w", err)
		}
		src.Order = min(orig.Order, limit)
		attrs := []any{"order", src.Order, "originalExecution", m.Source.OriginalExecution}
		if src.Order < orig.Order {
			d.log.WarnContext(ctx, "replay's original order is above the tenant's counter; clamped", append(attrs, "originalOrder", orig.Order)...)
		} else {
			d.log.InfoContext(ctx, "replay ranks as its original file", attrs...)
		}
		return nil
	case orig.Unordered:
		why = "the original execution was an unordered replay itself"
	case orig.EventTime != "" || orig.Sequencer != "":
		src.EventTime, src.Sequencer = orig.EventTime, orig.Sequencer
		d.log.InfoContext(ctx, "replay ranks as its original file (event time format)", "originalExecution", m.Source.OriginalExecution)
		return nil
	default:
		why = "the original execution's input carries no order"
	}
	src.Unordered = true
	d.log.WarnContext(ctx, "replay's original order unknown: it only fills keys no item holds", "why", why)
	return nil
}

// originalSource reads the source of the execution m names. why says why there is none.
func (h *Handler) originalSource(ctx context.Context, m pipeline.ControlMessage) (src pipeline.Source, why string, err error) {
	name := m.Source.OriginalExecution
	if name == "" {
		return src, "the request names no original execution", nil
	}
	out, err := h.describe(ctx, h.cfg.ExecutionARN(name))
	if isNotFound(err) {
		return src, fmt.Sprintf("the tenant has no execution %q (Step Functions keeps a closed execution for 90 days)", name), nil
	}
	if err != nil {
		return src, "", fmt.Errorf("describe the replay's original execution: %w", err)
	}
	if err := h.ownExecution(name, out); err != nil {
		return src, "", fmt.Errorf("original execution: %w", err)
	}
	var in pipeline.WorkflowInput
	if err := json.Unmarshal([]byte(aws.ToString(out.Input)), &in); err != nil {
		return src, fmt.Sprintf("execution %q has an input that is not a workflow input", name), nil
	}
	if !m.Source.IsVersionOf(in.Source) {
		return src, fmt.Sprintf("execution %q registered another object version", name), nil
	}
	return in.Source, "", nil
}
