package ops

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/sequence"
	"github.com/example/tenantpipeline/spec"
)

// A sequenced tenant (spec.Sequence) keeps its place in its own order of files in its bucket
// (internal/sequence): status reads it, and `sequence skip` and `sequence set` ask the controller
// to move it, with a control message in the tenant's message group (docs/operations.md,
// "Sequenced tenants").

// MaxHeldListed is how many held values status lists; HeldCount counts them all.
const MaxHeldListed = 20

// SequenceStatus is a sequenced tenant's place in its sequence, as status reports it (the
// "sequence" object of a tenant's row; null for a tenant without a sequence).
type SequenceStatus struct {
	// Kind is "number" or "name".
	Kind string `json:"kind"`
	// Next is the number the tenant expects next (kind number); null for kind name.
	Next *int64 `json:"next"`
	// Last is the last name processed (kind name); null for kind number, and before the first name.
	Last *string `json:"last"`
	// Running is the value of the file whose turn it is and whose execution runs; null when none.
	Running *string `json:"running"`
	// Held are the values of the files held ahead of their turn, oldest (lowest) first, at most
	// MaxHeldListed: numbers (JSON numbers) for kind number, names (strings) for kind name;
	// HeldCount counts every held file.
	Held      []any `json:"held"`
	HeldCount int   `json:"heldCount"`
	// GapSince is when the tenant began to wait for a missing number while holding later ones;
	// null without a gap.
	GapSince *time.Time `json:"gapSince"`
}

// sequenceRule is the tenant's sequence as deployed: a silo tenant's from its controller's TENANT
// variable, a pooled tenant's from its row of the pool's settings file. nil when the tenant has
// none, or its controller predates the settings variable.
func (o *Ops) sequenceRule(ctx context.Context, t pipeline.TenantOutput) (*spec.SequenceRule, error) {
	var seq *spec.Sequence
	if t.Pool != "" {
		p, ok := o.poolNamed(t.Pool)
		if !ok || p.settings == nil {
			return nil, fmt.Errorf("tenant %s: pool %s's settings file was not read", t.ID, t.Pool)
		}
		pt, err := p.settings.Tenant(t.ID)
		if err != nil {
			return nil, fmt.Errorf("tenant %s: pool %s's %s in the code of %s: %w", t.ID, t.Pool, pipeline.PoolSettingsFile, t.ControllerFunction, err)
		}
		seq = pt.Settings.Sequence
	} else {
		env, err := o.functionEnv(ctx, t.ControllerFunction)
		if err != nil {
			return nil, fmt.Errorf("tenant %s: get function %s (its %s variable holds the tenant's sequence): %w", t.ID, t.ControllerFunction, pipeline.EnvTenant, err)
		}
		s, err := tenantFromEnv(t, env)
		if err != nil || s == nil {
			return nil, err
		}
		seq = s.Sequence
	}
	if seq == nil {
		return nil, nil
	}
	r, err := seq.Compile()
	if err != nil {
		// The construct checked it before deploying it; a rule that does not compile now is not
		// one pipectl guesses at.
		return nil, fmt.Errorf("tenant %s: its deployed sequence.pattern: %w", t.ID, err)
	}
	return &r, nil
}

// sequenceStore is the store of the tenant's sequence objects, in its bucket (a pool's bucket for
// a pooled tenant).
func (o *Ops) sequenceStore(t pipeline.TenantOutput, r spec.SequenceRule) sequence.Store {
	return sequence.Store{S3: o.S3, Bucket: t.Bucket, Pool: t.KeysPool, Tenant: t.ID, Kind: r.Kind}
}

// sequenceStatus reads the tenant's place in its sequence: one GET of its state and one LIST page
// per 1,000 held files (the held values come from the keys alone).
func (o *Ops) sequenceStatus(ctx context.Context, t pipeline.TenantOutput, r spec.SequenceRule) (*SequenceStatus, error) {
	store := o.sequenceStore(t, r)
	st, _, err := store.Load(ctx, sequence.New(r))
	if err != nil {
		return nil, err
	}
	held, err := store.List(ctx, MaxHeldListed)
	if err != nil {
		return nil, err
	}
	s := &SequenceStatus{Kind: r.Kind, Held: []any{}, HeldCount: held.Count, GapSince: st.GapSince}
	for _, v := range held.Values {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && r.Kind == spec.SequenceNumber {
			s.Held = append(s.Held, n)
		} else {
			s.Held = append(s.Held, v)
		}
	}
	if r.Kind == spec.SequenceNumber {
		s.Next = aws.Int64(st.Next)
	} else if st.Last != "" {
		s.Last = aws.String(st.Last)
	}
	if st.Running != nil {
		s.Running = aws.String(sequence.Display(r.Kind, *st.Running))
	}
	return s, nil
}

// SequenceResult is the outcome of sequence skip and sequence set: the control message sent.
type SequenceResult struct {
	Tenant string `json:"tenant"`
	// Action is pipeline.ControlSequenceSkip or pipeline.ControlSequenceSet.
	Action string `json:"action"`
	Number int64  `json:"number"`
	// Next is the number the tenant expected next when skip read its state; null for set, which
	// reads none (the controller reads it at the head, where it sets the number).
	Next        *int64 `json:"next"`
	RequestID   string `json:"requestId"`
	MessageID   string `json:"messageId"`
	RequestedBy string `json:"requestedBy"`
	Reason      string `json:"reason"`
	// MessageGroup is the tenant's message group the request travels in, on QueueURL.
	QueueURL     string `json:"queueUrl"`
	MessageGroup string `json:"messageGroup"`
}

// SequenceSkip asks the controller to skip the missing number n of a sequenced tenant of kind
// number, so that the files held after it run. It refuses a number the tenant has passed (n below
// the next expected one), one whose file is held, runs or was woken already (skipping it would
// drop a file that arrived), and one skipped already; the controller decides again at the head of
// the tenant's group, in order with its files.
func (o *Ops) SequenceSkip(ctx context.Context, id string, n int64, reason string) (SequenceResult, error) {
	t, r, err := o.sequenceRequest(ctx, id, "skip", n, reason)
	if err != nil {
		return SequenceResult{}, err
	}
	store := o.sequenceStore(t, *r)
	st, _, err := store.Load(ctx, sequence.New(*r))
	if err != nil {
		return SequenceResult{}, fmt.Errorf("tenant %s: read its sequence state: %w", id, err)
	}
	if n < st.Next {
		return SequenceResult{}, refuse("tenant %s expects number %d next: %d is behind it, so there is nothing to skip", id, st.Next, n)
	}
	for _, e := range []struct {
		what  string
		entry *sequence.Entry
	}{{"runs now", st.Running}, {"was sent back to run", st.Woken}} {
		if e.entry != nil && e.entry.Num == n {
			return SequenceResult{}, refuse("tenant %s's file of number %d %s (execution %s): skipping it would drop a file that arrived", id, n, e.what, e.entry.Execution)
		}
	}
	for _, s := range st.Skipped {
		if s.From <= n && n <= s.To {
			return SequenceResult{}, refuse("tenant %s's number %d is skipped already (%d to %d, by %s at %s: %s)", id, n, s.From, s.To, s.By, s.At.UTC().Format(time.RFC3339), s.Reason)
		}
	}
	held, err := store.Held(ctx, spec.SequenceValue{Num: n})
	if err != nil {
		return SequenceResult{}, fmt.Errorf("tenant %s: read its held file of number %d: %w", id, n, err)
	}
	if held != nil {
		return SequenceResult{}, refuse("tenant %s holds a file of number %d already (%s, execution %s): it runs in its turn; skipping it would drop it", id, n, held.Key, held.Execution)
	}
	res, err := o.sendSequence(ctx, t, pipeline.ControlSequenceSkip, n, reason)
	if err != nil {
		return SequenceResult{}, err
	}
	res.Next = aws.Int64(st.Next)
	return res, nil
}

// SequenceSet asks the controller to expect the number n next: for a tenant that starts
// mid-stream, or to go back to a number it passed. It reads no state: the controller does, at the
// head of the tenant's group.
func (o *Ops) SequenceSet(ctx context.Context, id string, n int64, reason string) (SequenceResult, error) {
	t, _, err := o.sequenceRequest(ctx, id, "set", n, reason)
	if err != nil {
		return SequenceResult{}, err
	}
	return o.sendSequence(ctx, t, pipeline.ControlSequenceSet, n, reason)
}

// sequenceRequest refuses what neither skip nor set can do: no reason, a negative number, a tenant
// without a sequence of numbers.
func (o *Ops) sequenceRequest(ctx context.Context, id, verb string, n int64, reason string) (pipeline.TenantOutput, *spec.SequenceRule, error) {
	if strings.TrimSpace(reason) == "" {
		return pipeline.TenantOutput{}, nil, refuse("sequence %s of tenant %s needs --reason: it is the audit record", verb, id)
	}
	if n < 0 {
		return pipeline.TenantOutput{}, nil, refuse("sequence %s of tenant %s: number %d is negative; a sequence's numbers are 0 or more", verb, id, n)
	}
	t, err := o.Tenant(ctx, id)
	if err != nil {
		return pipeline.TenantOutput{}, nil, err
	}
	r, err := o.sequenceRule(ctx, t)
	switch {
	case err != nil:
		return pipeline.TenantOutput{}, nil, err
	case r == nil:
		return pipeline.TenantOutput{}, nil, refuse("tenant %s has no sequence: its files run in arrival order, and there is no number to %s", id, verb)
	case r.Kind != spec.SequenceNumber:
		return pipeline.TenantOutput{}, nil, refuse("tenant %s's sequence is of kind %q: names have no numbers to %s (a held name runs once it has settled)", id, r.Kind, verb)
	}
	return t, r, nil
}

// sendSequence sends the request into the tenant's message group, audited as a redrive is.
func (o *Ops) sendSequence(ctx context.Context, t pipeline.TenantOutput, action string, n int64, reason string) (SequenceResult, error) {
	m := pipeline.ControlMessage{Action: action, Number: aws.Int64(n)}
	res := SequenceResult{Tenant: t.ID, Action: action, Number: n, RequestID: o.NewRequestID(), QueueURL: t.QueueURL, MessageGroup: t.ID}
	id, err := o.sendControl(ctx, t, &m, res.RequestID, reason)
	if err != nil {
		return SequenceResult{}, err
	}
	res.MessageID, res.RequestedBy, res.Reason = id, m.RequestedBy, m.Reason
	return res, nil
}
