package localrun

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/smithy-go/encoding/cbor"

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

// PutInsightRule adds a Contributor Insights rule of the templates (deploy.Account).
func (c *Cloud) PutInsightRule(_ context.Context, _ *deploy.Resource, ir deploy.InsightRule) error {
	rule, err := insights.Parse(ir.Body)
	if err != nil {
		return err
	}
	c.insightLog.mu.Lock()
	defer c.insightLog.mu.Unlock()
	if c.insightLog.rules == nil {
		c.insightLog.rules = map[string]insights.Rule{}
	}
	c.insightLog.rules[ir.Name] = rule
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
func (c *Cloud) InsightRules() []string {
	c.insightLog.mu.Lock()
	defer c.insightLog.mu.Unlock()
	var names []string
	for n := range c.insightLog.rules {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// InsightRuleReport evaluates the named rule on the lines its log groups received so far: every
// contributor, the highest value first, as GetInsightRuleReport's contributors are ordered.
func (c *Cloud) InsightRuleReport(name string) ([]insights.Contributor, error) {
	l := &c.insightLog
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
func (c *Cloud) InsightMatches(in func(logGroup string) bool) int {
	l := &c.insightLog
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

// cloudWatchPath is where the CloudWatch client sends its requests: the SDK for Go speaks Smithy
// RPC v2 CBOR to CloudWatch, POST /service/GraniteServiceVersion20100801/operation/<Operation>
// (https://smithy.io/2.0/additional-specs/protocols/smithy-rpc-v2.html).
const cloudWatchPath = "/service/GraniteServiceVersion20100801/operation/"

// serveCloudWatch answers GetInsightRuleReport (pipectl health) from InsightRuleReport: the
// contributors, the highest first, at most MaxContributorCount (default 10, at most 100), each
// with one datapoint, the whole run being one period, in the report's last period
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetInsightRuleReport.html).
// Every other operation is refused by name.
func (c *Cloud) serveCloudWatch(w http.ResponseWriter, req *http.Request) {
	op := strings.TrimPrefix(req.URL.Path, cloudWatchPath)
	if op != "GetInsightRuleReport" {
		cborError(w, http.StatusBadRequest, "InvalidAction", fmt.Sprintf("the local run does not emulate CloudWatch %s", op))
		return
	}
	body, _ := io.ReadAll(req.Body)
	v, err := cbor.Decode(body)
	in, ok := v.(cbor.Map)
	if err != nil || !ok {
		cborError(w, http.StatusBadRequest, "InvalidParameterValue", "the request is not a CBOR map")
		return
	}
	name, _ := in["RuleName"].(cbor.String)
	start, errStart := cbor.AsTime(in["StartTime"])
	end, errEnd := cbor.AsTime(in["EndTime"])
	period, errPeriod := cbor.AsInt64(in["Period"])
	if name == "" || errStart != nil || errEnd != nil || errPeriod != nil || period <= 0 || !end.After(start) {
		cborError(w, http.StatusBadRequest, "InvalidParameterValue", "RuleName, StartTime before EndTime and a positive Period are required")
		return
	}
	limit := int64(10)
	if v, ok := in["MaxContributorCount"]; ok {
		if limit, err = cbor.AsInt64(v); err != nil || limit < 1 || limit > 100 {
			cborError(w, http.StatusBadRequest, "InvalidParameterValue", "MaxContributorCount must be 1 to 100")
			return
		}
	}
	cs, err := c.InsightRuleReport(string(name))
	if err != nil {
		cborError(w, http.StatusBadRequest, "ResourceNotFound", err.Error())
		return
	}
	at := &cbor.Tag{ID: 1, Value: cbor.Float64(float64(end.Add(-time.Duration(period) * time.Second).Unix()))}
	var sum float64
	list := cbor.List{}
	for i, ct := range cs {
		sum += ct.Value
		if int64(i) >= limit {
			continue
		}
		keys := cbor.List{}
		for _, k := range ct.Keys {
			keys = append(keys, cbor.String(k))
		}
		list = append(list, cbor.Map{
			"Keys": keys, "ApproximateAggregateValue": cbor.Float64(ct.Value),
			"Datapoints": cbor.List{cbor.Map{"Timestamp": at, "ApproximateValue": cbor.Float64(ct.Value)}},
		})
	}
	w.Header().Set("Smithy-Protocol", "rpc-v2-cbor")
	w.Header().Set("Content-Type", "application/cbor")
	w.Write(cbor.Encode(cbor.Map{
		"Contributors": list, "AggregateValue": cbor.Float64(sum), "ApproximateUniqueCount": cbor.Uint(len(cs)),
	}))
}

// cborError is a Smithy RPC v2 CBOR error: the shape's name in __type and the message. CloudWatch
// is awsQuery-compatible, so the query error code goes in X-Amzn-Query-Error ("<code>;Sender").
func cborError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Smithy-Protocol", "rpc-v2-cbor")
	w.Header().Set("Content-Type", "application/cbor")
	w.Header().Set("X-Amzn-Query-Error", code+";Sender")
	w.WriteHeader(status)
	w.Write(cbor.Encode(cbor.Map{"__type": cbor.String(code + "Exception"), "message": cbor.String(msg)}))
}
