package localrun

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// An operator's control-plane request by a session is judged by its role's policies, each
// operation by its action and resource (the event source mapping's ARN, the function's, the
// stack's, the insight rule's), explicit Deny first; GetCallerIdentity needs no permission; a
// request the local run does not judge fails closed; the run's own key passes.
func TestControlPlaneJudged(t *testing.T) {
	r := newTenantAuthRig(t)
	var reached atomic.Int64
	server := serveTest(t, r.auth.guardControlPlane(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached.Add(1) // the service behind: its answer does not matter here
		w.WriteHeader(http.StatusBadRequest)
	})))
	const (
		region  = "arn:aws:%s:us-east-1:123456789012:"
		mapping = "arn:aws:lambda:us-east-1:123456789012:event-source-mapping:abc"
		fn      = "arn:aws:lambda:us-east-1:123456789012:function:"
	)
	operate := []statement{
		allow([]string{"lambda:ListEventSourceMappings"}, []string{"*"}, nil),
		allow([]string{"lambda:GetEventSourceMapping", "lambda:UpdateEventSourceMapping"}, []string{mapping}, nil),
		allow([]string{"lambda:GetFunction"}, []string{fn + "acme-controller"}, nil),
		allow([]string{"cloudformation:DescribeStacks"}, []string{fmt.Sprintf(region, "cloudformation") + "stack/ops-acme/*"}, nil),
		allow([]string{"cloudwatch:GetInsightRuleReport"}, []string{fmt.Sprintf(region, "cloudwatch") + "insight-rule/p-blocked"}, nil),
	}
	noUpdate := append([]statement{deny([]string{"lambda:UpdateEventSourceMapping"}, []string{"*"}, nil)}, operate...)
	ctx := context.Background()
	week := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	calls := map[string]func(cfg aws.Config) error{
		"ListEventSourceMappings": func(cfg aws.Config) error {
			_, err := lambdaAt(cfg, server).ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{})
			return err
		},
		"UpdateEventSourceMapping abc": func(cfg aws.Config) error {
			_, err := lambdaAt(cfg, server).UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{UUID: aws.String("abc"), Enabled: aws.Bool(false)})
			return err
		},
		"GetEventSourceMapping other": func(cfg aws.Config) error {
			_, err := lambdaAt(cfg, server).GetEventSourceMapping(ctx, &lambda.GetEventSourceMappingInput{UUID: aws.String("other")})
			return err
		},
		"DeleteEventSourceMapping abc": func(cfg aws.Config) error {
			_, err := lambdaAt(cfg, server).DeleteEventSourceMapping(ctx, &lambda.DeleteEventSourceMappingInput{UUID: aws.String("abc")})
			return err
		},
		"GetFunction acme-controller": func(cfg aws.Config) error {
			_, err := lambdaAt(cfg, server).GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String("acme-controller")})
			return err
		},
		"GetFunction results": func(cfg aws.Config) error {
			_, err := lambdaAt(cfg, server).GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(fn + "results")})
			return err
		},
		"DescribeStacks ops-acme": func(cfg aws.Config) error {
			_, err := cloudformation.NewFromConfig(cfg, at(server, func(o *cloudformation.Options) (**string, *int) { return &o.BaseEndpoint, &o.RetryMaxAttempts })).
				DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String("ops-acme")})
			return err
		},
		"DescribeStacks ops-other": func(cfg aws.Config) error {
			_, err := cloudformation.NewFromConfig(cfg, at(server, func(o *cloudformation.Options) (**string, *int) { return &o.BaseEndpoint, &o.RetryMaxAttempts })).
				DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String("ops-other")})
			return err
		},
		"DescribeStacks every stack": func(cfg aws.Config) error {
			_, err := cloudformation.NewFromConfig(cfg, at(server, func(o *cloudformation.Options) (**string, *int) { return &o.BaseEndpoint, &o.RetryMaxAttempts })).
				DescribeStacks(ctx, &cloudformation.DescribeStacksInput{})
			return err
		},
		"GetInsightRuleReport p-blocked": func(cfg aws.Config) error {
			_, err := cloudwatch.NewFromConfig(cfg, at(server, func(o *cloudwatch.Options) (**string, *int) { return &o.BaseEndpoint, &o.RetryMaxAttempts })).
				GetInsightRuleReport(ctx, &cloudwatch.GetInsightRuleReportInput{RuleName: aws.String("p-blocked"), StartTime: aws.Time(week), EndTime: aws.Time(week.Add(time.Hour)), Period: aws.Int32(300)})
			return err
		},
		"GetInsightRuleReport q-blocked": func(cfg aws.Config) error {
			_, err := cloudwatch.NewFromConfig(cfg, at(server, func(o *cloudwatch.Options) (**string, *int) { return &o.BaseEndpoint, &o.RetryMaxAttempts })).
				GetInsightRuleReport(ctx, &cloudwatch.GetInsightRuleReportInput{RuleName: aws.String("q-blocked"), StartTime: aws.Time(week), EndTime: aws.Time(week.Add(time.Hour)), Period: aws.Int32(300)})
			return err
		},
		"GetCallerIdentity": func(cfg aws.Config) error {
			_, err := sts.NewFromConfig(cfg, at(server, func(o *sts.Options) (**string, *int) { return &o.BaseEndpoint, &o.RetryMaxAttempts })).
				GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
			return err
		},
	}
	for i, tc := range []struct {
		call     string
		identity []statement
		want     string // "" when the request reaches the service
	}{
		{"ListEventSourceMappings", operate, ""},
		{"ListEventSourceMappings", nil, "AccessDeniedException"},
		{"UpdateEventSourceMapping abc", operate, ""},
		{"UpdateEventSourceMapping abc", noUpdate, "AccessDeniedException"},
		{"GetEventSourceMapping other", operate, "AccessDeniedException"},
		{"DeleteEventSourceMapping abc", operate, "InvalidAction"},
		{"GetFunction acme-controller", operate, ""},
		{"GetFunction results", operate, "AccessDeniedException"},
		{"DescribeStacks ops-acme", operate, ""},
		{"DescribeStacks ops-other", operate, "AccessDenied"},
		{"DescribeStacks every stack", operate, "AccessDenied"},
		{"GetInsightRuleReport p-blocked", operate, ""},
		{"GetInsightRuleReport q-blocked", operate, "AccessDenied"},
		{"GetCallerIdentity", nil, ""},
	} {
		t.Run(fmt.Sprintf("%s, %d statements", tc.call, len(tc.identity)), func(t *testing.T) {
			before := reached.Load()
			err := calls[tc.call](r.sessionConfig(t, fmt.Sprintf("op%d", i), tc.identity))
			passed := reached.Load() > before
			var api smithy.APIError
			switch {
			case tc.want == "" && !passed:
				t.Errorf("got %v, want the request passed to the service", err)
			case tc.want != "" && (passed || !errors.As(err, &api) || api.ErrorCode() != tc.want):
				t.Errorf("got %v (passed on: %v), want %s", err, passed, tc.want)
			}
		})
	}
	before := reached.Load()
	calls["UpdateEventSourceMapping abc"](emulate.LocalAWS)
	if reached.Load() == before {
		t.Error("the run's own key: got refused, want the request passed on")
	}
}

// lambdaAt is a Lambda client of endpoint that does not retry.
func lambdaAt(cfg aws.Config, endpoint string) *lambda.Client {
	return lambda.NewFromConfig(cfg, at(endpoint, func(o *lambda.Options) (**string, *int) { return &o.BaseEndpoint, &o.RetryMaxAttempts }))
}

// at sets a client's endpoint and one attempt per call, through fields, which every SDK client's
// Options has.
func at[O any](endpoint string, fields func(*O) (**string, *int)) func(*O) {
	return func(o *O) {
		e, n := fields(o)
		*e, *n = &endpoint, 1
	}
}
