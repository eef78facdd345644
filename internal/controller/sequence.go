package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/s3event"
	"github.com/example/tenantpipeline/internal/sequence"
	"github.com/example/tenantpipeline/spec"
)

// A sequenced tenant's files (spec.Sequence; README, "Order") run in the sequence their names
// carry. Every decision is taken here, at the head of the tenant's FIFO message group, where the
// controller holds the tenant's lock, and recorded in the tenant's sequence state (internal/sequence),
// whose conditional writes guard against any second writer:
//
//   - a file whose turn it is becomes the state's running file and goes on as any file does
//     (admission, start, wait); its release moves the sequence on (sequenceDone), and the next held
//     file whose turn came is sent back to the group at once;
//   - a file ahead of its turn is held: its message body is written to held/<value>.json and the
//     message released, so it holds neither the group nor an admission slot;
//   - a file that can never run in the sequence is refused: summary.json says REFUSED and why, a
//     File Processed event says so, the message is released, and the object stays in the bucket
//     (pipectl replay may still run it, deliberately);
//   - while a number is missing, or a held name settles, the tenant has one tick: a control message
//     in the group pipeline.TickGroup(tenant) of the same queue, never the files' group, which
//     comes back about once a minute. It writes SequenceGapSeconds, and asks the head, through the
//     files' group, to skip the missing numbers after gapTimeout (onGap "skip") or to send back a
//     settled name. Its cost is per gap-minute, whatever the number of held files.

// tickInterval is the longest wait of a tick between two looks: one CloudWatch datapoint a minute.
const tickInterval = time.Minute

// tickMaxAge is when a tick is replaced by a fresh one: a FIFO message lives at most the queue's
// retention, 14 days (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html).
const tickMaxAge = 12 * 24 * time.Hour

// tickOrphanAfter is how long a tick waits for the state to record it before it takes itself for
// an orphan, whose arm's state write failed.
const tickOrphanAfter = 30 * time.Second

// maxSequenceAttempts bounds the read-change-write rounds of one decision.
const maxSequenceAttempts = 3

// maxRefusalsPerLook bounds the held files one look refuses (held files that fell behind after a
// skip or a set); the next look goes on.
const maxRefusalsPerLook = 25

// sequenceRequester is the requestedBy of the control messages the pipeline sends itself.
const sequenceRequester = "tenantpipeline"

// messageSender sends a message to the tenant's queue: a held file back to the tenant's group, a
// tick, or the tick's request to the head.
type messageSender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

var _ messageSender = (*sqs.Client)(nil)

// sequencer is a sequenced tenant's rule and store.
type sequencer struct {
	rule  spec.SequenceRule
	store sequence.Store
}

// sequencer returns the tenant's sequencer; nil for a tenant without a sequence. A rule the spec
// refuses never reaches a deployed controller, which checks every tenant at start-up.
func (h *Handler) sequencer() (*sequencer, error) {
	q := h.cfg.Tenant.Sequence
	if q == nil {
		return nil, nil
	}
	r, err := q.Compile()
	if err != nil {
		return nil, fmt.Errorf("the tenant's sequence: %w", err)
	}
	objs, ok := h.s3.(sequence.Objects)
	if !ok {
		return nil, errors.New("the controller's S3 client cannot list and delete objects")
	}
	return &sequencer{rule: r, store: sequence.Store{S3: objs, Bucket: h.cfg.Bucket, Pool: h.cfg.KeysPool, Tenant: h.cfg.Tenant.ID, Kind: r.Kind}}, nil
}

// value is the sequence value of the file key: its name relative to the tenant's prefix, read by
// the tenant's pattern. The event's key may be form-encoded (docs/data-path.md, "Object keys"): the key as given is tried first, then
// its form-decoded reading.
func (s *sequencer) value(key, prefix string) (spec.SequenceValue, bool) {
	rel := strings.TrimPrefix(key, prefix)
	if v, ok := s.rule.Value(rel); ok {
		return v, true
	}
	if dec, err := url.QueryUnescape(rel); err == nil && dec != rel {
		return s.rule.Value(dec)
	}
	return spec.SequenceValue{}, false
}

// sequenceFile decides a sequenced tenant's file at the head of the group. ok is false when the
// file goes on as any file does (its turn, or its execution exists already); d.sequence then
// names it.
func (h *Handler) sequenceFile(ctx context.Context, d *delivery, ev s3event.Event, name, arn string) (dec decision, done bool) {
	s, err := h.sequencer()
	if err != nil {
		// The configuration checks the sequence at start-up; a file is never quarantined for it.
		return h.serviceError(ctx, d, "read the tenant's sequence rule", err), true
	}
	if s == nil {
		return decision{}, false
	}
	key := ev.Detail.Object.Key
	v, matched := s.value(key, h.cfg.TenantPrefix)
	entry := sequence.Entry{Value: v.Text, Num: v.Num, Execution: name, Key: key}
	for range maxSequenceAttempts {
		st, etag, err := s.store.Load(ctx, sequence.New(s.rule))
		if err != nil {
			return h.serviceError(ctx, d, "read the tenant's sequence", err), true
		}
		verdict, reason := sequence.Run, ""
		var held *sequence.Held
		if !matched {
			verdict, reason = sequence.Refuse, sequence.RefusedUnmatched
		} else {
			ours := st.Running != nil && st.Running.Execution == name || st.Woken != nil && st.Woken.Execution == name
			if !ours {
				held, err = s.store.Held(ctx, v)
			}
			if err != nil {
				return h.serviceError(ctx, d, "read the tenant's held file", err), true
			}
			verdict, reason = sequence.Decide(st, v, name, held)
		}
		d.log = d.log.With("sequence", v.Text)
		switch verdict {
		case sequence.Run:
			if st.Running == nil || st.Running.Execution != name {
				woken := st.Woken != nil && st.Woken.Execution == name
				st.Running = &entry
				if woken {
					st.Woken = nil
				}
				st.GapSince, st.Updated = nil, h.now().UTC()
				if _, err := s.store.Save(ctx, st, etag); errors.Is(err, sequence.ErrConflict) {
					continue
				} else if err != nil {
					return h.serviceError(ctx, d, "record the tenant's running file", err), true
				}
				if held != nil || woken {
					if err := s.store.Release(ctx, v); err != nil {
						d.log.WarnContext(ctx, "the woken file's held object could not be deleted; it is refused as a duplicate when its turn is past", "error", err)
					}
				}
				d.log.InfoContext(ctx, "file's turn in the tenant's sequence", "next", sequence.Display(s.rule.Kind, entry))
			}
			d.sequence = &entry
			return decision{}, false
		case sequence.Again:
			d.log.InfoContext(ctx, "file held already (a repeated event); message released")
			return released, true
		case sequence.Refuse:
			// A file whose execution exists already ran (a repeated event of a file processed before
			// the tenant's state moved on): it goes on as usual, which releases it.
			if _, err := h.describe(ctx, arn); err == nil {
				return decision{}, false
			} else if !isNotFound(err) {
				return h.serviceError(ctx, d, "look up a refused file's execution", err), true
			}
			if err := h.refuse(ctx, d.log, s, entry, ev, reason); err != nil {
				return h.serviceError(ctx, d, "write a refused file's results", err), true
			}
			d.count(metrics.FilesRefused)
			return released, true
		case sequence.Hold:
			sent, _ := sentAt(d.rec)
			if sent.IsZero() {
				sent = h.now()
			}
			exists, err := s.store.Hold(ctx, sequence.Held{Value: v.Text, Num: v.Num, Execution: name, Key: key, Arrived: sent.UTC(), Body: d.rec.Body})
			if err != nil {
				return h.serviceError(ctx, d, "hold the file", err), true
			}
			if exists {
				continue // held meanwhile: decide again
			}
			st, err = h.lookAfterHold(ctx, d.log, s)
			if err != nil {
				// The file is held: its message goes, and its next delivery finds it held (Again).
				// The state is looked at again by the next file, release, request or tick.
				d.log.WarnContext(ctx, "the tenant's held files were not looked at after the hold", "error", err)
			}
			d.log.InfoContext(ctx, "file held: ahead of its turn in the tenant's sequence; message released",
				"next", next(s.rule.Kind, st), "gapSince", st.GapSince)
			d.count(metrics.FilesHeld)
			return released, true
		}
	}
	return h.serviceError(ctx, d, "decide the file's turn", errors.New("the tenant's sequence state changed during every attempt")), true
}

// lookAfterHold looks at the held files of a tenant with no running or woken file, after a file
// was held: a gap starts (and its tick), or a held file whose turn came is sent back. A conflict
// with another writer (the tick) reads again, so that a gap is never left without its tick.
func (h *Handler) lookAfterHold(ctx context.Context, log *slog.Logger, s *sequencer) (sequence.State, error) {
	for range maxSequenceAttempts {
		st, etag, err := s.store.Load(ctx, sequence.New(s.rule))
		if err != nil || st.Running != nil || st.Woken != nil {
			return st, err
		}
		if err := h.sequenceLook(ctx, log, s, &st); err != nil {
			return st, err
		}
		if _, err := s.store.Save(ctx, st, etag); !errors.Is(err, sequence.ErrConflict) {
			return st, err
		}
	}
	return sequence.State{}, errors.New("the tenant's sequence state changed during every attempt")
}

// next is the state's next value as operators read it.
func next(kind string, st sequence.State) string {
	if kind == spec.SequenceNumber {
		return strconv.FormatInt(st.Next, 10)
	}
	return "after " + strconv.Quote(st.Last)
}

// sequenceDone moves the sequence past the released running file e and sends back the next held
// file whose turn came. An error keeps the file's message: its next delivery finds the execution
// ended and comes here again.
func (h *Handler) sequenceDone(ctx context.Context, log *slog.Logger, e sequence.Entry) error {
	s, err := h.sequencer()
	if err != nil || s == nil {
		return err
	}
	for range maxSequenceAttempts {
		st, etag, err := s.store.Load(ctx, sequence.New(s.rule))
		if err != nil {
			return err
		}
		if !st.Done(e, h.now().UTC()) {
			return nil // moved on already (a repeated release)
		}
		if err := h.sequenceLook(ctx, log, s, &st); err != nil {
			return err
		}
		_, err = s.store.Save(ctx, st, etag)
		if errors.Is(err, sequence.ErrConflict) {
			continue
		}
		if err != nil {
			return err
		}
		log.InfoContext(ctx, "sequence moved on", "next", next(s.rule.Kind, st))
		return nil
	}
	return errors.New("the tenant's sequence state changed during every attempt")
}

// sequenceLook looks at the lowest held files of a tenant with no running or woken file: it
// refuses those that fell behind, sends back the one whose turn came, or starts (or keeps) the gap
// and the tick. It changes st; the caller saves it.
func (h *Handler) sequenceLook(ctx context.Context, log *slog.Logger, s *sequencer, st *sequence.State) error {
	now := h.now().UTC()
	for range maxRefusalsPerLook {
		low, err := s.store.Lowest(ctx)
		if err != nil {
			return err
		}
		if low == nil {
			if st.GapSince != nil {
				h.emitSequence(ctx, log, metrics.Seconds(metrics.SequenceGapSeconds, 0))
			}
			st.GapSince = nil
			return nil
		}
		v := spec.SequenceValue{Num: low.Num, Text: low.Value}
		entry := sequence.Entry{Value: low.Value, Num: low.Num, Execution: low.Execution, Key: low.Key}
		if reason, behind := behind(*st, v); behind {
			if err := h.refuseHeld(ctx, log, s, *low, reason); err != nil {
				return err
			}
			continue
		}
		due := s.rule.Kind == spec.SequenceNumber && low.Num == st.Next ||
			s.rule.Kind == spec.SequenceName && !now.Before(low.Arrived.Add(s.rule.Settle))
		if due {
			if err := h.sendBack(ctx, *low); err != nil {
				return err
			}
			if st.GapSince != nil {
				h.emitSequence(ctx, log, metrics.Seconds(metrics.SequenceGapSeconds, 0))
			}
			st.Woken, st.GapSince, st.Updated = &entry, nil, now
			log.InfoContext(ctx, "held file sent back: its turn came", "sequence", low.Value, "heldKey", low.Key)
			return nil
		}
		if s.rule.Kind == spec.SequenceNumber && st.GapSince == nil {
			st.GapSince = &now
			log.WarnContext(ctx, "sequence gap: a number is missing and later files are held", "next", st.Next, "lowestHeld", low.Num)
		}
		return h.armTick(ctx, log, st)
	}
	return nil
}

// behind reports whether a held value fell behind the sequence (after a skip or a set), and why it
// is refused.
func behind(st sequence.State, v spec.SequenceValue) (string, bool) {
	if st.Kind == spec.SequenceNumber {
		if v.Num >= st.Next {
			return "", false
		}
		if verdict, reason := sequence.Decide(st, v, "", nil); verdict == sequence.Refuse {
			return reason, true
		}
		return sequence.RefusedLate, true
	}
	switch {
	case st.Last == "" || v.Text > st.Last:
		return "", false
	case v.Text == st.Last:
		return sequence.RefusedDuplicate, true
	}
	return sequence.RefusedLate, true
}

// armTick sends the tenant's tick unless one is out (st.Tick).
func (h *Handler) armTick(ctx context.Context, log *slog.Logger, st *sequence.State) error {
	now := h.now().UTC()
	if st.Tick != nil && now.Sub(*st.Tick) < tickMaxAge {
		return nil
	}
	if err := h.sendControl(ctx, pipeline.TickGroup(h.cfg.Tenant.ID), pipeline.ControlSequenceTick, nil, "the tenant's sequence tick", now,
		"tick-"+strconv.FormatInt(now.UnixNano(), 10)); err != nil {
		return err
	}
	st.Tick = &now
	log.InfoContext(ctx, "sequence tick armed")
	return nil
}

// sendBack sends a held file's message back to the tenant's group. The deduplication id is the
// file's execution name: a second send within SQS's five-minute deduplication interval (a retried
// look) adds nothing.
func (h *Handler) sendBack(ctx context.Context, held sequence.Held) error {
	return h.sendFile(ctx, "seq-"+held.Execution, held.Body)
}

// sendFile sends a file's message to the tenant's group; a pool's counts it in the tenant's
// bounded backlog (Pool.handler sets it).
func (h *Handler) sendFile(ctx context.Context, dedupID, body string) error {
	if h.fileSender != nil {
		return h.fileSender(ctx, dedupID, body)
	}
	return h.send(ctx, h.cfg.Tenant.ID, dedupID, body)
}

func (h *Handler) send(ctx context.Context, group, dedupID, body string) error {
	q, ok := h.sqs.(messageSender)
	if !ok {
		return errors.New("the controller's SQS client cannot send messages")
	}
	_, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(h.cfg.QueueURL), MessageBody: aws.String(body),
		MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedupID)})
	if err != nil {
		return fmt.Errorf("send to the tenant's queue (group %s): %w", group, err)
	}
	return nil
}

// sendControl sends one of the pipeline's own control messages.
func (h *Handler) sendControl(ctx context.Context, group, action string, number *int64, reason string, at time.Time, id string) error {
	body, err := pipeline.EncodeControl(pipeline.ControlMessage{Type: pipeline.ControlType, Version: pipeline.ControlVersion, Action: action,
		Tenant: h.cfg.Tenant.ID, Number: number, RequestedBy: sequenceRequester, Reason: reason, RequestedAt: at, RequestID: id})
	if err != nil {
		return err
	}
	if pipeline.NeedsRecord(action) {
		if body, err = h.recordControl(ctx, body, id); err != nil {
			return err
		}
	}
	return h.send(ctx, group, id, string(body))
}

// recordControl writes the control record of the controller's own request (pipeline.NeedsRecord)
// once, with If-None-Match: *, and returns the body to send: the record's own when an earlier
// tick already wrote one for this request id, so every message of the request equals its record.
func (h *Handler) recordControl(ctx context.Context, body []byte, id string) ([]byte, error) {
	key := pipeline.ControlRequestKey(h.owner(), id)
	_, err := h.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(h.cfg.Bucket), Key: aws.String(key),
		Body: bytes.NewReader(body), ContentType: aws.String("application/json"), IfNoneMatch: aws.String("*")})
	if err == nil {
		return body, nil
	}
	if !conditionFailed(err) {
		return nil, fmt.Errorf("write the control record s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	b, found, err := h.getControlLimited(ctx, key, pipeline.MaxControlRecordBytes)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("the control record s3://%s/%s exists but cannot be read", h.cfg.Bucket, key)
	}
	return b, nil
}

// refuse writes a refused file's results and announces it.
func (h *Handler) refuse(ctx context.Context, log *slog.Logger, s *sequencer, e sequence.Entry, ev s3event.Event, reason string) error {
	in := h.fileInput(ev)
	in.Source.Sequence = e.Value
	queued := ev.Time
	sum := results.Summary{
		Version: results.SummaryVersion, Tenant: h.cfg.Tenant.ID, Tier: h.tier(), Execution: e.Execution,
		Source:   results.Source{Bucket: in.Source.Bucket, Key: in.Source.Key, Version: in.Source.VersionID},
		Status:   results.StatusRefused,
		Sequence: e.Value, Refusal: reason,
		OnInvalidRecord: h.cfg.Tenant.OnInvalidRecord,
		Files:           results.Files{Summary: results.URI(h.cfg.Bucket, results.Key(h.owner(), e.Execution, results.SummaryFile))},
	}
	if !queued.IsZero() {
		q := queued.UTC()
		sum.Timings.Queued = &q
	}
	if sum.OnInvalidRecord == "" {
		sum.OnInvalidRecord = pipeline.OnInvalidFailFile
	}
	body, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return err
	}
	key := results.Key(h.owner(), e.Execution, results.SummaryFile)
	if _, err := h.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(h.cfg.Bucket), Key: aws.String(key),
		Body: bytes.NewReader(append(body, '\n')), ContentType: aws.String("application/json")}); err != nil {
		return fmt.Errorf("put s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	if err := s.store.Refuse(ctx, sequence.Refused{Key: e.Key, Sequence: e.Value, Refusal: reason, Execution: e.Execution, At: h.now().UTC()}); err != nil {
		return err
	}
	input, _ := json.Marshal(in)
	if err := h.announce(ctx, log, fileEnd{Name: e.Execution, ARN: h.cfg.ExecutionARN(e.Execution), Status: results.StatusRefused, Input: string(input)}); err != nil {
		return err
	}
	log.WarnContext(ctx, "file refused: it is not registered and stays in the bucket (pipectl replay runs it deliberately)",
		"refusal", reason, "summaryKey", key)
	return nil
}

// refuseHeld refuses a held file that fell behind the sequence, and deletes its held object.
func (h *Handler) refuseHeld(ctx context.Context, log *slog.Logger, s *sequencer, held sequence.Held, reason string) error {
	ev, err := s3event.Parse([]byte(held.Body))
	if err != nil {
		return fmt.Errorf("the held file %s: %w", held.Key, err)
	}
	e := sequence.Entry{Value: held.Value, Num: held.Num, Execution: held.Execution, Key: held.Key}
	if err := h.refuse(ctx, log.With("key", held.Key, "sequence", held.Value), s, e, ev, reason); err != nil {
		return err
	}
	h.emitSequence(ctx, log, metrics.Count(metrics.FilesRefused, 1))
	return s.store.Release(ctx, spec.SequenceValue{Num: held.Num, Text: held.Value})
}

func (h *Handler) emitSequence(ctx context.Context, log *slog.Logger, ms ...metrics.Metric) {
	if err := h.metrics.Emit(ms...); err != nil {
		log.WarnContext(ctx, "metrics not written", "error", err)
	}
}

// sequenceControl performs a sequence-skip, sequence-set or sequence-wake at the head of the
// tenant's group.
func (h *Handler) sequenceControl(ctx context.Context, d *delivery, m pipeline.ControlMessage) decision {
	s, err := h.sequencer()
	if err == nil && s == nil {
		err = fmt.Errorf("%w: %s: the tenant has no sequence", pipeline.ErrInvalidControl, m.Action)
	}
	if err == nil && s.rule.Kind != spec.SequenceNumber && m.Action != pipeline.ControlSequenceWake {
		err = fmt.Errorf("%w: %s: the tenant's sequence is of kind %q, which has no numbers", pipeline.ErrInvalidControl, m.Action, s.rule.Kind)
	}
	if err != nil {
		return h.quarantine(ctx, d, err)
	}
	for range maxSequenceAttempts {
		st, etag, err := s.store.Load(ctx, sequence.New(s.rule))
		if err != nil {
			return h.serviceError(ctx, d, "read the tenant's sequence", err)
		}
		changed, note, err := h.applyControl(ctx, s, &st, m)
		if err != nil {
			return h.serviceError(ctx, d, m.Action, err)
		}
		if st.Running == nil && st.Woken == nil {
			if err := h.sequenceLook(ctx, d.log, s, &st); err != nil {
				return h.serviceError(ctx, d, "look at the tenant's held files", err)
			}
			changed = true
		}
		if changed {
			if _, err := s.store.Save(ctx, st, etag); errors.Is(err, sequence.ErrConflict) {
				continue
			} else if err != nil {
				return h.serviceError(ctx, d, "save the tenant's sequence", err)
			}
		}
		d.log.InfoContext(ctx, "sequence request performed: "+note, "next", next(s.rule.Kind, st))
		return released
	}
	return h.serviceError(ctx, d, m.Action, errors.New("the tenant's sequence state changed during every attempt"))
}

// applyControl changes st as m asks; note says what was done, for the audit line.
func (h *Handler) applyControl(ctx context.Context, s *sequencer, st *sequence.State, m pipeline.ControlMessage) (changed bool, note string, err error) {
	now := h.now().UTC()
	switch m.Action {
	case pipeline.ControlSequenceWake:
		return false, "look at the held files", nil
	case pipeline.ControlSequenceSet:
		n := *m.Number
		if n > st.Next {
			st.AddSkip(sequence.Skip{From: st.Next, To: n - 1, At: now, By: m.RequestedBy, Reason: "set: " + m.Reason})
		}
		st.Next, st.Woken, st.GapSince, st.Updated = n, nil, nil, now
		return true, fmt.Sprintf("next number set to %d", n), nil
	}
	n := *m.Number
	if m.RequestedBy == sequenceRequester {
		// onGap "skip": the tick asked to skip the gap that starts at n; only if it is still the gap.
		if st.Next != n || st.Running != nil || st.Woken != nil {
			return false, fmt.Sprintf("gap at %d closed already; nothing skipped", n), nil
		}
		to := n
		if low, err := s.store.Lowest(ctx); err != nil {
			return false, "", err
		} else if low != nil && low.Num > n {
			to = low.Num - 1
		}
		st.AddSkip(sequence.Skip{From: n, To: to, At: now, By: m.RequestedBy, Reason: m.Reason})
		st.PassSkips()
		st.GapSince, st.Updated = nil, now
		h.emitSequence(ctx, slog.Default(), metrics.Seconds(metrics.SequenceGapSeconds, 0))
		return true, fmt.Sprintf("missing numbers %d to %d skipped after the gap timeout", n, to), nil
	}
	switch {
	case n < st.Next:
		return false, fmt.Sprintf("number %d is behind the next expected %d; nothing skipped", n, st.Next), nil
	case st.Running != nil && st.Running.Num == n, st.Woken != nil && st.Woken.Num == n:
		return false, fmt.Sprintf("number %d has a file that runs; nothing skipped", n), nil
	}
	if held, err := s.store.Held(ctx, spec.SequenceValue{Num: n}); err != nil {
		return false, "", err
	} else if held != nil {
		return false, fmt.Sprintf("number %d has a held file; nothing skipped", n), nil
	}
	st.AddSkip(sequence.Skip{From: n, To: n, At: now, By: m.RequestedBy, Reason: m.Reason})
	st.PassSkips()
	st.Updated = now
	return true, fmt.Sprintf("number %d skipped", n), nil
}

// sequenceTick is one look of the tenant's tick, beside the head of the files' group: it reads, and
// writes only its own field of the state (Tick), with the state's conditional write.
func (h *Handler) sequenceTick(ctx context.Context, d *delivery, m pipeline.ControlMessage) decision {
	s, err := h.sequencer()
	if err != nil || s == nil {
		d.log.InfoContext(ctx, "sequence tick of a tenant without a sequence; released")
		return released
	}
	now := h.now().UTC()
	st, etag, err := s.store.Load(ctx, sequence.New(s.rule))
	if err != nil {
		return h.serviceError(ctx, d, "read the tenant's sequence", err)
	}
	switch {
	case st.Tick != nil && st.Tick.After(m.RequestedAt):
		d.log.InfoContext(ctx, "sequence tick replaced by a newer one; released")
		return released
	case st.Tick == nil || st.Tick.Before(m.RequestedAt):
		// The head sends a tick before it saves the state that records it, and a tick can be
		// delivered in between: it waits for its record. One whose record never came (the save
		// failed; the head arms another at its next look) goes after tickOrphanAfter.
		if now.Sub(m.RequestedAt) < tickOrphanAfter {
			return h.hold(ctx, d, time.Second)
		}
		d.log.InfoContext(ctx, "sequence tick never recorded in the state; released")
		return released
	}
	stop := func() decision {
		st.Tick = nil
		if _, err := s.store.Save(ctx, st, etag); errors.Is(err, sequence.ErrConflict) {
			return h.hold(ctx, d, time.Second) // the head changed the state: look again
		} else if err != nil {
			return h.serviceError(ctx, d, "clear the tick", err)
		}
		d.log.InfoContext(ctx, "sequence tick done")
		return released
	}
	if sent, ok := sentAt(d.rec); ok && now.Sub(sent) >= tickMaxAge {
		st.Tick = nil
		if err := h.armTick(ctx, d.log, &st); err != nil {
			return h.serviceError(ctx, d, "replace the tick", err)
		}
		if _, err := s.store.Save(ctx, st, etag); err != nil {
			return h.hold(ctx, d, time.Second)
		}
		return released
	}
	if st.Running != nil || st.Woken != nil {
		return stop() // the head looks again when that file is released
	}
	if s.rule.Kind == spec.SequenceName {
		low, err := s.store.Lowest(ctx)
		if err != nil {
			return h.serviceError(ctx, d, "read the lowest held file", err)
		}
		if low == nil {
			return stop()
		}
		due := low.Arrived.Add(s.rule.Settle)
		if now.Before(due) {
			return h.hold(ctx, d, ceilSecond(min(due.Sub(now), maxVisibility)))
		}
		if err := h.sendControl(ctx, h.cfg.Tenant.ID, pipeline.ControlSequenceWake, nil, "a held name settled", now, "wake-"+low.Execution); err != nil {
			return h.serviceError(ctx, d, "ask the head to send the settled file back", err)
		}
		return stop()
	}
	if st.GapSince == nil {
		return stop()
	}
	gap := st.Gap(now)
	ms := []metrics.Metric{metrics.Seconds(metrics.SequenceGapSeconds, gap)}
	wait := tickInterval
	if gap >= s.rule.GapTimeout {
		ms = append(ms, metrics.Count(metrics.SequenceGapsOverdue, 1))
		d.log.ErrorContext(ctx, "sequence gap over the tenant's gapTimeout: the missing file is not here", "next", st.Next,
			"gapSince", st.GapSince, "gapSeconds", gap.Seconds(), "onGap", s.rule.OnGap)
		if s.rule.OnGap == spec.OnGapSkip {
			n := st.Next
			reason := fmt.Sprintf("onGap skip: number %d missing for %s, over the gapTimeout of %s", n, gap.Round(time.Second), s.rule.GapTimeout)
			if err := h.sendControl(ctx, h.cfg.Tenant.ID, pipeline.ControlSequenceSkip, &n, reason, now,
				fmt.Sprintf("gap-%d-%d", n, st.GapSince.UnixMilli())); err != nil {
				return h.serviceError(ctx, d, "ask the head to skip the gap", err)
			}
		}
	} else {
		wait = min(wait, s.rule.GapTimeout-gap)
	}
	h.emitSequence(ctx, d.log, ms...)
	return h.hold(ctx, d, ceilSecond(wait))
}

// ceilSecond rounds d up to whole seconds, at least one: a visibility timeout has whole seconds.
func ceilSecond(d time.Duration) time.Duration {
	return max(time.Second, (d + time.Second - 1).Truncate(time.Second))
}
