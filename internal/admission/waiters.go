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

// stillWaiting is a waiting file's later delivery: its entry stays where it is and lives on.
func (s *Store) stillWaiting(ctx context.Context, g Gate, r Request, p place, now time.Time) (Decision, error) {
	sk := schema.EntrySK(p.weight, p.ticket)
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(g.Table),
		Key:                       key(g.queue(), sk),
		UpdateExpression:          aws.String("SET #r = :now, #x = :exp REMOVE #a"), // Arm sets aliveUntil anew
		ConditionExpression:       aws.String("#e = :exec"),
		ExpressionAttributeNames:  map[string]string{"#r": attrRenewedAt, "#x": schema.AttrExpiresAt, "#e": attrExecution, "#a": attrAlive},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(now.UnixMilli()), ":exp": num(s.waitExpiry(now)), ":exec": str(r.Execution)},
	})
	if conditionFailed(err) {
		// A handover took the entry between the place's read and now: the slot is reserved for
		// this file, or about to be. Read the place again and claim it.
		p2, err := s.readPlace(ctx, g, r.Tenant)
		if err != nil {
			return Decision{}, err
		}
		if p2.of(r.Execution) && p2.state == stateReserved {
			ok, err := s.claim(ctx, g, r, p2, now)
			if err != nil || ok {
				return Decision{Admitted: ok, Claimed: ok}, err
			}
		}
		// The entry was dropped (not renewed for WaiterTTL) or the handover is still under way:
		// queue again with the same ticket.
		return s.requeue(ctx, g, r, p, now)
	}
	if err != nil {
		return Decision{}, fmt.Errorf("renew the waiting entry: %w", err)
	}
	if err := s.touchPlace(ctx, g, r, now); err != nil {
		return Decision{}, err
	}
	m, err := s.readMeta(ctx, g)
	if err != nil {
		return Decision{}, err
	}
	d := Decision{Entry: EntryRef{Gate: g, SK: sk, Tenant: r.Tenant, Execution: r.Execution}}
	d.Ahead = m.ahead(p.weight, p.ticket)
	d.Counted, d.ExpectedWait = d.Ahead, m.expectedWait(d.Ahead)
	d.Wakes, err = s.reconcileIfDue(ctx, g, m, now)
	return d, err
}

// requeue puts a file that had a ticket back in its queue under the same ticket.
func (s *Store) requeue(ctx context.Context, g Gate, r Request, p place, now time.Time) (Decision, error) {
	sk := schema.EntrySK(p.weight, p.ticket)
	if err := s.putEntry(ctx, g, r, sk, p.ticket, time.UnixMilli(p.since), now); err != nil {
		return Decision{}, err
	}
	// The handover that took the entry counted it served; it waits again.
	if err := s.addServed(ctx, g, p.weight, -1); err != nil {
		return Decision{}, err
	}
	if err := s.putPlace(ctx, g, r, place{execution: r.Execution, state: stateWaiting, ticket: p.ticket, weight: p.weight, since: p.since}, now); err != nil {
		return Decision{}, err
	}
	m, err := s.readMeta(ctx, g)
	if err != nil {
		return Decision{}, err
	}
	d := Decision{Entry: EntryRef{Gate: g, SK: sk, Tenant: r.Tenant, Execution: r.Execution}, Ahead: m.ahead(p.weight, p.ticket)}
	d.Counted, d.ExpectedWait = d.Ahead, m.expectedWait(d.Ahead)
	d.Wakes, err = s.reconcileIfDue(ctx, g, m, now)
	return d, err
}

// enqueue gives the file a ticket of its weight and its entry.
func (s *Store) enqueue(ctx context.Context, g Gate, r Request, since time.Time, m meta, now time.Time) (Decision, error) {
	out, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(g.Table),
		Key:                       key(g.queue(), schema.CounterSK(r.Weight)),
		UpdateExpression:          aws.String("ADD #i :one SET #at = :now"),
		ExpressionAttributeNames:  map[string]string{"#i": attrIssued, "#at": attrIssuedAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1), ":now": num(now.UnixMilli())},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return Decision{}, fmt.Errorf("take a ticket: %w", err)
	}
	ticket := nOf(out.Attributes, attrIssued)
	sk := schema.EntrySK(r.Weight, ticket)
	if err := s.putEntry(ctx, g, r, sk, ticket, since, now); err != nil {
		return Decision{}, err
	}
	if err := s.putPlace(ctx, g, r, place{execution: r.Execution, state: stateWaiting, ticket: ticket, weight: r.Weight, since: since.UnixMilli()}, now); err != nil {
		return Decision{}, err
	}
	m.counters[r.Weight] = counter{issued: ticket, served: m.counters[r.Weight].served}
	d := Decision{Entry: EntryRef{Gate: g, SK: sk, Tenant: r.Tenant, Execution: r.Execution}, Ahead: m.ahead(r.Weight, ticket)}
	d.Counted, d.ExpectedWait = d.Ahead, m.expectedWait(d.Ahead)
	return d, nil
}

func (s *Store) putEntry(ctx context.Context, g Gate, r Request, sk string, ticket int64, since, now time.Time) error {
	_, err := s.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(g.Table), Item: map[string]types.AttributeValue{
		schema.AttrPK: str(g.queue()), schema.AttrSK: str(sk), attrTenant: str(r.Tenant), attrExecution: str(r.Execution),
		attrTicket: num(ticket), attrWeight: num(int64(r.Weight)), attrSince: num(since.UnixMilli()),
		attrRenewedAt: num(now.UnixMilli()), schema.AttrExpiresAt: num(s.waitExpiry(now)),
	}})
	if err != nil {
		return fmt.Errorf("record the waiting entry: %w", err)
	}
	return nil
}

// Arm records where the waiting file's message is, once its visibility is set for hold, so that a
// handover can wake it. The entry counts as alive until its file is due back (hold) plus one more
// hold and a minute; past that a handover skips it (its message is gone). It reports false when
// the entry is gone: a handover took it between Admit and now, and the caller asks again (Admit
// claims the slot).
func (s *Store) Arm(ctx context.Context, e EntryRef, w Wake, hold time.Duration) (bool, error) {
	now := s.now()
	alive := now.Add(2*hold + time.Minute)
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(e.Gate.Table),
		Key:                      key(e.Gate.queue(), e.SK),
		UpdateExpression:         aws.String("SET #q = :q, #h = :h, #m = :m, #r = :now, #a = :alive, #x = :exp"),
		ConditionExpression:      aws.String("#e = :exec"),
		ExpressionAttributeNames: map[string]string{"#q": attrQueueURL, "#h": attrReceipt, "#m": attrMessageID, "#r": attrRenewedAt, "#e": attrExecution, "#a": attrAlive, "#x": schema.AttrExpiresAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":q": str(w.QueueURL), ":h": str(w.ReceiptHandle), ":m": str(w.MessageID), ":now": num(now.UnixMilli()), ":exec": str(e.Execution),
			":alive": num(alive.UnixMilli()), ":exp": num(alive.Add(24 * time.Hour).Unix()),
		},
	})
	if conditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("admission gate %s: record the waiting message: %w", e.Gate.Key, err)
	}
	return true, nil
}

// entry is a waiting entry as read.
type entry struct {
	sk        string
	tenant    string
	execution string
	weight    int
	ticket    int64
	since     int64
	renewedAt int64
	alive     int64 // aliveUntil, when armed
	wake      Wake
}

// stale reports whether the entry's file stopped coming back: past its armed aliveUntil, or, not
// armed, not renewed for WaiterTTL.
func (e entry) stale(now time.Time, waiterTTL time.Duration) bool {
	if e.alive > 0 {
		return now.UnixMilli() > e.alive
	}
	return now.Sub(time.UnixMilli(e.renewedAt)) > waiterTTL
}

// head reads the first entry of the weight's queue.
func (s *Store) head(ctx context.Context, g Gate, weight int) (entry, bool, error) {
	out, err := s.DB.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(g.Table),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :w)"),
		ExpressionAttributeNames:  map[string]string{"#pk": schema.AttrPK, "#sk": schema.AttrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(g.queue()), ":w": str(fmt.Sprintf("%s%02d#", schema.EntryPrefix, weight))},
		Limit:                     aws.Int32(1),
	})
	if err != nil {
		return entry{}, false, fmt.Errorf("read the queue's head: %w", err)
	}
	if len(out.Items) == 0 {
		return entry{}, false, nil
	}
	return entryOf(out.Items[0]), true, nil
}

func entryOf(it map[string]types.AttributeValue) entry {
	e := entry{sk: sOf(it, schema.AttrSK), tenant: sOf(it, attrTenant), execution: sOf(it, attrExecution), weight: int(nOf(it, attrWeight)),
		ticket: nOf(it, attrTicket), since: nOf(it, attrSince), renewedAt: nOf(it, attrRenewedAt), alive: nOf(it, attrAlive)}
	e.wake = Wake{Tenant: e.tenant, Execution: e.execution, QueueURL: sOf(it, attrQueueURL), ReceiptHandle: sOf(it, attrReceipt), MessageID: sOf(it, attrMessageID)}
	return e
}

// next picks the waiter that goes next: of each weight's head, the one that waited longest scaled
// by its weight, ties to the earlier since, then the smaller tenant id. A weight whose counter
// says it has waiters but whose queue is empty has its counter set right.
func (s *Store) next(ctx context.Context, g Gate, m meta, now time.Time) (entry, bool, error) {
	var best entry
	found := false
	for w := 1; w <= MaxWeightClass; w++ {
		c := m.counters[w]
		if c.issued-c.served <= 0 {
			continue
		}
		e, ok, err := s.head(ctx, g, w)
		if err != nil {
			return entry{}, false, err
		}
		if !ok {
			// Tickets taken by a caller that stopped before its entry was written, or entries
			// taken without counting: nobody waits in this weight.
			if err := s.settleCounter(ctx, g, w, c, now); err != nil {
				return entry{}, false, err
			}
			continue
		}
		if !found || ranksBefore(e, best, now) {
			best, found = e, true
		}
	}
	return best, found, nil
}

func ranksBefore(a, b entry, now time.Time) bool {
	pa := (now.UnixMilli() - a.since) * int64(a.weight)
	pb := (now.UnixMilli() - b.since) * int64(b.weight)
	if pa != pb {
		return pa > pb
	}
	if a.since != b.since {
		return a.since < b.since
	}
	return a.tenant < b.tenant
}
