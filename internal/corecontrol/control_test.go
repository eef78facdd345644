package corecontrol

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/schema"
	"github.com/example/tenantpipeline/spec"
)

var t0 = time.Date(2026, 12, 6, 1, 30, 0, 0, time.UTC) // a Sunday, 01:30 UTC

func TestEffective(t *testing.T) {
	sunday2am := []spec.MaintenanceWindow{{Cron: "0 2 * * SUN", Duration: "1h"}}
	set := Settings{Name: "erp", MaxRunningFiles: 10, MaxRequestsInFlight: 40, Maintenance: sunday2am}
	override := func(limit int, until time.Time) *Override { return &Override{Limit: limit, Until: until} }
	for _, tc := range []struct {
		name string
		c    Control
		now  time.Time
		want Limit
	}{
		{"nothing set", Control{}, t0, Limit{Value: 10, Why: WhyConfigured}},
		{"paused", Control{Paused: true}, t0, Limit{Value: 0, Why: WhyPaused}},
		{"paused with an override", Control{Paused: true, Override: override(20, t0.Add(time.Hour))}, t0, Limit{Value: 0, Why: WhyPaused}},
		{"inside the window", Control{}, t0.Add(45 * time.Minute), Limit{Value: 0, Why: WhyMaintenance, Until: t0.Add(90 * time.Minute)}},
		{"window beats the override", Control{Override: override(20, t0.Add(2*time.Hour))}, t0.Add(time.Hour), Limit{Value: 0, Why: WhyMaintenance, Until: t0.Add(90 * time.Minute)}},
		{"at the window's end", Control{}, t0.Add(90 * time.Minute), Limit{Value: 10, Why: WhyConfigured}},
		{"override raises", Control{Override: override(20, t0.Add(time.Hour))}, t0, Limit{Value: 20, Why: WhyOverride}},
		{"override lowers, rising at its end", Control{Override: override(3, t0.Add(10*time.Minute))}, t0, Limit{Value: 3, Why: WhyOverride, Until: t0.Add(10 * time.Minute)}},
		{"override bounded by maxRequestsInFlight", Control{Override: override(100, t0.Add(time.Hour))}, t0, Limit{Value: 40, Why: WhyOverride}},
		{"expired override ignored", Control{Override: override(20, t0)}, t0, Limit{Value: 10, Why: WhyConfigured}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Effective(set, tc.c, tc.now); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestHold(t *testing.T) {
	w := []spec.MaintenanceWindow{{Cron: "0 2 * * SUN", Duration: "1h"}}
	for _, tc := range []struct {
		name string
		now  time.Time
		hold time.Duration
		want time.Duration
	}{
		{"no window open", t0, 5 * time.Minute, 5 * time.Minute},
		{"window ends after the hold", t0.Add(31 * time.Minute), 5 * time.Minute, 5 * time.Minute},
		{"window ends within the hold", t0.Add(88 * time.Minute), 5 * time.Minute, 2*time.Minute + time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Hold(tc.hold, w, tc.now); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// fakeDB keeps items by table, pk and sk, and evaluates the two conditions this package writes
// with: the version check and attribute_not_exists(#sk).
type fakeDB struct {
	mu    sync.Mutex
	items map[string]map[string]types.AttributeValue
	// race, when set, is called before a PutItem is applied: a concurrent writer's chance.
	race func(db *fakeDB)
	puts int
}

func itemKey(it map[string]types.AttributeValue) string {
	return sOf(it, schema.AttrPK) + "|" + sOf(it, schema.AttrSK)
}

func (f *fakeDB) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &dynamodb.GetItemOutput{Item: f.items[itemKey(in.Key)]}, nil
}

func (f *fakeDB) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if r := f.race; r != nil {
		f.race = nil
		r(f)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.puts++
	if f.items == nil {
		f.items = map[string]map[string]types.AttributeValue{}
	}
	k := itemKey(in.Item)
	cur, exists := f.items[k]
	switch cond := aws.ToString(in.ConditionExpression); cond {
	case "attribute_not_exists(#v) OR #v = :v":
		if _, has := cur[attrVersion]; has && cur[attrVersion].(*types.AttributeValueMemberN).Value != in.ExpressionAttributeValues[":v"].(*types.AttributeValueMemberN).Value {
			return nil, &types.ConditionalCheckFailedException{}
		}
	case "attribute_not_exists(#sk)":
		if exists {
			return nil, &types.ConditionalCheckFailedException{}
		}
	default:
		return nil, errors.New("fakeDB: unexpected condition " + cond)
	}
	f.items[k] = in.Item
	return &dynamodb.PutItemOutput{}, nil
}

func (f *fakeDB) audits() []map[string]types.AttributeValue {
	var out []map[string]types.AttributeValue
	for _, it := range f.items {
		if strings.HasPrefix(sOf(it, schema.AttrSK), schema.AuditPrefix) {
			out = append(out, it)
		}
	}
	return out
}

func TestStoreWritesAndAudits(t *testing.T) {
	ctx := context.Background()
	now := t0
	db := &fakeDB{}
	s := &Store{DB: db, Now: func() time.Time { now = now.Add(time.Second); return now }}
	type step struct {
		do          func() (Change, error)
		wantChanged bool
		check       func(Control) string
	}
	for i, st := range []step{
		{func() (Change, error) { return s.Pause(ctx, "tbl", "erp", "arn:alice", "ERP deploy") }, true,
			func(c Control) string {
				if !c.Paused || c.PausedBy != "arn:alice" || c.PauseReason != "ERP deploy" || c.PausedAt.IsZero() {
					return "want paused by arn:alice for ERP deploy"
				}
				return ""
			}},
		{func() (Change, error) { return s.Pause(ctx, "tbl", "erp", "arn:bob", "again") }, false,
			func(c Control) string {
				if c.PausedBy != "arn:alice" {
					return "a second pause replaced the first's record"
				}
				return ""
			}},
		{func() (Change, error) {
			return s.SetLimit(ctx, "tbl", "erp", 4, t0.Add(time.Hour), "arn:bob", "slow ERP")
		}, true,
			func(c Control) string {
				if !c.Paused || c.Override == nil || c.Override.Limit != 4 || !c.Override.Until.Equal(t0.Add(time.Hour)) || c.Override.By != "arn:bob" {
					return "want paused and an override of 4 until t0+1h by arn:bob"
				}
				return ""
			}},
		{func() (Change, error) { return s.Resume(ctx, "tbl", "erp", "arn:carol", "") }, true,
			func(c Control) string {
				if c.Paused || c.Override == nil {
					return "want resumed with the override kept"
				}
				return ""
			}},
		{func() (Change, error) { return s.Resume(ctx, "tbl", "erp", "arn:carol", "") }, false, func(Control) string { return "" }},
		{func() (Change, error) { return s.ClearLimit(ctx, "tbl", "erp", "arn:carol", "ERP fine") }, true,
			func(c Control) string {
				if c.Override != nil {
					return "want the override gone"
				}
				return ""
			}},
	} {
		ch, err := st.do()
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if ch.Changed != st.wantChanged {
			t.Errorf("step %d: got changed %v, want %v", i, ch.Changed, st.wantChanged)
		}
		if ch.Changed && ch.AuditSK == "" {
			t.Errorf("step %d: a change without an audit item", i)
		}
		got, err := s.Read(ctx, "tbl", "erp")
		if err != nil {
			t.Fatalf("step %d: read: %v", i, err)
		}
		if msg := st.check(got); msg != "" {
			t.Errorf("step %d: got %+v: %s", i, got, msg)
		}
	}
	audits := db.audits()
	if len(audits) != 4 {
		t.Fatalf("got %d audit items, want 4 (one per change)", len(audits))
	}
	for _, a := range audits {
		if sOf(a, attrBy) == "" || sOf(a, attrAt) == "" || sOf(a, attrAction) == "" {
			t.Errorf("audit item %v lacks who, when or what", a)
		}
		if _, ok := a[schema.AttrExpiresAt]; !ok {
			t.Errorf("audit item %s has no expiry", sOf(a, schema.AttrSK))
		}
	}
}

// A writer that changes the item between this store's read and its write does not have its
// change overwritten: the write is refused and made again from the new item.
func TestConcurrentWriterIsNotOverwritten(t *testing.T) {
	ctx := context.Background()
	db := &fakeDB{}
	s := &Store{DB: db, Now: func() time.Time { return t0 }}
	other := &Store{DB: db, Now: func() time.Time { return t0 }}
	db.race = func(*fakeDB) {
		if _, err := other.SetLimit(ctx, "tbl", "erp", 7, t0.Add(time.Hour), "arn:other", "raced"); err != nil {
			t.Errorf("the concurrent writer: %v", err)
		}
	}
	if _, err := s.Pause(ctx, "tbl", "erp", "arn:me", "pause"); err != nil {
		t.Fatal(err)
	}
	c, err := s.Read(ctx, "tbl", "erp")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Paused || c.Override == nil || c.Override.Limit != 7 {
		t.Errorf("got %+v, want both the pause and the concurrent override", c)
	}
}

// An item that does not decode is an error, never "not paused".
func TestUnreadableControlFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		it   map[string]types.AttributeValue
	}{
		{"paused not a boolean", map[string]types.AttributeValue{attrPaused: str("yes")}},
		{"override not a number", map[string]types.AttributeValue{attrLimit: str("4")}},
		{"override below 1", map[string]types.AttributeValue{attrLimit: num(0), attrUntil: num(t0.Add(time.Hour).UnixMilli())}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := key("erp", schema.ControlSK)
			for k, v := range tc.it {
				it[k] = v
			}
			db := &fakeDB{items: map[string]map[string]types.AttributeValue{itemKey(it): it}}
			s := &Store{DB: db, Now: func() time.Time { return t0 }}
			if l, err := s.Limit(context.Background(), "tbl", Settings{Name: "erp", MaxRunningFiles: 5}); err == nil {
				t.Errorf("got limit %+v and no error, want an error", l)
			}
		})
	}
}

func TestSetLimitRefusesBadValues(t *testing.T) {
	s := &Store{DB: &fakeDB{}, Now: func() time.Time { return t0 }}
	for _, tc := range []struct {
		name  string
		limit int
		until time.Time
	}{
		{"zero", 0, t0.Add(time.Hour)},
		{"ended", 3, t0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.SetLimit(context.Background(), "tbl", "erp", tc.limit, tc.until, "arn:x", "r"); err == nil {
				t.Errorf("got no error for limit %d until %s", tc.limit, tc.until)
			}
		})
	}
}
