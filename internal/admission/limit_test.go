package admission

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// fakeLimitTable is one limit item. It evaluates the store's two condition expressions as
// DynamoDB does, and before an UpdateItem's condition it runs intervene (another writer).
type fakeLimitTable struct {
	mu        sync.Mutex
	item      map[string]types.AttributeValue // nil: absent
	updates   int                             // applied UpdateItems
	failed    int                             // ConditionalCheckFailedExceptions answered
	getErr    error
	intervene func(f *fakeLimitTable)
}

var _ LimitAPI = (*fakeLimitTable)(nil)

func (f *fakeLimitTable) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.getErr != nil {
		return nil, f.getErr
	}
	if !aws.ToBool(in.ConsistentRead) {
		return nil, errors.New("want a strongly consistent read")
	}
	return &dynamodb.GetItemOutput{Item: f.item}, nil
}

func (f *fakeLimitTable) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if f.intervene != nil {
		f.intervene(f)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	v := in.ExpressionAttributeValues
	n := func(k string) string { return v[k].(*types.AttributeValueMemberN).Value }
	ok := false
	switch aws.ToString(in.ConditionExpression) {
	case "attribute_not_exists(#pk)":
		ok = f.item == nil
	case "#limit = :old AND #updatedAt = :oldAt":
		ok = f.item != nil && f.get(AttrLimit) == n(":old") && f.get(AttrUpdatedAt) == n(":oldAt")
	default:
		return nil, errors.New("unexpected condition " + aws.ToString(in.ConditionExpression))
	}
	if !ok {
		f.failed++
		return nil, &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	}
	f.put(n(":next"), n(":now"))
	f.updates++
	return &dynamodb.UpdateItemOutput{}, nil
}

func (f *fakeLimitTable) get(attr string) string {
	return f.item[attr].(*types.AttributeValueMemberN).Value
}

func (f *fakeLimitTable) put(limit, updatedAt string) {
	f.item = map[string]types.AttributeValue{
		AttrPK: &types.AttributeValueMemberS{Value: CoreGate("core-a")}, AttrSK: &types.AttributeValueMemberS{Value: LimitSK},
		AttrLimit: &types.AttributeValueMemberN{Value: limit}, AttrUpdatedAt: &types.AttributeValueMemberN{Value: updatedAt},
	}
}

func (f *fakeLimitTable) limit() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.item == nil {
		return "absent"
	}
	return f.get(AttrLimit)
}

var (
	coreA = pipeline.CoreSystem{Name: "core-a", MaxRunningFiles: 8, Adaptive: true, Table: "admission"}
	t0    = time.UnixMilli(1_700_000_000_000)
)

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func TestLimitStore(t *testing.T) {
	tests := []struct {
		name        string
		limit       string        // the stored limit; "" absent
		changed     time.Duration // how long before now it was last changed
		op          string        // "decrease" or "increase"
		wantLimit   int
		wantChanged bool
		wantStored  string
	}{
		{"decrease from absent halves maxRunningFiles", "", 0, "decrease", 4, true, "4"},
		{"decrease after the cooldown halves", "6", DecreaseCooldown, "decrease", 3, true, "3"},
		{"decrease inside the cooldown waits", "6", DecreaseCooldown - time.Millisecond, "decrease", 6, false, "6"},
		{"decrease never goes below 1", "1", time.Minute, "decrease", 1, false, "1"},
		{"decrease from above a lowered maxRunningFiles", "20", time.Minute, "decrease", 4, true, "4"},
		{"increase from absent: already maxRunningFiles", "", 0, "increase", 8, false, "absent"},
		{"increase after the interval adds one", "3", IncreaseInterval, "increase", 4, true, "4"},
		{"increase inside the interval waits", "3", IncreaseInterval - time.Millisecond, "increase", 3, false, "3"},
		{"increase never goes above maxRunningFiles", "8", time.Minute, "increase", 8, false, "8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeLimitTable{}
			if tc.limit != "" {
				f.put(tc.limit, ms(t0.Add(-tc.changed)))
			}
			s := &LimitStore{API: f, Now: func() time.Time { return t0 }}
			op := s.Decrease
			if tc.op == "increase" {
				op = s.Increase
			}
			got, changed, err := op(context.Background(), coreA)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.wantLimit || changed != tc.wantChanged {
				t.Errorf("got limit %d (changed %v), want %d (changed %v)", got, changed, tc.wantLimit, tc.wantChanged)
			}
			if s := f.limit(); s != tc.wantStored {
				t.Errorf("got stored limit %s, want %s", s, tc.wantStored)
			}
			if tc.wantChanged && f.get(AttrUpdatedAt) != ms(t0) {
				t.Errorf("got updatedAt %s, want %s", f.get(AttrUpdatedAt), ms(t0))
			}
		})
	}
}

// TestLimitStoreConcurrentWriter: another writer changes the item between the store's read and its
// UpdateItem. The condition fails (ConditionalCheckFailedException), the store reports no change
// and no error, and the other writer's value stays: no update is lost.
func TestLimitStoreConcurrentWriter(t *testing.T) {
	tests := []struct {
		name  string
		op    string
		other string // the limit the other writer stores
	}{
		{"decrease loses to a decrease", "decrease", "4"},
		{"decrease loses to an increase", "decrease", "7"},
		{"increase loses to a decrease", "increase", "3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeLimitTable{}
			f.put("6", ms(t0.Add(-time.Minute)))
			f.intervene = func(f *fakeLimitTable) {
				f.mu.Lock()
				f.put(tc.other, ms(t0.Add(-time.Millisecond)))
				f.mu.Unlock()
			}
			s := &LimitStore{API: f, Now: func() time.Time { return t0 }}
			op := s.Decrease
			if tc.op == "increase" {
				op = s.Increase
			}
			_, changed, err := op(context.Background(), coreA)
			if err != nil || changed {
				t.Errorf("got changed %v, error %v; want no change and no error", changed, err)
			}
			if f.failed != 1 || f.updates != 0 {
				t.Errorf("got %d failed and %d applied updates, want 1 and 0", f.failed, f.updates)
			}
			if got := f.limit(); got != tc.other {
				t.Errorf("got stored limit %s, want the other writer's %s", got, tc.other)
			}
		})
	}
}

// TestLimitStoreBurst: many files see 429s at once; the limit halves once, not down to 1.
func TestLimitStoreBurst(t *testing.T) {
	f := &fakeLimitTable{}
	f.put("8", ms(t0.Add(-time.Minute)))
	s := &LimitStore{API: f, Now: func() time.Time { return t0 }}
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := s.Decrease(context.Background(), coreA); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := f.limit(); got != "4" || f.updates != 1 {
		t.Errorf("got limit %s after %d updates, want 4 after 1", got, f.updates)
	}
}

func TestLimitStoreErrors(t *testing.T) {
	tests := []struct {
		name string
		f    *fakeLimitTable
	}{
		{"read fails", &fakeLimitTable{getErr: errors.New("throttled")}},
		{"item not a number", &fakeLimitTable{item: map[string]types.AttributeValue{AttrLimit: &types.AttributeValueMemberS{Value: "x"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &LimitStore{API: tc.f, Now: func() time.Time { return t0 }}
			if _, _, err := s.Decrease(context.Background(), coreA); err == nil {
				t.Error("got no error, want one")
			}
			if tc.f.updates != 0 {
				t.Errorf("got %d updates, want none", tc.f.updates)
			}
		})
	}
}
