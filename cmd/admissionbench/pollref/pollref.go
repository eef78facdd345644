package pollref

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// How admission works (docs/controller.md, "Admission"):
//
//   - A gate (a core system, a pool) is one partition of a DynamoDB table. A running file holds a
//     lease in each gate it passed: the item "slot#<index>" with index below the gate's limit,
//     naming the file's execution. PutItem with attribute_not_exists makes taking an index exact:
//     two controllers can never hold the same index, so a gate never has more leases than indexes
//     (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html).
//     Reads are strongly consistent (ConsistentRead), so a lease just written is seen by the next
//     reader (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.ReadConsistency.html).
//   - A lease is tied to the execution's name, not to a controller: a controller that dies after
//     taking it finds it again when the message comes back, and the status event of the execution
//     (or the safety net's look at it) deletes it by that name. The owner renews it every time it
//     looks at its running file, at least once per safety net; a lease nobody renewed for
//     LeaseTTL is free again, so a lost message never leaks a slot either.
//   - Gates are taken in a fixed order (the core system, then the pool) and held while the next
//     one is waited for, so two files never wait for each other's gate.
//   - A file that finds no free slot, or finds tenants that have waited longer (scaled by weight)
//     than it for the free ones, waits: the item "wait#<weight>#<since>#<tenant>" ranks it, and
//     "tenant#<tenant>" remembers since when it waits, so the wait survives its deliveries. Only a
//     tenant's head file waits (the FIFO group holds the rest), so one tenant has at most one
//     entry and its backlog never delays another tenant. A tenant's next file starts waiting anew,
//     behind every tenant that was waiting already.
//   - Waiting tenants of one weight are sorted by since in the sort key, so "how many waiting
//     tenants are ahead of me" is one Query per weight with Limit: its cost is bounded by the
//     gate's limit, not by the number of waiting tenants.

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
	// Key is the gate's partition key: CoreGate or PoolGate.
	Key string
	// Limit is the gate's configured number of running files (maxRunningFiles), at least 1.
	Limit int
	// Adaptive says the core system's adaptive limit item (LimitSK) may lower the limit.
	Adaptive bool
}

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

// Decision is the outcome of one Admit.
type Decision struct {
	// Admitted: the file holds a lease in every gate.
	Admitted bool
	// Unknown: not Fresh, and the first gate has neither a lease nor a wait of this execution.
	Unknown bool
	// Held: every lease was already held before this call (an earlier delivery was admitted).
	Held bool
	// Waited: the tenant had been waiting for this execution since an earlier delivery (so no
	// earlier delivery can have started it; see the package comment).
	Waited bool
	// WaitedFor is how long the file waited for admission, when it is admitted now or waits.
	WaitedFor time.Duration
	// Gate is the gate the file waits for, when not admitted.
	Gate string
	// Ahead is the number of waiting tenants ranked before this one in Gate, counted up to
	// Counted (Ahead == Counted: at least that many); Free the free slots Gate had.
	Ahead, Counted, Free int
	// Running and Limit are the blocking (or last) gate's running files and effective limit.
	Running, Limit int
	// Looks are the gates this call read, in order, as it found them.
	Looks []Look
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
	// WaiterTTL: a waiting entry not renewed for this long no longer counts against others.
	WaiterTTL time.Duration
	Now       func() time.Time
}

// Sort key prefixes.
const (
	slotPrefix   = "slot#"
	waitPrefix   = "wait#"
	tenantPrefix = "tenant#"
)

// Attributes of the items.
const (
	attrExecution = "execution"
	attrTenant    = "tenant"
	attrRenewedAt = "renewedAt"
	attrSince     = "since"
	attrWaitSK    = "waitSk"
	attrAcquired  = "acquiredAt"
)

func (s *Store) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

// maxTakeRounds bounds the read-then-take rounds of one gate in one Admit.
const maxTakeRounds = 3

// Admit takes a lease in each of the request's gates, in order, if the file may start now;
// otherwise it records (or renews) the tenant's place in the first gate it must wait for. Leases
// taken in earlier gates are kept while it waits (see the package comment).
func (s *Store) Admit(ctx context.Context, r Request) (Decision, error) {
	if err := r.check(); err != nil {
		return Decision{}, err
	}
	dec := Decision{Admitted: true, Held: true}
	for i, g := range r.Gates {
		gd, err := s.admitGate(ctx, g, r, i == 0 && !r.Fresh)
		if err != nil {
			return Decision{}, fmt.Errorf("admission gate %s: %w", g.Key, err)
		}
		if gd.Unknown {
			return gd, nil
		}
		dec.Looks = append(dec.Looks, Look{Gate: g.Key, Running: gd.Running, Limit: gd.Limit})
		dec.Held = dec.Held && gd.Held
		dec.Waited = dec.Waited || gd.Waited
		dec.WaitedFor = max(dec.WaitedFor, gd.WaitedFor)
		dec.Running, dec.Limit, dec.Gate = gd.Running, gd.Limit, g.Key
		if !gd.Admitted {
			gd.Gate, gd.Looks = g.Key, dec.Looks
			gd.Held, gd.Waited = false, dec.Waited || gd.Waited
			gd.WaitedFor = max(dec.WaitedFor, gd.WaitedFor)
			return gd, nil
		}
	}
	dec.Gate = ""
	return dec, nil
}

func (r Request) check() error {
	switch {
	case r.Execution == "" || r.Tenant == "":
		return errors.New("admission: a request needs an execution name and a tenant")
	case r.Weight < 1 || r.Weight > MaxWeightClass:
		return fmt.Errorf("admission: weight %d is outside 1..%d", r.Weight, MaxWeightClass)
	}
	for _, g := range r.Gates {
		if g.Table == "" || g.Key == "" || g.Limit < 1 || g.Limit > 9999 {
			return fmt.Errorf("admission: gate %q of table %q needs a limit of 1..9999, got %d", g.Key, g.Table, g.Limit)
		}
	}
	return nil
}

// lease is a slot item as read.
type lease struct {
	index     int
	sk        string
	execution string
	renewedAt int64
}

// gateState is one strongly consistent look at a gate.
type gateState struct {
	leases []lease // live leases
	stale  []lease // leases nobody renewed for LeaseTTL: free again
	limit  int     // the effective limit
}

func (st gateState) holder(execution string) (lease, bool) {
	for _, l := range st.leases {
		if l.execution == execution {
			return l, true
		}
	}
	return lease{}, false
}

func (s *Store) admitGate(ctx context.Context, g Gate, r Request, known bool) (Decision, error) {
	now := s.now()
	for round := 0; ; round++ {
		st, err := s.read(ctx, g, now)
		if err != nil {
			return Decision{}, err
		}
		d := Decision{Running: len(st.leases), Limit: st.limit}
		if l, ok := st.holder(r.Execution); ok {
			d.Admitted, d.Held = true, true
			return d, s.renewLease(ctx, g, l, now)
		}
		w, err := s.waiting(ctx, g, r.Tenant)
		if err != nil {
			return Decision{}, err
		}
		since := now
		if w.found && w.execution == r.Execution {
			since = time.UnixMilli(w.since)
			d.Waited = true
		} else if known {
			return Decision{Unknown: true}, nil
		}
		d.WaitedFor = now.Sub(since)
		d.Free = max(0, st.limit-len(st.leases))
		// With free slots, every weight is ranked; without, only the tenant's own weight, which
		// is enough to tell how soon it should look again.
		if d.Free > 0 {
			d.Counted = d.Free
			d.Ahead, err = s.ahead(ctx, g, r, since, now, d.Free, false)
		} else {
			d.Counted = rankCap(g)
			d.Ahead, err = s.ahead(ctx, g, r, since, now, d.Counted, true)
		}
		if err != nil {
			return Decision{}, err
		}
		if d.Free > 0 && d.Ahead < d.Free {
			taken, err := s.take(ctx, g, r, st, now)
			if err != nil {
				return Decision{}, err
			}
			if taken {
				d.Admitted = true
				d.Running++
				if w.found {
					s.forget(ctx, g, r.Tenant, w)
				}
				return d, nil
			}
			if round+1 < maxTakeRounds {
				continue // another controller took the index first: look again
			}
		}
		if err := s.wait(ctx, g, r, w, since, now); err != nil {
			return Decision{}, err
		}
		return d, nil
	}
}

// rankCap bounds how far Admit counts the tenants ahead of a waiting one: ten rounds of the gate's
// slots, so that a waiting tenant can look again about when its turn may come; past it, a tenant
// polls at the longest interval. The count reads at most this many keys of one weight.
func rankCap(g Gate) int { return min(10*g.Limit, 500) }

// read returns the gate's leases and effective limit.
func (s *Store) read(ctx context.Context, g Gate, now time.Time) (gateState, error) {
	st := gateState{limit: g.Limit}
	var start map[string]types.AttributeValue
	for {
		out, err := s.DB.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(g.Table),
			ConsistentRead:            aws.Bool(true),
			KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :slot)"),
			ExpressionAttributeNames:  map[string]string{"#pk": AttrPK, "#sk": AttrSK},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(g.Key), ":slot": str(slotPrefix)},
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return st, fmt.Errorf("read the running files: %w", err)
		}
		for _, it := range out.Items {
			l := lease{sk: sOf(it, AttrSK), execution: sOf(it, attrExecution), renewedAt: nOf(it, attrRenewedAt)}
			l.index, _ = strconv.Atoi(strings.TrimPrefix(l.sk, slotPrefix))
			if now.Sub(time.UnixMilli(l.renewedAt)) > s.LeaseTTL {
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
	if g.Adaptive {
		out, err := s.DB.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      aws.String(g.Table),
			ConsistentRead: aws.Bool(true),
			Key:            key(g.Key, LimitSK),
		})
		if err != nil {
			return st, fmt.Errorf("read the adaptive limit: %w", err)
		}
		if out.Item != nil {
			if v, err := strconv.ParseFloat(nStr(out.Item, AttrLimit), 64); err == nil && !math.IsNaN(v) {
				st.limit = min(g.Limit, max(1, int(math.Floor(v))))
			}
		}
	}
	return st, nil
}

// take writes a lease at a free index below the effective limit: a free one, or one whose lease
// went stale. It reports false when another controller took every candidate first.
func (s *Store) take(ctx context.Context, g Gate, r Request, st gateState, now time.Time) (bool, error) {
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
		item := map[string]types.AttributeValue{
			AttrPK:        str(g.Key),
			AttrSK:        str(slotSK(i)),
			attrExecution: str(r.Execution),
			attrTenant:    str(r.Tenant),
			attrAcquired:  num(now.UnixMilli()),
			attrRenewedAt: num(now.UnixMilli()),
			AttrExpiresAt: num(now.Add(s.LeaseTTL + 24*time.Hour).Unix()),
		}
		in := &dynamodb.PutItemInput{TableName: aws.String(g.Table), Item: item,
			ConditionExpression:      aws.String("attribute_not_exists(#sk)"),
			ExpressionAttributeNames: map[string]string{"#sk": AttrSK}}
		if l, ok := stale[i]; ok {
			// Free again only if nobody renewed it since it was read.
			in.ConditionExpression = aws.String("attribute_not_exists(#sk) OR #r = :seen")
			in.ExpressionAttributeNames["#r"] = attrRenewedAt
			in.ExpressionAttributeValues = map[string]types.AttributeValue{":seen": num(l.renewedAt)}
		}
		_, err := s.DB.PutItem(ctx, in)
		if conditionFailed(err) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("take slot %d: %w", i, err)
		}
		return true, nil
	}
	return false, nil
}

// renewLease records that the lease's file is still looked after.
func (s *Store) renewLease(ctx context.Context, g Gate, l lease, now time.Time) error {
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(g.Table),
		Key:                       key(g.Key, l.sk),
		UpdateExpression:          aws.String("SET #r = :now, #x = :exp"),
		ConditionExpression:       aws.String("#e = :exec"),
		ExpressionAttributeNames:  map[string]string{"#r": attrRenewedAt, "#x": AttrExpiresAt, "#e": attrExecution},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(now.UnixMilli()), ":exp": num(now.Add(s.LeaseTTL + 24*time.Hour).Unix()), ":exec": str(l.execution)},
	})
	if conditionFailed(err) {
		return nil // released meanwhile: the caller finds out on its next look
	}
	if err != nil {
		return fmt.Errorf("renew the lease: %w", err)
	}
	return nil
}

// Renew renews the execution's leases in the gates that hold one, and reports whether every gate
// did. A controller calls it each time it finds the file still running.
func (s *Store) Renew(ctx context.Context, gates []Gate, execution string) (bool, error) {
	now := s.now()
	all := true
	for _, g := range gates {
		st, err := s.read(ctx, g, now)
		if err != nil {
			return false, fmt.Errorf("admission gate %s: %w", g.Key, err)
		}
		l, ok := st.holder(execution)
		if !ok {
			all = false
			continue
		}
		if err := s.renewLease(ctx, g, l, now); err != nil {
			return false, fmt.Errorf("admission gate %s: %w", g.Key, err)
		}
	}
	return all, nil
}

// Release deletes the execution's leases (live or stale) in every gate. Releasing an execution
// that holds none is not an error: status events and deliveries may both release one file.
func (s *Store) Release(ctx context.Context, gates []Gate, execution string) (int, error) {
	now := s.now()
	n := 0
	for _, g := range gates {
		st, err := s.read(ctx, g, now)
		if err != nil {
			return n, fmt.Errorf("admission gate %s: %w", g.Key, err)
		}
		for _, l := range append(st.leases, st.stale...) {
			if l.execution != execution {
				continue
			}
			_, err := s.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{
				TableName:                 aws.String(g.Table),
				Key:                       key(g.Key, l.sk),
				ConditionExpression:       aws.String("#e = :exec"),
				ExpressionAttributeNames:  map[string]string{"#e": attrExecution},
				ExpressionAttributeValues: map[string]types.AttributeValue{":exec": str(execution)},
			})
			if conditionFailed(err) {
				continue
			}
			if err != nil {
				return n, fmt.Errorf("admission gate %s: release slot %d: %w", g.Key, l.index, err)
			}
			n++
		}
	}
	return n, nil
}

// waiter is a tenant's "tenant#" item: since when it waits, for which execution, and where its
// ranking entry is.
type waiter struct {
	found     bool
	execution string
	since     int64
	waitSK    string
}

func (s *Store) waiting(ctx context.Context, g Gate, tenant string) (waiter, error) {
	out, err := s.DB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(g.Table),
		ConsistentRead: aws.Bool(true),
		Key:            key(g.Key, tenantPrefix+tenant),
	})
	if err != nil {
		return waiter{}, fmt.Errorf("read the tenant's wait: %w", err)
	}
	if out.Item == nil {
		return waiter{}, nil
	}
	return waiter{found: true, execution: sOf(out.Item, attrExecution), since: nOf(out.Item, attrSince), waitSK: sOf(out.Item, attrWaitSK)}, nil
}

// wait records the tenant as waiting since since (kept from an earlier delivery of the same file)
// and renews its ranking entry, so others keep counting it.
func (s *Store) wait(ctx context.Context, g Gate, r Request, w waiter, since, now time.Time) error {
	sk := waitSK(r.Weight, since, r.Tenant)
	if w.found && w.waitSK != sk {
		s.deleteItem(ctx, g, w.waitSK) // an earlier file's entry, or a changed weight
	}
	exp := num(now.Add(s.WaiterTTL + 24*time.Hour).Unix())
	if !w.found || w.execution != r.Execution || w.waitSK != sk {
		if _, err := s.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(g.Table), Item: map[string]types.AttributeValue{
			AttrPK: str(g.Key), AttrSK: str(tenantPrefix + r.Tenant),
			attrExecution: str(r.Execution), attrSince: num(since.UnixMilli()), attrWaitSK: str(sk), AttrExpiresAt: exp,
		}}); err != nil {
			return fmt.Errorf("record the tenant's wait: %w", err)
		}
	}
	if _, err := s.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(g.Table), Item: map[string]types.AttributeValue{
		AttrPK: str(g.Key), AttrSK: str(sk), attrTenant: str(r.Tenant), attrExecution: str(r.Execution),
		attrRenewedAt: num(now.UnixMilli()), AttrExpiresAt: exp,
	}}); err != nil {
		return fmt.Errorf("renew the tenant's place: %w", err)
	}
	return nil
}

// forget deletes the tenant's wait once it is admitted. A failure is harmless: the entry no longer
// names a waiting file once the tenant's next file waits, and stale entries stop counting.
func (s *Store) forget(ctx context.Context, g Gate, tenant string, w waiter) {
	s.deleteItem(ctx, g, w.waitSK)
	s.deleteItem(ctx, g, tenantPrefix+tenant)
}

func (s *Store) deleteItem(ctx context.Context, g Gate, sk string) {
	if sk == "" {
		return
	}
	_, _ = s.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(g.Table), Key: key(g.Key, sk)})
}

// ahead counts, up to limit, the live waiting tenants ranked before r, which waits since since:
// those whose wait scaled by their weight is longer, ties broken by the earlier since, then by
// tenant id. One Query per weight: tenants of one weight are ahead exactly when they wait since
// before a threshold, and the sort key orders them by since.
func (s *Store) ahead(ctx context.Context, g Gate, r Request, since, now time.Time, limit int, ownWeightOnly bool) (int, error) {
	waited := now.Sub(since).Milliseconds() * int64(r.Weight)
	if !ownWeightOnly {
		// Most of the time nobody waits: one small Query says so, instead of one per weight.
		others, err := s.anyOtherWaiting(ctx, g, waitSK(r.Weight, since, r.Tenant))
		if err != nil || !others {
			return 0, err
		}
	}
	n := 0
	for w := 1; w <= MaxWeightClass && n < limit; w++ {
		if ownWeightOnly && w != r.Weight {
			continue
		}
		// (now - s) * w > waited  <=>  s < now - waited / w; equal priorities rank by since.
		threshold := now.UnixMilli() - waited/int64(w)
		if w < r.Weight {
			threshold++ // an equal priority with a smaller weight waited since earlier: ahead
		}
		upper := waitPrefix + fmt.Sprintf("%02d#%013d#", w, threshold)
		if w == r.Weight {
			upper = waitSK(w, since, r.Tenant) // ties: the earlier since, then the smaller id
		}
		cnt, err := s.countBefore(ctx, g, w, upper, now, limit-n)
		if err != nil {
			return 0, err
		}
		n += cnt
	}
	return n, nil
}

// anyOtherWaiting reports whether the gate has a waiting entry besides own (stale ones included:
// the per-weight count then decides).
func (s *Store) anyOtherWaiting(ctx context.Context, g Gate, own string) (bool, error) {
	out, err := s.DB.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(g.Table),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :w)"),
		ExpressionAttributeNames:  map[string]string{"#pk": AttrPK, "#sk": AttrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(g.Key), ":w": str(waitPrefix)},
		ProjectionExpression:      aws.String("#sk"),
		Limit:                     aws.Int32(2),
	})
	if err != nil {
		return false, fmt.Errorf("look for waiting tenants: %w", err)
	}
	for _, it := range out.Items {
		if sOf(it, AttrSK) != own {
			return true, nil
		}
	}
	return false, nil
}

// MaxWeightClass is the largest weight admission looks for (pipeline.MaxWeight).
const MaxWeightClass = 10

// countBefore counts, up to limit, the live entries of weight w whose sort key is below upper.
// Stale entries (not renewed for WaiterTTL) do not count.
func (s *Store) countBefore(ctx context.Context, g Gate, w int, upper string, now time.Time, limit int) (int, error) {
	lower := waitPrefix + fmt.Sprintf("%02d#", w)
	n := 0
	var start map[string]types.AttributeValue
	for n < limit {
		out, err := s.DB.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(g.Table),
			ConsistentRead:            aws.Bool(true),
			KeyConditionExpression:    aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
			ExpressionAttributeNames:  map[string]string{"#pk": AttrPK, "#sk": AttrSK, "#r": attrRenewedAt},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(g.Key), ":lo": str(lower), ":hi": str(upper)},
			ProjectionExpression:      aws.String("#sk, #r"),
			Limit:                     aws.Int32(int32(limit - n + 4)),
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return 0, fmt.Errorf("rank the waiting tenants: %w", err)
		}
		for _, it := range out.Items {
			if sOf(it, AttrSK) >= upper {
				continue // BETWEEN includes its upper bound
			}
			if now.Sub(time.UnixMilli(nOf(it, attrRenewedAt))) <= s.WaiterTTL {
				n++
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	return min(n, limit), nil
}

func slotSK(i int) string { return fmt.Sprintf("%s%04d", slotPrefix, i) }

func waitSK(weight int, since time.Time, tenant string) string {
	return fmt.Sprintf("%s%02d#%013d#%s", waitPrefix, weight, since.UnixMilli(), tenant)
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: str(pk), AttrSK: str(sk)}
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

// Summary is one gate as an operator sees it.
type Summary struct {
	Gate string `json:"gate"`
	// Running are the executions holding a live lease, sorted.
	Running []string `json:"running"`
	// Limit is the effective limit (adaptive or configured), MaxRunningFiles the configured one.
	Limit           int `json:"limit"`
	MaxRunningFiles int `json:"maxRunningFiles"`
	// Waiting is the number of tenants waiting (live entries); OldestWaitSeconds the longest wait.
	Waiting           int     `json:"waitingTenants"`
	OldestWaitSeconds float64 `json:"oldestAdmissionWaitSeconds"`
}

// Summarize reads the gate whole: its leases and every waiting entry (a paginated Query; for
// operators, not for the controllers' hot path).
func (s *Store) Summarize(ctx context.Context, g Gate) (Summary, error) {
	now := s.now()
	st, err := s.read(ctx, g, now)
	if err != nil {
		return Summary{}, err
	}
	sum := Summary{Gate: g.Key, Limit: st.limit, MaxRunningFiles: g.Limit, Running: []string{}}
	for _, l := range st.leases {
		sum.Running = append(sum.Running, l.execution)
	}
	slices.Sort(sum.Running)
	var start map[string]types.AttributeValue
	for {
		out, err := s.DB.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(g.Table),
			ConsistentRead:            aws.Bool(true),
			KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :w)"),
			ExpressionAttributeNames:  map[string]string{"#pk": AttrPK, "#sk": AttrSK, "#r": attrRenewedAt},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(g.Key), ":w": str(waitPrefix)},
			ProjectionExpression:      aws.String("#sk, #r"),
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return Summary{}, fmt.Errorf("read the waiting tenants: %w", err)
		}
		for _, it := range out.Items {
			if now.Sub(time.UnixMilli(nOf(it, attrRenewedAt))) > s.WaiterTTL {
				continue
			}
			sum.Waiting++
			parts := strings.Split(sOf(it, AttrSK), "#") // wait, weight, since, tenant
			if len(parts) >= 3 {
				if ms, err := strconv.ParseInt(parts[2], 10, 64); err == nil {
					sum.OldestWaitSeconds = max(sum.OldestWaitSeconds, now.Sub(time.UnixMilli(ms)).Seconds())
				}
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	return sum, nil
}

// Holders lists the executions holding a live lease in the gate, for operators.
func (s *Store) Holders(ctx context.Context, g Gate) ([]string, int, error) {
	st, err := s.read(ctx, g, s.now())
	if err != nil {
		return nil, 0, err
	}
	var names []string
	for _, l := range st.leases {
		names = append(names, l.execution)
	}
	slices.Sort(names)
	return names, st.limit, nil
}
