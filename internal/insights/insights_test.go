package insights

import (
	"fmt"
	"strings"
	"testing"
)

// lines are what a pool's controller writes: EMF lines with Pool, the Tenant property and metric
// fields, slog lines, and the runtime's text lines.
var lines = [][]byte{
	[]byte(`{"_aws":{},"Pool":"p","Tenant":"acme","Blocked":0,"Waits":1}`),
	[]byte(`{"_aws":{},"Pool":"p","Tenant":"globex","Blocked":1}`),
	[]byte(`{"_aws":{},"Pool":"p","Tenant":"globex","Blocked":1}`),
	[]byte(`{"_aws":{},"Pool":"p","Tenant":"initech","HeadQueuedSeconds":900.5}`),
	[]byte(`{"_aws":{},"Pool":"p","Tenant":"acme","HeadQueuedSeconds":120}`),
	[]byte(`{"_aws":{},"Pool":"p","UnknownTenantMessages":1,"Blocked":1}`),
	[]byte(`{"level":"INFO","msg":"waiting","tenant":"acme","Blocked":"1"}`),
	[]byte(`START RequestId: 1 Version: $LATEST`),
}

func rule(agg, valueOf string, filters ...Filter) Rule {
	return Rule{Schema: Schema, LogGroupNames: []string{"g"}, LogFormat: "JSON", AggregateOn: agg,
		Contribution: Contribution{Keys: []string{"$.Tenant"}, ValueOf: valueOf, Filters: filters}}
}

func TestEvaluate(t *testing.T) {
	tests := []struct {
		name    string
		rule    Rule
		want    string // contributors, highest first
		wantMax float64
		wantAny bool
		matched int // log events billed
	}{
		{"sum of Blocked: every tenant's delivery counts, the halted one first",
			rule(Sum, "$.Blocked", Present("$.Blocked"), Present("$.Tenant")), "globex=2 acme=0", 2, true, 3},
		{"count above a threshold: only the tenant over it",
			rule(Count, "", Above("$.HeadQueuedSeconds", 600), Present("$.Tenant")), "initech=1", 1, true, 1},
		{"nothing matches: no datapoint",
			rule(Count, "", Above("$.HeadQueuedSeconds", 1000)), "", 0, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.rule.Validate(); err != nil {
				t.Fatal(err)
			}
			cs := tc.rule.Evaluate(lines)
			var got []string
			for _, c := range cs {
				got = append(got, fmt.Sprintf("%s=%g", strings.Join(c.Keys, ","), c.Value))
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("got contributors %q, want %q", g, tc.want)
			}
			if m, ok := MaxContributorValue(cs); m != tc.wantMax || ok != tc.wantAny {
				t.Errorf("got MaxContributorValue %v (datapoint %v), want %v (%v)", m, ok, tc.wantMax, tc.wantAny)
			}
			if n := tc.rule.Matched(lines); n != tc.matched {
				t.Errorf("got %d matched log events, want %d", n, tc.matched)
			}
		})
	}
}

// Every tenant is a contributor, however many: the rule keeps no top-N, only the report does.
func TestEvaluateManyContributors(t *testing.T) {
	const n = 100_000
	ls := make([][]byte, 0, n)
	for i := range n {
		ls = append(ls, fmt.Appendf(nil, `{"Tenant":"t%d","Blocked":%d}`, i, min(1, i%50_000)))
	}
	cs := rule(Sum, "$.Blocked", Present("$.Blocked")).Evaluate(ls)
	if len(cs) != n {
		t.Fatalf("got %d contributors, want %d", len(cs), n)
	}
	if m, _ := MaxContributorValue(cs); m != 1 {
		t.Errorf("got MaxContributorValue %v, want 1", m)
	}
}

func TestParse(t *testing.T) {
	good := rule(Count, "", Above("$.HeadRunningSeconds", 60)).JSON()
	if r, err := Parse(good); err != nil || r.Contribution.Filters[0].GreaterThan == nil || *r.Contribution.Filters[0].GreaterThan != 60 {
		t.Fatalf("got %+v, %v; want the rule back", r, err)
	}
	tests := []struct {
		name, body, want string
	}{
		{"unknown field", `{"Schema":{"Name":"CloudWatchLogRule","Version":1},"Nope":1}`, "unknown field"},
		{"sum without ValueOf", rule(Sum, "").JSON(), "Sum needs a ValueOf"},
		{"count with ValueOf", rule(Count, "$.x").JSON(), "Count takes none"},
		{"five filters", rule(Count, "", Present("$.a"), Present("$.b"), Present("$.c"), Present("$.d"), Present("$.e")).JSON(), "at most 4"},
		{"no log group", strings.Replace(good, `["g"]`, `[]`, 1), "no log group"},
		{"filter without operator", strings.Replace(good, `"GreaterThan":60`, `"Other":1`, 1), "unknown field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.body)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// A rule name holds 128 printable ASCII characters; a long stack name is cut and hashed, and two
// long names that differ only past the cut stay apart.
func TestPoolTenantRuleName(t *testing.T) {
	if got, want := PoolTenantRuleName("TenantPipeline-Pool-default", "default", "Blocked"), "TenantPipeline-Pool-default-default-TenantBlocked"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	long := strings.Repeat("s", 120)
	a, b := PoolTenantRuleName(long+"a", "p", "HeadRunningSeconds"), PoolTenantRuleName(long+"b", "p", "HeadRunningSeconds")
	if len(a) != 128 || len(b) != 128 || a == b || !strings.HasSuffix(a, "-TenantHeadRunningSeconds") {
		t.Errorf("got %q (%d) and %q (%d), want two distinct 128-character names ending in the metric", a, len(a), b, len(b))
	}
}
