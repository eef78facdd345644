package localrun

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

func TestLambdaFunctionARN(t *testing.T) {
	const fn = "arn:aws:lambda:us-east-1:123456789012:function:"
	for name, want := range map[string]string{
		"results":                           fn + "results",
		"results:live":                      fn + "results:live",
		fn + "results":                      fn + "results",
		"123456789012:function:results":     fn + "results",
		"123456789012:function:results:$1x": fn + "results:$1x",
	} {
		if got := lambdaFunctionARN(name, "us-east-1", "123456789012"); got != want {
			t.Errorf("%q: got %q, want %q", name, got, want)
		}
	}
}

// An Invoke by a session is judged by its role's policies on the function's ARN, qualified when
// the request names a version or alias; a request signed with the run's own key passes.
func TestLambdaInvokeJudged(t *testing.T) {
	r := newTenantAuthRig(t)
	const results = "arn:aws:lambda:us-east-1:123456789012:function:results"
	server := serveGuarded(t, r.auth.guardLambda, "application/json", "{}")
	invoke := allow([]string{"lambda:InvokeFunction"}, []string{results}, nil)
	for i, tc := range []struct {
		name      string
		identity  []statement
		function  string
		qualifier string
		want      bool
	}{
		{"its function, by name", []statement{invoke}, "results", "", true},
		{"its function, by ARN", []statement{invoke}, results, "", true},
		{"another function", []statement{invoke}, "controller", "", false},
		{"its function's alias, allowed only unqualified", []statement{invoke}, "results", "live", false},
		{"no grant", nil, "results", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := r.sessionConfig(t, fmt.Sprintf("fn%d", i), tc.identity)
			c := lambda.NewFromConfig(cfg, func(o *lambda.Options) { o.BaseEndpoint = aws.String(server) })
			in := &lambda.InvokeInput{FunctionName: aws.String(tc.function), Payload: []byte("{}")}
			if tc.qualifier != "" {
				in.Qualifier = aws.String(tc.qualifier)
			}
			_, err := c.Invoke(context.Background(), in)
			wantAllowed(t, err, tc.want, "AccessDeniedException")
		})
	}
	own := lambda.NewFromConfig(emulate.LocalAWS, func(o *lambda.Options) { o.BaseEndpoint = aws.String(server) })
	if _, err := own.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("controller")}); err != nil {
		t.Errorf("the run's own key: got %v, want the invoke passed on", err)
	}
}
