package test

import (
	"strings"
	"testing"
)

// alarmByID returns the properties of the tenant's alarm whose logical id contains suffix.
func alarmByID(t *testing.T, tpl map[string]any, tenant, suffix string) map[string]any {
	t.Helper()
	var found map[string]any
	for id, a := range tenantResources(t, tpl, "AWS::CloudWatch::Alarm", tenant) {
		if strings.Contains(id, suffix) {
			if found != nil {
				t.Fatalf("tenant %s: more than one alarm matches %s", tenant, suffix)
			}
			found = props(a)
		}
	}
	if found == nil {
		t.Fatalf("tenant %s: got no alarm %s", tenant, suffix)
	}
	return found
}

// Every alarm of the tenant, by logical id part: its metric, threshold and how it evaluates.
func TestAlarmsPerTenant(t *testing.T) {
	sharedApp(t)
	type want struct {
		metric     string // namespace/name; "" for a metric-math alarm
		stat       string
		threshold  float64
		periods    float64
		datapoints float64
		missing    string
	}
	wants := map[string]want{
		"ErrorLogsAlarm":        {"TenantPipeline/ErrorLogs-acme", "Sum", 1, 1, 1, "notBreaching"},
		"ControllerErrorsAlarm": {"AWS/Lambda/Errors", "Sum", 1, 1, 1, "notBreaching"},
		"OldestMessageAlarm":    {"AWS/SQS/ApproximateAgeOfOldestMessage", "Maximum", 25 * 3600, 1, 1, "notBreaching"},
		"ExpiringMessageAlarm":  {"AWS/SQS/ApproximateAgeOfOldestMessage", "Maximum", (14 - 1 - 1) * 24 * 3600, 1, 1, "notBreaching"},
		"StalledAlarm":          {"", "", 1, 15, 15, "notBreaching"},
		"BacklogAlarm":          {"AWS/SQS/ApproximateNumberOfMessagesVisible", "Maximum", 100, 1, 1, "notBreaching"},
		// 1 of 2: a 5-minute safety net and one 5-minute period more (an unchanged health line is
		// written once per safety net).
		"HeadQueuedAlarm":            {"TenantPipeline/HeadQueuedSeconds", "Maximum", 7200, 2, 1, "notBreaching"},
		"HeadRunningAlarm":           {"TenantPipeline/HeadRunningSeconds", "Maximum", 18 * 3600, 2, 1, "notBreaching"},
		"BlockedAlarm":               {"TenantPipeline/Blocked", "Maximum", 1, 3, 2, "missing"},
		"ExecutionsFailedAlarm":      {"AWS/States/ExecutionsFailed", "Sum", 1, 1, 1, "notBreaching"},
		"ExecutionsTimedOutAlarm":    {"AWS/States/ExecutionsTimedOut", "Sum", 1, 1, 1, "notBreaching"},
		"ExecutionsAbortedAlarm":     {"AWS/States/ExecutionsAborted", "Sum", 1, 1, 1, "notBreaching"},
		"RuleFailedInvocationsAlarm": {"AWS/Events/FailedInvocations", "Sum", 1, 1, 1, "notBreaching"},
		"RuleDeadLettersAlarm":       {"AWS/SQS/ApproximateNumberOfMessagesVisible", "Maximum", 1, 1, 1, "notBreaching"},
	}
	if got := len(tenantResources(t, shared.template, "AWS::CloudWatch::Alarm", "acme")); got != len(wants) {
		t.Errorf("got %d alarms, want %d", got, len(wants))
	}
	for id, w := range wants {
		t.Run(id, func(t *testing.T) {
			p := alarmByID(t, shared.template, "acme", id)
			if w.metric != "" {
				if got := p["Namespace"].(string) + "/" + p["MetricName"].(string); got != w.metric {
					t.Errorf("metric: got %s, want %s", got, w.metric)
				}
				if p["Statistic"] != w.stat {
					t.Errorf("statistic: got %v, want %s", p["Statistic"], w.stat)
				}
			}
			if p["Threshold"] != w.threshold || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
				t.Errorf("got %v %v, want >= %v", p["ComparisonOperator"], p["Threshold"], w.threshold)
			}
			if p["EvaluationPeriods"] != w.periods || p["DatapointsToAlarm"] != w.datapoints {
				t.Errorf("got %v of %v datapoints, want %v of %v", p["DatapointsToAlarm"], p["EvaluationPeriods"], w.datapoints, w.periods)
			}
			if p["TreatMissingData"] != w.missing {
				t.Errorf("TreatMissingData: got %v, want %s", p["TreatMissingData"], w.missing)
			}
			if _, ok := p["AlarmActions"]; ok {
				t.Errorf("alarm actions without a topic: %v", p["AlarmActions"])
			}
		})
	}
	for _, id := range []string{"HeadQueuedAlarm", "HeadRunningAlarm", "BlockedAlarm"} {
		if got := asJSON(alarmByID(t, shared.template, "acme", id)["Dimensions"]); got != `[{"Name":"Tenant","Value":"acme"}]` {
			t.Errorf("%s dimensions: got %s", id, got)
		}
	}
	ruleID, _ := fileRule(t, shared.template, "acme")
	if got := asJSON(alarmByID(t, shared.template, "acme", "RuleFailedInvocationsAlarm")["Dimensions"]); got != `[{"Name":"RuleName","Value":{"Ref":"`+ruleID+`"}}]` {
		t.Errorf("FailedInvocations dimensions: got %s, want the tenant's rule", got)
	}
	dlqID, _ := ruleDLQ(t, shared.template, "acme")
	if got := asJSON(alarmByID(t, shared.template, "acme", "RuleDeadLettersAlarm")["Dimensions"]); !strings.Contains(got, `"Fn::GetAtt":["`+dlqID+`","QueueName"]`) {
		t.Errorf("dead-letter depth dimensions: got %s, want the queue name of %s", got, dlqID)
	}
	filters := tenantResources(t, shared.template, "AWS::Logs::MetricFilter", "acme")
	if len(filters) != 3 {
		t.Errorf("got %d metric filters, want one per function (3)", len(filters))
	}
	for id, f := range filters {
		p := props(f)
		if p["FilterPattern"] != `{ $.level = "ERROR" }` {
			t.Errorf("%s: FilterPattern got %v", id, p["FilterPattern"])
		}
		if got := get(t, p, "MetricTransformations", 0, "MetricName"); got != "ErrorLogs-acme" {
			t.Errorf("%s: MetricName got %v", id, got)
		}
	}
}

// 3a. Stalled is metric math over one-minute data: messages visible the whole minute, and no group
// with a message in flight at any time in it.
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-available-cloudwatch-metrics.html
func TestStalledAlarmExpression(t *testing.T) {
	sharedApp(t)
	queueID, _ := fifoQueue(t, shared.template, "acme")
	p := alarmByID(t, shared.template, "acme", "StalledAlarm")
	byID := map[string]map[string]any{}
	for _, m := range p["Metrics"].([]any) {
		byID[m.(map[string]any)["Id"].(string)] = m.(map[string]any)
	}
	var expr map[string]any
	for _, m := range byID {
		if _, ok := m["Expression"]; ok {
			expr = m
		}
	}
	if expr == nil || expr["Expression"] != "IF(visible > 0 AND inflight == 0, 1, 0)" || expr["ReturnData"] == false {
		t.Fatalf("got expression %v, want IF(visible > 0 AND inflight == 0, 1, 0) returning data", expr)
	}
	for id, want := range map[string][2]string{
		"visible":  {"ApproximateNumberOfMessagesVisible", "Minimum"},
		"inflight": {"ApproximateNumberOfGroupsWithInflightMessages", "Maximum"},
	} {
		m, ok := byID[id]
		if !ok {
			t.Fatalf("no metric %s in %v", id, keys(anyMap(byID)))
		}
		ms := get(t, m, "MetricStat")
		if get(t, ms, "Metric", "MetricName") != want[0] || get(t, ms, "Stat") != want[1] || get(t, ms, "Period") != float64(60) {
			t.Errorf("%s: got %s, want %s %s over 60 s", id, asJSON(ms), want[1], want[0])
		}
		if got := asJSON(get(t, ms, "Metric", "Dimensions")); !strings.Contains(got, `"Fn::GetAtt":["`+queueID+`","QueueName"]`) {
			t.Errorf("%s: dimensions %s, want the tenant's FIFO queue", id, got)
		}
	}
}

// 3d. Every alarm says what it means and what to do, names its tenant, and links the runbook.
func TestAlarmDescriptionsLinkTheRunbook(t *testing.T) {
	sharedApp(t)
	for _, tenant := range sampleTenants {
		for id, a := range tenantResources(t, shared.template, "AWS::CloudWatch::Alarm", tenant) {
			d := flatten(t, props(a)["AlarmDescription"]) // the dashboard link holds the region
			if !strings.Contains(d, "README.md#operations") || !strings.Contains(d, tenant) || len(d) < 80 {
				t.Errorf("%s: description %q, want what it means and what to do, the tenant, and README.md#operations", id, d)
			}
		}
	}
}

func anyMap[V any](m map[string]V) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}
