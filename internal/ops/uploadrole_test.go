package ops_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
)

const (
	siloUploader = "arn:aws:iam::123456789012:role/acme-uploader"
	poolUploader = "arn:aws:iam::123456789012:role/shared-uploader"
)

// uploadWorld has a silo tenant acme with an uploader role, a silo tenant globex without one, and
// a pool shared of tenant hooli with the pool's uploader role.
func uploadWorld() *opsfake.World {
	w := opsfake.New(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	acme := opsfake.Tenant("acme", pipeline.OnFailureContinue)
	acme.UploaderRoleARN = siloUploader
	w.AddTenant("TenantPipeline-Tenants-a", acme)
	w.AddTenant("TenantPipeline-Tenants-a", opsfake.Tenant("globex", pipeline.OnFailureContinue))
	w.AddPool("TenantPipeline-Pool-shared", opsfake.Pool("shared"), map[string]string{"hooli": pipeline.OnFailureHalt})
	w.SetUploaderRole("shared", poolUploader)
	return w
}

// TestPresignUploadWithRole: --role signs with a session of the tenant's uploader role: a silo
// tenant's own, assumed without tags (its trust policy allows no sts:TagSession), or its pool's,
// assumed with exactly the tag tenant=<id>; either lasts a minute longer than the URL.
func TestPresignUploadWithRole(t *testing.T) {
	for _, tc := range []struct {
		tenant, wantRole, wantTags, wantPrefix string
	}{
		{"acme", siloUploader, "", "/inbox/acme/"},
		{"hooli", poolUploader, "tenant=hooli", "/hooli/"},
	} {
		t.Run(tc.tenant, func(t *testing.T) {
			w := uploadWorld()
			o := ops.New(w.Clients(), "TenantPipeline")
			o.Now, o.HTTP = func() time.Time { return w.Now }, w.HTTPClient()
			up, err := o.PresignUpload(context.Background(), tc.tenant, "a.csv", ops.PresignOptions{Expires: 30 * time.Minute, Role: true})
			if err != nil {
				t.Fatal(err)
			}
			if up.Role != tc.wantRole {
				t.Errorf("got role %q, want %q", up.Role, tc.wantRole)
			}
			if len(w.AssumeRoles) != 1 {
				t.Fatalf("got %d AssumeRole calls, want 1", len(w.AssumeRoles))
			}
			in := w.AssumeRoles[0]
			var tags []string
			for _, tg := range in.Tags {
				tags = append(tags, aws.ToString(tg.Key)+"="+aws.ToString(tg.Value))
			}
			if got := strings.Join(tags, ","); aws.ToString(in.RoleArn) != tc.wantRole || got != tc.wantTags || aws.ToInt32(in.DurationSeconds) != 1860 {
				t.Errorf("got AssumeRole of %s with tags %q for %ds, want %s with tags %q for 1860s (the URL's 30 minutes and one more)",
					aws.ToString(in.RoleArn), got, aws.ToInt32(in.DurationSeconds), tc.wantRole, tc.wantTags)
			}
			u, err := url.Parse(up.URL)
			if err != nil {
				t.Fatal(err)
			}
			if q := u.Query(); !strings.HasPrefix(q.Get("X-Amz-Credential"), "ASIASESSION1/") || q.Get("X-Amz-Security-Token") != "session-token" {
				t.Errorf("got credential %q, token %q; want the uploader session's", q.Get("X-Amz-Credential"), q.Get("X-Amz-Security-Token"))
			}
			if !strings.Contains(u.Path, tc.wantPrefix+"a.csv") {
				t.Errorf("got path %q, want the tenant's prefix %sa.csv", u.Path, tc.wantPrefix)
			}
		})
	}
}

// TestPresignUploadWithoutRole: a silo tenant without an uploader role is refused with a message
// naming the uploaders field; nothing is assumed.
func TestPresignUploadWithoutRole(t *testing.T) {
	w := uploadWorld()
	o := ops.New(w.Clients(), "TenantPipeline")
	o.Now, o.HTTP = func() time.Time { return w.Now }, w.HTTPClient()
	_, err := o.PresignUpload(context.Background(), "globex", "a.csv", ops.PresignOptions{Expires: time.Hour, Role: true})
	var refused *ops.RefusedError
	want := `tenant globex is a silo tenant without an uploader role: set "uploaders" on the tenant in tenants.json (Props.Uploaders in your own app) and deploy`
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want a refusal containing %q", err, want)
	}
	if len(w.AssumeRoles) != 0 {
		t.Errorf("got %d AssumeRole calls, want none", len(w.AssumeRoles))
	}
}
