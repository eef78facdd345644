package breaker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/schema"
)

// The breaker item's attributes, beside schema.AttrPK and schema.AttrSK. Times are epoch
// milliseconds, durations milliseconds; an absent number is zero.
const (
	AttrStatus         = "state"
	AttrOpenedAt       = "openedAt"
	AttrReason         = "reason"
	AttrFailures       = "failures"
	AttrWindowStart    = "windowStart"
	AttrWindowFailures = "windowFailures"
	AttrNextProbe      = "nextProbe"
	AttrBackoff        = "backoffMs"
	AttrProber         = "prober"
	AttrProbeUntil     = "probeUntil"
	AttrOpens          = "opens"
	AttrVersion        = "version"
)

// ReadAPI is the part of the DynamoDB client that reads a breaker (admission's gate).
type ReadAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// API is the part of the DynamoDB client the store uses.
type API interface {
	ReadAPI
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// Key is the breaker item's key of the core system name.
func Key(name string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		schema.AttrPK: &types.AttributeValueMemberS{Value: schema.CoreGate(name)},
		schema.AttrSK: &types.AttributeValueMemberS{Value: SK},
	}
}

// Read reads the breaker of core system name in table; an absent item is the zero State (closed).
// consistent asks for a strongly consistent read, which a decision about to be written needs
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.ReadConsistency.html);
// a look before sending may be eventually consistent.
func Read(ctx context.Context, api ReadAPI, table, name string, consistent bool) (State, error) {
	out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: Key(name), ConsistentRead: aws.Bool(consistent)})
	if err != nil {
		return State{}, fmt.Errorf("reading the breaker of core system %s: %w", name, err)
	}
	s, err := decode(out.Item)
	if err != nil {
		return State{}, fmt.Errorf("the breaker item of core system %s in %s: %w", name, table, err)
	}
	return s, nil
}

func decode(it map[string]types.AttributeValue) (State, error) {
	if len(it) == 0 {
		return State{}, nil
	}
	var errs []error
	n := func(name string) int64 {
		v, ok := it[name]
		if !ok {
			return 0
		}
		m, ok := v.(*types.AttributeValueMemberN)
		if !ok {
			errs = append(errs, fmt.Errorf("attribute %s is not a number", name))
			return 0
		}
		i, err := strconv.ParseInt(m.Value, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("attribute %s: %w", name, err))
		}
		return i
	}
	str := func(name string) string {
		if v, ok := it[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	t := func(name string) time.Time {
		if ms := n(name); ms > 0 {
			return time.UnixMilli(ms)
		}
		return time.Time{}
	}
	s := State{
		Status: Status(str(AttrStatus)), OpenedAt: t(AttrOpenedAt), Reason: str(AttrReason),
		Failures: int(n(AttrFailures)), WindowStart: t(AttrWindowStart), WindowFailures: int(n(AttrWindowFailures)),
		NextProbe: t(AttrNextProbe), Backoff: time.Duration(n(AttrBackoff)) * time.Millisecond,
		Prober: str(AttrProber), ProbeUntil: t(AttrProbeUntil), Opens: int(n(AttrOpens)), Version: n(AttrVersion),
	}
	switch s.Status {
	case "", Closed, Open, HalfOpen:
	default:
		errs = append(errs, fmt.Errorf("state %q is not %s, %s or %s", s.Status, Closed, Open, HalfOpen))
	}
	if s.Version <= 0 {
		errs = append(errs, fmt.Errorf("attribute %s is missing", AttrVersion))
	}
	return s, errors.Join(errs...)
}

// write stores next over cur, only if the item is still cur (the same version, or still absent),
// so that two writers that read the same item never both change it
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html).
// ok is false when another writer got there first.
func write(ctx context.Context, api API, table, name string, cur, next State) (State, bool, error) {
	next.Version = cur.Version + 1
	ms := func(t time.Time) types.AttributeValue {
		if t.IsZero() {
			return num(0)
		}
		return num(t.UnixMilli())
	}
	status := next.Status
	if status == "" {
		status = Closed
	}
	vals := map[string]types.AttributeValue{
		":state": &types.AttributeValueMemberS{Value: string(status)}, ":openedAt": ms(next.OpenedAt),
		":reason": &types.AttributeValueMemberS{Value: next.Reason}, ":failures": num(int64(next.Failures)),
		":windowStart": ms(next.WindowStart), ":windowFailures": num(int64(next.WindowFailures)),
		":nextProbe": ms(next.NextProbe), ":backoff": num(next.Backoff.Milliseconds()),
		":prober": &types.AttributeValueMemberS{Value: next.Prober}, ":probeUntil": ms(next.ProbeUntil),
		":opens": num(int64(next.Opens)), ":version": num(next.Version),
	}
	names := map[string]string{
		"#state": AttrStatus, "#openedAt": AttrOpenedAt, "#reason": AttrReason, "#failures": AttrFailures,
		"#windowStart": AttrWindowStart, "#windowFailures": AttrWindowFailures, "#nextProbe": AttrNextProbe,
		"#backoff": AttrBackoff, "#prober": AttrProber, "#probeUntil": AttrProbeUntil, "#opens": AttrOpens, "#version": AttrVersion,
	}
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(table),
		Key:       Key(name),
		UpdateExpression: aws.String("SET #state = :state, #openedAt = :openedAt, #reason = :reason, #failures = :failures, " +
			"#windowStart = :windowStart, #windowFailures = :windowFailures, #nextProbe = :nextProbe, #backoff = :backoff, " +
			"#prober = :prober, #probeUntil = :probeUntil, #opens = :opens, #version = :version"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	}
	if cur.Stored() {
		in.ConditionExpression = aws.String("#version = :old")
		vals[":old"] = num(cur.Version)
	} else {
		in.ConditionExpression = aws.String("attribute_not_exists(#pk)")
		names["#pk"] = schema.AttrPK
	}
	_, err := api.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return cur, false, nil
	case err != nil:
		return cur, false, fmt.Errorf("writing the breaker of core system %s: %w", name, err)
	}
	return next, true, nil
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// Store reads and moves one core system's breaker.
type Store struct {
	API   API
	Table string
	Name  string // the core system's name
}

// Read reads the breaker; see the package function Read.
func (s Store) Read(ctx context.Context, consistent bool) (State, error) {
	return Read(ctx, s.API, s.Table, s.Name, consistent)
}

// maxAttempts bounds how often Apply computes a decision again after losing to another writer.
const maxAttempts = 4

// Apply moves the breaker by decide, starting from cur (the caller's last read): it writes
// decide's state when decide says it changed, conditional on the item still being the one it
// was computed from. When another writer changed the item first, it reads the item again
// (strongly consistent) and decides again, a few times. It returns the state it leaves (the
// last read when nothing was written), and whether its own write made it.
func (s Store) Apply(ctx context.Context, cur State, decide func(State) (State, bool)) (State, bool, error) {
	for attempt := 1; ; attempt++ {
		next, changed := decide(cur)
		if !changed {
			return cur, false, nil
		}
		got, ok, err := write(ctx, s.API, s.Table, s.Name, cur, next)
		if err != nil || ok {
			return got, ok, err
		}
		if attempt == maxAttempts {
			return cur, false, nil
		}
		if cur, err = s.Read(ctx, true); err != nil {
			return cur, false, err
		}
	}
}

// GateLimit is the breaker's bound on admission to the core system whose gate partition is
// gateKey (schema.CoreGate): limited with 0 while it is open, 1 while half-open (Gate), read
// strongly consistent as admission reads its slots. An absent item does not limit.
func GateLimit(ctx context.Context, api ReadAPI, table, gateKey string, now time.Time) (limit int, limited bool, err error) {
	out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			schema.AttrPK: &types.AttributeValueMemberS{Value: gateKey},
			schema.AttrSK: &types.AttributeValueMemberS{Value: SK},
		}})
	if err != nil {
		return 0, false, fmt.Errorf("read the breaker: %w", err)
	}
	s, err := decode(out.Item)
	if err != nil {
		return 0, false, fmt.Errorf("the breaker item of %s in %s: %w", gateKey, table, err)
	}
	limit, limited = Gate(s, now)
	return limit, limited, nil
}
