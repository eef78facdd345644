package localrun

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	ststypes "github.com/aws/aws-sdk-go-v2/service/sts/types"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/tenantcreds"
)

// tenantAuthRig is the pool template of testdata/tenantrole with its bucket, the local STS and
// the guarded S3 endpoint.
type tenantAuthRig struct {
	auth *tenantAuth
	role string
	sts  *httptest.Server
	s3   *httptest.Server
	own  *s3.Client // the function's own credentials ("local")
}

func newTenantAuthRig(t *testing.T) *tenantAuthRig {
	t.Helper()
	asm, err := deploy.LoadAssembly("testdata/tenantrole")
	if err != nil {
		t.Fatal(err)
	}
	res, err := deploy.NewResolver(asm, emulate.Region, "123456789012")
	if err != nil {
		t.Fatal(err)
	}
	s := emulate.NewS3(&emulate.APICounter{}, &emulate.RequestMeter{}, emulate.NewSequencers("", 1))
	if err := s.Backend.CreateBucket("ingest"); err != nil {
		t.Fatal(err)
	}
	res.Set(asm.OfType("AWS::S3::Bucket")[0], deploy.Identity{Ref: "ingest", Attrs: map[string]string{"Arn": "arn:aws:s3:::ingest"}})
	role, err := res.ResolveString(asm.OfType("AWS::IAM::Role")[0].Stack, []byte(`{"Fn::GetAtt":["PoolTenantRole0DA6EF0C","Arn"]}`))
	if err != nil {
		t.Fatal(err)
	}
	r := &tenantAuthRig{auth: newTenantAuth(asm, res), role: role}
	r.sts = httptest.NewServer(http.HandlerFunc(r.auth.serveSTS))
	r.s3 = httptest.NewServer(r.auth.guardS3(s.Handler(true)))
	t.Cleanup(func() { r.sts.Close(); r.s3.Close() })
	r.own = r.client(aws.NewCredentialsCache(emulate.LocalAWS.Credentials))
	for _, k := range []string{"pools/p/a/x.csv", "pools/p/b/x.csv", "work/a/e/manifest", "work/b/e/manifest"} {
		if _, err := r.own.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("ingest"), Key: aws.String(k), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r *tenantAuthRig) client(creds aws.CredentialsProvider) *s3.Client {
	cfg := emulate.LocalAWS.Copy()
	cfg.Credentials = creds
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint = aws.String(r.s3.URL); o.UsePathStyle = true })
}

func (r *tenantAuthRig) stsClient() *sts.Client {
	return sts.NewFromConfig(emulate.LocalAWS, func(o *sts.Options) { o.BaseEndpoint = aws.String(r.sts.URL) })
}

func errorCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// A session for tenant a (made as the functions make it, tenantcreds over the local STS) reads
// and writes a's keys and is refused b's with S3's AccessDenied: a wrong key, or an execution of
// b processed with a's tag, cannot reach b's objects. The function's own credentials are unchanged.
func TestTenantSessionReadsOnlyItsTenant(t *testing.T) {
	r := newTenantAuthRig(t)
	creds, err := tenantcreds.New(r.stsClient(), r.role, 0).For("a")
	if err != nil {
		t.Fatal(err)
	}
	a := r.client(creds)
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		client   *s3.Client
		get, put string
		wantCode string // "": allowed
	}{
		{"a's file", a, "pools/p/a/x.csv", "", ""},
		{"a's manifest", a, "work/a/e/manifest", "", ""},
		{"a writes its manifest", a, "", "work/a/e2/manifest", ""},
		{"b's file", a, "pools/p/b/x.csv", "", "AccessDenied"},
		{"b's manifest (b's execution with a's tag)", a, "work/b/e/manifest", "", "AccessDenied"},
		{"a writes b's manifest", a, "", "work/b/e2/manifest", "AccessDenied"},
		{"a's id further down b's key", a, "pools/p/b/a/x.csv", "", "AccessDenied"},
		{"control objects are not granted here", a, "control/a/paused.json", "", "AccessDenied"},
		{"the function's own credentials read b's file", r.own, "pools/p/b/x.csv", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.get != "" {
				var out *s3.GetObjectOutput
				if out, err = tc.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("ingest"), Key: aws.String(tc.get)}); err == nil {
					out.Body.Close()
				}
			} else {
				_, err = tc.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("ingest"), Key: aws.String(tc.put), Body: strings.NewReader("m")})
			}
			if got := errorCode(err); got != tc.wantCode {
				t.Errorf("got error %q (%v), want %q", got, err, tc.wantCode)
			}
		})
	}
}

// The policy evaluation, for what the local run has no emulator of (Secrets Manager) and for
// DynamoDB tables and listings: a's session gets a's secret, table and prefixes, never b's.
func TestTenantSessionPolicy(t *testing.T) {
	r := newTenantAuthRig(t)
	a := tenantSession{role: r.role, tags: map[string]string{"tenant": "a"}}
	secret := func(name string) string {
		return "arn:aws:secretsmanager:" + emulate.Region + ":123456789012:secret:" + name
	}
	table := func(name string) string { return "arn:aws:dynamodb:" + emulate.Region + ":123456789012:table/" + name }
	for _, tc := range []struct {
		name             string
		s                tenantSession
		action, resource string
		keys             map[string]string
		want             bool
	}{
		{"a's secret", a, "secretsmanager:GetSecretValue", secret("pipeline/a-AbCdEf"), nil, true},
		{"b's secret", a, "secretsmanager:GetSecretValue", secret("pipeline/b-AbCdEf"), nil, false},
		{"a-b's secret is not a's", a, "secretsmanager:GetSecretValue", secret("pipeline/a-b-AbCdEf"), nil, false},
		{"a's table", a, "dynamodb:PutItem", table("pool-a"), nil, true},
		{"b's table", a, "dynamodb:PutItem", table("pool-b"), nil, false},
		{"a's table, another action", a, "dynamodb:DeleteItem", table("pool-a"), nil, false},
		{"listing a's prefix", a, "s3:ListBucket", "arn:aws:s3:::ingest", map[string]string{"s3:prefix": "pools/p/a/x"}, true},
		{"listing b's prefix", a, "s3:ListBucket", "arn:aws:s3:::ingest", map[string]string{"s3:prefix": "pools/p/b/"}, false},
		{"listing without a prefix", a, "s3:ListBucket", "arn:aws:s3:::ingest", nil, false},
		{"a session without the tag", tenantSession{role: r.role, tags: map[string]string{"team": "a"}}, "s3:GetObject", "arn:aws:s3:::ingest/pools/p/a/x.csv", nil, false},
		{"a tag value with a wildcard is literal", tenantSession{role: r.role, tags: map[string]string{"tenant": "*"}}, "s3:GetObject", "arn:aws:s3:::ingest/pools/p/a/x.csv", nil, false},
		{"an unknown role", tenantSession{role: "arn:aws:iam::123456789012:role/other", tags: a.tags}, "s3:GetObject", "arn:aws:s3:::ingest/pools/p/a/x.csv", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.auth.allowed(tc.s, tc.action, tc.resource, tc.keys); got != tc.want {
				t.Errorf("got allowed %v, want %v", got, tc.want)
			}
		})
	}
}

// The local STS refuses a session without exactly the tenant tag, as the role's trust policy does.
func TestLocalAssumeRoleNeedsTheTenantTag(t *testing.T) {
	r := newTenantAuthRig(t)
	for _, tc := range []struct {
		name     string
		role     string
		tags     []ststypes.Tag
		wantCode string
	}{
		{"tenant tag", "", []ststypes.Tag{{Key: aws.String("tenant"), Value: aws.String("a")}}, ""},
		{"no tag", "", nil, "AccessDenied"},
		{"another tag too", "", []ststypes.Tag{{Key: aws.String("tenant"), Value: aws.String("a")}, {Key: aws.String("team"), Value: aws.String("x")}}, "AccessDenied"},
		{"empty tenant", "", []ststypes.Tag{{Key: aws.String("tenant"), Value: aws.String("")}}, "AccessDenied"},
		{"unknown role", "arn:aws:iam::123456789012:role/other", []ststypes.Tag{{Key: aws.String("tenant"), Value: aws.String("a")}}, "AccessDenied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			role := tc.role
			if role == "" {
				role = r.role
			}
			p := stscreds.NewAssumeRoleProvider(r.stsClient(), role, func(o *stscreds.AssumeRoleOptions) { o.Tags = tc.tags })
			_, err := p.Retrieve(context.Background())
			if got := errorCode(err); got != tc.wantCode {
				t.Errorf("got %q (%v), want %q", got, err, tc.wantCode)
			}
		})
	}
}
