package localrun

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// The local IAM API makes a role as IAM does, for whoever may call iam:CreateRole on its ARN: a
// name is taken once (case-insensitively, the templates' roles' names included), a malformed name,
// path or policy is refused with IAM's error, and the templates' roles cannot be changed. A
// created role is then judged by its own trust policy and inline policies.
func TestLocalIAM(t *testing.T) {
	r := newTenantAuthRig(t)
	srv := httptest.NewServer(r.auth.guardControlPlane(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		form, _ := url.ParseQuery(string(body))
		r.auth.serveIAM(w, form)
	})))
	t.Cleanup(srv.Close)
	client := func(cfg aws.Config) *iam.Client {
		return iam.NewFromConfig(cfg, func(o *iam.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	}
	ctx := context.Background()
	admin := client(r.sessionConfig(t, "admin", outsiderStatements))
	nobody := client(r.sessionConfig(t, "nobody", []statement{allow([]string{"iam:CreateRole"}, []string{"arn:aws:iam::123456789012:role/other/*"}, nil)}))
	own := client(emulate.LocalAWS)
	const path = "/tenantpipeline/App/"
	trust := `{"Version":"2012-10-17","Statement":{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"sts:AssumeRole"}}`
	templateRole := r.role[strings.LastIndex(r.role, "/")+1:]

	created, err := admin.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("intruder"), Path: aws.String(path), AssumeRolePolicyDocument: aws.String(trust)})
	if err != nil {
		t.Fatalf("CreateRole: %v", err)
	}
	arn := "arn:aws:iam::123456789012:role" + path + "intruder"
	if got := aws.ToString(created.Role.Arn); got != arn || !strings.HasPrefix(aws.ToString(created.Role.RoleId), "AROA") || aws.ToString(created.Role.Path) != path {
		t.Errorf("created %s (id %s, path %s), want %s with an AROA id", got, aws.ToString(created.Role.RoleId), aws.ToString(created.Role.Path), arn)
	}
	if got, err := own.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("intruder")}); err != nil || aws.ToString(got.Role.Arn) != arn {
		t.Errorf("GetRole: %v, %v; want %s", got, err, arn)
	}
	for _, tc := range []struct {
		name string
		do   func() error
		want string
	}{
		{"CreateRole of a taken name, another case", func() error {
			_, err := admin.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("INTRUDER"), AssumeRolePolicyDocument: aws.String(trust)})
			return err
		}, "EntityAlreadyExists"},
		{"CreateRole of a template role's name", func() error {
			_, err := admin.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(templateRole), Path: aws.String(path), AssumeRolePolicyDocument: aws.String(trust)})
			return err
		}, "EntityAlreadyExists"},
		{"CreateRole of a bad name", func() error {
			_, err := admin.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("a/b"), AssumeRolePolicyDocument: aws.String(trust)})
			return err
		}, "ValidationError"},
		{"CreateRole under a bad path", func() error {
			_, err := admin.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("x"), Path: aws.String("no-slashes"), AssumeRolePolicyDocument: aws.String(trust)})
			return err
		}, "ValidationError"},
		{"CreateRole with a malformed trust", func() error {
			_, err := admin.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("x"), AssumeRolePolicyDocument: aws.String("{")})
			return err
		}, "MalformedPolicyDocument"},
		{"CreateRole without iam:CreateRole on its ARN", func() error {
			_, err := nobody.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("x"), Path: aws.String(path), AssumeRolePolicyDocument: aws.String(trust)})
			return err
		}, "AccessDenied"},
		{"PutRolePolicy with no statement", func() error {
			_, err := admin.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(templateRole), PolicyName: aws.String("p"), PolicyDocument: aws.String(`{"Statement":[]}`)})
			return err
		}, "MalformedPolicyDocument"},
		{"PutRolePolicy on a template role", func() error {
			_, err := admin.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(templateRole), PolicyName: aws.String("p"),
				PolicyDocument: aws.String(`{"Statement":{"Effect":"Allow","Action":"*","Resource":"*"}}`)})
			return err
		}, "InvalidAction"},
		{"PutRolePolicy on no role", func() error {
			_, err := admin.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String("nobody"), PolicyName: aws.String("p"),
				PolicyDocument: aws.String(`{"Statement":{"Effect":"Allow","Action":"*","Resource":"*"}}`)})
			return err
		}, "NoSuchEntity"},
		{"DeleteRole of a template role", func() error {
			_, err := admin.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(templateRole)})
			return err
		}, "InvalidAction"},
	} {
		if err := tc.do(); errorCode(err) != tc.want {
			t.Errorf("%s: got %q (%v), want %s", tc.name, errorCode(err), err, tc.want)
		}
	}

	// Its own trust and policies decide.
	if _, err := admin.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String("intruder"), PolicyName: aws.String("admin"),
		PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`)}); err != nil {
		t.Fatalf("PutRolePolicy: %v", err)
	}
	if ok, why := r.auth.trusts(nil, arn, nil); !ok {
		t.Errorf("the run's own key may not assume the role its trust names the account for: %s", why)
	}
	if ok, _ := r.auth.trusts(nil, arn, map[string]string{"tenant": "a"}); ok {
		t.Error("the role's trust allows no sts:TagSession, but a tagged session was allowed")
	}
	st, err := r.auth.roleStatements(arn)
	if err != nil || len(st) != 1 || st[0].Effect != "Allow" {
		t.Errorf("the role's statements: %v, %v; want its inline policy's Allow", st, err)
	}
	if _, err := admin.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String("intruder")}); errorCode(err) != "DeleteConflict" {
		t.Errorf("DeleteRole with an inline policy: got %q (%v), want DeleteConflict", errorCode(err), err)
	}
}
