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

// A file that passes several gates gives back the slots it took when a later gate is full, so that
// no file holds one gate's slot while it waits for another's. It keeps its place at each gate it
// gave back: its place there says "yielded" with its ticket and when it first waited. When the
// later gate admits it and it asks again, it queues under that ticket, ahead of every file that
// came after it (or takes a free slot when nobody waits), instead of at the back: under contention
// at both gates it would otherwise bounce between them indefinitely.
//
// A file that took a free slot has no ticket there; it takes one as it gives the slot back, counted
// served at once (it does not wait there now), so that it ranks before every later file.

// yieldGate gives the file's slot of gate g back (handing it to the gate's next waiter) and keeps
// the file's place there.
func (s *Store) yieldGate(ctx context.Context, g Gate, r Request, since, now time.Time) ([]Wake, error) {
	p, err := s.readPlace(ctx, g, r.Tenant)
	if err != nil {
		return nil, err
	}
	ticket, weight := int64(0), r.Weight
	if p.of(r.Execution) && p.ticket > 0 {
		ticket, weight = p.ticket, max(p.weight, 1)
	}
	if ticket == 0 {
		if ticket, err = s.reserveTicket(ctx, g, r.Weight); err != nil {
			return nil, err
		}
	}
	_, wakes, err := s.releaseGate(ctx, g, r.Tenant, r.Execution, now)
	if err != nil {
		return wakes, err
	}
	return wakes, s.putPlace(ctx, g, r, place{execution: r.Execution, state: stateYielded, ticket: ticket, weight: weight, since: since.UnixMilli()}, now)
}

// reserveTicket takes a ticket of the weight and counts it served in the same write: the file it
// is for does not wait at the gate now, and no handover looks for its entry.
func (s *Store) reserveTicket(ctx context.Context, g Gate, weight int) (int64, error) {
	out, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(g.Table),
		Key:                       key(g.queue(), schema.CounterSK(weight)),
		UpdateExpression:          aws.String("ADD #i :one, #s :one"),
		ExpressionAttributeNames:  map[string]string{"#i": attrIssued, "#s": attrServed},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return 0, fmt.Errorf("keep the file's place: %w", err)
	}
	return nOf(out.Attributes, attrIssued), nil
}

// comeBack is the ask of a file that yielded the gate: a free slot when nobody waits, else its
// place in the queue under its ticket.
func (s *Store) comeBack(ctx context.Context, g Gate, r Request, p place, now time.Time) (Decision, error) {
	m, err := s.readMeta(ctx, g)
	if err != nil {
		return Decision{}, err
	}
	if m.waiting() == 0 {
		st, err := s.readSlots(ctx, g, now)
		if err != nil {
			return Decision{}, err
		}
		d := Decision{Running: st.occupied(), Limit: st.limit, Free: max(0, st.limit-st.occupied())}
		d.Looks = []Look{{Gate: g.Key, Running: d.Running, Limit: d.Limit}}
		if d.Free > 0 {
			idx, err := s.take(ctx, g, r, st, now)
			if err != nil {
				return Decision{}, err
			}
			if idx >= 0 {
				// The ticket was counted served when the file yielded: nothing to count.
				if err := s.putPlace(ctx, g, r, place{execution: r.Execution, state: stateHolding, slot: idx, ticket: p.ticket, weight: p.weight, since: p.since}, now); err != nil {
					return Decision{}, err
				}
				d.Admitted = true
				d.Running++
				return d, nil
			}
		}
	}
	return s.requeue(ctx, g, r, p, now)
}
