package admission

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/schema"
)

// How admission works (docs/controller.md, "Admission"): a semaphore per gate with a wait queue.
//
//   - A gate (a core system, a pool) is two partitions of a DynamoDB table: the gate's key holds
//     the slots, the gate's key plus schema.QueueSuffix the waiting files. A running file holds the item
//     "slot#<index>" with an index below the gate's limit, naming its execution. Taking a free
//     index is a PutItem with attribute_not_exists, and every change of a slot is conditional on
//     the execution it names, so two files never hold one index
//     (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html).
//     Reads are strongly consistent
//     (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.ReadConsistency.html).
//   - A file that may not start takes a ticket of its weight ("ctr#<weight>", an atomic counter)
//     and waits under "w#<weight>#<ticket>" with the receipt handle of its message, which it keeps
//     in flight for the safety net. Its tenant's place, "t#<tenant>", says whether the tenant's
//     head file waits, holds a slot handed to it, or runs, and on which index.
//   - Every release hands the freed slot over: it takes the next waiter in fair order (the head of
//     each weight's queue, ranked by (now − since) × weight), rewrites the slot as reserved for
//     that waiter's execution for ReserveFor, and returns the waiter's receipt handle, which the
//     caller makes visible at once. The woken delivery claims the slot. A reservation nobody
//     claims in time goes to the next waiter; its file, when it comes, queues again with its own
//     ticket, ahead of every later one.
//   - Finding the next waiter reads the gate's counters (one small Query) and one item per weight
//     with waiters: constant work, whatever the number of waiters. A waiter's rank in its weight is
//     its ticket less the weight's served count.
//   - A lease is tied to the execution's name. It is renewed by the file's deliveries; one nobody
//     renewed for LeaseTTL, and a reservation past its window, are handed over by the gate's
//     reconciler, which runs at most once per ReconcileEvery per gate, from whichever call finds it
//     due. A file whose lease was taken meanwhile takes a free index again, or holds an overflow
//     lease ("slot#x#<execution>") that counts against the gate until it ends.
//   - A file never holds one gate's slot while it waits for another's: a file that finds a later
//     gate full gives back what it took in earlier gates (handing it over) and waits there, its
//     wait counted from when it first waited.

// ItemAPI is the part of the DynamoDB client admission uses.
type ItemAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

var _ ItemAPI = (*dynamodb.Client)(nil)

// Gate is one bound on running files.
type Gate struct {
	// Table is the DynamoDB table the gate lives in.
	Table string
	// Key is the gate's partition key: schema.CoreGate or schema.PoolGate.
	Key string
	// Limit is the gate's configured number of running files (maxRunningFiles), at least 1.
	Limit int
	// Adaptive says the core system's adaptive limit item (schema.LimitSK) may lower the limit.
	Adaptive bool
}

// queue is the partition key of the gate's waiting files.
func (g Gate) queue() string { return schema.GateQueue(g.Key) }

// Request is one file asking to start.
type Request struct {
	// Execution is the file's execution name: the lease's identity.
	Execution string
	Tenant    string
	// Weight is the tenant's weight, 1..MaxWeightClass (pipeline.MinWeight..MaxWeight).
	Weight int
	// Gates are the gates the file must pass, in the order they are taken.
	Gates []Gate
	// Fresh says no execution of this file can exist yet unless admission knows of it: the
	// message's first delivery, or a caller that looked the execution up. Without it, a file that
	// admission has never seen is reported Unknown and nothing is written.
	Fresh bool
}

// Wake is a waiting file's message, to be made visible because a slot was handed to it.
type Wake struct {
	Gate, Tenant, Execution string
	QueueURL, ReceiptHandle string
	MessageID               string
}

// Decision is the outcome of one Admit.
type Decision struct {
	// Admitted: the file holds a lease in every gate.
	Admitted bool
	// Unknown: not Fresh, and no gate has a place of this execution.
	Unknown bool
	// Held: every lease was already held before this call (an earlier delivery was admitted).
	Held bool
	// Claimed: a slot had been handed to the file while it waited, and this call claimed it.
	Claimed bool
	// Waited: the file had been waiting since an earlier delivery (so no earlier delivery can
	// have started it).
	Waited bool
	// Paused: an earlier delivery found the tenant paused (Pause); nothing was taken. The caller
	// reads the pause again and calls Resume once it is lifted.
	Paused bool
	// WaitedFor is how long the file waited for admission, when it is admitted now or waits.
	WaitedFor time.Duration
	// Gate is the gate the file waits for, when not admitted.
	Gate string
	// Ahead is the number of files of the tenant's weight ahead of it in Gate's queue; Counted
	// equals Ahead (kept for callers that bound it); Free the free slots Gate had, when read.
	Ahead, Counted, Free int
	// Running and Limit are the blocking (or last) gate's running files and effective limit,
	// when this call read them (0 otherwise).
	Running, Limit int
	// Looks are the gates whose slots this call read, as it found them.
	Looks []Look
	// Wakes are waiters this call handed a slot to (slots it gave back, expired ones the
	// reconciler found): the caller makes each message visible.
	Wakes []Wake
	// Entry is the waiting entry, when not admitted: Arm records the message's receipt handle in
	// it once the message's visibility is set.
	Entry EntryRef
}

// EntryRef names a waiting entry.
type EntryRef struct {
	Gate      Gate
	SK        string
	Tenant    string
	Execution string
}

// Look is one gate as one Admit found it.
type Look struct {
	Gate           string
	Running, Limit int
}

// Store is the admission state of one table or several.
type Store struct {
	DB ItemAPI
	// LeaseTTL: a lease not renewed for this long is free again. It must exceed the longest time a
	// running file's controller can go without looking at it (twice the safety net, plus margin).
	LeaseTTL time.Duration
	// WaiterTTL: a waiting entry whose file has not asked or been armed for this long is skipped
	// by a handover. It must exceed a waiting file's safety net.
	WaiterTTL time.Duration
	// ReserveFor is how long a handed-over slot stays reserved for the woken file. Default:
	// DefaultReserveFor.
	ReserveFor time.Duration
	// ReconcileEvery is the least time between two reconciles of one gate. Default:
	// DefaultReconcileEvery.
	ReconcileEvery time.Duration
	Now            func() time.Time
}

// DefaultReserveFor is how long a handed-over slot waits for its file: the woken message is
// visible at once, and SQS FIFO to Lambda takes well under a second (p99 ≈ 650 ms measured), so
// 30 s rides out a throttled or slow poller. Past it the slot goes to the next waiter.
const DefaultReserveFor = 30 * time.Second

// DefaultReconcileEvery is how often, at most, one gate's slots are read whole to find stale
// leases, expired reservations and free slots nobody was woken for.
const DefaultReconcileEvery = 15 * time.Second

// Attributes of the items.
const (
	attrExecution = "execution"
	attrTenant    = "tenant"
	attrRenewedAt = "renewedAt"
	attrAcquired  = "acquiredAt"
	attrReserved  = "reservedUntil"
	attrSince     = "since"
	attrTicket    = "ticket"
	attrWeight    = "weight"
	attrState     = "state"
	attrSlot      = "slot"
	attrIssued    = "issued"
	attrServed    = "served"
	attrIssuedAt  = "issuedAt"
	attrQueueURL  = "queueUrl"
	attrReceipt   = "receiptHandle"
	attrMessageID = "messageId"
	attrReconcile = "reconciledAt"
	attrOverflow  = "overflow"
	attrAlive     = "aliveUntil"
)

// Place states.
const (
	stateWaiting  = "waiting"
	stateReserved = "reserved"
	stateHolding  = "holding"
	statePaused   = "paused"
	// stateReleased: the file ended and gave its slots back. Kept (until its expiry) so that a
	// second release of the same file, its status event and its delivery both, finds it at once.
	stateReleased = "released"
)

// overflowSlot is the place's slot of an overflow lease.
const overflowSlot = -1

func (s *Store) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

func (s *Store) reserveFor() time.Duration {
	if s.ReserveFor > 0 {
		return s.ReserveFor
	}
	return DefaultReserveFor
}

func (s *Store) reconcileEvery() time.Duration {
	if s.ReconcileEvery > 0 {
		return s.ReconcileEvery
	}
	return DefaultReconcileEvery
}

func (r Request) check() error {
	switch {
	case r.Execution == "" || r.Tenant == "":
		return errors.New("admission: a request needs an execution name and a tenant")
	case r.Weight < 1 || r.Weight > MaxWeightClass:
		return fmt.Errorf("admission: weight %d is outside 1..%d", r.Weight, MaxWeightClass)
	}
	return checkGates(r.Gates)
}

func checkGates(gs []Gate) error {
	for _, g := range gs {
		if g.Table == "" || g.Key == "" || g.Limit < 1 || g.Limit > 9999 {
			return fmt.Errorf("admission: gate %q of table %q needs a limit of 1..9999, got %d", g.Key, g.Table, g.Limit)
		}
	}
	return nil
}

// place is a tenant's "t#" item in one gate.
type place struct {
	found     bool
	execution string
	state     string
	slot      int
	ticket    int64
	weight    int
	since     int64
}

func (p place) of(execution string) bool { return p.found && p.execution == execution }

// Admit decides whether the file may start now. It claims a slot handed to it, takes a free one
// when nobody waits, or records (or keeps) its place in the first gate it must wait for, giving
// back anything it took in the gates before (see the package comment).
func (s *Store) Admit(ctx context.Context, r Request) (Decision, error) {
	if err := r.check(); err != nil {
		return Decision{}, err
	}
	now := s.now()
	// The places are read on every ask, also a fresh one: a caller that looked the execution up
	// (a control message) may have been handed a slot while it waited.
	places := make([]place, len(r.Gates))
	known := false
	for i, g := range r.Gates {
		p, err := s.readPlace(ctx, g, r.Tenant)
		if err != nil {
			return Decision{}, fmt.Errorf("admission gate %s: %w", g.Key, err)
		}
		if p.of(r.Execution) && p.state != stateReleased {
			places[i], known = p, true
			if p.state == statePaused {
				return Decision{Paused: true, Gate: g.Key}, nil
			}
		}
	}
	if !known && !r.Fresh {
		return Decision{Unknown: true}, nil
	}
	// The file's wait counts from the first time it waited in any gate.
	since := now
	waited := false
	for _, p := range places {
		if p.found && (p.state == stateWaiting || p.state == stateReserved) {
			waited = true
			since = minTime(since, time.UnixMilli(p.since))
		}
	}

	dec := Decision{Admitted: true, Held: true, Waited: waited, WaitedFor: now.Sub(since)}
	var taken []int // gates whose slot this call took or claimed
	for i, g := range r.Gates {
		gd, err := s.admitGate(ctx, g, r, places[i], since, now)
		if err != nil {
			return Decision{}, fmt.Errorf("admission gate %s: %w", g.Key, err)
		}
		dec.Wakes = append(dec.Wakes, gd.Wakes...)
		dec.Looks = append(dec.Looks, gd.Looks...)
		dec.Running, dec.Limit = gd.Running, gd.Limit
		if gd.Admitted {
			dec.Held = dec.Held && gd.Held
			dec.Claimed = dec.Claimed || gd.Claimed
			if !gd.Held {
				taken = append(taken, i)
			}
			continue
		}
		// Gate i is full: give back what this call took before it, so no file holds one gate's
		// slot while it waits for another's.
		for _, j := range taken {
			_, wakes, err := s.releaseGate(ctx, r.Gates[j], r.Tenant, r.Execution, now)
			if err != nil {
				return Decision{}, fmt.Errorf("admission gate %s: give back: %w", r.Gates[j].Key, err)
			}
			dec.Wakes = append(dec.Wakes, wakes...)
		}
		gd.Wakes, gd.Looks, gd.Waited, gd.WaitedFor = dec.Wakes, dec.Looks, waited, dec.WaitedFor
		gd.Gate = g.Key
		return gd, nil
	}
	return dec, nil
}

// admitGate is one gate of Admit. since is when the file first waited (now if it never did).
func (s *Store) admitGate(ctx context.Context, g Gate, r Request, p place, since, now time.Time) (Decision, error) {
	if p.of(r.Execution) {
		switch p.state {
		case stateHolding:
			return Decision{Admitted: true, Held: true}, nil
		case stateReserved:
			ok, err := s.claim(ctx, g, r, p.slot, now)
			if err != nil || ok {
				return Decision{Admitted: ok, Claimed: ok}, err
			}
			// The reservation expired and went to the next waiter: queue again, with the ticket
			// this file had, ahead of every later one.
			return s.requeue(ctx, g, r, p, now)
		case stateWaiting:
			return s.stillWaiting(ctx, g, r, p, now)
		}
	}
	m, err := s.readMeta(ctx, g)
	if err != nil {
		return Decision{}, err
	}
	var d Decision
	if m.waiting() == 0 {
		st, err := s.readSlots(ctx, g, now)
		if err != nil {
			return Decision{}, err
		}
		d.Running, d.Limit = st.occupied(), st.limit
		d.Looks = []Look{{Gate: g.Key, Running: d.Running, Limit: d.Limit}}
		d.Free = max(0, st.limit-st.occupied())
		if d.Free > 0 {
			idx, err := s.take(ctx, g, r, st, now)
			if err != nil {
				return Decision{}, err
			}
			if idx >= 0 {
				if err := s.putPlace(ctx, g, r, place{execution: r.Execution, state: stateHolding, slot: idx, weight: r.Weight, since: since.UnixMilli()}, now); err != nil {
					return Decision{}, err
				}
				d.Admitted = true
				d.Running++
				return d, nil
			}
		}
	}
	// Somebody waits, or every slot is taken: join the queue.
	w, err := s.enqueue(ctx, g, r, since, m, now)
	if err != nil {
		return Decision{}, err
	}
	w.Running, w.Limit, w.Looks, w.Free = d.Running, d.Limit, d.Looks, d.Free
	wakes, err := s.reconcileIfDue(ctx, g, m, now)
	if err != nil {
		return Decision{}, err
	}
	w.Wakes = wakes
	return w, nil
}

// claim turns the slot reserved for the file into its lease. It reports false when the slot no
// longer names the file (its reservation expired and went on).
func (s *Store) claim(ctx context.Context, g Gate, r Request, idx int, now time.Time) (bool, error) {
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(g.Table),
		Key:                       key(g.Key, schema.SlotSK(idx)),
		UpdateExpression:          aws.String("SET #r = :now, #a = :now, #x = :exp REMOVE #res"),
		ConditionExpression:       aws.String("#e = :exec"),
		ExpressionAttributeNames:  map[string]string{"#r": attrRenewedAt, "#a": attrAcquired, "#x": schema.AttrExpiresAt, "#res": attrReserved, "#e": attrExecution},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(now.UnixMilli()), ":exp": num(s.leaseExpiry(now)), ":exec": str(r.Execution)},
	})
	if conditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim slot %d: %w", idx, err)
	}
	return true, s.putPlace(ctx, g, r, place{execution: r.Execution, state: stateHolding, slot: idx, weight: r.Weight}, now)
}

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
			ok, err := s.claim(ctx, g, r, p2.slot, now)
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
	d.Counted = d.Ahead
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
	d.Counted = d.Ahead
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
	d.Counted = d.Ahead
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

// readPlace reads the tenant's place in the gate.
func (s *Store) readPlace(ctx context.Context, g Gate, tenant string) (place, error) {
	out, err := s.DB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(g.Table),
		ConsistentRead: aws.Bool(true),
		Key:            key(g.queue(), schema.PlaceSK(tenant)),
	})
	if err != nil {
		return place{}, fmt.Errorf("read the tenant's place: %w", err)
	}
	if out.Item == nil {
		return place{}, nil
	}
	it := out.Item
	return place{found: true, execution: sOf(it, attrExecution), state: sOf(it, attrState), slot: int(nOf(it, attrSlot)),
		ticket: nOf(it, attrTicket), weight: int(nOf(it, attrWeight)), since: nOf(it, attrSince)}, nil
}

func (s *Store) putPlace(ctx context.Context, g Gate, r Request, p place, now time.Time) error {
	_, err := s.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(g.Table), Item: map[string]types.AttributeValue{
		schema.AttrPK: str(g.queue()), schema.AttrSK: str(schema.PlaceSK(r.Tenant)), attrExecution: str(p.execution), attrState: str(p.state),
		attrSlot: num(int64(p.slot)), attrTicket: num(p.ticket), attrWeight: num(int64(max(p.weight, 1))), attrSince: num(p.since),
		schema.AttrExpiresAt: num(s.placeExpiry(now)),
	}})
	if err != nil {
		return fmt.Errorf("record the tenant's place: %w", err)
	}
	return nil
}

// touchPlace moves the place's expiry on, so a wait longer than a day keeps it.
func (s *Store) touchPlace(ctx context.Context, g Gate, r Request, now time.Time) error {
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(g.Table),
		Key:                       key(g.queue(), schema.PlaceSK(r.Tenant)),
		UpdateExpression:          aws.String("SET #x = :exp"),
		ConditionExpression:       aws.String("#e = :exec"),
		ExpressionAttributeNames:  map[string]string{"#x": schema.AttrExpiresAt, "#e": attrExecution},
		ExpressionAttributeValues: map[string]types.AttributeValue{":exp": num(s.placeExpiry(now)), ":exec": str(r.Execution)},
	})
	if err != nil && !conditionFailed(err) {
		return fmt.Errorf("renew the tenant's place: %w", err)
	}
	return nil
}

// markReleased records that the file's place gave its slots back, if it still names execution.
func (s *Store) markReleased(ctx context.Context, g Gate, tenant, execution string, now time.Time) error {
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(g.Table),
		Key:                       key(g.queue(), schema.PlaceSK(tenant)),
		UpdateExpression:          aws.String("SET #st = :rel, #x = :exp"),
		ConditionExpression:       aws.String("#e = :exec"),
		ExpressionAttributeNames:  map[string]string{"#st": attrState, "#x": schema.AttrExpiresAt, "#e": attrExecution},
		ExpressionAttributeValues: map[string]types.AttributeValue{":rel": str(stateReleased), ":exp": num(s.placeExpiry(now)), ":exec": str(execution)},
	})
	if err != nil && !conditionFailed(err) {
		return fmt.Errorf("record the tenant's release: %w", err)
	}
	return nil
}

// deletePlace deletes the tenant's place if it still names execution.
func (s *Store) deletePlace(ctx context.Context, g Gate, tenant, execution string) error {
	_, err := s.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(g.Table),
		Key:                       key(g.queue(), schema.PlaceSK(tenant)),
		ConditionExpression:       aws.String("#e = :exec"),
		ExpressionAttributeNames:  map[string]string{"#e": attrExecution},
		ExpressionAttributeValues: map[string]types.AttributeValue{":exec": str(execution)},
	})
	if err != nil && !conditionFailed(err) {
		return fmt.Errorf("delete the tenant's place: %w", err)
	}
	return nil
}

// The items expire by DynamoDB's TTL a day after they stop mattering; each renewal moves it on.
func (s *Store) leaseExpiry(now time.Time) int64 { return now.Add(s.LeaseTTL + 24*time.Hour).Unix() }
func (s *Store) waitExpiry(now time.Time) int64  { return now.Add(s.WaiterTTL + 24*time.Hour).Unix() }
func (s *Store) placeExpiry(now time.Time) int64 {
	return now.Add(max(s.WaiterTTL, s.LeaseTTL) + 24*time.Hour).Unix()
}

// counter is one weight's tickets: issued so far, and served (taken off the queue).
type counter struct{ issued, served int64 }

// meta is a gate's queue counters and reconcile mark, as one Query read them.
type meta struct {
	counters     map[int]counter
	reconciledAt int64
	overflow     int64
}

func (m meta) waiting() int64 {
	var n int64
	for _, c := range m.counters {
		n += max(0, c.issued-c.served)
	}
	return n
}

// ahead is how many files of the weight hold a smaller ticket and still wait.
func (m meta) ahead(weight int, ticket int64) int {
	return int(max(0, ticket-m.counters[weight].served-1))
}

func (s *Store) readMeta(ctx context.Context, g Gate) (meta, error) {
	out, err := s.DB.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(g.Table),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :c)"),
		ExpressionAttributeNames:  map[string]string{"#pk": schema.AttrPK, "#sk": schema.AttrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(g.queue()), ":c": str(schema.CounterPrefix)},
	})
	if err != nil {
		return meta{}, fmt.Errorf("read the queue's counters: %w", err)
	}
	m := meta{counters: map[int]counter{}}
	for _, it := range out.Items {
		sk := sOf(it, schema.AttrSK)
		if sk == schema.MetaSK {
			m.reconciledAt, m.overflow = nOf(it, attrReconcile), nOf(it, attrOverflow)
			continue
		}
		w, err := strconv.Atoi(strings.TrimPrefix(sk, schema.CounterPrefix))
		if err != nil {
			continue
		}
		m.counters[w] = counter{issued: nOf(it, attrIssued), served: nOf(it, attrServed)}
	}
	return m, nil
}

func (s *Store) addServed(ctx context.Context, g Gate, weight int, n int64) error {
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(g.Table),
		Key:                       key(g.queue(), schema.CounterSK(weight)),
		UpdateExpression:          aws.String("ADD #s :n"),
		ExpressionAttributeNames:  map[string]string{"#s": attrServed},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": num(n)},
	})
	if err != nil {
		return fmt.Errorf("count the queue served: %w", err)
	}
	return nil
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

// settleGrace is how long a ticket stays counted as waiting before its entry exists: a caller
// takes its ticket, then writes its entry, so an empty queue under a ticket younger than this may
// be an entry on its way. Settling it then would count the coming waiter as served, and no release
// would ever hand it a slot. A minute is far longer than two DynamoDB writes with the SDK's
// retries; a caller that stopped between them leaves a ticket that is settled after it.
const settleGrace = time.Minute

// settleCounter sets served to issued when the weight's queue is empty, if nobody changed the
// counter since it was read and its last ticket is older than settleGrace.
func (s *Store) settleCounter(ctx context.Context, g Gate, w int, c counter, now time.Time) error {
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(g.Table),
		Key:                       key(g.queue(), schema.CounterSK(w)),
		UpdateExpression:          aws.String("SET #s = :i"),
		ConditionExpression:       aws.String("#i = :i AND (attribute_not_exists(#at) OR #at < :cut)"),
		ExpressionAttributeNames:  map[string]string{"#s": attrServed, "#i": attrIssued, "#at": attrIssuedAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{":i": num(c.issued), ":cut": num(now.Add(-settleGrace).UnixMilli())},
	})
	if err != nil && !conditionFailed(err) {
		return fmt.Errorf("settle the queue's counter: %w", err)
	}
	return nil
}

// maxHandoverTries bounds the waiters one handover looks at (entries another releaser took
// first, entries whose file stopped asking).
const maxHandoverTries = 5

// handover gives slot idx, now held by from (or free, when from is ""), to the next waiter. It
// reports the waiter to wake; false when nobody waits, and then the slot is left as it was.
func (s *Store) handover(ctx context.Context, g Gate, idx int, from string, m meta, now time.Time) (Wake, bool, error) {
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

// reserve rewrites slot idx as reserved for the waiter, if it is still from's (or free).
func (s *Store) reserve(ctx context.Context, g Gate, idx int, from string, e entry, now time.Time) (bool, error) {
	in := &dynamodb.PutItemInput{TableName: aws.String(g.Table), Item: map[string]types.AttributeValue{
		schema.AttrPK: str(g.Key), schema.AttrSK: str(schema.SlotSK(idx)), attrExecution: str(e.execution), attrTenant: str(e.tenant),
		attrAcquired: num(now.UnixMilli()), attrRenewedAt: num(now.UnixMilli()),
		attrReserved: num(now.Add(s.reserveFor()).UnixMilli()), schema.AttrExpiresAt: num(s.leaseExpiry(now)),
	}}
	if from == "" {
		in.ConditionExpression = aws.String("attribute_not_exists(#sk)")
		in.ExpressionAttributeNames = map[string]string{"#sk": schema.AttrSK}
	} else {
		in.ConditionExpression = aws.String("#e = :from")
		in.ExpressionAttributeNames = map[string]string{"#e": attrExecution}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":from": str(from)}
	}
	_, err := s.DB.PutItem(ctx, in)
	if conditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reserve slot %d: %w", idx, err)
	}
	return true, nil
}

// lease is a slot item as read.
type lease struct {
	index         int // overflowSlot for an overflow lease
	sk            string
	execution     string
	tenant        string
	renewedAt     int64
	reservedUntil int64
}

// gateState is one strongly consistent look at a gate's slots.
type gateState struct {
	leases []lease // live leases, reservations and overflow leases
	stale  []lease // leases nobody renewed for LeaseTTL, reservations past their window
	limit  int     // the effective limit
}

func (st gateState) occupied() int { return len(st.leases) }

func (st gateState) holder(execution string) (lease, bool) {
	for _, l := range append(st.leases, st.stale...) {
		if l.execution == execution {
			return l, true
		}
	}
	return lease{}, false
}

// readSlots returns the gate's leases and effective limit.
func (s *Store) readSlots(ctx context.Context, g Gate, now time.Time) (gateState, error) {
	st := gateState{limit: g.Limit}
	var start map[string]types.AttributeValue
	for {
		out, err := s.DB.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(g.Table),
			ConsistentRead:            aws.Bool(true),
			KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :slot)"),
			ExpressionAttributeNames:  map[string]string{"#pk": schema.AttrPK, "#sk": schema.AttrSK},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(g.Key), ":slot": str(schema.SlotPrefix)},
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return st, fmt.Errorf("read the running files: %w", err)
		}
		for _, it := range out.Items {
			l := lease{sk: sOf(it, schema.AttrSK), execution: sOf(it, attrExecution), tenant: sOf(it, attrTenant),
				renewedAt: nOf(it, attrRenewedAt), reservedUntil: nOf(it, attrReserved), index: overflowSlot}
			if !strings.HasPrefix(l.sk, schema.OverflowPrefix) {
				l.index, _ = strconv.Atoi(strings.TrimPrefix(l.sk, schema.SlotPrefix))
			}
			expired := now.Sub(time.UnixMilli(l.renewedAt)) > s.LeaseTTL ||
				(l.reservedUntil > 0 && now.UnixMilli() > l.reservedUntil)
			if expired {
				st.stale = append(st.stale, l)
			} else {
				st.leases = append(st.leases, l)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	limit, err := s.effectiveLimit(ctx, g)
	if err != nil {
		return st, err
	}
	st.limit = limit
	return st, nil
}

// effectiveLimit is the gate's limit, lowered by its adaptive limit item.
func (s *Store) effectiveLimit(ctx context.Context, g Gate) (int, error) {
	if !g.Adaptive {
		return g.Limit, nil
	}
	out, err := s.DB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(g.Table),
		ConsistentRead: aws.Bool(true),
		Key:            key(g.Key, schema.LimitSK),
	})
	if err != nil {
		return 0, fmt.Errorf("read the adaptive limit: %w", err)
	}
	if out.Item != nil {
		if v, err := strconv.ParseFloat(nStr(out.Item, schema.AttrLimit), 64); err == nil && !math.IsNaN(v) {
			return min(g.Limit, max(1, int(math.Floor(v)))), nil
		}
	}
	return g.Limit, nil
}

// take writes a lease at a free index below the effective limit: a free one, or one whose lease
// went stale nobody handed over yet. It returns -1 when another controller took every candidate
// first. A PutItem whose answer was lost and that is retried finds the item already naming this
// execution (ReturnValuesOnConditionCheckFailure), so one file never ends up holding two slots.
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_PutItem.html
func (s *Store) take(ctx context.Context, g Gate, r Request, st gateState, now time.Time) (int, error) {
	if l, ok := st.holder(r.Execution); ok && l.index != overflowSlot {
		return l.index, s.renewIndex(ctx, g, l.index, r.Execution, now)
	}
	used := map[int]bool{}
	for _, l := range st.leases {
		used[l.index] = true
	}
	stale := map[int]lease{}
	for _, l := range st.stale {
		stale[l.index] = l
	}
	for i := 0; i < st.limit; i++ {
		if used[i] {
			continue
		}
		in := &dynamodb.PutItemInput{TableName: aws.String(g.Table), Item: leaseItem(g, i, r, now, s.leaseExpiry(now)),
			ConditionExpression:                 aws.String("attribute_not_exists(#sk)"),
			ExpressionAttributeNames:            map[string]string{"#sk": schema.AttrSK},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
		if l, ok := stale[i]; ok {
			// Free again only if nobody renewed it since it was read.
			in.ConditionExpression = aws.String("attribute_not_exists(#sk) OR #r = :seen")
			in.ExpressionAttributeNames["#r"] = attrRenewedAt
			in.ExpressionAttributeValues = map[string]types.AttributeValue{":seen": num(l.renewedAt)}
		}
		_, err := s.DB.PutItem(ctx, in)
		var cf *types.ConditionalCheckFailedException
		if errors.As(err, &cf) {
			holder := sOf(cf.Item, attrExecution)
			if cf.Item == nil {
				// No item in the answer (an endpoint without ReturnValuesOnConditionCheckFailure,
				// such as the local emulator): read the slot.
				if holder, err = s.slotHolder(ctx, g, i); err != nil {
					return -1, err
				}
			}
			if holder == r.Execution {
				return i, nil // our own earlier write, whose answer was lost
			}
			continue
		}
		if err != nil {
			return -1, fmt.Errorf("take slot %d: %w", i, err)
		}
		return i, nil
	}
	return -1, nil
}

func (s *Store) slotHolder(ctx context.Context, g Gate, i int) (string, error) {
	out, err := s.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(g.Table), Key: key(g.Key, schema.SlotSK(i)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return "", fmt.Errorf("read slot %d: %w", i, err)
	}
	return sOf(out.Item, attrExecution), nil
}

func leaseItem(g Gate, i int, r Request, now time.Time, exp int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		schema.AttrPK: str(g.Key), schema.AttrSK: str(schema.SlotSK(i)), attrExecution: str(r.Execution), attrTenant: str(r.Tenant),
		attrAcquired: num(now.UnixMilli()), attrRenewedAt: num(now.UnixMilli()), schema.AttrExpiresAt: num(exp),
	}
}

// renewIndex records that the file holding slot idx is still looked after. It reports a
// ConditionalCheckFailedException when the slot names another execution.
func (s *Store) renewIndex(ctx context.Context, g Gate, idx int, execution string, now time.Time) error {
	sk := schema.SlotSK(idx)
	if idx == overflowSlot {
		sk = schema.OverflowSK(execution)
	}
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(g.Table),
		Key:                       key(g.Key, sk),
		UpdateExpression:          aws.String("SET #r = :now, #x = :exp REMOVE #res"),
		ConditionExpression:       aws.String("#e = :exec"),
		ExpressionAttributeNames:  map[string]string{"#r": attrRenewedAt, "#x": schema.AttrExpiresAt, "#e": attrExecution, "#res": attrReserved},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(now.UnixMilli()), ":exp": num(s.leaseExpiry(now)), ":exec": str(execution)},
	})
	return err
}

// RenewResult is what one Renew found.
type RenewResult struct {
	// Held: every gate holds a lease of the execution now.
	Held bool
	// Regained counts gates whose lease had gone (taken by another file or released) and that the
	// file took again: a free index, or an overflow lease.
	Regained int
	// Adopted counts gates where the execution had neither a place nor a lease (a run admission
	// never admitted: a halted tenant's redrive, or one started before admission was configured)
	// and took one now, beyond the limit if need be; such gates are not counted in Regained.
	Adopted int
	// Overflow counts the gates where the regained or adopted lease is an overflow lease.
	Overflow int
	Wakes    []Wake
}

// Renew renews the execution's leases, also a stale one nobody took meanwhile. A gate where the
// lease is gone is taken again: a free index if the gate has one, else an overflow lease that
// counts against the gate until the file ends, so the bound holds again as soon as files end. A
// controller calls it each time it finds the file still running.
func (s *Store) Renew(ctx context.Context, gates []Gate, tenant, execution string) (RenewResult, error) {
	if err := checkGates(gates); err != nil {
		return RenewResult{}, err
	}
	now := s.now()
	res := RenewResult{Held: true}
	for _, g := range gates {
		p, err := s.readPlace(ctx, g, tenant)
		if err != nil {
			return res, fmt.Errorf("admission gate %s: %w", g.Key, err)
		}
		if p.of(execution) && (p.state == stateHolding || p.state == stateReserved) {
			err := s.renewIndex(ctx, g, p.slot, execution, now)
			if err == nil {
				if p.state == stateReserved {
					r := Request{Execution: execution, Tenant: tenant, Weight: max(p.weight, 1)}
					if err := s.putPlace(ctx, g, r, place{execution: execution, state: stateHolding, slot: p.slot, weight: p.weight}, now); err != nil {
						return res, fmt.Errorf("admission gate %s: %w", g.Key, err)
					}
				} else if err := s.touchPlace(ctx, g, Request{Execution: execution, Tenant: tenant}, now); err != nil {
					return res, fmt.Errorf("admission gate %s: %w", g.Key, err)
				}
				continue
			}
			if !conditionFailed(err) {
				return res, fmt.Errorf("admission gate %s: renew the lease: %w", g.Key, err)
			}
		}
		// No place, or the place's slot names another file: look for the lease among the slots.
		st, err := s.readSlots(ctx, g, now)
		if err != nil {
			return res, fmt.Errorf("admission gate %s: %w", g.Key, err)
		}
		r := Request{Execution: execution, Tenant: tenant, Weight: max(p.weight, 1)}
		if l, ok := st.holder(execution); ok {
			if err := s.renewIndex(ctx, g, l.index, execution, now); err != nil && !conditionFailed(err) {
				return res, fmt.Errorf("admission gate %s: renew the lease: %w", g.Key, err)
			} else if err == nil {
				if err := s.putPlace(ctx, g, r, place{execution: execution, state: stateHolding, slot: l.index, weight: r.Weight}, now); err != nil {
					return res, fmt.Errorf("admission gate %s: %w", g.Key, err)
				}
				continue
			}
		}
		// The lease is gone (or never was): the file runs, so it takes a slot, ahead of any waiter.
		if p.of(execution) && p.state != stateReleased {
			res.Regained++
		} else {
			res.Adopted++ // never admitted, or released and run again (a halted tenant's redrive)
		}
		idx := -1
		if st.occupied() < st.limit {
			if idx, err = s.take(ctx, g, r, st, now); err != nil {
				return res, fmt.Errorf("admission gate %s: %w", g.Key, err)
			}
		}
		if idx < 0 {
			if err := s.putOverflow(ctx, g, r, now); err != nil {
				return res, fmt.Errorf("admission gate %s: %w", g.Key, err)
			}
			idx = overflowSlot
			res.Overflow++
		}
		if err := s.putPlace(ctx, g, r, place{execution: execution, state: stateHolding, slot: idx, weight: r.Weight}, now); err != nil {
			return res, fmt.Errorf("admission gate %s: %w", g.Key, err)
		}
	}
	return res, nil
}

// putOverflow writes an overflow lease and counts it in the gate's meta item, so releases know to
// shrink the gate back before handing slots over.
func (s *Store) putOverflow(ctx context.Context, g Gate, r Request, now time.Time) error {
	item := leaseItem(g, 0, r, now, s.leaseExpiry(now))
	item[schema.AttrSK] = str(schema.OverflowSK(r.Execution))
	_, err := s.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(g.Table), Item: item,
		ConditionExpression: aws.String("attribute_not_exists(#sk)"), ExpressionAttributeNames: map[string]string{"#sk": schema.AttrSK}})
	if conditionFailed(err) {
		return s.renewIndex(ctx, g, overflowSlot, r.Execution, now)
	}
	if err != nil {
		return fmt.Errorf("take an overflow lease: %w", err)
	}
	return s.addOverflow(ctx, g, 1)
}

func (s *Store) addOverflow(ctx context.Context, g Gate, n int64) error {
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(g.Table),
		Key:                       key(g.queue(), schema.MetaSK),
		UpdateExpression:          aws.String("ADD #o :n"),
		ExpressionAttributeNames:  map[string]string{"#o": attrOverflow},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": num(n)},
	})
	if err != nil {
		return fmt.Errorf("count the overflow leases: %w", err)
	}
	return nil
}

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
		if freed {
			n++
		}
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
			wakes, err = s.free(ctx, g, idx, execution, now)
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
func (s *Store) free(ctx context.Context, g Gate, idx int, execution string, now time.Time) ([]Wake, error) {
	m, err := s.readMeta(ctx, g)
	if err != nil {
		return nil, err
	}
	if m.overflow > 0 {
		moved, err := s.moveOverflowIn(ctx, g, idx, execution, now)
		if err != nil || moved {
			return nil, err
		}
	}
	limit, err := s.effectiveLimit(ctx, g)
	if err != nil {
		return nil, err
	}
	if idx < limit && m.waiting() > 0 {
		w, ok, err := s.handover(ctx, g, idx, execution, m, now)
		if err != nil {
			return nil, err
		}
		if ok {
			return []Wake{w}, nil
		}
	}
	return nil, s.deleteLease(ctx, g, schema.SlotSK(idx), execution, false)
}

// moveOverflowIn gives slot idx to a file holding an overflow lease, so the gate shrinks back to
// its indexes.
func (s *Store) moveOverflowIn(ctx context.Context, g Gate, idx int, execution string, now time.Time) (bool, error) {
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
	_, err = s.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(g.Table), Item: leaseItem(g, idx, r, now, s.leaseExpiry(now)),
		ConditionExpression: aws.String("#e = :from"), ExpressionAttributeNames: map[string]string{"#e": attrExecution},
		ExpressionAttributeValues: map[string]types.AttributeValue{":from": str(execution)}})
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
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(g.Table),
		Key:                       key(g.queue(), schema.MetaSK),
		UpdateExpression:          aws.String("SET #c = :now"),
		ConditionExpression:       aws.String("attribute_not_exists(#c) OR #c = :seen"),
		ExpressionAttributeNames:  map[string]string{"#c": attrReconcile},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(now.UnixMilli()), ":seen": num(m.reconciledAt)},
	})
	if conditionFailed(err) {
		return nil, nil // another caller reconciles
	}
	if err != nil {
		return nil, fmt.Errorf("mark the reconcile: %w", err)
	}
	return s.reconcile(ctx, g, now)
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
		w, err := s.free(ctx, g, l.index, l.execution, now)
		if err != nil {
			return wakes, err
		}
		wakes = append(wakes, w...)
		handed += len(w)
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
		w, ok, err := s.handover(ctx, g, i, "", m, now)
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

// MaxWeightClass is the largest weight admission looks for (pipeline.MaxWeight).
const MaxWeightClass = 10

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{schema.AttrPK: str(pk), schema.AttrSK: str(sk)}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func sOf(it map[string]types.AttributeValue, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func nStr(it map[string]types.AttributeValue, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return ""
}

func nOf(it map[string]types.AttributeValue, name string) int64 {
	n, _ := strconv.ParseInt(nStr(it, name), 10, 64)
	return n
}

func conditionFailed(err error) bool {
	var cf *types.ConditionalCheckFailedException
	return errors.As(err, &cf)
}
