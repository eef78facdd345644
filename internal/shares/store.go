package shares

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/schema"
)

// ReadAPI is the part of the DynamoDB client that reads the shares (pipectl status).
type ReadAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// API is the part of the DynamoDB client the store uses.
type API interface {
	ReadAPI
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// State is the shares item as read: its entries, sorted by execution, and its version (0 when
// the item is absent).
type State struct {
	Entries []Entry
	Version int64
}

// Entry returns the entry of execution, and whether there is one.
func (s State) Entry(execution string) (Entry, bool) {
	i := slices.IndexFunc(s.Entries, func(e Entry) bool { return e.Execution == execution })
	if i < 0 {
		return Entry{}, false
	}
	return s.Entries[i], true
}

// Key is the shares item's key of the core system name.
func Key(name string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		schema.AttrPK: &types.AttributeValueMemberS{Value: schema.CoreGate(name)},
		schema.AttrSK: &types.AttributeValueMemberS{Value: schema.SharesSK},
	}
}

// Read reads the shares of core system name in table; an absent item is the zero State.
// consistent asks for a strongly consistent read, which a write after a lost race needs; the
// regular look may be eventually consistent, since every write is conditional on the version it
// was computed from
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.ReadConsistency.html).
func Read(ctx context.Context, api ReadAPI, table, name string, consistent bool) (State, error) {
	out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: Key(name), ConsistentRead: aws.Bool(consistent)})
	if err != nil {
		return State{}, fmt.Errorf("reading the request shares of core system %s: %w", name, err)
	}
	s, err := decode(out.Item)
	if err != nil {
		return State{}, fmt.Errorf("the request shares item of core system %s in %s: %w", name, table, err)
	}
	return s, nil
}

func decode(it map[string]types.AttributeValue) (State, error) {
	if len(it) == 0 {
		return State{}, nil
	}
	var errs []error
	num := func(m map[string]types.AttributeValue, name, where string) int64 {
		v, ok := m[name].(*types.AttributeValueMemberN)
		if !ok {
			errs = append(errs, fmt.Errorf("%sattribute %s is not a number", where, name))
			return 0
		}
		i, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%sattribute %s: %w", where, name, err))
		}
		return i
	}
	var s State
	s.Version = num(it, schema.AttrShareVersion, "")
	if s.Version <= 0 {
		errs = append(errs, fmt.Errorf("attribute %s is not positive", schema.AttrShareVersion))
	}
	entries, ok := it[schema.AttrShareEntries].(*types.AttributeValueMemberM)
	if !ok {
		return s, errors.Join(append(errs, fmt.Errorf("attribute %s is not a map", schema.AttrShareEntries))...)
	}
	for name, v := range entries.Value {
		m, ok := v.(*types.AttributeValueMemberM)
		if !ok {
			errs = append(errs, fmt.Errorf("entry %s is not a map", name))
			continue
		}
		where := "entry " + name + ": "
		ms := func(attr string) time.Time { return time.UnixMilli(num(m.Value, attr, where)) }
		e := Entry{Execution: name, Demand: int(num(m.Value, schema.AttrShareDemand, where)),
			Weight: int(num(m.Value, schema.AttrShareWeight, where)), Grant: int(num(m.Value, schema.AttrShareGrant, where)),
			Joined: ms(schema.AttrShareJoined), Seen: ms(schema.AttrShareSeen), Until: ms(schema.AttrShareUntil)}
		if e.Grant < 0 || e.Demand < 1 || e.Weight < 1 {
			errs = append(errs, fmt.Errorf("%sgrant %d, demand %d, weight %d: want a grant of at least 0, the others at least 1", where, e.Grant, e.Demand, e.Weight))
		}
		s.Entries = append(s.Entries, e)
	}
	slices.SortFunc(s.Entries, func(a, b Entry) int { return strings.Compare(a.Execution, b.Execution) })
	return s, errors.Join(errs...)
}

// write stores entries over cur, only if the item is still cur (the same version, or still
// absent), so that two writers that read the same item never both change it
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html).
// ok is false when another writer got there first.
func write(ctx context.Context, api API, table, name string, cur State, entries []Entry) (State, bool, error) {
	next := State{Entries: entries, Version: cur.Version + 1}
	names := map[string]string{"#entries": schema.AttrShareEntries, "#version": schema.AttrShareVersion}
	vals := map[string]types.AttributeValue{":entries": entriesValue(entries), ":version": num(next.Version)}
	in := &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       Key(name),
		UpdateExpression:          aws.String("SET #entries = :entries, #version = :version"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	}
	if cur.Version > 0 {
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
		return cur, false, fmt.Errorf("writing the request shares of core system %s: %w", name, err)
	}
	return next, true, nil
}

// entriesValue is the AttrShareEntries map of entries.
func entriesValue(entries []Entry) types.AttributeValue {
	m := make(map[string]types.AttributeValue, len(entries))
	for _, e := range entries {
		m[e.Execution] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			schema.AttrShareDemand: num(int64(e.Demand)), schema.AttrShareWeight: num(int64(e.Weight)),
			schema.AttrShareGrant: num(int64(e.Grant)), schema.AttrShareJoined: num(e.Joined.UnixMilli()),
			schema.AttrShareSeen: num(e.Seen.UnixMilli()), schema.AttrShareUntil: num(e.Until.UnixMilli()),
		}}
	}
	return &types.AttributeValueMemberM{Value: m}
}

// Item is the shares item of core system name holding st, as the store writes it (for fakes of
// the table).
func Item(name string, st State) map[string]types.AttributeValue {
	it := Key(name)
	it[schema.AttrShareEntries], it[schema.AttrShareVersion] = entriesValue(st.Entries), num(st.Version)
	return it
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// Store reads and writes one core system's shares item.
type Store struct {
	API   API
	Table string
	Name  string // the core system's name
}

// Read reads the shares; see the package function Read.
func (s Store) Read(ctx context.Context, consistent bool) (State, error) {
	return Read(ctx, s.API, s.Table, s.Name, consistent)
}

// Remove removes the entry of execution in one unconditional UpdateItem that also raises the
// version, so that a write another invocation computed from a state that held the entry fails
// its condition instead of writing it back. Removing an entry only frees capacity, so it needs no
// read first. An item without the entry is left as it is.
func (s Store) Remove(ctx context.Context, execution string) error {
	_, err := s.API.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.Table),
		Key:                       Key(s.Name),
		UpdateExpression:          aws.String("REMOVE #entries.#me SET #version = #version + :one"),
		ConditionExpression:       aws.String("attribute_exists(#entries.#me)"),
		ExpressionAttributeNames:  map[string]string{"#entries": schema.AttrShareEntries, "#me": execution, "#version": schema.AttrShareVersion},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("removing %s from the request shares of core system %s: %w", execution, s.Name, err)
	}
	return nil
}

// MaxAttempts bounds how often Apply computes the entries again after losing to another writer.
const MaxAttempts = 4

// Apply writes the entries decide computes from cur (the caller's last read), when decide says
// they changed, conditional on the item still being cur. When another writer changed the item
// first, it reads the item again (strongly consistent) and decides again, up to MaxAttempts
// times. It returns the state it leaves (the last read when nothing was written) and whether
// its own write made it. Entries dead at now are dropped from every write.
func (s Store) Apply(ctx context.Context, cur State, now time.Time, decide func(State) ([]Entry, bool)) (State, bool, error) {
	for attempt := 1; ; attempt++ {
		next, changed := decide(cur)
		if !changed {
			return cur, false, nil
		}
		next = slices.DeleteFunc(slices.Clone(next), func(e Entry) bool { return !e.Live(now) })
		got, ok, err := write(ctx, s.API, s.Table, s.Name, cur, next)
		if err != nil || ok {
			return got, ok, err
		}
		if attempt == MaxAttempts {
			return cur, false, nil
		}
		if cur, err = s.Read(ctx, true); err != nil {
			return cur, false, err
		}
	}
}

// LimitOf reads a core system's adaptive running-file limit (schema.LimitSK) eventually
// consistent, clamped to 1..maxRunningFiles; an absent item is maxRunningFiles. The shares follow
// the limit within a read, which is what eventual consistency costs.
func LimitOf(ctx context.Context, api ReadAPI, table, name string, maxRunningFiles int) (int, error) {
	out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(false),
		Key: map[string]types.AttributeValue{
			schema.AttrPK: &types.AttributeValueMemberS{Value: schema.CoreGate(name)},
			schema.AttrSK: &types.AttributeValueMemberS{Value: schema.LimitSK},
		}})
	if err != nil {
		return 0, fmt.Errorf("reading the adaptive limit of core system %s: %w", name, err)
	}
	if len(out.Item) == 0 {
		return maxRunningFiles, nil
	}
	v, ok := out.Item[schema.AttrLimit].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("the adaptive limit item of core system %s: attribute %s is not a number", name, schema.AttrLimit)
	}
	n, err := strconv.Atoi(v.Value)
	if err != nil {
		return 0, fmt.Errorf("the adaptive limit item of core system %s: %w", name, err)
	}
	return min(max(1, n), max(1, maxRunningFiles)), nil
}
