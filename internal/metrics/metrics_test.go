package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var clock = func() time.Time { return time.UnixMilli(1700000000123) }

func TestEmitMatchesGolden(t *testing.T) {
	checkGolden(t, New(&bytes.Buffer{}, "TenantPipeline", "acme"), "waits.json")
}

// A pooled tenant's line has every metric under [Pool] alone, and Tenant as a property.
func TestEmitInPoolMatchesGolden(t *testing.T) {
	checkGolden(t, New(&bytes.Buffer{}, "TenantPipeline", "acme").InPool("default"), "pool-waits.json")
}

// In a pool no metric has a Tenant dimension, whatever the line holds, and each line carries the
// Tenant property; a silo tenant's lines keep [Tenant]. A core system's directive is kept.
func TestEmitInPoolDirectives(t *testing.T) {
	tests := []struct {
		name       string
		pool, core string
		ms         []Metric
		want       string // each directive's dimension sets and metric names
	}{
		{"silo: [Tenant]", "", "", []Metric{Count(Blocked, 1), Count(Waits, 1)}, "[[Tenant]] Blocked,Waits"},
		{"pool: [Pool]", "shared", "", []Metric{Count(Blocked, 1), Seconds(HeadRunningSeconds, time.Second)}, "[[Pool]] Blocked,HeadRunningSeconds"},
		{"pool and core system", "shared", "ledger", []Metric{Count(RecordsRegistered, 3), Count(CoreSystemThrottles, 1), Count(CoreSystemRequests, 4)},
			"[[Pool]] RecordsRegistered,CoreSystemThrottles; [[CoreSystem]] CoreSystemThrottles,CoreSystemRequests"},
		{"pool, core system metrics only", "shared", "ledger", []Metric{Count(CoreSystemRequests, 4)}, "[[CoreSystem]] CoreSystemRequests"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := New(&buf, "ns", "acme").InPool(tc.pool).InCoreSystem(tc.core).Emit(tc.ms...); err != nil {
				t.Fatal(err)
			}
			doc := decodeLine(t, buf.Bytes())
			if g := doc.directives(); g != tc.want {
				t.Errorf("got directives %s, want %s", g, tc.want)
			}
			if doc.Tenant != "acme" {
				t.Errorf("got Tenant %q, want acme in every line", doc.Tenant)
			}
			if tc.pool != "" && (doc.Pool == nil || *doc.Pool != tc.pool) {
				t.Errorf("got Pool %v, want %s", doc.Pool, tc.pool)
			}
			if tc.pool != "" && strings.Contains(doc.directives(), DimensionTenant) {
				t.Errorf("got a Tenant dimension in a pool: %s", buf.String())
			}
		})
	}
}

type line struct {
	Tenant     string
	Pool       *string
	CoreSystem *string
	AWS        struct {
		CloudWatchMetrics []struct {
			Dimensions [][]string
			Metrics    []struct{ Name string }
		}
	} `json:"_aws"`
}

func decodeLine(t *testing.T, b []byte) line {
	t.Helper()
	var doc line
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("got invalid JSON %q: %v", b, err)
	}
	return doc
}

// directives is each directive's dimension sets and metric names, "; "-separated.
func (l line) directives() string {
	var got []string
	for _, d := range l.AWS.CloudWatchMetrics {
		var names []string
		for _, m := range d.Metrics {
			names = append(names, m.Name)
		}
		got = append(got, fmt.Sprint(d.Dimensions)+" "+strings.Join(names, ","))
	}
	return strings.Join(got, "; ")
}

// A Register line of a tenant naming a core system carries CoreSystemThrottles under [Tenant] and
// [CoreSystem], CoreSystemRequests under [CoreSystem] alone, the other metrics under [Tenant].
func TestEmitInCoreSystemMatchesGolden(t *testing.T) {
	checkGolden(t, New(&bytes.Buffer{}, "TenantPipeline", "acme").InCoreSystem("ledger"), "core-register.json",
		Count(RecordsRegistered, 40), Count(CoreSystemThrottles, 2), Seconds(RateLimitWaitSeconds, 1500*time.Millisecond), Count(CoreSystemRequests, 42))
}

// The directives of a line by the metrics it holds, with and without a core system.
func TestEmitInCoreSystemDirectives(t *testing.T) {
	tests := []struct {
		name string
		core string
		ms   []Metric
		want string // each directive's dimension sets and metric names
	}{
		{"requests only: no [Tenant] directive", "ledger", []Metric{Count(CoreSystemRequests, 3)},
			"[[CoreSystem]] CoreSystemRequests"},
		{"no core system metric: a plain [Tenant] line", "ledger", []Metric{Count(RecordsRegistered, 3), Seconds(RateLimitWaitSeconds, time.Second)},
			"[[Tenant]] RecordsRegistered,RateLimitWaitSeconds"},
		{"throttles under both", "ledger", []Metric{Count(CoreSystemThrottles, 1)},
			"[[Tenant]] CoreSystemThrottles; [[CoreSystem]] CoreSystemThrottles"},
		{"no core system named: throttles under [Tenant] only", "", []Metric{Count(CoreSystemThrottles, 1), Count(RecordsRegistered, 3)},
			"[[Tenant]] CoreSystemThrottles,RecordsRegistered"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := New(&buf, "ns", "acme").InCoreSystem(tc.core).Emit(tc.ms...); err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Tenant     string
				CoreSystem *string
				AWS        struct {
					CloudWatchMetrics []struct {
						Dimensions [][]string
						Metrics    []struct{ Name string }
					}
				} `json:"_aws"`
			}
			if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
				t.Fatalf("got invalid JSON %q: %v", buf.String(), err)
			}
			var got []string
			for _, d := range doc.AWS.CloudWatchMetrics {
				var names []string
				for _, m := range d.Metrics {
					names = append(names, m.Name)
				}
				dims := fmt.Sprint(d.Dimensions)
				got = append(got, dims+" "+strings.Join(names, ","))
			}
			if g := strings.Join(got, "; "); g != tc.want {
				t.Errorf("got directives %s, want %s", g, tc.want)
			}
			if wantCore := strings.Contains(tc.want, "CoreSystem]]"); (doc.CoreSystem != nil) != wantCore || doc.Tenant != "acme" {
				t.Errorf("got Tenant %q, CoreSystem %v, want acme and a CoreSystem field %v", doc.Tenant, doc.CoreSystem, wantCore)
			}
		})
	}
	if err := New(&bytes.Buffer{}, "ns", "acme").InCoreSystem("ledger").Emit(Count(DimensionCoreSystem, 1)); err == nil {
		t.Error("got no error for a metric named like the CoreSystem dimension, want one")
	}
}

func checkGolden(t *testing.T, e *Emitter, golden string, ms ...Metric) {
	t.Helper()
	var buf bytes.Buffer
	e.w = &buf
	e.WithClock(clock)
	if len(ms) == 0 {
		ms = []Metric{Count(Waits, 1), Seconds(HeadQueuedSeconds, 2500*time.Millisecond)}
	}
	if err := e.Emit(ms...); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", golden))
	if err != nil {
		t.Fatal(err)
	}
	var got, wantDoc any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("got invalid JSON %q: %v", buf.String(), err)
	}
	if err := json.Unmarshal(want, &wantDoc); err != nil {
		t.Fatal(err)
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(wantDoc)
	if !bytes.Equal(gj, wj) {
		t.Errorf("got %s, want %s", gj, wj)
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 || !strings.HasSuffix(buf.String(), "\n") {
		t.Errorf("got %d newlines, want exactly one line ending in a newline", n)
	}
}

func TestEmitRejects(t *testing.T) {
	tests := []struct {
		name string
		ms   []Metric
	}{
		{"dimension name", []Metric{Count(DimensionTenant, 1)}},
		{"metadata key", []Metric{Count("_aws", 1)}},
		{"empty name", []Metric{Count("", 1)}},
		{"duplicate", []Metric{Count(Waits, 1), Count(Waits, 2)}},
		{"pool dimension name", []Metric{Count(DimensionPool, 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			// A pooled tenant's Emitter: its line also holds the Pool field.
			err := New(&buf, "ns", "t").InPool("p").Emit(tt.ms...)
			if err == nil {
				t.Fatalf("got no error, want one")
			}
			if buf.Len() != 0 {
				t.Errorf("got output %q, want none", buf.String())
			}
		})
	}
}

func TestEmitNothing(t *testing.T) {
	var buf bytes.Buffer
	if err := New(&buf, "ns", "t").Emit(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Errorf("got output %q, want none", buf.String())
	}
}

// A pool-wide Emitter has the Pool dimension, and that dimension's name is reserved instead.
func TestEmitPoolDimension(t *testing.T) {
	var buf bytes.Buffer
	e := NewDimension(&buf, "TenantPipeline", DimensionPool, "shared-1").WithClock(clock)
	if err := e.Emit(Count(UnroutedObjects, 1)); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Pool            string  `json:"Pool"`
		Tenant          *string `json:"Tenant"`
		UnroutedObjects float64 `json:"UnroutedObjects"`
		AWS             struct {
			CloudWatchMetrics []struct {
				Dimensions [][]string `json:"Dimensions"`
			} `json:"CloudWatchMetrics"`
		} `json:"_aws"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("got invalid JSON %q: %v", buf.String(), err)
	}
	if doc.Pool != "shared-1" || doc.Tenant != nil || doc.UnroutedObjects != 1 {
		t.Errorf("got Pool %q, Tenant %v, UnroutedObjects %v, want shared-1, none, 1", doc.Pool, doc.Tenant, doc.UnroutedObjects)
	}
	if d := doc.AWS.CloudWatchMetrics; len(d) != 1 || len(d[0].Dimensions) != 1 || len(d[0].Dimensions[0]) != 1 || d[0].Dimensions[0][0] != DimensionPool {
		t.Errorf("got dimensions %v, want [[Pool]]", d)
	}
	if err := e.Emit(Count(DimensionPool, 1)); err == nil {
		t.Error("got no error for a metric named like the dimension, want one")
	}
}
