package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/insights"
	"github.com/example/tenantpipeline/internal/metrics"
)

// CloudWatch is the slice of the CloudWatch client pipectl health uses.
type CloudWatch interface {
	GetInsightRuleReport(ctx context.Context, in *cloudwatch.GetInsightRuleReportInput, optFns ...func(*cloudwatch.Options)) (*cloudwatch.GetInsightRuleReportOutput, error)
}

var _ CloudWatch = (*cloudwatch.Client)(nil)

// A pool's per-tenant health (pipectl health). Its four per-tenant alarms read Contributor
// Insights rules keyed by tenant, each alarming when the period's top contributor reaches 1
// (constructs/tenantpipeline, poolinsights.go). The rules' reports name the tenants: a tenant is
// over an alarm's threshold when one of its datapoints in the window is at least 1.
//
// GetInsightRuleReport returns at most 100 contributors, the highest first by OrderBy
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetInsightRuleReport.html),
// and takes 20 requests per second per region
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch_limits.html): one
// request per rule, four per pool.
const (
	// HealthPeriod is the reports' period: the alarms' default evaluation period.
	HealthPeriod = 5 * time.Minute
	// HealthMaxTenants is the report's most contributors, the API's maximum.
	HealthMaxTenants = 100
	// HealthThreshold is every per-tenant alarm's threshold on its rule's values.
	HealthThreshold = 1
)

// PoolTenantAlarms are a pool's per-tenant alarms and the figure each one's rule reads.
var PoolTenantAlarms = []struct{ Alarm, Metric string }{
	{"TenantBlocked", metrics.Blocked},
	{"TenantFailedFiles", metrics.FailedFiles},
	{"TenantHeadRunning", metrics.HeadRunningSeconds},
	{"TenantHeadQueued", metrics.HeadQueuedSeconds},
	{"TenantSequenceGap", metrics.SequenceGapsOverdue},
}

// PoolHealth is one pool's tenants over its per-tenant alarms' thresholds in a window.
type PoolHealth struct {
	Pool   string        `json:"pool"`
	Stack  string        `json:"stack"`
	From   time.Time     `json:"from"`
	To     time.Time     `json:"to"`
	Alarms []TenantAlarm `json:"alarms"`
}

// TenantAlarm is one per-tenant alarm: its rule, and the tenants whose value reached the threshold
// in a period of the window, highest first.
type TenantAlarm struct {
	Alarm   string        `json:"alarm"`
	Rule    string        `json:"rule"`
	Tenants []TenantValue `json:"tenants"`
	// Truncated: the report held HealthMaxTenants contributors, so more tenants may be over the
	// threshold than are listed.
	Truncated bool `json:"truncated"`
	// Missing: the pool has no such rule (it was deployed before the alarm existed): deploy it
	// again. Its tenants are then unknown, not none.
	Missing bool `json:"missing,omitempty"`
}

// TenantValue is a tenant's highest value of a rule in one period of the window.
type TenantValue struct {
	Tenant string  `json:"tenant"`
	Value  float64 `json:"value"`
}

// PoolHealth reads the per-tenant rules of pool over the last window (rounded up to whole
// periods) and names the tenants over each alarm's threshold.
func (o *Ops) PoolHealth(ctx context.Context, pool string, window time.Duration) (PoolHealth, error) {
	if o.CloudWatch == nil {
		return PoolHealth{}, fmt.Errorf("pool health needs a CloudWatch client")
	}
	if _, err := o.Tenants(ctx); err != nil {
		return PoolHealth{}, err
	}
	var stack string
	var names []string
	for _, p := range o.found.pools {
		names = append(names, p.out.Pool)
		if p.out.Pool == pool {
			stack = p.stack
		}
	}
	if stack == "" {
		slices.Sort(names)
		return PoolHealth{}, refuse("pool %q not found; pools: %v", pool, names)
	}
	periods := max(1, int((window+HealthPeriod-1)/HealthPeriod))
	to := o.Now().UTC().Truncate(HealthPeriod).Add(HealthPeriod)
	h := PoolHealth{Pool: pool, Stack: stack, From: to.Add(-time.Duration(periods) * HealthPeriod), To: to}
	for _, a := range PoolTenantAlarms {
		rule := insights.PoolTenantRuleName(stack, pool, a.Metric)
		out, err := o.CloudWatch.GetInsightRuleReport(ctx, &cloudwatch.GetInsightRuleReportInput{
			RuleName: aws.String(rule), StartTime: aws.Time(h.From), EndTime: aws.Time(h.To),
			Period: aws.Int32(int32(HealthPeriod.Seconds())), MaxContributorCount: aws.Int32(HealthMaxTenants),
			OrderBy: aws.String("Sum"),
		})
		// GetInsightRuleReport answers ResourceNotFound for a rule that does not exist
		// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetInsightRuleReport.html).
		var api smithy.APIError
		if errors.As(err, &api) && (api.ErrorCode() == "ResourceNotFound" || api.ErrorCode() == "ResourceNotFoundException") {
			h.Alarms = append(h.Alarms, TenantAlarm{Alarm: a.Alarm, Rule: rule, Tenants: []TenantValue{}, Missing: true})
			continue
		}
		if err != nil {
			return PoolHealth{}, fmt.Errorf("pool %s: report of rule %s: %w", pool, rule, err)
		}
		ta := TenantAlarm{Alarm: a.Alarm, Rule: rule, Tenants: []TenantValue{}, Truncated: len(out.Contributors) >= HealthMaxTenants}
		for _, c := range out.Contributors {
			top := 0.0
			for _, d := range c.Datapoints {
				top = max(top, aws.ToFloat64(d.ApproximateValue))
			}
			if top >= HealthThreshold && len(c.Keys) == 1 {
				ta.Tenants = append(ta.Tenants, TenantValue{Tenant: c.Keys[0], Value: top})
			}
		}
		slices.SortStableFunc(ta.Tenants, func(x, y TenantValue) int {
			switch {
			case x.Value > y.Value:
				return -1
			case x.Value < y.Value:
				return 1
			}
			return 0
		})
		h.Alarms = append(h.Alarms, ta)
	}
	return h, nil
}
