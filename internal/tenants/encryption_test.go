package tenants

import (
	"reflect"
	"strings"
	"testing"
)

func TestEncryption(t *testing.T) {
	const arn = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	tenantsJSON := `"tenants": [{"id": "acme", "registerUrl": "https://core.example.com/records"}]`
	for _, tc := range []struct {
		name, encryption string
		want             *Encryption
		wantErr          []string
	}{
		{name: "absent", encryption: ""},
		{name: "null", encryption: `"encryption": null,`},
		{name: "create", encryption: `"encryption": {"key": "create"},`, want: &Encryption{Key: "create"}},
		{name: "key ARN", encryption: `"encryption": {"keyArn": "` + arn + `"},`, want: &Encryption{KeyARN: arn}},
		{name: "multi-Region key", encryption: `"encryption": {"keyArn": "arn:aws-us-gov:kms:us-gov-west-1:111122223333:key/mrk-1234abcd12ab34cd56ef1234567890ab"},`,
			want: &Encryption{KeyARN: "arn:aws-us-gov:kms:us-gov-west-1:111122223333:key/mrk-1234abcd12ab34cd56ef1234567890ab"}},
		{name: "both", encryption: `"encryption": {"key": "create", "keyArn": "` + arn + `"},`, wantErr: []string{`"key" and "keyArn" are both set`}},
		{name: "neither", encryption: `"encryption": {},`, wantErr: []string{`encryption: set {"key": "create"}`}},
		{name: "bad key", encryption: `"encryption": {"key": "new"},`, wantErr: []string{`encryption.key "new" is invalid`}},
		{name: "alias ARN", encryption: `"encryption": {"keyArn": "arn:aws:kms:eu-west-1:111122223333:alias/pipeline"},`,
			wantErr: []string{`encryption.keyArn "arn:aws:kms:eu-west-1:111122223333:alias/pipeline" is not a KMS key ARN`}},
		{name: "short account", encryption: `"encryption": {"keyArn": "arn:aws:kms:eu-west-1:1111:key/1234abcd-12ab-34cd-56ef-1234567890ab"},`,
			wantErr: []string{`encryption.keyArn`, `is not a KMS key ARN`}},
		{name: "unknown field", encryption: `"encryption": {"key": "create", "rotation": true},`, wantErr: []string{`encryption: unknown field "rotation"`}},
		{name: "misspelt field", encryption: `"encryption": {"keyARN": "` + arn + `"},`, wantErr: []string{`encryption: unknown field "keyARN" (did you mean "keyArn"?)`}},
		{name: "admins", encryption: `"encryption": {"key": "create", "admins": ["arn:aws:iam::111122223333:role/key-admin", "arn:aws:iam::111122223333:user/ops/alice"]},`,
			want: &Encryption{Key: "create", Admins: []string{"arn:aws:iam::111122223333:role/key-admin", "arn:aws:iam::111122223333:user/ops/alice"}}},
		{name: "admin root", encryption: `"encryption": {"key": "create", "admins": ["arn:aws:iam::111122223333:root"]},`,
			wantErr: []string{`encryption.admins[0]: "arn:aws:iam::111122223333:root" is not an IAM role or user ARN`}},
		{name: "admin wildcard", encryption: `"encryption": {"key": "create", "admins": ["arn:aws:iam::111122223333:role/key-admin", "arn:aws:iam::111122223333:role/*"]},`,
			wantErr: []string{`encryption.admins[1]: "arn:aws:iam::111122223333:role/*" is not an IAM role or user ARN`}},
		{name: "admin session", encryption: `"encryption": {"key": "create", "admins": ["arn:aws:sts::111122223333:assumed-role/key-admin/alice"]},`,
			wantErr: []string{`encryption.admins[0]:`, `not an IAM role or user ARN`}},
		{name: "admin twice", encryption: `"encryption": {"key": "create", "admins": ["arn:aws:iam::111122223333:role/a", "arn:aws:iam::111122223333:role/a"]},`,
			wantErr: []string{`encryption.admins[1]: "arn:aws:iam::111122223333:role/a" is listed twice`}},
		{name: "admins of an imported key", encryption: `"encryption": {"keyArn": "` + arn + `", "admins": ["arn:aws:iam::111122223333:role/key-admin"]},`,
			wantErr: []string{`encryption.admins is set with "keyArn"`}},
		{name: "wrong type", encryption: `"encryption": "create",`, wantErr: []string{`"encryption": `}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte("{"+tc.encryption+tenantsJSON+"}"), Options{})
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("got no error, want %q", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("got %q, want it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == nil && f.Encryption != nil:
				t.Errorf("got %+v, want no encryption", f.Encryption)
			case tc.want != nil && (f.Encryption == nil || !reflect.DeepEqual(*f.Encryption, *tc.want)):
				t.Errorf("got %+v, want %+v", f.Encryption, tc.want)
			}
		})
	}
}

func TestKeyARNParts(t *testing.T) {
	p, r, a := KeyARNParts("arn:aws-cn:kms:cn-north-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab")
	if p != "aws-cn" || r != "cn-north-1" || a != "111122223333" {
		t.Errorf("got %q %q %q, want aws-cn cn-north-1 111122223333", p, r, a)
	}
}
