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

// Release frees the execution's leases (live or stale) in every gate, handing each freed slot to
// the gate's next waiter, and returns the waiters to wake. Releasing an execution that holds none
// is not an error: status events and deliveries may both release one file.
func (s *Store) Release(ctx context.Context, gates []Gate, tenant, execution string) (int, []Wake, error) {
	if err := checkGates(gates); err != nil {
		return 0, nil, err
	}
	now := s.now()
	n := 0
	var wakes []Wake
	for _, g := range gates {
		freed, w, err := s.releaseGate(ctx, g, tenant, execution, now)
		if err != nil {
			return n, wakes, fmt.Errorf("admission gate %s: %w", g.Key, err)
		}
		wakes = append(wakes, w...)
		if !freed {
			continue // a second release reads one item, no more
		}
		n++
		// A release runs the gate's reconciler when it is due, as an ask does: a gate whose
		// waiters all wait out long holds is still reconciled while its files end.
		m, err := s.readMeta(ctx, g)
		if err != nil {
			return n, wakes, fmt.Errorf("admission gate %s: %w", g.Key, err)
		}
		w, err = s.reconcileIfDue(ctx, g, m, now)
		if err != nil {
			return n, wakes, fmt.Errorf("admission gate %s: %w", g.Key, err)
		}
		wakes = append(wakes, w...)
	}
	return n, wakes, nil
}

// releaseGate frees the execution's lease in one gate. The slot goes to the next waiter, unless
// the gate has overflow leases (one of them moves in) or its effective limit is now below the
// index (it shrinks).
func (s *Store) releaseGate(ctx context.Context, g Gate, tenant, execution string, now time.Time) (bool, []Wake, error) {
	p, err := s.readPlace(ctx, g, tenant)
	if err != nil {
		return false, nil, err
	}
	idx, found := 0, false
	switch {
	case p.of(execution) && (p.state == stateHolding || p.state == stateReserved):
		idx, found = p.slot, true
	case p.of(execution) && p.state == stateReleased:
		return false, nil, nil // released already
	default:
		// A late event of an earlier file, or a place never written: look among the slots.
		st, err := s.readSlots(ctx, g, now)
		if err != nil {
			return false, nil, err
		}
		if l, ok := st.holder(execution); ok {
			idx, found = l.index, true
		}
	}
	// The slot is passed on before the place says released: a release that fails half-way is
	// retried in full.
	var wakes []Wake
	if found {
		if idx == overflowSlot {
			err = s.deleteLease(ctx, g, schema.OverflowSK(execution), execution, true)
		} else {
			wakes, err = s.free(ctx, g, idx, holder{execution: execution}, now)
		}
		if err != nil {
			return false, wakes, err
		}
	}
	if p.of(execution) {
		if p.state == stateWaiting {
			if err := s.leaveQueue(ctx, g, p); err != nil {
				return found, wakes, err
			}
		}
		if err := s.markReleased(ctx, g, tenant, execution, now); err != nil {
			return found, wakes, err
		}
	}
	return found, wakes, nil
}

// free passes slot idx, held by execution, on: to an overflow lease, to the next waiter, or to
// nobody.
func (s *Store) free(ctx context.Context, g Gate, idx int, from holder, now time.Time) ([]Wake, error) {
	m, err := s.readMeta(ctx, g)
	if err != nil {
		return nil, err
	}
	if m.overflow > 0 {
		moved, err := s.moveOverflowIn(ctx, g, idx, from, now)
		if err != nil || moved {
			return nil, err
		}
	}
	limit, err := s.effectiveLimit(ctx, g)
	if err != nil {
		return nil, err
	}
	if idx < limit && m.waiting() > 0 {
		w, ok, err := s.handover(ctx, g, idx, from, m, now)
		if err != nil {
			return nil, err
		}
		if ok {
			return []Wake{w}, nil
		}
	}
	cond, names, values := from.condition()
	_, err = s.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(g.Table), Key: key(g.Key, schema.SlotSK(idx)),
		ConditionExpression: aws.String(cond), ExpressionAttributeNames: names, ExpressionAttributeValues: values})
	if err != nil && !conditionFailed(err) {
		return nil, fmt.Errorf("release slot %d: %w", idx, err)
	}
	return nil, nil
}

// moveOverflowIn gives slot idx to a file holding an overflow lease, so the gate shrinks back to
// its indexes.
func (s *Store) moveOverflowIn(ctx context.Context, g Gate, idx int, from holder, now time.Time) (bool, error) {
	out, err := s.DB.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(g.Table),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :x)"),
		ExpressionAttributeNames:  map[string]string{"#pk": schema.AttrPK, "#sk": schema.AttrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(g.Key), ":x": str(schema.OverflowPrefix)},
		Limit:                     aws.Int32(1),
	})
	if err != nil {
		return false, fmt.Errorf("read the overflow leases: %w", err)
	}
	if len(out.Items) == 0 {
		return false, s.addOverflow(ctx, g, -1) // the count ran ahead of the leases
	}
	it := out.Items[0]
	r := Request{Execution: sOf(it, attrExecution), Tenant: sOf(it, attrTenant)}
	cond, names, values := from.condition()
	_, err = s.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(g.Table), Item: leaseItem(g, idx, r, now, s.leaseExpiry(now)),
		ConditionExpression: aws.String(cond), ExpressionAttributeNames: names, ExpressionAttributeValues: values})
	if conditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("move an overflow lease into slot %d: %w", idx, err)
	}
	if err := s.deleteLease(ctx, g, schema.OverflowSK(r.Execution), r.Execution, true); err != nil {
		return true, err
	}
	_, err = s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(g.Table),
		Key:                       key(g.queue(), schema.PlaceSK(r.Tenant)),
		UpdateExpression:          aws.String("SET #slot = :idx"),
		ConditionExpression:       aws.String("#e = :exec"),
		ExpressionAttributeNames:  map[string]string{"#slot": attrSlot, "#e": attrExecution},
		ExpressionAttributeValues: map[string]types.AttributeValue{":idx": num(int64(idx)), ":exec": str(r.Execution)},
	})
	if err != nil && !conditionFailed(err) {
		return true, fmt.Errorf("move an overflow lease into slot %d: %w", idx, err)
	}
	return true, nil
}

func (s *Store) deleteLease(ctx context.Context, g Gate, sk, execution string, overflow bool) error {
	_, err := s.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(g.Table),
		Key:                       key(g.Key, sk),
		ConditionExpression:       aws.String("#e = :exec"),
		ExpressionAttributeNames:  map[string]string{"#e": attrExecution},
		ExpressionAttributeValues: map[string]types.AttributeValue{":exec": str(execution)},
	})
	if conditionFailed(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release %s: %w", sk, err)
	}
	if overflow {
		return s.addOverflow(ctx, g, -1)
	}
	return nil
}

// leaveQueue deletes a waiting place's entry, counting it served.
func (s *Store) leaveQueue(ctx context.Context, g Gate, p place) error {
	_, err := s.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(g.Table),
		Key:                       key(g.queue(), schema.EntrySK(p.weight, p.ticket)),
		ConditionExpression:       aws.String("#e = :exec"),
		ExpressionAttributeNames:  map[string]string{"#e": attrExecution},
		ExpressionAttributeValues: map[string]types.AttributeValue{":exec": str(p.execution)},
	})
	if conditionFailed(err) {
		return nil // a handover took it, and counted it
	}
	if err != nil {
		return fmt.Errorf("leave the queue: %w", err)
	}
	return s.addServed(ctx, g, p.weight, 1)
}

// Pause gives back whatever the execution holds or waits for, and marks the tenant's places
// paused, so that its later deliveries take nothing (Decision.Paused) until Resume. A paused
// tenant's time does not count as waiting: after Resume it queues anew.
func (s *Store) Pause(ctx context.Context, gates []Gate, tenant, execution string) ([]Wake, error) {
	if err := checkGates(gates); err != nil {
		return nil, err
	}
	now := s.now()
	var wakes []Wake
	for _, g := range gates {
		_, w, err := s.releaseGate(ctx, g, tenant, execution, now)
		if err != nil {
			return wakes, fmt.Errorf("admission gate %s: %w", g.Key, err)
		}
		wakes = append(wakes, w...)
		r := Request{Execution: execution, Tenant: tenant}
		if err := s.putPlace(ctx, g, r, place{execution: execution, state: statePaused}, now); err != nil {
			return wakes, fmt.Errorf("admission gate %s: %w", g.Key, err)
		}
	}
	return wakes, nil
}

// Resume deletes the tenant's paused places; its file then asks admission as a new one.
func (s *Store) Resume(ctx context.Context, gates []Gate, tenant, execution string) error {
	for _, g := range gates {
		if err := s.deletePlace(ctx, g, tenant, execution); err != nil {
			return fmt.Errorf("admission gate %s: %w", g.Key, err)
		}
	}
	return nil
}
