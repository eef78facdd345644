// Package insights is the body of a CloudWatch Contributor Insights rule over JSON log lines, and
// its evaluation on lines in hand. The construct builds a pool's per-tenant rules with it; the
// local run evaluates the same rules on the functions' output, so a rule reads the same fields in
// both places.
//
// Rule syntax: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/ContributorInsights-RuleSyntax.html
package insights

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Aggregations of a rule (AggregateOn).
const (
	// Count ranks contributors by their matching log events.
	Count = "Count"
	// Sum ranks contributors by the sum of the ValueOf field of their matching log events.
	Sum = "Sum"
)

// Schema is the one schema of a rule over CloudWatch Logs.
var Schema = RuleSchema{Name: "CloudWatchLogRule", Version: 1}

// RuleSchema names the rule's format.
type RuleSchema struct {
	Name    string `json:"Name"`
	Version int    `json:"Version"`
}

// Rule is a Contributor Insights rule over JSON logs: the fields of the rule syntax this module
// uses.
type Rule struct {
	Schema        RuleSchema   `json:"Schema"`
	LogGroupNames []string     `json:"LogGroupNames"`
	LogFormat     string       `json:"LogFormat"`
	Contribution  Contribution `json:"Contribution"`
	AggregateOn   string       `json:"AggregateOn"`
}

// Contribution says what a contributor is (Keys, at most four), what is summed (ValueOf, with
// AggregateOn Sum) and which log events count (Filters, at most four, all must match).
type Contribution struct {
	Keys    []string `json:"Keys"`
	ValueOf string   `json:"ValueOf,omitempty"`
	Filters []Filter `json:"Filters,omitempty"`
}

// Filter is one condition on a log event's field: the operators this module uses.
type Filter struct {
	Match       string   `json:"Match"`
	IsPresent   *bool    `json:"IsPresent,omitempty"`
	GreaterThan *float64 `json:"GreaterThan,omitempty"`
}

// Present is a filter matching the events that hold field.
func Present(field string) Filter {
	t := true
	return Filter{Match: field, IsPresent: &t}
}

// Above is a filter matching the events whose field is a number greater than v.
func Above(field string, v float64) Filter { return Filter{Match: field, GreaterThan: &v} }

// PoolTenantRuleName is the name of a pool's per-tenant rule of metric: the stack's name, the
// pool's and the metric's, unique per account and region as stack names are; the construct names
// its rules so and pipectl finds them so. Past the 128 characters a rule name holds
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_InsightRule.html), the
// stack and pool part is cut and a hash of the whole keeps the name unique.
func PoolTenantRuleName(stack, pool, metric string) string {
	name := fmt.Sprintf("%s-%s-Tenant%s", stack, pool, metric)
	if len(name) <= 128 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	tail := "-" + hex.EncodeToString(sum[:4]) + "-Tenant" + metric
	return name[:128-len(tail)] + tail
}

// JSON is the rule body, as CloudFormation's AWS::CloudWatch::InsightRule RuleBody takes it.
func (r Rule) JSON() string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // only strings and numbers: cannot fail
	}
	return string(b)
}

// Parse decodes a rule body and checks the limits of the rule syntax this package relies on.
func Parse(body string) (Rule, error) {
	var r Rule
	d := json.NewDecoder(strings.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		return Rule{}, fmt.Errorf("rule body: %w", err)
	}
	return r, r.Validate()
}

// Validate checks what the rule syntax requires of the fields this package writes.
func (r Rule) Validate() error {
	c := r.Contribution
	switch {
	case r.Schema != Schema:
		return fmt.Errorf("rule schema %+v, want %+v", r.Schema, Schema)
	case r.LogFormat != "JSON":
		return fmt.Errorf("rule log format %q, want JSON", r.LogFormat)
	case len(r.LogGroupNames) == 0:
		return fmt.Errorf("rule has no log group")
	case len(c.Keys) == 0 || len(c.Keys) > 4:
		return fmt.Errorf("rule has %d keys, want 1 to 4", len(c.Keys))
	case len(c.Filters) > 4:
		return fmt.Errorf("rule has %d filters, want at most 4", len(c.Filters))
	case r.AggregateOn == Sum && c.ValueOf == "", r.AggregateOn == Count && c.ValueOf != "":
		return fmt.Errorf("rule aggregates on %s with ValueOf %q: Sum needs a ValueOf, Count takes none", r.AggregateOn, c.ValueOf)
	case r.AggregateOn != Sum && r.AggregateOn != Count:
		return fmt.Errorf("rule aggregates on %q, want %s or %s", r.AggregateOn, Count, Sum)
	}
	for _, f := range c.Filters {
		if (f.IsPresent == nil) == (f.GreaterThan == nil) {
			return fmt.Errorf("filter on %s: want exactly one of IsPresent, GreaterThan", f.Match)
		}
	}
	return nil
}

// Contributor is one contributor's aggregate over the lines evaluated.
type Contributor struct {
	Keys  []string
	Value float64
}

// Evaluate applies the rule to JSON log lines, as Contributor Insights does to the events of its
// log groups in one period: the lines that are not JSON objects, lack a key or fail a filter are
// not counted. It returns every contributor, the highest value first (ties by keys).
func (r Rule) Evaluate(lines [][]byte) []Contributor {
	agg := map[string]*Contributor{}
	for _, l := range lines {
		var doc map[string]any
		if json.Unmarshal(l, &doc) != nil {
			continue
		}
		if !r.counts(doc) {
			continue
		}
		keys, _ := r.keys(doc)
		v := 1.0
		if r.AggregateOn == Sum {
			v = field(doc, r.Contribution.ValueOf).(float64)
		}
		id := strings.Join(keys, "\x00")
		if agg[id] == nil {
			agg[id] = &Contributor{Keys: keys}
		}
		agg[id].Value += v
	}
	out := make([]Contributor, 0, len(agg))
	for _, c := range agg {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Value != out[j].Value {
			return out[i].Value > out[j].Value
		}
		return strings.Join(out[i].Keys, "\x00") < strings.Join(out[j].Keys, "\x00")
	})
	return out
}

// Matched is how many of the lines the rule matches: the log events Contributor Insights bills
// ("$0.02 per one million log events that match the rule", https://aws.amazon.com/cloudwatch/pricing/).
// A line matches when it is a JSON object with every key and passes every filter (and, for Sum,
// has a number to sum), as Evaluate counts them.
func (r Rule) Matched(lines [][]byte) int {
	n := 0
	for _, l := range lines {
		var doc map[string]any
		if json.Unmarshal(l, &doc) != nil {
			continue
		}
		if r.counts(doc) {
			n++
		}
	}
	return n
}

// counts reports whether a log event contributes to the rule.
func (r Rule) counts(doc map[string]any) bool {
	if _, ok := r.keys(doc); !ok || !r.matches(doc) {
		return false
	}
	if r.AggregateOn == Sum {
		_, isNum := field(doc, r.Contribution.ValueOf).(float64)
		return isNum
	}
	return true
}

// MaxContributorValue is INSIGHT_RULE_METRIC(rule, 'MaxContributorValue') of one period: the top
// contributor's value, and false when no line matched (the metric has no datapoint).
func MaxContributorValue(cs []Contributor) (float64, bool) {
	if len(cs) == 0 {
		return 0, false
	}
	return cs[0].Value, true
}

func (r Rule) keys(doc map[string]any) ([]string, bool) {
	var keys []string
	for _, k := range r.Contribution.Keys {
		switch v := field(doc, k).(type) {
		case string:
			keys = append(keys, v)
		case float64, bool:
			keys = append(keys, fmt.Sprint(v))
		default:
			return nil, false
		}
	}
	return keys, true
}

func (r Rule) matches(doc map[string]any) bool {
	for _, f := range r.Contribution.Filters {
		v := field(doc, f.Match)
		switch {
		case f.IsPresent != nil:
			if (v != nil) != *f.IsPresent {
				return false
			}
		case f.GreaterThan != nil:
			n, ok := v.(float64)
			if !ok || n <= *f.GreaterThan {
				return false
			}
		}
	}
	return true
}

// field reads a "$.a.b" path of the JSON property notation; nested objects only, which is all
// this module's rules use.
func field(doc map[string]any, path string) any {
	rest, ok := strings.CutPrefix(path, "$.")
	if !ok {
		return nil
	}
	var cur any = doc
	for _, name := range strings.Split(rest, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[name]
	}
	return cur
}
