package localrun

import (
	"bytes"
	"fmt"
	"slices"
	"sync"

	"github.com/example/tenantpipeline/internal/insights"
	"github.com/example/tenantpipeline/internal/localrun/deploy"
)

// Contributor Insights, emulated. A pool's per-tenant alarms read Contributor Insights rules over
// its controller's log group, keyed by the Tenant of each line (constructs/tenantpipeline,
// poolinsights.go). The run keeps the lines each function writes under the log group its template
// names (LoggingConfig.LogGroup), reads the rules of the templates, and evaluates a rule on the
// lines of its log groups with the same code the construct builds its bodies with
// (internal/insights): every contributor, the highest first, and the top contributor's value that
// INSIGHT_RULE_METRIC(rule, 'MaxContributorValue') gives the alarm. The whole run is one period.
type insightLog struct {
	mu    sync.Mutex
	rules map[string]insights.Rule // by rule name
	lines map[string][][]byte      // by log group name
}

// tenantField marks the lines a per-tenant rule can match; the others are not kept.
var tenantField = []byte(`"Tenant"`)

// loadInsightRules reads the templates' AWS::CloudWatch::InsightRule resources.
func (r *Run) loadInsightRules(asm *deploy.Assembly, res *deploy.Resolver) error {
	r.insightLog.mu.Lock()
	defer r.insightLog.mu.Unlock()
	r.insightLog.rules = map[string]insights.Rule{}
	for _, ir := range asm.OfType("AWS::CloudWatch::InsightRule") {
		var name, body string
		if err := asm.Prop(res, ir, "RuleName", &name); err != nil {
			return err
		}
		if err := asm.Prop(res, ir, "RuleBody", &body); err != nil {
			return err
		}
		rule, err := insights.Parse(body)
		if err != nil {
			return fmt.Errorf("insight rule %s: %w", ir.LogicalID, err)
		}
		r.insightLog.rules[name] = rule
	}
	return nil
}

// observer returns the LogLine hook of a function logging to logGroup: it keeps the lines a rule
// can match, then hands the line to next.
func (l *insightLog) observer(logGroup string, next func([]byte)) func([]byte) {
	return func(line []byte) {
		if logGroup != "" && bytes.Contains(line, tenantField) {
			l.mu.Lock()
			if l.lines == nil {
				l.lines = map[string][][]byte{}
			}
			l.lines[logGroup] = append(l.lines[logGroup], slices.Clone(line))
			l.mu.Unlock()
		}
		next(line)
	}
}

// InsightRules are the names of the templates' Contributor Insights rules, sorted.
func (r *Run) InsightRules() []string {
	r.insightLog.mu.Lock()
	defer r.insightLog.mu.Unlock()
	var names []string
	for n := range r.insightLog.rules {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// InsightRuleReport evaluates the named rule on the lines its log groups received so far: every
// contributor, the highest value first, as GetInsightRuleReport's contributors are ordered.
func (r *Run) InsightRuleReport(name string) ([]insights.Contributor, error) {
	l := &r.insightLog
	l.mu.Lock()
	defer l.mu.Unlock()
	rule, ok := l.rules[name]
	if !ok {
		return nil, fmt.Errorf("no Contributor Insights rule %q in the templates", name)
	}
	var lines [][]byte
	for _, g := range rule.LogGroupNames {
		lines = append(lines, l.lines[g]...)
	}
	return rule.Evaluate(lines), nil
}

// InsightMatches is how many log events of the log groups for which in is true match a rule,
// counted once per rule they match: what Contributor Insights bills.
func (r *Run) InsightMatches(in func(logGroup string) bool) int {
	l := &r.insightLog
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, rule := range l.rules {
		for _, g := range rule.LogGroupNames {
			if in(g) {
				n += rule.Matched(l.lines[g])
			}
		}
	}
	return n
}
