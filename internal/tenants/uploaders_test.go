package tenants

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestTenantUploaders: a silo tenant's uploaders are read as they are, role and user ARNs with or
// without a path, in every partition.
func TestTenantUploaders(t *testing.T) {
	want := []string{"arn:aws:iam::123456789012:role/platform", "arn:aws:iam::123456789012:role/svc/upload-vendor", "arn:aws-cn:iam::123456789012:user/ci"}
	b, _ := json.Marshal(want)
	f, err := Parse([]byte(`{"tenants": [{"id": "a", "uploaders": `+string(b)+`}, {"id": "b"}]}`), Options{RegisterURL: "https://core.example.com/records"})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Tenants[0].Uploaders; !slices.Equal(got, want) {
		t.Errorf("tenant a: got uploaders %v, want %v", got, want)
	}
	if got := f.Tenants[1].Uploaders; got != nil {
		t.Errorf("tenant b: got uploaders %v, want none", got)
	}
}

// TestTenantUploadersRefused: a silo tenant's uploaders are checked as a pool's are (the trust
// policy names principals exactly), and a pooled tenant's uploaders are its pool's.
func TestTenantUploadersRefused(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       []string
	}{
		{"wildcard", `{"tenants": [{"id": "a", "uploaders": ["arn:aws:iam::123456789012:role/platform/*"]}]}`,
			[]string{`uploaders (tenant "a"): "arn:aws:iam::123456789012:role/platform/*" is not an IAM role or user ARN: name the role your platform's service runs as`}},
		{"question mark", `{"tenants": [{"id": "a", "uploaders": ["arn:aws:iam::123456789012:role/platfor?"]}]}`,
			[]string{`uploaders (tenant "a"): "arn:aws:iam::123456789012:role/platfor?" is not an IAM role or user ARN`}},
		{"assumed-role session", `{"tenants": [{"id": "a", "uploaders": ["arn:aws:sts::123456789012:assumed-role/platform/s1"]}]}`,
			[]string{`uploaders (tenant "a"): "arn:aws:sts::123456789012:assumed-role/platform/s1" is not an IAM role or user ARN`}},
		{"whole account", `{"tenants": [{"id": "a", "uploaders": ["arn:aws:iam::123456789012:root"]}]}`,
			[]string{`uploaders (tenant "a"): "arn:aws:iam::123456789012:root" is not an IAM role or user ARN`}},
		{"account id alone", `{"tenants": [{"id": "a", "uploaders": ["123456789012"]}]}`,
			[]string{`uploaders (tenant "a"): "123456789012" is not an IAM role or user ARN`}},
		{"every bad one told", `{"tenants": [{"id": "a", "uploaders": ["x", "arn:aws:iam::123456789012:role/ok", "y"]}]}`,
			[]string{`uploaders (tenant "a"): "x" is not`, `uploaders (tenant "a"): "y" is not`}},
		{"not a list", `{"tenants": [{"id": "a", "uploaders": "arn:aws:iam::123456789012:role/platform"}]}`,
			[]string{`tenants[0] ("a"): uploaders: got JSON string, want an array`}},
		{"pooled tenant", `{"tenants": [{"id": "a", "tier": "pool", "uploaders": ["arn:aws:iam::123456789012:role/platform"]}]}`,
			[]string{`uploaders (tenant "a"): is set, but the tenant is pooled: its uploaders assume the pool's uploader role with the session tag tenant=a; list them in pools.default.uploaders instead, or set "tier": "silo"`}},
		{"pooled tenant of a named pool", `{"pools": {"big": {}}, "tenants": [{"id": "a", "tier": "pool", "pool": "big", "uploaders": ["arn:aws:iam::123456789012:role/platform"]}]}`,
			[]string{`list them in pools.big.uploaders instead`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.json), Options{RegisterURL: "https://core.example.com/records"})
			if err == nil {
				t.Fatal("Parse accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\nlacks %q", err, w)
				}
			}
			if tc.name == "every bad one told" && strings.Contains(err.Error(), "role/ok") {
				t.Errorf("error\n%v\nnames the valid uploader", err)
			}
		})
	}
}
