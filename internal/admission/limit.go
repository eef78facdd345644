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
)

// LimitAPI is the part of the DynamoDB client the limit store uses.
type LimitAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ LimitAPI = (*dynamodb.Client)(nil)

// AdaptiveLimit is a core system's adaptive running-file limit as stored.
type AdaptiveLimit struct {
	Value     int
	UpdatedAt time.Time // zero when the item is absent
	Stored    bool      // false: no item, the limit is maxRunningFiles
	raw       string    // the stored limit attribute, unclamped, for the condition
}

// LimitStore reads and moves the adaptive limit item of a core system's gate (pk CoreGate(name),
// sk LimitSK). Every change is an UpdateItem conditional on the value and updatedAt it was computed
// from, so two writers that read the same item never both apply: the second finds the condition
// false, and no change is ever computed from a value another writer has already replaced.
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
		AttrPK: &types.AttributeValueMemberS{Value: CoreGate(core.Name)},
		AttrSK: &types.AttributeValueMemberS{Value: LimitSK},
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
	v, errV := limitNumber(out.Item[AttrLimit])
	at, errAt := limitNumber(out.Item[AttrUpdatedAt])
	if err := errors.Join(errV, errAt); err != nil {
		return AdaptiveLimit{}, fmt.Errorf("the adaptive limit item of core system %s in %s: %w", core.Name, core.Table, err)
	}
	return AdaptiveLimit{Value: Clamp(int(v), core.MaxRunningFiles), UpdatedAt: time.UnixMilli(at), Stored: true,
		raw: out.Item[AttrLimit].(*types.AttributeValueMemberN).Value}, nil
}

func limitNumber(v types.AttributeValue) (int64, error) {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, errors.New("an attribute is missing or not a number")
	}
	return strconv.ParseInt(n.Value, 10, 64)
}

// Decrease halves the core system's limit (Decrease) unless it changed less than DecreaseCooldown
// ago or is 1 already. It reports the limit it leaves and whether it changed it; a concurrent
// writer that got there first (ConditionalCheckFailedException) is no error: that writer changed
// the limit just now, which starts the cooldown.
func (s *LimitStore) Decrease(ctx context.Context, core pipeline.CoreSystem) (int, bool, error) {
	cur, err := s.Read(ctx, core)
	if err != nil {
		return 0, false, err
	}
	now := s.now()
	if (cur.Stored && !decreaseDue(cur.UpdatedAt, now)) || cur.Value <= 1 {
		return cur.Value, false, nil
	}
	return s.set(ctx, core, cur, Decrease(cur.Value), now)
}

// Increase adds one to the core system's limit (Increase) when it is below MaxRunningFiles and last
// changed at least IncreaseInterval ago. It reports the limit it leaves and whether it changed it;
// losing to a concurrent writer is no error.
func (s *LimitStore) Increase(ctx context.Context, core pipeline.CoreSystem) (int, bool, error) {
	cur, err := s.Read(ctx, core)
	if err != nil {
		return 0, false, err
	}
	now := s.now()
	if !cur.Stored || cur.Value >= core.MaxRunningFiles || !increaseDue(cur.UpdatedAt, now) {
		return cur.Value, false, nil
	}
	return s.set(ctx, core, cur, Increase(cur.Value, core.MaxRunningFiles), now)
}

// set writes limit next over cur, only if the item is still cur.
func (s *LimitStore) set(ctx context.Context, core pipeline.CoreSystem, cur AdaptiveLimit, next int, now time.Time) (int, bool, error) {
	in := &dynamodb.UpdateItemInput{
		TableName:        aws.String(core.Table),
		Key:              limitItemKey(core),
		UpdateExpression: aws.String("SET #limit = :next, #updatedAt = :now"),
		ExpressionAttributeNames: map[string]string{
			"#limit": AttrLimit, "#updatedAt": AttrUpdatedAt,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":next": &types.AttributeValueMemberN{Value: strconv.Itoa(next)},
			":now":  &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)},
		},
	}
	if cur.Stored {
		in.ConditionExpression = aws.String("#limit = :old AND #updatedAt = :oldAt")
		in.ExpressionAttributeValues[":old"] = &types.AttributeValueMemberN{Value: cur.raw}
		in.ExpressionAttributeValues[":oldAt"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(cur.UpdatedAt.UnixMilli(), 10)}
	} else {
		in.ConditionExpression = aws.String("attribute_not_exists(#pk)")
		in.ExpressionAttributeNames["#pk"] = AttrPK
	}
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
