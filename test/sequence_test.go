package test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
)

// sequenceTopic receives the alarms of the sequence app.
const sequenceTopic = "arn:aws:sns:eu-west-1:123456789012:ops"

// sequenceApp synthesizes testdata/sequence.json with the app's key and an alarm topic: silo
// tenants with a numbered sequence (ledger: gapTimeout 30m, onGap hold; tally: gapTimeout 1h by
// default, onGap skip), one with a named sequence (diary), one without (plain), and a pooled
// tenant with a sequence (hooli). It returns the silo tenants' template and the pool's.
func sequenceApp(t *testing.T) (silo, pool map[string]any) {
	t.Helper()
	_, built := synthApp(t, "sequence.json", stackOptions(sequenceTopic))
	if len(built.TenantStacks) != 1 || len(built.PoolStacks) != 1 {
		t.Fatalf("got %d tenant stacks and %d pool stacks, want 1 and 1", len(built.TenantStacks), len(built.PoolStacks))
	}
	return stackTemplate(t, built.TenantStacks[0]), stackTemplate(t, built.PoolStacks[0])
}

// granted is one statement as "actions resources", its actions and resources sorted and joined by
// commas, resources flattened (flatten).
func granted(t *testing.T, s map[string]any) string {
	t.Helper()
	return strings.Join(actions(s), ",") + " " + strings.Join(resources(t, s), ",")
}

// globMatch reports whether an IAM resource pattern, in which "*" matches any run of characters
// and "?" any one character, "/" included, matches s.
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_resource.html
func globMatch(pattern, s string) bool {
	re := strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(pattern))
	return regexp.MustCompile("^" + re + "$").MatchString(s)
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"b/results/acme/*/summary.json", "b/results/acme/e-1/summary.json", true},
		{"b/results/acme/*", "b/results/acme/e-1/summary.json", true},
		{"b/results/acme/*/event-*.json", "b/results/acme/e-1/summary.json", false},
		{"b/results/acme/*/summary.json", "b/results/acmex/e-1/summary.json", false},
		{"b/control/acme/sequence/*", "b/control/acme/sequence/held/0000000000000000007.json", true},
		{"b/control/acme/s?ip/*", "b/control/acme/skip/x", true},
	} {
		if got := globMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q): got %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

// The controller of a sequenced silo tenant keeps its sequence: it reads, writes and deletes
// exactly the objects under control/<tenant>/sequence/, writes a refused file's summary.json,
// and sends to its own queue (held files given back, the tick), with the key's GenerateDataKey
// for that queue alone; the queue's Deny spares it. A tenant without a sequence gets none of it,
// so its policy is what it was.
func TestSequenceControllerGrants(t *testing.T) {
	silo, _ := sequenceApp(t)
	for _, tc := range []struct {
		tenant    string
		sequenced bool
	}{{"ledger", true}, {"tally", true}, {"diary", true}, {"plain", false}} {
		t.Run(tc.tenant, func(t *testing.T) {
			stmts := statementsOf(t, silo, tc.tenant, "Controller")
			queue := ""
			for id, q := range tenantResources(t, silo, "AWS::SQS::Queue", tc.tenant) {
				if props(q)["FifoQueue"] == true {
					queue = "<GetAtt:" + id + ".Arn>"
				}
			}
			var all []string
			for _, s := range stmts {
				all = append(all, granted(t, s))
			}
			// The sequence's statements, each exactly once for a sequenced tenant; for any tenant,
			// no other statement names the sequence prefix, deletes or sends.
			wants := map[string]string{
				"s3:DeleteObject,s3:GetObject,s3:PutObject": "/" + pipeline.SequencePrefix(pipeline.SiloOwner(tc.tenant)) + "*",
				"s3:PutObject":    "/" + results.Key(pipeline.SiloOwner(tc.tenant), "*", results.SummaryFile),
				"sqs:SendMessage": queue,
			}
			found := map[string]int{}
			for _, s := range stmts {
				acts, rs := strings.Join(actions(s), ","), resources(t, s)
				if want, ok := wants[acts]; ok && s["Effect"] == "Allow" && s["Condition"] == nil && len(rs) == 1 && strings.HasSuffix(rs[0], want) {
					found[acts]++
					continue
				}
				if g := granted(t, s); strings.Contains(g, "/sequence/") || strings.Contains(g, "s3:DeleteObject") || strings.Contains(g, "sqs:SendMessage") {
					t.Errorf("got %s, want no other grant on the sequence or to send", g)
				}
			}
			for acts, on := range wants {
				if want := map[bool]int{true: 1, false: 0}[tc.sequenced]; found[acts] != want {
					t.Errorf("%s on %s: got %d statements, want %d; the controller's statements:\n%s", acts, on, found[acts], want, strings.Join(all, "\n"))
				}
			}
			// The queue's key: Decrypt to receive (every tenant), GenerateDataKey to send (sequenced only).
			var sends int
			for _, s := range stmts {
				if dig(s, "Condition", "StringEquals", "kms:EncryptionContext:aws:sqs:arn") == nil {
					continue
				}
				if got := asJSON(dig(s, "Condition", "StringEquals", "kms:EncryptionContext:aws:sqs:arn")); !strings.Contains(got, `"`+strings.TrimSuffix(strings.TrimPrefix(queue, "<GetAtt:"), ".Arn>")+`"`) {
					t.Errorf("got the queue key's grant on %s, want the tenant's queue %s alone", got, queue)
				}
				if slices.Contains(actions(s), "kms:GenerateDataKey") {
					sends++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.sequenced]; sends != want {
				t.Errorf("got %d kms:GenerateDataKey grants on the queue's key, want %d", sends, want)
			}
			if tc.sequenced {
				// The queue's Deny spares the controller's role, or its sends would be refused.
				controllerRole := "<GetAtt:" + logicalIDOf(t, silo, "AWS::IAM::Role", tc.tenant, "ControllerServiceRole") + ".Arn>"
				var spared bool
				for _, qp := range tenantResources(t, silo, "AWS::SQS::QueuePolicy", tc.tenant) {
					for _, s := range get(t, props(qp), "PolicyDocument", "Statement").([]any) {
						st := s.(map[string]any)
						if st["Effect"] != "Deny" || !slices.Contains(actions(st), "sqs:SendMessage") || flatten(t, st["Resource"]) != queue {
							continue
						}
						for _, a := range dig(st, "Condition", "ArnNotLike", "aws:PrincipalArn").([]any) {
							spared = spared || flatten(t, a) == controllerRole
						}
					}
				}
				if !spared {
					t.Errorf("the Deny of sqs:SendMessage on %s does not spare the controller's role %s", queue, controllerRole)
				}
			}
		})
	}
}

// A sequenced silo tenant of kind number has a SequenceGap alarm: the controller's
// SequenceGapSeconds (its Tenant dimension) at its Maximum reaches the sequence's gapTimeout,
// missing data not breaching (no tick: no gap), with the tenant's alarm actions. A named
// sequence has no gaps and a tenant without a sequence nothing to wait for: no alarm.
func TestSequenceGapAlarm(t *testing.T) {
	silo, _ := sequenceApp(t)
	for _, tc := range []struct {
		tenant    string
		threshold float64 // 0: no alarm
		says      string
	}{
		{"ledger", 30 * 60, "pipectl sequence skip ledger NUMBER"},
		{"tally", 60 * 60, "onGap skip"},
		{"diary", 0, ""},
		{"plain", 0, ""},
	} {
		t.Run(tc.tenant, func(t *testing.T) {
			var found []map[string]any
			for id, a := range tenantResources(t, silo, "AWS::CloudWatch::Alarm", tc.tenant) {
				if strings.Contains(id, "SequenceGap") {
					found = append(found, props(a))
				}
			}
			if tc.threshold == 0 {
				if len(found) != 0 {
					t.Fatalf("got %d SequenceGap alarms, want none", len(found))
				}
				return
			}
			if len(found) != 1 {
				t.Fatalf("got %d SequenceGap alarms, want 1", len(found))
			}
			p := found[0]
			for k, want := range map[string]string{
				"Namespace": `"` + pipeline.DefaultMetricsNamespace + `"`, "MetricName": `"` + metrics.SequenceGapSeconds + `"`,
				"Dimensions": `[{"Name":"Tenant","Value":"` + tc.tenant + `"}]`, "Statistic": `"Maximum"`, "Period": `300`,
				"Threshold": asJSON(tc.threshold), "ComparisonOperator": `"GreaterThanOrEqualToThreshold"`,
				"EvaluationPeriods": `1`, "DatapointsToAlarm": `1`, "TreatMissingData": `"notBreaching"`,
				"AlarmActions": `["` + sequenceTopic + `"]`, "OKActions": `["` + sequenceTopic + `"]`,
			} {
				if got := asJSON(p[k]); got != want {
					t.Errorf("%s: got %s, want %s", k, got, want)
				}
			}
			if d := flatten(t, p["AlarmDescription"]); !strings.Contains(d, tc.says) || !strings.Contains(d, "Runbook: ") || !strings.Contains(d, "Dashboard: ") {
				t.Errorf("description %q, want it to say %q and link the runbook and the dashboard", d, tc.says)
			}
		})
	}
}

// A pool's tenant role keeps any tenant's sequence, whether or not a tenant of the pool has one
// today (a pool's rows may gain one at any time): GetObject, PutObject and DeleteObject on exactly
// control/${aws:PrincipalTag/tenant}/sequence/*, and PutObject on the tenant's results'
// summary.json (the results/<tenant>/* grant covers it). The pool controller's own role sends
// held files and the ticks to the pool queue.
func TestPoolSequenceGrants(t *testing.T) {
	_, withSequence := sequenceApp(t)
	for _, tc := range []struct {
		name string
		tpl  map[string]any
	}{
		{"a pool with a sequenced tenant", withSequence},
		{"a pool without", defaultPoolTemplate(t, "testdata/pool.json", "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var roleStmts []string
			bucket := ""
			for _, s := range poolPolicyStatements(t, tc.tpl, "PoolTenantRole") {
				g := granted(t, s)
				roleStmts = append(roleStmts, g)
				quarantine := "/" + pipeline.QuarantineDir(pipeline.PoolOwner("default", "${aws:PrincipalTag/tenant}")) + "*"
				if strings.HasPrefix(g, "s3:PutObject ") && strings.HasSuffix(g, quarantine) {
					bucket = strings.TrimSuffix(strings.TrimPrefix(g, "s3:PutObject "), quarantine)
				}
			}
			if bucket == "" {
				t.Fatalf("no quarantine/ grant to find the bucket's ARN in:\n%s", strings.Join(roleStmts, "\n"))
			}
			tag := "${aws:PrincipalTag/tenant}"
			want := "s3:DeleteObject,s3:GetObject,s3:PutObject " + bucket + "/" + pipeline.SequencePrefix(pipeline.PoolOwner("default", tag)) + "*"
			if n := slices.Index(roleStmts, want); n < 0 {
				t.Errorf("the tenant role grants\n%s\nwant %q", strings.Join(roleStmts, "\n"), want)
			}
			for _, g := range roleStmts {
				if strings.Contains(g, "s3:DeleteObject") && g != want {
					t.Errorf("got %s, want DeleteObject on the sequence prefix alone", g)
				}
			}
			// A refused file's summary.json, written under the tenant's results.
			summary := bucket + "/" + results.Key(pipeline.PoolOwner("default", tag), "execution-1", results.SummaryFile)
			var writes bool
			for _, s := range poolPolicyStatements(t, tc.tpl, "PoolTenantRole") {
				if !slices.Contains(actions(s), "s3:PutObject") {
					continue
				}
				for _, r := range resources(t, s) {
					writes = writes || globMatch(r, summary)
				}
			}
			if !writes {
				t.Errorf("the tenant role may not put %s; it grants\n%s", summary, strings.Join(roleStmts, "\n"))
			}
			// The pool controller's own role sends to the pool queue.
			var queue string
			for id, q := range byType(tc.tpl, "AWS::SQS::Queue") {
				if strings.HasPrefix(id, "PoolQueue") && props(q)["FifoQueue"] == true {
					queue = "<GetAtt:" + id + ".Arn>"
				}
			}
			var sends bool
			for _, s := range poolPolicyStatements(t, tc.tpl, "PoolController") {
				sends = sends || slices.Contains(actions(s), "sqs:SendMessage") && slices.Contains(resources(t, s), queue)
			}
			if queue == "" || !sends {
				t.Errorf("the pool controller may not send to the pool queue %q", queue)
			}
		})
	}
}

// A pool has one SequenceGap alarm, whether or not a tenant of it has a sequence today: the top
// tenant's SequenceGapsOverdue, summed per tenant by a Contributor Insights rule over the pool
// controller's log group keyed by $.Tenant, reaches 1 (one tick of a gap past its gapTimeout),
// missing data not breaching, with the pool's alarm actions. The rule names the tenants.
func TestPoolSequenceGapAlarm(t *testing.T) {
	_, withSequence := sequenceApp(t)
	for _, tc := range []struct {
		name    string
		tpl     map[string]any
		actions string
	}{
		{"a pool with a sequenced tenant", withSequence, `["` + sequenceTopic + `"]`},
		{"a pool without", defaultPoolTemplate(t, "testdata/pool.json", ""), "null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ruleID, ruleName string
			for id, r := range poolRules(t, tc.tpl) {
				if strings.HasSuffix(r.name, "-Tenant"+metrics.SequenceGapsOverdue) {
					c := r.body.Contribution
					if ruleID != "" || r.body.AggregateOn != "Sum" || c.ValueOf != "$."+metrics.SequenceGapsOverdue || !slices.Equal(c.Keys, []string{"$.Tenant"}) {
						t.Errorf("%s: got %s of %q keyed by %v (or a second rule), want one Sum of $.%s keyed by $.Tenant", id, r.body.AggregateOn, c.ValueOf, c.Keys, metrics.SequenceGapsOverdue)
					}
					ruleID, ruleName = id, r.name
				}
			}
			if ruleID == "" {
				t.Fatalf("got no rule of %s", metrics.SequenceGapsOverdue)
			}
			var found []map[string]any
			for id, a := range resourcesOfType(tc.tpl, "AWS::CloudWatch::Alarm") {
				if strings.Contains(id, "TenantSequenceGapAlarm") {
					found = append(found, a)
				}
			}
			if len(found) != 1 {
				t.Fatalf("got %d TenantSequenceGap alarms, want 1", len(found))
			}
			p := props(found[0])
			if got, want := flatten(t, get(t, p, "Metrics", 0, "Expression")), `INSIGHT_RULE_METRIC("`+ruleName+`", "MaxContributorValue")`; got != want {
				t.Errorf("expression: got %s, want %s", got, want)
			}
			for k, want := range map[string]string{
				"Threshold": `1`, "ComparisonOperator": `"GreaterThanOrEqualToThreshold"`, "EvaluationPeriods": `1`,
				"TreatMissingData": `"notBreaching"`, "AlarmActions": tc.actions, "OKActions": tc.actions,
			} {
				if got := asJSON(p[k]); got != want {
					t.Errorf("%s: got %s, want %s", k, got, want)
				}
			}
			if deps := asJSON(found[0]["DependsOn"]); !strings.Contains(deps, ruleID) {
				t.Errorf("depends on %s, want its rule %s", deps, ruleID)
			}
			if d := flatten(t, p["AlarmDescription"]); !strings.Contains(d, "pipectl sequence skip TENANT NUMBER") || !strings.Contains(d, "get-insight-rule-report --rule-name "+ruleName) {
				t.Errorf("description %q, want what to do and where the tenants are named", d)
			}
		})
	}
}

// A sequenced silo tenant's dashboard rows chart its gap and its held and refused files, by its
// Tenant dimension, and its alarm status widget shows the SequenceGap alarm; a tenant without a
// sequence has neither.
func TestSequenceDashboard(t *testing.T) {
	silo, _ := sequenceApp(t)
	var body dashboardBody
	for _, d := range resourcesOfType(silo, "AWS::CloudWatch::Dashboard") {
		flattenJSON(t, props(d)["DashboardBody"], &body)
	}
	for _, tc := range []struct {
		tenant    string
		sequenced bool
		alarm     bool
	}{{"ledger", true, true}, {"diary", true, false}, {"plain", false, false}} {
		t.Run(tc.tenant, func(t *testing.T) {
			ten := "Tenant=" + tc.tenant
			want := map[dashboardMetric]bool{
				{"sequence gap (s)", pipeline.DefaultMetricsNamespace, metrics.SequenceGapSeconds, "Maximum", ten, 300}: tc.sequenced,
				{"files held and refused", pipeline.DefaultMetricsNamespace, metrics.FilesHeld, "Sum", ten, 300}:        tc.sequenced,
				{"files held and refused", pipeline.DefaultMetricsNamespace, metrics.FilesRefused, "Sum", ten, 300}:     tc.sequenced,
			}
			got := metricsOf(t, body, tc.tenant)
			for m, present := range want {
				if slices.Contains(got, m) != present {
					t.Errorf("got %+v charted %v, want %v", m, !present, present)
				}
			}
			var alarmID string
			for id := range tenantResources(t, silo, "AWS::CloudWatch::Alarm", tc.tenant) {
				if strings.Contains(id, "SequenceGapAlarm") {
					alarmID = id
				}
			}
			var shown bool
			for _, w := range body.Widgets {
				shown = shown || w.Type == "alarm" && alarmID != "" && slices.Contains(w.Properties.Alarms, "<GetAtt:"+alarmID+".Arn>")
			}
			if shown != tc.alarm {
				t.Errorf("SequenceGap alarm %q in the alarm status widget: got %v, want %v", alarmID, shown, tc.alarm)
			}
		})
	}
}
