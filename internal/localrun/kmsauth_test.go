package localrun

import (
	"fmt"
	"testing"
)

// A KMS call S3 makes for a caller is judged by the key's policy and the caller's: the default key
// policy's root statement lets the caller's own Allow (through S3, for the bucket's objects) use the
// key; without it no identity policy can; a key policy that names the role allows by itself; an
// explicit Deny refuses; the service and the encryption context must be those the Allow names.
func TestKMSCallsJudgedByTheKeyPolicy(t *testing.T) {
	r := newTenantAuthRig(t)
	const key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	root := mustStatement(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"kms:*","Resource":"*"}`)
	rootButDeletion := mustStatement(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"NotAction":["kms:ScheduleKeyDeletion","kms:DisableKey"],"Resource":"*"}`)
	use := mustStatement(`{"Effect":"Allow","Action":["kms:GenerateDataKey","kms:Decrypt"],"Resource":"` + key + `",
		"Condition":{"StringEquals":{"kms:ViaService":"s3.us-east-1.amazonaws.com"},"StringLike":{"kms:EncryptionContext:aws:s3:arn":"arn:aws:s3:::ingest/pools/p/${aws:PrincipalTag/tenant}/*"}}}`)
	object := map[string]string{"aws:s3:arn": "arn:aws:s3:::ingest/pools/p/a/x.csv"}
	for i, tc := range []struct {
		name      string
		keyPolicy []statement
		identity  []statement
		service   string
		context   map[string]string
		want      bool
	}{
		{"the root statement and the role's Allow", []statement{root}, []statement{use}, "s3", object, true},
		{"another tenant's object", []statement{root}, []statement{use}, "s3", map[string]string{"aws:s3:arn": "arn:aws:s3:::ingest/pools/p/b/x.csv"}, false},
		{"through another service", []statement{root}, []statement{use}, "sqs", object, false},
		{"without the root statement", nil, []statement{use}, "s3", object, false},
		{"the root statement, no Allow of the role", []statement{root}, nil, "s3", object, false},
		{"a key policy naming the role", []statement{mustStatement(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:role/kms5"},"Action":"kms:GenerateDataKey","Resource":"*"}`)}, nil, "s3", object, true},
		{"the role's own Deny", []statement{root}, []statement{use, deny([]string{"kms:*"}, []string{"*"}, nil)}, "s3", object, false},
		{"the key policy's Deny", []statement{root, mustStatement(`{"Effect":"Deny","Principal":"*","Action":"kms:*","Resource":"*","Condition":{"StringNotEquals":{"kms:ViaService":"sqs.us-east-1.amazonaws.com"}}}`)}, []statement{use}, "s3", object, false},
		{"the account statement that holds back deletion", []statement{rootButDeletion}, []statement{use}, "s3", object, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := r.synthetic(t, fmt.Sprintf("kms%d", i), tc.identity)
			r.auth.mu.Lock()
			r.auth.resourcePolicies = map[string][]statement{key: tc.keyPolicy}
			r.auth.mu.Unlock()
			if got, why := r.auth.kmsAllowed(s, "kms:GenerateDataKey", key, tc.service, tc.context, true); got != tc.want {
				t.Errorf("got %v (%s), want %v", got, why, tc.want)
			}
		})
	}
}

// The account statement of a key NewKey creates leaves out what only the key's administrators may
// do: a role whose own policy allows kms:* may use the key, and may not schedule its deletion.
func TestKMSAccountStatementHoldsBackDeletion(t *testing.T) {
	r := newTenantAuthRig(t)
	const key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	account := mustStatement(`{"Sid":"TenantPipelineAccountUsesTheKey","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},
		"NotAction":["kms:ScheduleKeyDeletion","kms:DisableKey","kms:DisableKeyRotation","kms:DeleteImportedKeyMaterial"],"Resource":"*"}`)
	s, _ := r.synthetic(t, "kmsall", []statement{mustStatement(`{"Effect":"Allow","Action":"kms:*","Resource":"*"}`)})
	r.auth.mu.Lock()
	r.auth.resourcePolicies = map[string][]statement{key: {account}}
	r.auth.mu.Unlock()
	for action, want := range map[string]bool{"kms:GenerateDataKey": true, "kms:Decrypt": true, "kms:ScheduleKeyDeletion": false, "kms:DisableKey": false} {
		if got, why := r.auth.kmsAllowed(s, action, key, "s3", nil, true); got != want {
			t.Errorf("%s: got %v (%s), want %v", action, got, why, want)
		}
	}
}
