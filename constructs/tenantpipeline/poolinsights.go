package tenantpipeline

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/insights"
)

// Per-tenant health in a pool. A pooled tenant's figures are fields of the controller's EMF lines,
// the tenant the property Tenant (internal/metrics, Emitter.InPool), not metrics of their own: a
// pool's custom metrics do not grow with its tenants. Each per-tenant alarm reads one
// CloudWatch Contributor Insights rule over the controller's log group, keyed by $.Tenant, through
// the metric math function INSIGHT_RULE_METRIC(rule, 'MaxContributorValue'): the value of the
// period's top contributor, the tenant with the highest value
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/ContributorInsights-GraphReportData.html,
// which also documents alarms on it;
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetInsightRuleReport.html).
//
// Why every tenant is evaluated. A rule is applied to every log event of its log groups that its
// filters match ("All rules analyze incoming data in real time",
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/ContributorInsights.html), and
// neither that page nor the rule syntax sets a limit on the contributors a rule tracks. The top-N
// is a limit of the report only: GetInsightRuleReport returns at most MaxContributorCount
// contributors, 1 to 100 (default 10), ordered by OrderBy, over at most 24 hours
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/ContributorInsights-ViewReports.html). The alarm does not read the report: MaxContributorValue is the
// highest value among all the period's contributors, so it reaches the threshold as soon as any
// one tenant does, whichever tenant it is and however many others there are. The report (the
// console's rule page, the dashboard, or aws cloudwatch get-insight-rule-report
// --max-contributor-count 100) then names the tenants over the threshold, highest first. The docs
// call a contributor's aggregate in the report "an approximation"
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_InsightRuleContributor.html)
// and say nothing of MaxContributorValue's precision; the rules are built so that any
// approximation fails closed: each filter keeps only the events that are themselves a breach
// (a value above the threshold, or Blocked, FailedFiles and SequenceGapsOverdue summed where any
// non-zero is one), so one matching event makes the top value at least 1, the alarm's threshold.
//
// Limits relied on:
//   - 100 Contributor Insights rules per account and region, adjustable
//     (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch_limits.html): a
//     pool has len(PoolTenantAlarmMetrics) rules (5), whatever its tenant count, so 20 pools fit
//     the default quota.
//   - A rule: at most 4 keys and 4 filters, log format JSON, AggregateOn Count or Sum, ValueOf only
//     with Sum; its body at most 8,192 ASCII characters and its name 1 to 128 printable ASCII
//     characters
//     (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/ContributorInsights-RuleSyntax.html;
//     https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_InsightRule.html).
//   - GetInsightRuleReport: 20 transactions per second per region (cloudwatch_limits.html).
//
// Pricing (https://aws.amazon.com/cloudwatch/pricing/, Contributor Insights): $0.50 per rule per
// month and $0.02 per million log events that match a rule; README.md, "Cost and quotas per
// tenant", works it out per pooled tenant.

// PoolTenantRules are a pool's Contributor Insights rules, one per per-tenant alarm (the fields of
// PoolAlarms of the same names). Exported as the type of TenantPool.TenantRules.
type PoolTenantRules struct {
	Blocked     awscloudwatch.CfnInsightRule
	FailedFiles awscloudwatch.CfnInsightRule
	HeadRunning awscloudwatch.CfnInsightRule
	HeadQueued  awscloudwatch.CfnInsightRule
	SequenceGap awscloudwatch.CfnInsightRule
}

// All lists the rules in the order of PoolTenantAlarmMetrics.
func (r PoolTenantRules) All() []awscloudwatch.CfnInsightRule {
	return []awscloudwatch.CfnInsightRule{r.Blocked, r.FailedFiles, r.HeadRunning, r.HeadQueued, r.SequenceGap}
}

// tenantKey is the key of every per-tenant rule: the Tenant property of a pooled tenant's lines.
const tenantKey = "$." + DimensionTenant

// poolTenantRule is the rule body of one per-tenant figure of a pool, over the controller's log
// group logs. Blocked, FailedFiles and SequenceGapsOverdue are summed per tenant over every line
// that holds them (a not-blocked tenant's Blocked 0 is data, as in a silo; SequenceGapsOverdue is 1
// on each tick of a gap past its gapTimeout); HeadRunningSeconds and HeadQueuedSeconds count the
// lines whose value is above threshold (Contributor Insights has no Maximum).
func poolTenantRule(logs, metric string, threshold float64) insights.Rule {
	field := "$." + metric
	c := insights.Contribution{Keys: []string{tenantKey}, Filters: []insights.Filter{insights.Present(tenantKey)}}
	aggregate := insights.Count
	switch metric {
	case MetricBlocked, MetricFailedFiles, MetricSequenceGapsOverdue:
		aggregate, c.ValueOf = insights.Sum, field
		c.Filters = append(c.Filters, insights.Present(field))
	default:
		c.Filters = append(c.Filters, insights.Above(field, threshold))
	}
	return insights.Rule{Schema: insights.Schema, LogGroupNames: []string{logs}, LogFormat: "JSON", Contribution: c, AggregateOn: aggregate}
}

// insightRuleName is the name of a pool's rule of metric (insights.PoolTenantRuleName).
func insightRuleName(stack, pool, metric string) string {
	return insights.PoolTenantRuleName(stack, pool, metric)
}

// insightRuleMetric is the metric math expression of a rule's statistic.
func insightRuleMetric(rule, statistic string) string {
	return fmt.Sprintf("INSIGHT_RULE_METRIC(%q, %q)", rule, statistic) // the docs' form: double quotes
}

// newTenantRules creates the pool's rules over the controller's log group.
func (t *TenantPool) newTenantRules(logs awslogs.ILogGroup) PoolTenantRules {
	a := t.Props.Shared.Alarms
	scope := constructs.NewConstruct(t.Construct, jsii.String("TenantRules"))
	stack := *awscdk.Stack_Of(t.Construct).StackName()
	rule := func(metric string, threshold float64) awscloudwatch.CfnInsightRule {
		return awscloudwatch.NewCfnInsightRule(scope, jsii.String(metric), &awscloudwatch.CfnInsightRuleProps{
			RuleName:  jsii.String(insightRuleName(stack, t.Props.Name, metric)),
			RuleState: jsii.String("ENABLED"),
			RuleBody:  jsii.String(poolTenantRule(*logs.LogGroupName(), metric, threshold).JSON()),
		})
	}
	return PoolTenantRules{
		Blocked:     rule(MetricBlocked, 0),
		FailedFiles: rule(MetricFailedFiles, 0),
		HeadRunning: rule(MetricHeadRunningSeconds, a.HeadRunning.Seconds()),
		HeadQueued:  rule(MetricHeadQueuedSeconds, a.HeadQueued.Seconds()),
		SequenceGap: rule(MetricSequenceGapsOverdue, 0),
	}
}

// tenantRuleMetric is the alarm's metric of a rule: its top contributor's value per period.
func tenantRuleMetric(rule awscloudwatch.CfnInsightRule, period awscdk.Duration) awscloudwatch.IMetric {
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String(insightRuleMetric(*rule.RuleName(), "MaxContributorValue")),
		Period:     period,
		Label:      jsii.String("Top tenant of " + *rule.RuleName()),
	})
}

// dependOnRules makes each per-tenant alarm wait for its rule: an alarm on INSIGHT_RULE_METRIC of
// a rule that does not exist yet has no data.
func (t *TenantPool) dependOnRules() {
	a, r := t.Alarms, t.TenantRules
	for i, alarm := range []awscloudwatch.Alarm{a.TenantBlocked, a.TenantFailedFiles, a.TenantHeadRunning, a.TenantHeadQueued, a.TenantSequenceGap} {
		alarm.Node().AddDependency(r.All()[i])
	}
}

// insightRuleWidget is a dashboard graph of a Contributor Insights rule's top contributors, which
// CDK has no widget for: a metric widget whose properties hold insightRule
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/CloudWatch-Dashboard-Body-Structure.html).
type insightRuleWidget struct {
	title, rule string
	top         int
	x, y        *float64
}

var _ awscloudwatch.IWidget = (*insightRuleWidget)(nil)

func (w *insightRuleWidget) Position(x, y *float64)          { w.x, w.y = x, y }
func (w *insightRuleWidget) Height() *float64                { return jsii.Number(graphHeight) }
func (w *insightRuleWidget) Width() *float64                 { return jsii.Number(graphWidth) }
func (w *insightRuleWidget) Warnings() *[]*string            { return &[]*string{} }
func (w *insightRuleWidget) WarningsV2() *map[string]*string { return &map[string]*string{} }

// ToJson is the widget's dashboard body, ordered by Sum: for a Count rule the tenants' matching
// lines, for a Sum rule the sum of their values.
func (w *insightRuleWidget) ToJson() *[]any {
	return &[]any{map[string]any{
		"type": "metric", "x": w.x, "y": w.y, "width": graphWidth, "height": graphHeight,
		"properties": map[string]any{
			"title":       w.title,
			"region":      *awscdk.Aws_REGION(),
			"view":        "timeSeries",
			"period":      300,
			"legend":      map[string]any{"position": "bottom"},
			"insightRule": map[string]any{"ruleName": w.rule, "maxContributorCount": w.top, "orderBy": "Sum"},
		},
	}}
}
