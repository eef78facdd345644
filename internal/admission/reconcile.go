package admission

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/schema"
)

// maxReconcileHandovers bounds the slots one reconcile hands over; the rest wait for the next.
const maxReconcileHandovers = 10

// reconcileIfDue runs the gate's reconciler if nobody did for ReconcileEvery: it hands over the
// slots of leases nobody renewed for LeaseTTL, reservations nobody claimed in time, and free
// slots (a lost wake-up, a raised limit) while files wait. Its cost is per gate and period, never
// per waiter.
func (s *Store) reconcileIfDue(ctx context.Context, g Gate, m meta, now time.Time) ([]Wake, error) {
	if now.UnixMilli()-m.reconciledAt < s.reconcileEvery().Milliseconds() {
		return nil, nil
	}
	// The mark also keeps the gate's pace: files served per minute since the previous mark, which
	// sizes a waiting file's hold from its expected wait (Decision.Hold).
	served, pace := m.served(), int64(0)
	if elapsed := now.UnixMilli() - m.reconciledAt; m.reconciledAt > 0 && elapsed > 0 && served > m.mark {
		pace = max(1, (served-m.mark)*time.Minute.Milliseconds()/elapsed)
	}
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(g.Table),
		Key:                      key(g.queue(), schema.MetaSK),
		UpdateExpression:         aws.String("SET #c = :now, #m = :served, #p = :pace"),
		ConditionExpression:      aws.String("attribute_not_exists(#c) OR #c = :seen"),
		ExpressionAttributeNames: map[string]string{"#c": attrReconcile, "#m": attrMark, "#p": attrPace},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(now.UnixMilli()), ":seen": num(m.reconciledAt),
			":served": num(served), ":pace": num(pace)},
	})
	if conditionFailed(err) {
		return nil, nil // another caller reconciles
	}
	if err != nil {
		return nil, fmt.Errorf("mark the reconcile: %w", err)
	}
	return s.reconcile(ctx, g, now)
}

// ReconcileDue runs the gate's reconciler on its schedule (the controller's scheduled
// invocation): unless a release or a waiter ran it within ReconcileEvery, as reconcileIfDue.
func (s *Store) ReconcileDue(ctx context.Context, g Gate) ([]Wake, error) {
	if err := checkGates([]Gate{g}); err != nil {
		return nil, err
	}
	m, err := s.readMeta(ctx, g)
	if err != nil {
		return nil, err
	}
	return s.reconcileIfDue(ctx, g, m, s.now())
}

// Reconcile runs the gate's reconciler now (operators, tests).
func (s *Store) Reconcile(ctx context.Context, g Gate) ([]Wake, error) {
	if err := checkGates([]Gate{g}); err != nil {
		return nil, err
	}
	return s.reconcile(ctx, g, s.now())
}

func (s *Store) reconcile(ctx context.Context, g Gate, now time.Time) ([]Wake, error) {
	st, err := s.readSlots(ctx, g, now)
	if err != nil {
		return nil, err
	}
	var wakes []Wake
	handed := 0
	for _, l := range st.stale {
		if handed >= maxReconcileHandovers {
			return wakes, nil
		}
		if l.index == overflowSlot {
			if err := s.deleteLease(ctx, g, l.sk, l.execution, true); err != nil {
				return wakes, err
			}
			continue
		}
		w, err := s.free(ctx, g, l.index, holder{execution: l.execution, seen: l.renewedAt}, now)
		if err != nil {
			return wakes, err
		}
		wakes = append(wakes, w...)
		handed += len(w)
		if l.reservedUntil > 0 && l.wake.ReceiptHandle != "" {
			// A reservation nobody claimed: its waiter's wake-up was lost (a failed or throttled
			// visibility change, a releaser that stopped). Wake it again from its stored receipt, so
			// that it queues again under its ticket now rather than after its hold, up to 12 hours.
			again := l.wake
			again.Again = true
			wakes = append(wakes, again)
		}
	}
	used := map[int]bool{}
	for _, l := range st.leases {
		used[l.index] = true
	}
	for _, l := range st.stale {
		used[l.index] = true // handed over or freed above; the next reconcile sees it
	}
	free := st.limit - st.occupied()
	for i := 0; i < st.limit && free > 0 && handed < maxReconcileHandovers; i++ {
		if used[i] {
			continue
		}
		m, err := s.readMeta(ctx, g)
		if err != nil {
			return wakes, err
		}
		if m.waiting() == 0 {
			break
		}
		w, ok, err := s.handover(ctx, g, i, holder{}, m, now)
		if err != nil {
			return wakes, err
		}
		if !ok {
			break // nobody waits
		}
		wakes = append(wakes, w)
		handed++
		free--
	}
	return wakes, nil
}
