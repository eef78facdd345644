package admission

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/schema"
)

// The adaptive rule's own attributes of the limit item, beside schema.AttrLimit and schema.AttrUpdatedAt (the
// last change of either kind), which admission reads. Both are absent on an item written before
// they existed, and absent means zero.
const (
	// AttrDecreasedAt is the epoch milliseconds of the last decrease: the generation line.
	AttrDecreasedAt = "decreasedAt"
	// AttrClean counts the unthrottled Register invocations since the last change.
	AttrClean = "clean"
)

// LimitAPI is the part of the DynamoDB client the limit store uses.
type LimitAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ LimitAPI = (*dynamodb.Client)(nil)

// AdaptiveLimit is a core system's adaptive running-file limit as stored.
type AdaptiveLimit struct {
	Value       int
	UpdatedAt   time.Time // the last change; zero when the item is absent
	DecreasedAt time.Time // the last decrease; zero when none is recorded
	Clean       int       // unthrottled invocations since UpdatedAt
	Stored      bool      // false: no item, the limit is maxRunningFiles
	raw         string    // the stored limit attribute, unclamped, for the condition
}

// LimitStore reads and moves the adaptive limit item of a core system's gate (pk schema.CoreGate(name),
// sk schema.LimitSK). Every write is an UpdateItem conditional on the limit and updatedAt it was computed
// from, so two writers that read the same item never both change it: the second finds the
// condition false, and no change is ever computed from a value another writer has already
// replaced. In particular two files of one generation that see 429s together decrease it once.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html
type LimitStore struct {
	API LimitAPI
	Now func() time.Time // Default: time.Now.
}

func (s *LimitStore) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

func limitItemKey(core pipeline.CoreSystem) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		schema.AttrPK: &types.AttributeValueMemberS{Value: schema.CoreGate(core.Name)},
		schema.AttrSK: &types.AttributeValueMemberS{Value: schema.LimitSK},
	}
}

// Read returns the core system's limit, clamped to 1..MaxRunningFiles; an absent item is
// MaxRunningFiles. It reads strongly consistently, so a change made just before is seen.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.ReadConsistency.html
func (s *LimitStore) Read(ctx context.Context, core pipeline.CoreSystem) (AdaptiveLimit, error) {
	out, err := s.API.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(core.Table),
		Key:            limitItemKey(core),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return AdaptiveLimit{}, fmt.Errorf("reading the adaptive limit of core system %s: %w", core.Name, err)
	}
	if len(out.Item) == 0 {
		return AdaptiveLimit{Value: core.MaxRunningFiles}, nil
	}
	v, errV := limitNumber(out.Item, schema.AttrLimit, false)
	at, errAt := limitNumber(out.Item, schema.AttrUpdatedAt, false)
	dec, errDec := limitNumber(out.Item, AttrDecreasedAt, true)
	clean, errClean := limitNumber(out.Item, AttrClean, true)
	if err := errors.Join(errV, errAt, errDec, errClean); err != nil {
		return AdaptiveLimit{}, fmt.Errorf("the adaptive limit item of core system %s in %s: %w", core.Name, core.Table, err)
	}
	l := AdaptiveLimit{Value: Clamp(int(v), core.MaxRunningFiles), UpdatedAt: time.UnixMilli(at), Clean: int(clean), Stored: true,
		raw: out.Item[schema.AttrLimit].(*types.AttributeValueMemberN).Value}
	if dec > 0 {
		l.DecreasedAt = time.UnixMilli(dec)
	}
	return l, nil
}

// limitNumber reads the integer attribute name of item; an optional one may be absent (0).
func limitNumber(item map[string]types.AttributeValue, name string, optional bool) (int64, error) {
	v, ok := item[name]
	if !ok && optional {
		return 0, nil
	}
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %s is missing or not a number", name)
	}
	i, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %s: %w", name, err)
	}
	return i, nil
}

// Decrease halves the core system's limit (Decrease) for a "slow down" answer to a file admitted
// at admitted (zero: unknown), when the generation rule allows it (decreaseAllowed). It reports the
// limit it leaves and whether it changed it; a concurrent writer that got there first
// (ConditionalCheckFailedException) is no error: that writer changed the limit just now, and a
// file of this generation does not lower it again.
func (s *LimitStore) Decrease(ctx context.Context, core pipeline.CoreSystem, admitted time.Time) (int, bool, error) {
	cur, err := s.Read(ctx, core)
	if err != nil {
		return 0, false, err
	}
	if !decreaseAllowed(cur, admitted) {
		return cur.Value, false, nil
	}
	return s.set(ctx, core, cur, Decrease(cur.Value), true)
}

// Increase counts one unthrottled Register invocation against the core system's limit, and adds
// one to the limit (Increase) when a limit's worth have been counted since its last change. It
// reports the limit it leaves and whether it changed it. A limit at MaxRunningFiles, or absent
// (which is MaxRunningFiles), is not written at all; losing to a concurrent writer is no error.
func (s *LimitStore) Increase(ctx context.Context, core pipeline.CoreSystem) (int, bool, error) {
	cur, err := s.Read(ctx, core)
	if err != nil {
		return 0, false, err
	}
	if !cur.Stored || cur.Value >= core.MaxRunningFiles {
		return cur.Value, false, nil
	}
	clean, counted, err := s.count(ctx, core, cur)
	if err != nil || !counted || !increaseDue(clean, cur.Value) {
		return cur.Value, false, err
	}
	return s.set(ctx, core, cur, Increase(cur.Value, core.MaxRunningFiles), false)
}

// count adds one to the item's clean counter, only if the item is still cur, and returns the new
// count. ADD is atomic, so concurrent counts are never lost
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.UpdateExpressions.html#Expressions.UpdateExpressions.ADD),
// and UPDATED_NEW returns the count this write made
// (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html#DDB-UpdateItem-request-ReturnValues).
func (s *LimitStore) count(ctx context.Context, core pipeline.CoreSystem, cur AdaptiveLimit) (int, bool, error) {
	in := &dynamodb.UpdateItemInput{
		TableName:                aws.String(core.Table),
		Key:                      limitItemKey(core),
		UpdateExpression:         aws.String("ADD #clean :one"),
		ExpressionAttributeNames: map[string]string{"#clean": AttrClean},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": &types.AttributeValueMemberN{Value: "1"},
		},
		ReturnValues: types.ReturnValueUpdatedNew,
	}
	unchanged(in, cur)
	out, err := s.API.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return 0, false, nil // the limit changed since the read: the count starts again there
	case err != nil:
		return 0, false, fmt.Errorf("counting a clean invocation against the adaptive limit of core system %s: %w", core.Name, err)
	}
	n, err := limitNumber(out.Attributes, AttrClean, false)
	if err != nil {
		return 0, false, fmt.Errorf("counting a clean invocation against the adaptive limit of core system %s: %w", core.Name, err)
	}
	return int(n), true, nil
}

// set writes limit next over cur, only if the item is still cur, and starts a new count of clean
// invocations; a decrease also moves the generation line (AttrDecreasedAt) to now. The time it
// writes is after cur's even when this writer's clock is behind the last one's, so the line never
// moves back and every change has its own updatedAt.
func (s *LimitStore) set(ctx context.Context, core pipeline.CoreSystem, cur AdaptiveLimit, next int, decrease bool) (int, bool, error) {
	at := s.now()
	if cur.Stored && !at.After(cur.UpdatedAt) {
		at = cur.UpdatedAt.Add(time.Millisecond)
	}
	now := strconv.FormatInt(at.UnixMilli(), 10)
	in := &dynamodb.UpdateItemInput{
		TableName:        aws.String(core.Table),
		Key:              limitItemKey(core),
		UpdateExpression: aws.String("SET #limit = :next, #updatedAt = :now, #clean = :zero"),
		ExpressionAttributeNames: map[string]string{
			"#limit": schema.AttrLimit, "#updatedAt": schema.AttrUpdatedAt, "#clean": AttrClean,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":next": &types.AttributeValueMemberN{Value: strconv.Itoa(next)},
			":now":  &types.AttributeValueMemberN{Value: now},
			":zero": &types.AttributeValueMemberN{Value: "0"},
		},
	}
	if decrease {
		in.UpdateExpression = aws.String(*in.UpdateExpression + ", #decreasedAt = :now")
		in.ExpressionAttributeNames["#decreasedAt"] = AttrDecreasedAt
	}
	unchanged(in, cur)
	_, err := s.API.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return cur.Value, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("writing the adaptive limit of core system %s: %w", core.Name, err)
	}
	return next, true, nil
}

// unchanged makes in conditional on the item still being cur: the same limit and updatedAt, or
// still absent.
func unchanged(in *dynamodb.UpdateItemInput, cur AdaptiveLimit) {
	if !cur.Stored {
		in.ConditionExpression = aws.String("attribute_not_exists(#pk)")
		in.ExpressionAttributeNames["#pk"] = schema.AttrPK
		return
	}
	in.ConditionExpression = aws.String("#limit = :old AND #updatedAt = :oldAt")
	in.ExpressionAttributeNames["#limit"] = schema.AttrLimit
	in.ExpressionAttributeNames["#updatedAt"] = schema.AttrUpdatedAt
	in.ExpressionAttributeValues[":old"] = &types.AttributeValueMemberN{Value: cur.raw}
	in.ExpressionAttributeValues[":oldAt"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(cur.UpdatedAt.UnixMilli(), 10)}
}
