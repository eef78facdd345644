package localrun

import (
	"encoding/json"
	"strings"
	"testing"
)

// The evaluation of a session's role policies with the bucket's policy, in AWS's order, against
// the examples of IAM's "Policy evaluation logic" pages and the statements the constructs write:
// an explicit Deny in either wins; an Allow in either allows within the account, though a resource
// policy's Allow that names only the account leaves it to the identity policies; every operator
// and key the emulation supports; and what it does not support fails closed.
func TestPolicyEvaluation(t *testing.T) {
	r := newTenantAuthRig(t)
	const account = "123456789012"
	object := "arn:aws:s3:::ingest/pools/p/a/x.csv"
	all := []string{"arn:aws:s3:::ingest/*"}
	stmt := func(js string) statement {
		var s statement
		if err := json.Unmarshal([]byte(js), &s); err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return s
	}
	anyS3 := allow([]string{"s3:*"}, all, nil)
	put := map[string]string{"aws:SecureTransport": "true", "s3:ObjectCreationOperation": "true", "s3:if-none-match": "*"}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range put {
			out[k] = v
		}
		for k, v := range extra {
			if v == "" {
				delete(out, k)
				continue
			}
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		identity []statement
		bucket   []statement
		action   string
		resource string
		keys     map[string]string
		want     bool
	}{
		// "Example identity-based and resource-based policy evaluation": an identity policy's
		// Deny of every bucket named like *log* wins over the bucket policy's Allow of the user.
		{"AWS's example: the identity Deny wins over the bucket's Allow",
			[]statement{anyS3, stmt(`{"Sid":"DenyS3Logs","Effect":"Deny","Action":"s3:*","Resource":"arn:aws:s3:::*log*"}`)},
			[]statement{stmt(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:role/AWSsexampletheidentityDenywinsoverthebucketsAllow"},"Action":"s3:*","Resource":"arn:aws:s3:::ingest/*"}`)},
			"s3:PutObject", "arn:aws:s3:::ingest/logs/x", put, false},
		{"the bucket's Allow of the role grants without an identity Allow", nil,
			[]statement{stmt(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:role/thebucketsAllowoftherolegrantswithoutanidentityAllow"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::ingest/*"}`)},
			"s3:GetObject", object, put, true},
		{"the bucket's Allow of the account leaves it to the identity", nil,
			[]statement{stmt(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::` + account + `:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::ingest/*"}`)},
			"s3:GetObject", object, put, false},
		{"the bucket's Deny of the account applies", []statement{anyS3},
			[]statement{stmt(`{"Effect":"Deny","Principal":{"AWS":"` + account + `"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::ingest/*"}`)},
			"s3:GetObject", object, put, false},
		{"the bucket's Deny of a service does not apply to a session", []statement{anyS3},
			[]statement{stmt(`{"Effect":"Deny","Principal":{"Service":"logs.amazonaws.com"},"Action":"s3:*","Resource":"arn:aws:s3:::ingest/*"}`)},
			"s3:GetObject", object, put, true},
		{"the bucket's Deny of another role does not apply", []statement{anyS3},
			[]statement{stmt(`{"Effect":"Deny","Principal":{"AWS":"arn:aws:iam::123456789012:role/other"},"Action":"s3:*","Resource":"arn:aws:s3:::ingest/*"}`)},
			"s3:GetObject", object, put, true},

		// The read Deny's exemption by aws:PrincipalArn: a path's wildcard stays within the ARN's
		// last part, and ArnNotLike refuses every other role.
		{"ArnNotLike: a role outside the path is refused", []statement{anyS3},
			[]statement{stmt(`{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::ingest/*","Condition":{"ArnNotLike":{"aws:PrincipalArn":"arn:aws:iam::123456789012:role/tenantpipeline/*"}}}`)},
			"s3:GetObject", object, put, false},
		{"ArnNotLike: a role under the path is exempt", []statement{anyS3},
			[]statement{stmt(`{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::ingest/*","Condition":{"ArnNotLike":{"aws:PrincipalArn":"arn:aws:iam::123456789012:role/*"}}}`)},
			"s3:GetObject", object, put, true},
		{"ArnLike: a wildcard does not cross a colon", []statement{anyS3},
			[]statement{stmt(`{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::ingest/*","Condition":{"ArnLike":{"aws:PrincipalArn":"arn:aws:*:role/*"}}}`)},
			"s3:GetObject", object, put, true},
		{"ArnLike: six parts matched apart", []statement{anyS3},
			[]statement{stmt(`{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::ingest/*","Condition":{"ArnLike":{"aws:PrincipalArn":"arn:aws:iam::*:role/*"}}}`)},
			"s3:GetObject", object, put, false},
		{"ArnEquals: another account", []statement{anyS3},
			[]statement{stmt(`{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::ingest/*","Condition":{"ArnEquals":{"aws:PrincipalArn":"arn:aws:iam::111122223333:role/*"}}}`)},
			"s3:GetObject", object, put, true},

		// The upload Denies: Null "false" AND a negated match on a header the request may omit.
		{"SSE-S3 refused", []statement{anyS3}, []statement{sseKMSOnly}, "s3:PutObject", object, with(map[string]string{"s3:x-amz-server-side-encryption": "AES256"}), false},
		{"SSE-KMS passes", []statement{anyS3}, []statement{sseKMSOnly}, "s3:PutObject", object, with(map[string]string{"s3:x-amz-server-side-encryption": "aws:kms"}), true},
		{"no encryption header passes", []statement{anyS3}, []statement{sseKMSOnly}, "s3:PutObject", object, put, true},
		{"StringNotEqualsIfExists alone refuses no header either way", []statement{anyS3},
			[]statement{stmt(`{"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::ingest/*","Condition":{"StringNotEqualsIfExists":{"s3:x-amz-server-side-encryption":"aws:kms"}}}`)},
			"s3:PutObject", object, put, false},
		{"StringEqualsIfExists: absent holds", []statement{stmt(`{"Effect":"Allow","Action":"s3:PutObject","Resource":"*","Condition":{"StringEqualsIfExists":{"s3:x-amz-storage-class":"STANDARD"}}}`)}, nil,
			"s3:PutObject", object, put, true},
		{"StringEquals: absent does not hold", []statement{stmt(`{"Effect":"Allow","Action":"s3:PutObject","Resource":"*","Condition":{"StringEquals":{"s3:x-amz-storage-class":"STANDARD"}}}`)}, nil,
			"s3:PutObject", object, put, false},
		{"a storage class in the list passes", []statement{anyS3}, []statement{storageClasses}, "s3:PutObject", object, with(map[string]string{"s3:x-amz-storage-class": "INTELLIGENT_TIERING"}), true},
		{"GLACIER refused", []statement{anyS3}, []statement{storageClasses}, "s3:PutObject", object, with(map[string]string{"s3:x-amz-storage-class": "GLACIER"}), false},
		{"StringEqualsIgnoreCase", []statement{stmt(`{"Effect":"Allow","Action":"s3:PutObject","Resource":"*","Condition":{"StringEqualsIgnoreCase":{"s3:x-amz-storage-class":"standard"}}}`)}, nil,
			"s3:PutObject", object, with(map[string]string{"s3:x-amz-storage-class": "STANDARD"}), true},
		{"StringNotLike", []statement{anyS3}, []statement{stmt(`{"Effect":"Deny","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::ingest","Condition":{"StringNotLike":{"s3:prefix":"pools/*"}}}`)},
			"s3:ListBucket", "arn:aws:s3:::ingest", map[string]string{"s3:prefix": "control/"}, false},
		{"SSE-C refused", []statement{anyS3}, []statement{noSSEC}, "s3:PutObject", object, with(map[string]string{"s3:x-amz-server-side-encryption-customer-algorithm": "AES256"}), false},
		{"no SSE-C passes", []statement{anyS3}, []statement{noSSEC}, "s3:PutObject", object, put, true},
		{"an overwrite (no If-None-Match) refused", []statement{anyS3}, []statement{noOverwrite}, "s3:PutObject", object, with(map[string]string{"s3:if-none-match": ""}), false},
		{"a part of a multipart upload passes", []statement{anyS3}, []statement{noOverwrite}, "s3:PutObject", object,
			with(map[string]string{"s3:if-none-match": "", "s3:ObjectCreationOperation": "false"}), true},
		{"a Bool written unquoted", []statement{anyS3},
			[]statement{stmt(`{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::ingest/*","Condition":{"Bool":{"aws:SecureTransport":false}}}`)},
			"s3:PutObject", object, with(map[string]string{"aws:SecureTransport": "false"}), false},

		// A queue's tags, for the core system's wake-ups (attribute-based access control).
		{"a queue tagged for wake-ups", []statement{wakeUps}, nil, "sqs:ChangeMessageVisibility", "arn:aws:sqs:us-east-1:123456789012:q",
			map[string]string{resourceTagsRead: "true", "aws:ResourceTag/wake": "true"}, true},
		{"a queue not tagged", []statement{wakeUps}, nil, "sqs:ChangeMessageVisibility", "arn:aws:sqs:us-east-1:123456789012:q",
			map[string]string{resourceTagsRead: "true"}, false},
		{"a resource whose tags are not read", []statement{wakeUps}, nil, "sqs:ChangeMessageVisibility", "arn:aws:sqs:us-east-1:123456789012:q",
			map[string]string{"aws:ResourceTag/wake": "true"}, false},

		// NotAction: every action but those it lists.
		{"NotAction: an Allow of every other action", []statement{stmt(`{"Effect":"Allow","NotAction":"iam:*","Resource":"*"}`)}, nil,
			"s3:GetObject", object, put, true},
		{"NotAction: an Allow leaves out what it lists", []statement{stmt(`{"Effect":"Allow","NotAction":["s3:Delete*","iam:*"],"Resource":"*"}`)}, nil,
			"s3:DeleteObject", object, put, false},
		{"NotAction: a Deny of every other action", []statement{anyS3},
			[]statement{stmt(`{"Effect":"Deny","Principal":"*","NotAction":"s3:GetObject","Resource":"arn:aws:s3:::ingest/*"}`)},
			"s3:PutObject", object, put, false},
		{"NotAction: a Deny spares what it lists", []statement{anyS3},
			[]statement{stmt(`{"Effect":"Deny","Principal":"*","NotAction":"s3:GetObject","Resource":"arn:aws:s3:::ingest/*"}`)},
			"s3:GetObject", object, put, true},

		// What the emulation does not evaluate fails closed.
		{"NotPrincipal: a Deny applies", []statement{anyS3},
			[]statement{stmt(`{"Effect":"Deny","NotPrincipal":{"AWS":"arn:aws:iam::123456789012:role/op"},"Action":"s3:*","Resource":"arn:aws:s3:::ingest/*"}`)},
			"s3:GetObject", object, put, false},
		{"Action and NotAction in one statement: an Allow does not", []statement{stmt(`{"Effect":"Allow","Action":"s3:*","NotAction":"iam:*","Resource":"*"}`)}, nil,
			"s3:GetObject", object, put, false},
		{"an unknown key: a Deny applies", []statement{anyS3},
			[]statement{stmt(`{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::ingest/*","Condition":{"StringNotEquals":{"aws:SourceVpce":"vpce-1"}}}`)},
			"s3:GetObject", object, put, false},
		{"a set operator: a Deny applies", []statement{anyS3},
			[]statement{stmt(`{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::ingest/*","Condition":{"ForAnyValue:StringLike":{"s3:prefix":"x"}}}`)},
			"s3:GetObject", object, put, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.NewReplacer(" ", "", ",", "", "'", "", "(", "", ")", "", ":", "", "-", "").Replace(tc.name)
			s, _ := r.synthetic(t, name, tc.identity)
			r.auth.mu.Lock()
			r.auth.resourcePolicies = map[string][]statement{"ingest": tc.bucket}
			r.auth.mu.Unlock()
			got, why := r.auth.decide(s, tc.action, tc.resource, tc.keys)
			if got != tc.want {
				t.Errorf("got allowed %v (%s), want %v", got, why, tc.want)
			}
		})
	}
}

// The statements of the constructs' BucketUploadDenies, as the templates resolve them, and the
// core system's wake-up grant.
var (
	wakeUps = mustStatement(`{"Effect":"Allow","Action":"sqs:ChangeMessageVisibility","Resource":"arn:aws:sqs:us-east-1:123456789012:*",
		"Condition":{"StringEquals":{"aws:ResourceTag/wake":"true"}}}`)
	sseKMSOnly = mustStatement(`{"Sid":"NoObjectEncryptionButSSEKMS","Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::ingest/*",
		"Condition":{"Null":{"s3:x-amz-server-side-encryption":"false"},"StringNotEquals":{"s3:x-amz-server-side-encryption":"aws:kms"}}}`)
	storageClasses = mustStatement(`{"Sid":"NoObjectStorageClassButStandardOrIntelligentTiering","Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::ingest/*",
		"Condition":{"Null":{"s3:x-amz-storage-class":"false"},"StringNotEquals":{"s3:x-amz-storage-class":["STANDARD","INTELLIGENT_TIERING"]}}}`)
	noSSEC = mustStatement(`{"Sid":"NoObjectEncryptedWithACustomerProvidedKey","Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::ingest/*",
		"Condition":{"Null":{"s3:x-amz-server-side-encryption-customer-algorithm":"false"}}}`)
	noOverwrite = mustStatement(`{"Sid":"OnlyThePipelineAndOperatorsWriteWithoutIfNoneMatch","Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::ingest/*",
		"Condition":{"ArnNotLike":{"aws:PrincipalArn":["arn:aws:iam::123456789012:role/tenantpipeline/x/*"]},"Null":{"s3:if-none-match":"true"},"Bool":{"s3:ObjectCreationOperation":"true"}}}`)
)

func mustStatement(js string) statement {
	var s statement
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		panic(err)
	}
	return s
}

// unsupported names what a refusal's log line says the emulation does not evaluate.
func TestPolicyUnsupportedNamesWhat(t *testing.T) {
	s := mustStatement(`{"Effect":"Deny","NotPrincipal":{"AWS":"x"},"Action":"s3:*","Resource":"*",
		"Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"},"StringEquals":{"aws:SourceVpce":"v"},"Null":{"s3:prefix":"true"}}}`)
	want := "NotPrincipal, the condition key aws:SourceVpce, the condition operator IpAddress"
	if got := s.unsupported(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := mustStatement(`{"Effect":"Allow","Action":"s3:*","NotAction":"iam:*","Resource":"*"}`).unsupported(); got != "both Action and NotAction" {
		t.Errorf("got %q, want both Action and NotAction", got)
	}
}

// IAM's wildcards as the evaluator matches them, without a regular expression: "*" any run of
// characters (none, or a newline, included), "?" exactly one character (of any width), the rest
// literally, case-insensitively only when asked; a tag's value is literal, a missing tag matches
// nothing, and a "*" backtracks past an earlier partial match.
func TestWildcard(t *testing.T) {
	tags := map[string]string{"tenant": "a*c", "empty": ""}
	for _, tc := range []struct {
		pattern, v string
		fold       bool
		want, ok   bool
	}{
		{"*", "", false, true, true},
		{"*", "any\nthing", false, true, true},
		{"pools/p/*", "pools/p/a/x.csv", false, true, true},
		{"pools/p/*", "pools/q/a/x.csv", false, false, true},
		{"pools/p/?/x.csv", "pools/p/注/x.csv", false, true, true},
		{"pools/p/?/x.csv", "pools/p/ab/x.csv", false, false, true},
		{"a*b*c", "aXbYbZc", false, true, true},
		{"a*b*c", "aXbYbZ", false, false, true},
		{"*.csv", ".csv.csv", false, true, true},
		{"s3:GetObject*", "S3:getobjectversion", true, true, true},
		{"s3:GetObject*", "S3:getobjectversion", false, false, true},
		{"pools/p/${aws:PrincipalTag/tenant}/*", "pools/p/a*c/x.csv", false, true, true},
		{"pools/p/${aws:PrincipalTag/tenant}/*", "pools/p/abc/x.csv", false, false, true},
		{"pools/p/${aws:PrincipalTag/empty}x", "pools/p/x", false, true, true},
		{"pools/p/${aws:PrincipalTag/missing}/*", "pools/p//x", false, false, false},
		{"exact", "exact", false, true, true},
		{"exact", "exact ", false, false, true},
	} {
		got, ok := wildcard(tc.pattern, tags, tc.fold, tc.v)
		if got != tc.want || ok != tc.ok {
			t.Errorf("wildcard(%q, fold=%v) on %q: got %v, %v; want %v, %v", tc.pattern, tc.fold, tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

// A condition on the session's tag (aws:PrincipalTag/<key>): the Deny a pool's tenant roles carry
// against silo tenants' ids applies to a session tagged with one of them, not to another tenant's
// session nor to a session without the tag (a missing key makes StringEquals false).
func TestPolicyPrincipalTagCondition(t *testing.T) {
	r := newTenantAuthRig(t)
	object := "arn:aws:s3:::ingest/control/s1/wake-done.json"
	policy := []statement{
		allow([]string{"s3:*"}, []string{"arn:aws:s3:::ingest/*"}, nil),
		mustStatement(`{"Sid":"NoSiloTenantSessions","Effect":"Deny","Action":"*","Resource":"*","Condition":{"StringEquals":{"aws:PrincipalTag/tenant":["s1","s2"]}}}`),
	}
	s, _ := r.synthetic(t, "PrincipalTagCondition", policy)
	for _, tc := range []struct {
		name string
		tags map[string]string
		want bool
	}{
		{"a silo tenant's id", map[string]string{"tenant": "s1"}, false},
		{"the other silo tenant's id", map[string]string{"tenant": "s2"}, false},
		{"a pooled tenant's id", map[string]string{"tenant": "p1"}, true},
		{"an id that only starts like one", map[string]string{"tenant": "s1x"}, true},
		{"no tenant tag", map[string]string{"team": "s1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.tags = tc.tags
			r.auth.mu.Lock()
			r.auth.resourcePolicies = map[string][]statement{}
			r.auth.mu.Unlock()
			if got, why := r.auth.decide(s, "s3:PutObject", object, nil); got != tc.want {
				t.Errorf("got allowed %v (%s), want %v", got, why, tc.want)
			}
		})
	}
}
