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

	"github.com/example/tenantpipeline/internal/corecontrol"
	"github.com/example/tenantpipeline/internal/schema"
)

// lease is a slot item as read.
type lease struct {
	index         int // overflowSlot for an overflow lease
	sk            string
	execution     string
	tenant        string
	renewedAt     int64
	reservedUntil int64
	wake          Wake // a reservation's waiter's message, when it was armed
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
				renewedAt: nOf(it, attrRenewedAt), reservedUntil: nOf(it, attrReserved), index: overflowSlot,
				wake: Wake{Gate: g.Key, Tenant: sOf(it, attrTenant), Execution: sOf(it, attrExecution),
					QueueURL: sOf(it, attrQueueURL), ReceiptHandle: sOf(it, attrReceipt), MessageID: sOf(it, attrMessageID)}}
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

// effectiveLimit is the gate's limit as its operators steer it (steeredLimit), lowered by its
// adaptive limit item while that is below maxRunningFiles.
func (s *Store) effectiveLimit(ctx context.Context, g Gate) (int, error) {
	limit, err := s.steeredLimit(ctx, g)
	if err != nil || !g.Adaptive {
		return limit, err
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
		if v, err := strconv.ParseFloat(nStr(out.Item, schema.AttrLimit), 64); err == nil && !math.IsNaN(v) && int(math.Floor(v)) < g.Limit {
			return min(limit, max(1, int(math.Floor(v)))), nil
		}
	}
	return limit, nil
}

// steeredLimit is a core system gate's limit as its control item and maintenance windows leave
// it (corecontrol.Effective); a pool gate's is its Limit.
func (s *Store) steeredLimit(ctx context.Context, g Gate) (int, error) {
	if g.Core == nil {
		return g.Limit, nil
	}
	l, err := (&corecontrol.Store{DB: s.DB, Now: s.Now}).Limit(ctx, g.Table, *g.Core)
	if err != nil {
		return 0, err
	}
	return l.Value, nil
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
