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

// maxHandoverTries bounds the waiters one handover looks at (entries another releaser took
// first, entries whose file stopped asking).
const maxHandoverTries = 5

// holder is a slot as its caller read it: the execution it named ("" for a free slot) and, for a
// stale lease or reservation the reconciler found, the renewedAt it read. A slot is passed on only
// if it is still so: a late file that claimed its expired reservation between the reconciler's
// read and its write keeps its slot.
type holder struct {
	execution string
	seen      int64 // renewedAt as read; 0: any
}

// condition is the condition that the slot is still as h read it.
func (h holder) condition() (string, map[string]string, map[string]types.AttributeValue) {
	if h.execution == "" {
		return "attribute_not_exists(#sk)", map[string]string{"#sk": schema.AttrSK}, nil
	}
	if h.seen == 0 {
		return "#e = :from", map[string]string{"#e": attrExecution}, map[string]types.AttributeValue{":from": str(h.execution)}
	}
	return "#e = :from AND #r = :seen", map[string]string{"#e": attrExecution, "#r": attrRenewedAt},
		map[string]types.AttributeValue{":from": str(h.execution), ":seen": num(h.seen)}
}

// handover gives slot idx, now held as from says (or free), to the next waiter. It reports the
// waiter to wake; false when nobody waits, and then the slot is left as it was.
func (s *Store) handover(ctx context.Context, g Gate, idx int, from holder, m meta, now time.Time) (Wake, bool, error) {
	for try := 0; try < maxHandoverTries; try++ {
		if try > 0 {
			var err error
			if m, err = s.readMeta(ctx, g); err != nil {
				return Wake{}, false, err
			}
		}
		e, ok, err := s.next(ctx, g, m, now)
		if err != nil || !ok {
			return Wake{}, false, err
		}
		out, err := s.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName:                           aws.String(g.Table),
			Key:                                 key(g.queue(), e.sk),
			ConditionExpression:                 aws.String("attribute_exists(#sk)"),
			ExpressionAttributeNames:            map[string]string{"#sk": schema.AttrSK},
			ReturnValues:                        types.ReturnValueAllOld,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureNone,
		})
		if conditionFailed(err) {
			continue // another releaser took this waiter
		}
		if err != nil {
			return Wake{}, false, fmt.Errorf("take the next waiter: %w", err)
		}
		if len(out.Attributes) > 0 {
			e = entryOf(out.Attributes)
		}
		if err := s.addServed(ctx, g, e.weight, 1); err != nil {
			return Wake{}, false, err
		}
		if e.stale(now, s.WaiterTTL) {
			continue // its file stopped asking; if it ever asks again, it queues with its ticket
		}
		ok, err = s.reserve(ctx, g, idx, from, e, now)
		if err != nil {
			return Wake{}, false, err
		}
		if !ok {
			// The slot is no longer from's: put the waiter back where it was.
			r := Request{Execution: e.execution, Tenant: e.tenant, Weight: e.weight}
			if err := s.putEntry(ctx, g, r, e.sk, e.ticket, time.UnixMilli(e.since), time.UnixMilli(e.renewedAt)); err != nil {
				return Wake{}, false, err
			}
			if err := s.restoreWake(ctx, g, e); err != nil {
				return Wake{}, false, err
			}
			return Wake{}, false, s.addServed(ctx, g, e.weight, -1)
		}
		_, err = s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(g.Table),
			Key:                       key(g.queue(), schema.PlaceSK(e.tenant)),
			UpdateExpression:          aws.String("SET #st = :res, #slot = :idx, #x = :exp"),
			ConditionExpression:       aws.String("#e = :exec"),
			ExpressionAttributeNames:  map[string]string{"#st": attrState, "#slot": attrSlot, "#x": schema.AttrExpiresAt, "#e": attrExecution},
			ExpressionAttributeValues: map[string]types.AttributeValue{":res": str(stateReserved), ":idx": num(int64(idx)), ":exp": num(s.placeExpiry(now)), ":exec": str(e.execution)},
		})
		if err != nil && !conditionFailed(err) {
			return Wake{}, false, fmt.Errorf("tell the waiter its slot: %w", err)
		}
		// A place that names another execution: the tenant moved on; the reservation expires.
		w := e.wake
		w.Gate = g.Key
		return w, true, nil
	}
	return Wake{}, false, nil
}

func (s *Store) restoreWake(ctx context.Context, g Gate, e entry) error {
	if e.wake.ReceiptHandle == "" {
		return nil
	}
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(g.Table),
		Key:                      key(g.queue(), e.sk),
		UpdateExpression:         aws.String("SET #q = :q, #h = :h, #m = :m, #a = :alive"),
		ExpressionAttributeNames: map[string]string{"#q": attrQueueURL, "#h": attrReceipt, "#m": attrMessageID, "#a": attrAlive},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":q": str(e.wake.QueueURL), ":h": str(e.wake.ReceiptHandle), ":m": str(e.wake.MessageID), ":alive": num(e.alive),
		},
	})
	if err != nil {
		return fmt.Errorf("put the waiter back: %w", err)
	}
	return nil
}

// reserve rewrites slot idx as reserved for the waiter, if it is still as from read it.
func (s *Store) reserve(ctx context.Context, g Gate, idx int, from holder, e entry, now time.Time) (bool, error) {
	in := &dynamodb.PutItemInput{TableName: aws.String(g.Table), Item: map[string]types.AttributeValue{
		schema.AttrPK: str(g.Key), schema.AttrSK: str(schema.SlotSK(idx)), attrExecution: str(e.execution), attrTenant: str(e.tenant),
		attrAcquired: num(now.UnixMilli()), attrRenewedAt: num(now.UnixMilli()),
		attrReserved: num(now.Add(s.reserveFor()).UnixMilli()), schema.AttrExpiresAt: num(s.leaseExpiry(now)),
	}}
	// The reservation keeps where the waiter's message is: if it expires unclaimed (a lost
	// wake-up), the reconciler wakes the waiter again from it (reconcile.go).
	if e.wake.ReceiptHandle != "" {
		in.Item[attrQueueURL], in.Item[attrReceipt], in.Item[attrMessageID] = str(e.wake.QueueURL), str(e.wake.ReceiptHandle), str(e.wake.MessageID)
	}
	cond, names, values := from.condition()
	in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues = aws.String(cond), names, values
	_, err := s.DB.PutItem(ctx, in)
	if conditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reserve slot %d: %w", idx, err)
	}
	return true, nil
}
