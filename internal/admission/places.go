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
