package localrun

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// GetSecretValue by a session is judged by its role's policies: a tenant session reads its own
// tenant's secret under the pool's prefix and no other, a role without the grant reads none, the
// run's own key reads any; every value names its secret, and a secret named by anything but its
// ARN is not found.
func TestSecretsJudged(t *testing.T) {
	r := newTenantAuthRig(t)
	c := &Cloud{auth: r.auth}
	server := serveTest(t, http.HandlerFunc(c.serveSecrets))
	const prefix = "arn:aws:secretsmanager:us-east-1:123456789012:secret:tenantpipeline/"
	own, other := prefix+"a-AbCdEf", prefix+"b-AbCdEf"
	grant := allow([]string{"secretsmanager:GetSecretValue"}, []string{prefix + "${aws:PrincipalTag/tenant}-??????"}, nil)
	get := func(cfg aws.Config, id string) (string, error) {
		out, err := secretsmanager.NewFromConfig(cfg, func(o *secretsmanager.Options) { o.BaseEndpoint = aws.String(server) }).
			GetSecretValue(context.Background(), &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
		if err != nil {
			return "", err
		}
		return aws.ToString(out.SecretString), nil
	}
	for i, tc := range []struct {
		name     string
		identity []statement
		secret   string
		want     bool
	}{
		{"its tenant's secret", []statement{grant}, own, true},
		{"another tenant's secret", []statement{grant}, other, false},
		{"no grant (a pool's Split)", nil, own, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			value, err := get(r.sessionConfig(t, fmt.Sprintf("sec%d", i), tc.identity), tc.secret)
			wantAllowed(t, err, tc.want, "AccessDeniedException")
			if tc.want && value != "local-secret:tenantpipeline/a" {
				t.Errorf("got %q, want local-secret:tenantpipeline/a", value)
			}
		})
	}
	if v, err := get(emulate.LocalAWS, other); err != nil || v != "local-secret:tenantpipeline/b" {
		t.Errorf("the run's own key: got %q, %v; want local-secret:tenantpipeline/b", v, err)
	}
	_, err := get(emulate.LocalAWS, "tenantpipeline/a")
	wantAllowed(t, err, false, "ResourceNotFoundException")
}
