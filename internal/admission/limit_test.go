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
	"github.com/example/tenantpipeline/internal/schema"
)

// The limit store's tests run against dynalite (TestMain), so the conditions, ADD and
// ReturnValues are DynamoDB's own.

var t0 = time.UnixMilli(1_700_000_000_000)

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// limitTable is one core system's admission table holding (or not) its limit item.
type limitTable struct {
	t    *testing.T
	db   *dynamodb.Client
	core pipeline.CoreSystem
}

func newLimitTable(t *testing.T, maxRunning int) *limitTable {
	db, table := newTable(t)
	return &limitTable{t: t, db: db, core: pipeline.CoreSystem{Name: "core-a", MaxRunningFiles: maxRunning, Adaptive: true, Table: table}}
}

// put stores the limit item with the given number attributes (limit, updatedAt, ...).
func (l *limitTable) put(attrs map[string]string) {
	l.t.Helper()
	item := limitItemKey(l.core)
	for k, v := range attrs {
		item[k] = &types.AttributeValueMemberN{Value: v}
	}
	if _, err := l.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(l.core.Table), Item: item}); err != nil {
		l.t.Fatal(err)
	}
}

// item is the stored limit item's number attributes; nil when absent.
func (l *limitTable) item() map[string]string {
	l.t.Helper()
	out, err := l.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(l.core.Table), Key: limitItemKey(l.core), ConsistentRead: aws.Bool(true)})
	if err != nil {
		l.t.Fatal(err)
	}
	if out.Item == nil {
		return nil
	}
	m := map[string]string{}
	for k, v := range out.Item {
		if n, ok := v.(*types.AttributeValueMemberN); ok {
			m[k] = n.Value
		}
	}
	return m
}

func (l *limitTable) store(now func() time.Time) *LimitStore { return &LimitStore{API: l.db, Now: now} }

func at(t time.Time) func() time.Time { return func() time.Time { return t } }

func TestLimitStoreDecrease(t *testing.T) {
	old := t0.Add(-time.Minute)
	tests := []struct {
		name        string
		item        map[string]string // nil: absent
		admitted    time.Time         // zero: unknown
		wantLimit   int
		wantChanged bool
	}{
		{"from absent halves maxRunningFiles", nil, t0.Add(-time.Hour), 4, true},
		{"from absent, unknown admission", nil, time.Time{}, 4, true},
		{"an item written before decreasedAt existed halves", map[string]string{"limit": "6", "updatedAt": ms(old)}, t0.Add(-time.Hour), 3, true},
		{"a file admitted after the last decrease halves", map[string]string{"limit": "6", "updatedAt": ms(old), "decreasedAt": ms(old)}, old.Add(time.Second), 3, true},
		{"a file of the last decrease's generation does not", map[string]string{"limit": "6", "updatedAt": ms(old), "decreasedAt": ms(old)}, old.Add(-time.Second), 6, false},
		{"unknown admission right after a decrease does not", map[string]string{"limit": "6", "updatedAt": ms(old), "decreasedAt": ms(old)}, time.Time{}, 6, false},
		{"unknown admission after a raise halves", map[string]string{"limit": "7", "updatedAt": ms(old), "decreasedAt": ms(old.Add(-time.Minute))}, time.Time{}, 3, true},
		{"never below 1", map[string]string{"limit": "1", "updatedAt": ms(old)}, t0, 1, false},
		{"from above a lowered maxRunningFiles", map[string]string{"limit": "20", "updatedAt": ms(old)}, t0, 4, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimitTable(t, 8)
			if tc.item != nil {
				tc.item["clean"] = "5"
				l.put(tc.item)
			}
			got, changed, err := l.store(at(t0)).Decrease(context.Background(), l.core, tc.admitted)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.wantLimit || changed != tc.wantChanged {
				t.Errorf("got limit %d (changed %v), want %d (changed %v)", got, changed, tc.wantLimit, tc.wantChanged)
			}
			item := l.item()
			if !tc.wantChanged {
				if tc.item == nil && item != nil {
					t.Errorf("got item %v, want none", item)
				}
				return
			}
			want := map[string]string{"limit": strconv.Itoa(tc.wantLimit), "updatedAt": ms(t0), "decreasedAt": ms(t0), "clean": "0"}
			for k, v := range want {
				if item[k] != v {
					t.Errorf("got %s %s, want %s", k, item[k], v)
				}
			}
		})
	}
}

// TestLimitStoreIncrease: a limit's worth of clean invocations since the last change add one,
// and the count starts again; at or above maxRunningFiles nothing is written.
func TestLimitStoreIncrease(t *testing.T) {
	l := newLimitTable(t, 8)
	old := t0.Add(-time.Minute)
	l.put(map[string]string{"limit": "3", "updatedAt": ms(old), "decreasedAt": ms(old)})
	s := l.store(at(t0))
	var limits []int
	for range 3 + 4 {
		got, _, err := s.Increase(context.Background(), l.core)
		if err != nil {
			t.Fatal(err)
		}
		limits = append(limits, got)
	}
	if want := []int{3, 3, 4, 4, 4, 4, 5}; !equalInts(limits, want) {
		t.Errorf("got limits %v, want %v", limits, want)
	}
	item := l.item()
	if item["limit"] != "5" || item["clean"] != "0" || item["decreasedAt"] != ms(old) {
		t.Errorf("got item %v, want limit 5, clean 0, decreasedAt unchanged %s", item, ms(old))
	}
	if item["updatedAt"] == ms(old) {
		t.Errorf("got updatedAt unchanged %s, want the raise's", item["updatedAt"])
	}

	for _, tc := range []struct {
		name string
		item map[string]string
	}{
		{"absent", nil},
		{"at maxRunningFiles", map[string]string{"limit": "8", "updatedAt": ms(old)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimitTable(t, 8)
			if tc.item != nil {
				l.put(tc.item)
			}
			if got, changed, err := l.store(at(t0)).Increase(context.Background(), l.core); err != nil || changed || got != 8 {
				t.Errorf("got %d (changed %v, error %v), want 8 unchanged", got, changed, err)
			}
			if item := l.item(); (tc.item == nil) != (item == nil) || item["clean"] != "" {
				t.Errorf("got item %v, want it untouched", item)
			}
		})
	}
}

// TestLimitStoreConcurrentRaise: a limit's worth of clean invocations at once raise it once.
func TestLimitStoreConcurrentRaise(t *testing.T) {
	l := newLimitTable(t, 8)
	l.put(map[string]string{"limit": "4", "updatedAt": ms(t0.Add(-time.Minute))})
	s := l.store(at(t0))
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := s.Increase(context.Background(), l.core); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if item := l.item(); item["limit"] != "5" {
		t.Errorf("got limit %s, want 5", item["limit"])
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// meddling runs other before the store's nth UpdateItem (1-based): another writer between the
// store's read and its write.
type meddling struct {
	LimitAPI
	nth   int
	other func()
	seen  int
}

func (m *meddling) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if m.seen++; m.seen == m.nth {
		m.other()
	}
	return m.LimitAPI.UpdateItem(ctx, in, o...)
}

// TestLimitStoreConcurrentWriter: another writer changes the item between the store's read and its
// UpdateItem. The condition fails, the store reports no change and no error, and the other
// writer's value stays: no update is lost, and no clean invocation counts against a limit it did
// not see.
func TestLimitStoreConcurrentWriter(t *testing.T) {
	tests := []struct {
		name  string
		op    string
		limit string // the limit the store reads
		nth   int    // the store's UpdateItem the other writer comes before
		other string // the limit the other writer stores
	}{
		{"decrease loses to a decrease", "decrease", "6", 1, "3"},
		{"decrease loses to an increase", "decrease", "6", 1, "7"},
		{"an increase loses to a decrease", "increase", "1", 2, "3"},
		{"a clean count loses to a decrease", "increase", "6", 1, "3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimitTable(t, 8)
			l.put(map[string]string{"limit": tc.limit, "updatedAt": ms(t0.Add(-time.Minute))})
			other := map[string]string{"limit": tc.other, "updatedAt": ms(t0.Add(-time.Millisecond)), "clean": "0"}
			s := &LimitStore{API: &meddling{LimitAPI: l.db, nth: tc.nth, other: func() { l.put(other) }}, Now: at(t0)}
			var changed bool
			var err error
			if tc.op == "increase" {
				_, changed, err = s.Increase(context.Background(), l.core)
			} else {
				_, changed, err = s.Decrease(context.Background(), l.core, t0)
			}
			if err != nil || changed {
				t.Errorf("got changed %v, error %v; want no change and no error", changed, err)
			}
			if got := l.item(); got["limit"] != tc.other || got["clean"] != "0" {
				t.Errorf("got item %v, want the other writer's limit %s and clean 0", got, tc.other)
			}
		})
	}
}

// TestLimitStoreBurst: many files of one generation see 429s at once; the limit halves once.
func TestLimitStoreBurst(t *testing.T) {
	l := newLimitTable(t, 8)
	l.put(map[string]string{"limit": "8", "updatedAt": ms(t0.Add(-time.Minute)), "decreasedAt": ms(t0.Add(-time.Minute))})
	s := l.store(at(t0))
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := s.Decrease(context.Background(), l.core, t0.Add(-time.Second)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := l.item()["limit"]; got != "4" {
		t.Errorf("got limit %s, want 4", got)
	}
}

// TestLimitStoreClockBehind: a writer whose clock is behind the last change's writer still moves
// updatedAt and the generation line forward, so files admitted before that change stay in its
// generation.
func TestLimitStoreClockBehind(t *testing.T) {
	l := newLimitTable(t, 8)
	last := t0.Add(time.Second) // written by a writer whose clock is ahead of this one
	l.put(map[string]string{"limit": "7", "updatedAt": ms(last), "decreasedAt": ms(t0.Add(-time.Minute))})
	if _, changed, err := l.store(at(t0)).Decrease(context.Background(), l.core, t0.Add(-time.Second)); err != nil || !changed {
		t.Fatalf("got changed %v, error %v; want a decrease", changed, err)
	}
	item := l.item()
	if want := ms(last.Add(time.Millisecond)); item["updatedAt"] != want || item["decreasedAt"] != want {
		t.Errorf("got updatedAt %s, decreasedAt %s; want both %s", item["updatedAt"], item["decreasedAt"], want)
	}
}

type failingGet struct{ LimitAPI }

func (failingGet) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return nil, errors.New("throttled")
}

func TestLimitStoreErrors(t *testing.T) {
	tests := []struct {
		name string
		item map[string]types.AttributeValue // besides the key
		api  func(*dynamodb.Client) LimitAPI
	}{
		{"read fails", nil, func(db *dynamodb.Client) LimitAPI { return failingGet{db} }},
		{"limit not a number", map[string]types.AttributeValue{schema.AttrLimit: &types.AttributeValueMemberS{Value: "x"}, schema.AttrUpdatedAt: &types.AttributeValueMemberN{Value: "1"}}, nil},
		{"decreasedAt not a number", map[string]types.AttributeValue{schema.AttrLimit: &types.AttributeValueMemberN{Value: "4"}, schema.AttrUpdatedAt: &types.AttributeValueMemberN{Value: "1"},
			AttrDecreasedAt: &types.AttributeValueMemberS{Value: "yesterday"}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimitTable(t, 8)
			var api LimitAPI = l.db
			if tc.api != nil {
				api = tc.api(l.db)
			}
			if tc.item != nil {
				item := limitItemKey(l.core)
				for k, v := range tc.item {
					item[k] = v
				}
				if _, err := l.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(l.core.Table), Item: item}); err != nil {
					t.Fatal(err)
				}
			}
			s := &LimitStore{API: api, Now: at(t0)}
			if _, _, err := s.Decrease(context.Background(), l.core, t0); err == nil {
				t.Error("decrease: got no error, want one")
			}
			if _, _, err := s.Increase(context.Background(), l.core); err == nil {
				t.Error("increase: got no error, want one")
			}
			if item := l.item(); tc.item == nil && item != nil {
				t.Errorf("got item %v, want none written", item)
			}
		})
	}
}

// TestAdaptiveLimitStorm: a 10-second 429 storm against 50 running files ends at 12 or more, not
// at 1. On a fake clock in steps of 250 ms, every running file sees a 429 in every step and asks
// the store to decrease (all at once, as concurrent Registers do); files end one every 300 ms, and
// admission lets a new file in whenever fewer than the limit run, each of which sees 429s too.
// The limit must fall (the overload is heard), and files admitted after a decrease must be able to
// lower it again (the rule is not "once and never again"), yet a generation lowers it only once.
// Files of unknown admission (executions started before their state machine passed it on) fall
// under the rule's safe side: they halve it at most once between two raises.
func TestAdaptiveLimitStorm(t *testing.T) {
	const files, maxRunning = 50, 50
	tests := []struct {
		name          string
		unknown       func(i int) bool // the file i has no admission time
		wantDecreases int
	}{
		{"all admission times known", func(int) bool { return false }, 2},
		{"a fifth of the running files of unknown admission", func(i int) bool { return i < files && i%5 == 0 }, 2},
		{"no admission times at all", func(int) bool { return true }, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimitTable(t, maxRunning)
			c := &clock{t: t0}
			s := l.store(c.Now)
			type file struct{ admitted, ends time.Time }
			var running []file
			for i := range files {
				f := file{admitted: t0, ends: t0.Add(time.Duration(i+1) * 300 * time.Millisecond)}
				if tc.unknown(i) {
					f.admitted = time.Time{}
				}
				running = append(running, f)
			}
			admittedLater, decreases, next := 0, 0, files
			var mu sync.Mutex
			for c.Now().Before(t0.Add(10 * time.Second)) {
				c.Add(250 * time.Millisecond)
				now := c.Now()
				kept := running[:0]
				for _, f := range running {
					if f.ends.After(now) {
						kept = append(kept, f)
					}
				}
				running = kept
				lim, err := s.Read(context.Background(), l.core)
				if err != nil {
					t.Fatal(err)
				}
				for len(running) < lim.Value {
					f := file{admitted: now, ends: now.Add(time.Hour)}
					if tc.unknown(next) {
						f.admitted = time.Time{}
					}
					running = append(running, f)
					admittedLater++
					next++
				}
				var wg sync.WaitGroup
				for _, f := range running {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, changed, err := s.Decrease(context.Background(), l.core, f.admitted)
						if err != nil {
							t.Error(err)
						}
						if changed {
							mu.Lock()
							decreases++
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
			}
			lim, err := s.Read(context.Background(), l.core)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("limit %d after %d decreases; %d files admitted during the storm", lim.Value, decreases, admittedLater)
			if lim.Value < 12 || lim.Value > maxRunning {
				t.Errorf("got limit %d after the storm, want 12..%d", lim.Value, maxRunning)
			}
			if decreases != tc.wantDecreases {
				t.Errorf("got %d decreases, want %d", decreases, tc.wantDecreases)
			}
			if admittedLater == 0 {
				t.Error("got no file admitted during the storm, want some: the scenario must exercise a new generation")
			}
		})
	}
}
