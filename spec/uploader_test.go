package spec

import "testing"

func TestPrincipalARNChecks(t *testing.T) {
	for _, tc := range []struct {
		arn string
		ok  bool
	}{
		{"arn:aws:iam::123456789012:role/platform", true},
		{"arn:aws:iam::123456789012:role/team/platform", true},
		{"arn:aws:iam::123456789012:user/alice", true},
		{"arn:aws-cn:iam::123456789012:role/key-admin", true},
		{"arn:aws:iam::123456789012:root", false},
		{"arn:aws:iam::123456789012:role/*", false},
		{"arn:aws:iam::123456789012:role/key-admin?", false},
		{"arn:aws:sts::123456789012:assumed-role/platform/session", false},
		{"arn:aws:iam::12345:role/platform", false},
		{"123456789012", false},
		{"*", false},
		{"", false},
	} {
		for name, check := range map[string]func(string) error{"CheckUploader": CheckUploader, "CheckKeyAdmin": CheckKeyAdmin} {
			if err := check(tc.arn); (err == nil) != tc.ok {
				t.Errorf("%s(%q) = %v, want ok %v", name, tc.arn, err, tc.ok)
			}
		}
	}
}
