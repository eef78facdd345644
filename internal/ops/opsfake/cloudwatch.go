package opsfake

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
)

// cloudWatchFake serves the Contributor Insights reports of World.InsightReports.
type cloudWatchFake World

// SetInsightReport sets a rule's report: each tenant one contributor whose datapoints are values,
// highest aggregate first as the API orders them.
func (w *World) SetInsightReport(rule string, values map[string][]float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.InsightReports == nil {
		w.InsightReports = map[string][]cwtypes.InsightRuleContributor{}
	}
	var cs []cwtypes.InsightRuleContributor
	for tenant, vs := range values {
		c := cwtypes.InsightRuleContributor{Keys: []string{tenant}, ApproximateAggregateValue: aws.Float64(0)}
		for i, v := range vs {
			c.Datapoints = append(c.Datapoints, cwtypes.InsightRuleContributorDatapoint{Timestamp: aws.Time(w.Now.Add(-5 * time.Duration(i) * time.Minute)), ApproximateValue: aws.Float64(v)})
			*c.ApproximateAggregateValue += v
		}
		cs = append(cs, c)
	}
	w.InsightReports[rule] = cs
}

func (c *cloudWatchFake) GetInsightRuleReport(_ context.Context, in *cloudwatch.GetInsightRuleReportInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.GetInsightRuleReportOutput, error) {
	w := (*World)(c)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.fail("GetInsightRuleReport"); err != nil {
		return nil, err
	}
	w.InsightRequests = append(w.InsightRequests, *in)
	cs, ok := w.InsightReports[aws.ToString(in.RuleName)]
	if !ok {
		return nil, &cwtypes.ResourceNotFound{Message: aws.String("rule " + aws.ToString(in.RuleName) + " does not exist")}
	}
	n := min(len(cs), int(aws.ToInt32(in.MaxContributorCount)))
	return &cloudwatch.GetInsightRuleReportOutput{Contributors: cs[:n], ApproximateUniqueCount: aws.Int64(int64(len(cs)))}, nil
}
