package admission

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/corecontrol"
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
	// Core is a core system gate's settings: its control item (package corecontrol) and its
	// maintenance windows set the limit (paused or in a window: 0; an override in place of
	// Limit). Nil for a pool's gate.
	Core *corecontrol.Settings
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
	// Again: the waiter's reservation expired unclaimed (its wake-up was lost) and the slot went
	// on; it is woken again so that it queues again under its ticket. Not a handover.
	Again bool
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
	// ExpectedWait is how long the file may still wait at Gate at the pace the gate admitted
	// files since its previous reconcile (counters.go): 0 when unknown.
	ExpectedWait time.Duration
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
	attrMark      = "servedAtReconcile"
	attrPace      = "servedPerMinute"
	attrAlive     = "aliveUntil"
)

// Place states.
const (
	stateWaiting  = "waiting"
	stateReserved = "reserved"
	stateHolding  = "holding"
	statePaused   = "paused"
	// stateYielded: the file gave the gate's slot back because a later gate was full (yield.go).
	// It keeps its ticket and its wait: when it comes back, it queues under that ticket.
	stateYielded = "yielded"
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
		if p.found && (p.state == stateWaiting || p.state == stateReserved || p.state == stateYielded) {
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
		// slot while it waits for another's. The file keeps its place there (yield.go).
		for _, j := range taken {
			wakes, err := s.yieldGate(ctx, r.Gates[j], r, since, now)
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
		case stateYielded:
			return s.comeBack(ctx, g, r, p, now)
		case stateReserved:
			ok, err := s.claim(ctx, g, r, p, now)
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
func (s *Store) claim(ctx context.Context, g Gate, r Request, p place, now time.Time) (bool, error) {
	idx := p.slot
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
	// The place keeps the ticket it was handed the slot under: a file that gives the slot back
	// (yieldGate) queues under it again.
	return true, s.putPlace(ctx, g, r, place{execution: r.Execution, state: stateHolding, slot: idx, ticket: p.ticket, weight: r.Weight, since: p.since}, now)
}

// MaxWeightClass is the largest weight admission looks for (pipeline.MaxWeight).
const MaxWeightClass = 10
