package localrun

import (
	"testing"

	"github.com/example/tenantpipeline/internal/insights"
)

// The run keeps, per log group, the lines a per-tenant rule can match, hands every line on, and
// evaluates a rule on its own log groups' lines only; the matched events it bills are those of the
// log groups asked about.
func TestInsightLog(t *testing.T) {
	r := &Cloud{}
	r.insightLog.rules = map[string]insights.Rule{"blocked": {Schema: insights.Schema, LogGroupNames: []string{"controller-logs"}, LogFormat: "JSON",
		AggregateOn: insights.Sum, Contribution: insights.Contribution{Keys: []string{"$.Tenant"}, ValueOf: "$.Blocked", Filters: []insights.Filter{insights.Present("$.Blocked")}}}}
	var passed int
	next := func([]byte) { passed++ }
	controller, register := r.insightLog.observer("controller-logs", next), r.insightLog.observer("register-logs", next)
	controller([]byte(`{"Pool":"p","Tenant":"a","Blocked":1}`))
	controller([]byte(`{"level":"INFO","msg":"waiting","tenant":"a"}`))
	register([]byte(`{"Pool":"p","Tenant":"b","Blocked":5}`))
	controller([]byte(`{"Pool":"p","Tenant":"a","Blocked":1}`))
	if passed != 4 {
		t.Errorf("got %d lines handed on, want 4", passed)
	}
	if n := len(r.insightLog.lines["controller-logs"]); n != 2 {
		t.Errorf("got %d controller lines kept, want the 2 with Tenant", n)
	}
	cs, err := r.InsightRuleReport("blocked")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Keys[0] != "a" || cs[0].Value != 2 {
		t.Errorf("got %+v, want a=2 (b's line is another log group's)", cs)
	}
	for _, tc := range []struct {
		group string
		want  int
	}{{"controller-logs", 2}, {"register-logs", 0}} {
		if n := r.InsightMatches(func(g string) bool { return g == tc.group }); n != tc.want {
			t.Errorf("matched events over %s: got %d, want %d", tc.group, n, tc.want)
		}
	}
	if _, err := r.InsightRuleReport("nope"); err == nil {
		t.Error("got no error for an unknown rule, want one")
	}
}
