package test

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/stacks"
)

// The ingest bucket refuses what the pipeline cannot honour: SSE-C always; with a customer-managed
// key, another encryption or another key; a storage class but STANDARD and INTELLIGENT_TIERING;
// and, from everyone but the pipeline's roles and the operators, a write without If-None-Match.
// The statements are written out here as S3's and IAM's pages give them, not taken from the
// construct:
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/ServerSideEncryptionCustomerKeys.html
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html#require-sse-kms
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html

// The Sids of the upload Denies.
const (
	sidSSEC          = "NoObjectEncryptedWithACustomerProvidedKey"
	sidSSEKMS        = "NoObjectEncryptionButSSEKMS"
	sidKey           = "NoObjectKMSKeyButThePipelines"
	sidStorageClass  = "NoObjectStorageClassButStandardOrIntelligentTiering"
	sidNoOverwrite   = "OnlyThePipelineAndOperatorsWriteWithoutIfNoneMatch"
	sidControlWrites = "OnlyThePipelineAndOperatorsWriteControlWorkQuarantine"
	sidReadDeny      = "OnlyThePipelineAndOperatorsReadObjects"
)

// uploadDenySids are the Sids of the upload Denies.
var uploadDenySids = map[string]bool{sidSSEC: true, sidSSEKMS: true, sidKey: true, sidStorageClass: true, sidNoOverwrite: true}

// uploadDenies are the exact statements, by Sid, that a bucket's policy carries for the bucket's
// ARN bucketArn (a template value), the key's ARN keyArn (nil: no key), the pipeline's roles
// (exactRoles) and the operators: the upload Denies and the read Deny, which keeps everyone but the pipeline's roles
// and the operators from reading the bucket's objects.
func uploadDenies(bucketArn, keyArn any, roles []any, operatorARNs ...any) map[string]map[string]any {
	objects := map[string]any{"Fn::Join": []any{"", []any{bucketArn, "/*"}}}
	deny := func(sid string, condition map[string]any) map[string]any {
		return map[string]any{"Sid": sid, "Effect": "Deny", "Principal": "*", "Action": "s3:PutObject", "Resource": objects, "Condition": condition}
	}
	exempt := append(slices.Clone(roles), operatorARNs...)
	out := map[string]map[string]any{
		sidReadDeny: {"Sid": sidReadDeny, "Effect": "Deny", "Principal": "*", "Action": []any{"s3:GetObject", "s3:GetObjectVersion"}, "Resource": objects,
			"Condition": map[string]any{"ArnNotLike": map[string]any{"aws:PrincipalArn": exempt}}},
		sidSSEC: deny(sidSSEC, map[string]any{"Null": map[string]any{"s3:x-amz-server-side-encryption-customer-algorithm": "false"}}),
		sidStorageClass: deny(sidStorageClass, map[string]any{
			"Null":            map[string]any{"s3:x-amz-storage-class": "false"},
			"StringNotEquals": map[string]any{"s3:x-amz-storage-class": []any{"STANDARD", "INTELLIGENT_TIERING"}},
		}),
		sidNoOverwrite: deny(sidNoOverwrite, map[string]any{
			"Null":       map[string]any{"s3:if-none-match": "true"},
			"Bool":       map[string]any{"s3:ObjectCreationOperation": "true"},
			"ArnNotLike": map[string]any{"aws:PrincipalArn": exempt},
		}),
	}
	if keyArn != nil {
		out[sidSSEKMS] = deny(sidSSEKMS, map[string]any{
			"Null":            map[string]any{"s3:x-amz-server-side-encryption": "false"},
			"StringNotEquals": map[string]any{"s3:x-amz-server-side-encryption": "aws:kms"},
		})
		out[sidKey] = deny(sidKey, map[string]any{
			"Null":            map[string]any{"s3:x-amz-server-side-encryption-aws-kms-key-id": "false"},
			"StringNotEquals": map[string]any{"s3:x-amz-server-side-encryption-aws-kms-key-id": keyArn},
		})
	}
	return out
}

// sidCounts counts the statements of each Sid in the template's bucket policies.
func sidCounts(t *testing.T, tpl map[string]any) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, pol := range byType(tpl, "AWS::S3::BucketPolicy") {
		for _, st := range get(t, props(pol), "PolicyDocument", "Statement").([]any) {
			if sid, ok := st.(map[string]any)["Sid"].(string); ok {
				n[sid]++
			}
		}
	}
	return n
}

// checkUploadDenies asserts that the template's bucket policy holds exactly one of each statement
// of want, and none of the key's statements that want lacks.
func checkUploadDenies(t *testing.T, tpl assertions.Template, want map[string]map[string]any) {
	t.Helper()
	for sid, st := range want {
		t.Run(sid, func(t *testing.T) { hasStatement(t, tpl, "AWS::S3::BucketPolicy", nil, st) })
	}
	counts := sidCounts(t, templateJSON(tpl))
	for _, sid := range []string{sidSSEC, sidSSEKMS, sidKey, sidStorageClass, sidNoOverwrite, sidControlWrites, sidReadDeny} {
		wantN := 0
		if _, ok := want[sid]; ok || sid == sidControlWrites {
			wantN = 1
		}
		if counts[sid] != wantN {
			t.Errorf("got %d statements %s in the bucket's policy, want %d", counts[sid], sid, wantN)
		}
	}
}

// TestBucketRefusesWhatThePipelineCannotHonour: a bucket created in the app gets the upload
// Denies from the constructs, in both tiers, with and without a customer-managed key; with
// several silo tenants and pools on one bucket, still one statement of each.
func TestBucketRefusesWhatThePipelineCannotHonour(t *testing.T) {
	ops := tenantpipeline.Operators{PrincipalARNs: []string{operatorPattern}}
	for _, tc := range []struct {
		name         string
		silos, pools int
		withKey      bool
	}{
		{"silo", 1, 0, false},
		{"silo with a key", 1, 0, true},
		{"pool", 0, 1, false},
		{"pool with a key", 0, 1, true},
		{"two silos and two pools with a key", 2, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := testApp(t)
			stack := awscdk.NewStack(app, jsii.String("Refuses"), nil)
			bprops := &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true), Versioned: jsii.Bool(true), EnforceSSL: jsii.Bool(true)}
			if tc.withKey {
				key := awskms.NewKey(stack, jsii.String("Key"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
				bprops.Encryption, bprops.EncryptionKey, bprops.BucketKeyEnabled = awss3.BucketEncryption_KMS, key, jsii.Bool(true)
			}
			bucket := awss3.NewBucket(stack, jsii.String("Ingest"), bprops)
			shared := tenantpipeline.SharedProps{Operators: ops}
			for i, id := range []string{"acme", "initech"}[:tc.silos] {
				tenantpipeline.New(stack, "Tenant-"+id, &tenantpipeline.Props{
					Tenant: tenantpipeline.Tenant{ID: id, RegisterURL: "https://core.example.com/" + id, Prefix: "inbox/" + strings.Repeat("x", i) + id + "/"},
					Bucket: bucket, SharedProps: shared,
				})
			}
			for _, name := range []string{"p", "q"}[:tc.pools] {
				tenantpipeline.NewPool(stack, "Pool-"+name, &tenantpipeline.PoolProps{Name: name, Bucket: bucket, IntakeGroups: 1,
					Tenants: []tenantpipeline.Tenant{{ID: "hooli" + name, RegisterURL: "https://core.example.com/h"}}, Shared: shared})
			}
			tpl := assertions.Template_FromStack(stack, nil)
			tj := templateJSON(tpl)
			var keyArn any
			if tc.withKey {
				keyArn = getAtt(logicalIDOfType(t, tj, "AWS::KMS::Key"))
			}
			checkUploadDenies(t, tpl, uploadDenies(getAtt(logicalIDOfType(t, tj, "AWS::S3::Bucket")), keyArn, exactRoles(t, tenantpipeline.DefaultRolePath, tj), operatorPattern))
		})
	}
}

// TestAppIngestBucketRefusesWhatThePipelineCannotHonour: the app's own ingest bucket, without and
// with the app's key (tenants file "encryption"), carries the upload Denies beside the write Deny
// the app adds itself.
func TestAppIngestBucketRefusesWhatThePipelineCannotHonour(t *testing.T) {
	for _, tc := range []struct {
		file    string
		withKey bool
	}{
		{"one-tenant.json", false},
		{"encryption.json", true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			_, built := synthApp(t, tc.file, stackOptions(""))
			tpl := assertions.Template_FromStack(built.Ingest, nil)
			tj := templateJSON(tpl)
			var keyArn any
			if tc.withKey {
				keyArn = getAtt(logicalIDOfType(t, tj, "AWS::KMS::Key"))
			}
			checkUploadDenies(t, tpl, uploadDenies(getAtt(logicalIDOfType(t, tj, "AWS::S3::Bucket")), keyArn,
				exactRoles(t, "/tenantpipeline/TenantPipeline/", appTemplates(t, built)...)))
		})
	}
}

// TestImportedBucketWarnsOfTheUploadDenies: CDK cannot change an imported bucket's policy, so synth
// warns with the statements to add, and BucketUploadDeniesJSON is them, the key's included.
func TestImportedBucketWarnsOfTheUploadDenies(t *testing.T) {
	app := testApp(t)
	stack := awscdk.NewStack(app, jsii.String("Imported"), nil)
	bucket := awss3.Bucket_FromBucketName(stack, jsii.String("Bucket"), jsii.String("corp-ingest"))
	key := awskms.Key_FromKeyArn(stack, jsii.String("Key"), jsii.String("arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"))
	shared := tenantpipeline.SharedProps{EncryptionKey: key, KeyPolicyCovered: true}
	tenantpipeline.New(stack, "Tenant-acme", &tenantpipeline.Props{
		Tenant: tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/r"}, Bucket: bucket, SharedProps: shared})
	tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{Name: "default", Bucket: bucket, IntakeGroups: 1,
		Tenants: []tenantpipeline.Tenant{{ID: "hooli", RegisterURL: "https://core.example.com/h"}}, Shared: shared})
	tpl := templateJSON(assertions.Template_FromStack(stack, nil))
	if n := len(byType(tpl, "AWS::S3::BucketPolicy")); n != 0 {
		t.Errorf("got %d bucket policies, want none for an imported bucket", n)
	}
	warnings := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"),
		assertions.Match_StringLikeRegexp(jsii.String("the statements of BucketUploadDeniesJSON, which refuse SSE-C, another key")))
	if got := len(*warnings); got != 1 {
		t.Errorf("got %d warnings naming BucketUploadDeniesJSON, want 1 for the bucket's role path, operators and key", got)
	}

	objects := `"Resource":["arn:<Ref:AWS::Partition>:s3:::corp-ingest/*"]`
	keyArn := *key.KeyArn()
	got := flatten(t, stack.Resolve(jsii.String(tenantpipeline.BucketUploadDeniesJSON(bucket, key, "/tenantpipeline/", tenantpipeline.Operators{}))))
	want := `[` +
		`{"Sid":"` + sidSSEC + `","Effect":"Deny","Principal":"*","Action":["s3:PutObject"],` + objects + `,"Condition":{"Null":{"s3:x-amz-server-side-encryption-customer-algorithm":"false"}}},` +
		`{"Sid":"` + sidSSEKMS + `","Effect":"Deny","Principal":"*","Action":["s3:PutObject"],` + objects + `,"Condition":{"Null":{"s3:x-amz-server-side-encryption":"false"},"StringNotEquals":{"s3:x-amz-server-side-encryption":"aws:kms"}}},` +
		`{"Sid":"` + sidKey + `","Effect":"Deny","Principal":"*","Action":["s3:PutObject"],` + objects + `,"Condition":{"Null":{"s3:x-amz-server-side-encryption-aws-kms-key-id":"false"},"StringNotEquals":{"s3:x-amz-server-side-encryption-aws-kms-key-id":"` + keyArn + `"}}},` +
		`{"Sid":"` + sidStorageClass + `","Effect":"Deny","Principal":"*","Action":["s3:PutObject"],` + objects + `,"Condition":{"Null":{"s3:x-amz-storage-class":"false"},"StringNotEquals":{"s3:x-amz-storage-class":["STANDARD","INTELLIGENT_TIERING"]}}},` +
		`{"Sid":"` + sidNoOverwrite + `","Effect":"Deny","Principal":"*","Action":["s3:PutObject"],` + objects + `,"Condition":{"ArnNotLike":{"aws:PrincipalArn":[` + exactRolesFlat(t, "/tenantpipeline/", templateJSON(assertions.Template_FromStack(stack, nil))) + `]},"Bool":{"s3:ObjectCreationOperation":"true"},"Null":{"s3:if-none-match":"true"}}}` +
		`]`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestStackOwningTheBucketAddsTheUploadDenies: an app whose bucket lives in a stack of its own
// adds BucketUploadDenies there, and the constructs in another stack then add none of their own.
func TestStackOwningTheBucketAddsTheUploadDenies(t *testing.T) {
	app := testApp(t)
	owner := awscdk.NewStack(app, jsii.String("Owner"), nil)
	bucket := stacks.NewIngestBucket(owner, "Bucket")
	for _, s := range tenantpipeline.BucketUploadDenies(bucket, nil, tenantpipeline.DefaultRolePath, tenantpipeline.Operators{}) {
		bucket.AddToResourcePolicy(s)
	}
	stack := awscdk.NewStack(app, jsii.String("Tenants"), nil)
	tenantpipeline.New(stack, "Tenant-acme", &tenantpipeline.Props{
		Tenant: tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/r"}, Bucket: bucket})
	tpl := assertions.Template_FromStack(owner, nil)
	checkUploadDenies(t, tpl, uploadDenies(getAtt(logicalIDOfType(t, templateJSON(tpl), "AWS::S3::Bucket")), nil,
		exactRoles(t, tenantpipeline.DefaultRolePath, templateJSON(assertions.Template_FromStack(stack, nil)))))
}

// TestExistingBucketGetsTheUploadDeniesToAdd: with an existing bucket, the first tenant stack
// outputs the upload Denies its owner must add, with the key's statements when the app has a key,
// all on the bucket's objects, and synth names the output.
func TestExistingBucketGetsTheUploadDeniesToAdd(t *testing.T) {
	for _, tc := range []struct {
		file string
		sids []string
	}{
		{"one-tenant.json", []string{sidSSEC, sidStorageClass, sidNoOverwrite}},
		{"encryption.json", []string{sidSSEC, sidSSEKMS, sidKey, sidStorageClass, sidNoOverwrite}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			o := stackOptions("")
			o.BucketName = "corp-ingest"
			_, built := synthApp(t, tc.file, o)
			stack, outStack := built.TenantStacks[0], built.TenantStacks[0]
			if built.Key != nil {
				// An output may not carry an import: the key's own stack outputs the statements
				// that name it.
				outStack = awscdk.Stack_Of(built.Key)
			}
			tpl := assertions.Template_FromStack(outStack, nil)
			out := templateJSON(tpl)["Outputs"].(map[string]any)[stacks.ImportedBucketUploadDeniesOutput]
			if out == nil {
				t.Fatalf("got no output %s", stacks.ImportedBucketUploadDeniesOutput)
			}
			var got []map[string]any
			flattenJSON(t, get(t, out, "Value"), &got)
			var sids []string
			for _, st := range got {
				sids = append(sids, st["Sid"].(string))
				if r, _ := st["Resource"].([]any); len(r) != 1 || r[0] != "arn:<Ref:AWS::Partition>:s3:::corp-ingest/*" {
					t.Errorf("%s: got Resource %v, want the bucket's objects", st["Sid"], st["Resource"])
				}
				if a, _ := st["Action"].([]any); st["Effect"] != "Deny" || len(a) != 1 || a[0] != "s3:PutObject" {
					t.Errorf("%s: got Effect %v, Action %v, want a Deny of s3:PutObject", st["Sid"], st["Effect"], st["Action"])
				}
				// The app's key, in its own stack.
				if k := fmt.Sprint(st["Condition"]); st["Sid"] == sidKey && !strings.Contains(k, "<GetAtt:EncryptionKey") {
					t.Errorf("got the key statement's condition %s, want the app's EncryptionKey's ARN", k)
				}
			}
			if !slices.Equal(sids, tc.sids) {
				t.Errorf("got statements %v, want %v", sids, tc.sids)
			}
			msgs := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"),
				assertions.Match_StringLikeRegexp(jsii.String("corp-ingest is not managed by this app.*stack output "+stacks.ImportedBucketUploadDeniesOutput+" of stack "+*outStack.StackName())))
			if len(*msgs) != 1 {
				t.Errorf("got %d warnings naming %s, want 1", len(*msgs), stacks.ImportedBucketUploadDeniesOutput)
			}
		})
	}
}

// TestUploadDeniesOfABucketWithoutItsOwnKey: a bucket of the app encrypted by S3 (no key of its
// own) gets no key statements, even when the constructs take a key, and an app's own upload Denies
// for another role path leave the overwrite Deny to the app, with a warning that names it alone
// (the write Deny is in place, so the controllers keep trusting it).
func TestUploadDeniesOfABucketWithoutItsOwnKey(t *testing.T) {
	for _, tc := range []struct {
		name        string
		otherPath   bool
		wantSids    map[string]int
		wantWarning string // "": none
	}{
		{"the constructs' key", false, map[string]int{sidSSEC: 1, sidStorageClass: 1, sidNoOverwrite: 1, sidControlWrites: 1}, ""},
		{"the app's Denies for another role path", true, map[string]int{sidSSEC: 1, sidStorageClass: 1, sidNoOverwrite: 1, sidControlWrites: 1},
			"statements \\[" + sidNoOverwrite + "\\] are for another role path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := testApp(t)
			stack := awscdk.NewStack(app, jsii.String("NoOwnKey"), nil)
			bucket := stacks.NewIngestBucket(stack, "Bucket")
			if tc.otherPath {
				for _, s := range tenantpipeline.BucketUploadDenies(bucket, nil, "/other/", tenantpipeline.Operators{}) {
					bucket.AddToResourcePolicy(s)
				}
			}
			key := awskms.NewKey(stack, jsii.String("Key"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
			tenantpipeline.New(stack, "Tenant-acme", &tenantpipeline.Props{
				Tenant: tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/r"}, Bucket: bucket,
				SharedProps: tenantpipeline.SharedProps{EncryptionKey: key}})
			counts := sidCounts(t, templateJSON(assertions.Template_FromStack(stack, nil)))
			for _, sid := range []string{sidSSEC, sidSSEKMS, sidKey, sidStorageClass, sidNoOverwrite, sidControlWrites} {
				if counts[sid] != tc.wantSids[sid] {
					t.Errorf("got %d statements %s, want %d", counts[sid], sid, tc.wantSids[sid])
				}
			}
			warnings := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"),
				assertions.Match_StringLikeRegexp(jsii.String("BucketUploadDeniesJSON")))
			switch {
			case tc.wantWarning == "" && len(*warnings) != 0:
				t.Errorf("got %d warnings about the bucket's Denies, want none", len(*warnings))
			case tc.wantWarning != "":
				matching := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"),
					assertions.Match_StringLikeRegexp(jsii.String(tc.wantWarning)))
				if len(*warnings) != 1 || len(*matching) != 1 {
					t.Errorf("got %d warnings about the bucket's Denies, %d matching %q, want 1 and 1", len(*warnings), len(*matching), tc.wantWarning)
				}
				for _, w := range *matching {
					if msg := asJSON(w.Entry.Data); strings.Contains(msg, "until BucketWriteDeny") {
						t.Errorf("got warning %s, want no word of the write Deny, which is in place", msg)
					}
				}
			}
		})
	}
}

// TestBucketReadDenyForAnExistingBucketAndOwnRegisterFunctions: an existing bucket's first tenant
// stack outputs the read Deny its owner must add, exactly, and synth names the output; a register
// function of your own whose role is not under the role path is warned of, since the Deny refuses
// it the files, and one whose role is is not.
func TestBucketReadDenyForAnExistingBucketAndOwnRegisterFunctions(t *testing.T) {
	t.Run("existing bucket", func(t *testing.T) {
		o := stackOptions("")
		o.BucketName = "corp-ingest"
		_, built := synthApp(t, "one-tenant.json", o)
		stack := built.TenantStacks[0]
		out := templateJSON(assertions.Template_FromStack(stack, nil))["Outputs"].(map[string]any)[stacks.ImportedBucketReadDenyOutput]
		if out == nil {
			t.Fatalf("got no output %s", stacks.ImportedBucketReadDenyOutput)
		}
		got := flatten(t, get(t, out, "Value"))
		want := `{"Sid":"` + sidReadDeny + `","Effect":"Deny","Principal":"*","Action":["s3:GetObject","s3:GetObjectVersion"],` +
			`"Resource":["arn:<Ref:AWS::Partition>:s3:::corp-ingest/*"],` +
			`"Condition":{"ArnNotLike":{"aws:PrincipalArn":[` + exactRolesFlat(t, "/tenantpipeline/TenantPipeline/", appTemplates(t, built)...) + `]}}}`
		if got != want {
			t.Errorf("got\n%s\nwant\n%s", got, want)
		}
		msgs := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"),
			assertions.Match_StringLikeRegexp(jsii.String("corp-ingest is not managed by this app.*stack output "+stacks.ImportedBucketReadDenyOutput)))
		if len(*msgs) != 1 {
			t.Errorf("got %d warnings naming %s, want 1", len(*msgs), stacks.ImportedBucketReadDenyOutput)
		}
	})
	for _, tc := range []struct {
		name     string
		path     string
		wantWarn int
	}{
		{"own register function under the role path", tenantpipeline.DefaultRolePath, 0},
		{"own register function elsewhere", "/", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := testApp(t)
			stack := awscdk.NewStack(app, jsii.String("OwnRegister"), nil)
			bucket := stacks.NewIngestBucket(stack, "Bucket")
			role := awsiam.NewRole(stack, jsii.String("RegisterRole"), &awsiam.RoleProps{
				AssumedBy: awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil), Path: jsii.String(tc.path)})
			fn := awslambda.NewFunction(stack, jsii.String("MyRegister"), &awslambda.FunctionProps{
				Runtime: awslambda.Runtime_NODEJS_22_X(), Handler: jsii.String("index.handler"), Role: role,
				Code: awslambda.Code_FromInline(jsii.String("exports.handler = async () => ({})"))})
			tenantpipeline.New(stack, "Tenant-acme", &tenantpipeline.Props{
				Tenant: tenantpipeline.Tenant{ID: "acme"}, Bucket: bucket, RegisterFunction: fn})
			msgs := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"),
				assertions.Match_StringLikeRegexp(jsii.String("register function .*MyRegister has no role under the pipeline's role path")))
			if len(*msgs) != tc.wantWarn {
				t.Errorf("got %d warnings about the register function's role, want %d", len(*msgs), tc.wantWarn)
			}
		})
	}
}

// exactRoles is what the bucket's Denies exempt for the roles under rolePath in the templates:
// each role's exact ARN, arn:<partition>:iam::<account>:role<path><name>, in the order of the
// names. Every role under the path must have a name of its own (RoleName): a pattern would exempt
// any role created under the path.
func exactRoles(t *testing.T, rolePath string, tpls ...map[string]any) []any {
	t.Helper()
	type named struct {
		name string
		arn  any
	}
	var roles []named
	for _, tpl := range tpls {
		for id, r := range byType(tpl, "AWS::IAM::Role") {
			if path, _ := props(r)["Path"].(string); path != rolePath {
				continue
			}
			name, ok := props(r)["RoleName"]
			if !ok {
				t.Errorf("role %s under %s has no RoleName, so no exact ARN", id, rolePath)
				continue
			}
			// The construct's names: <hash>-<region>, the region a deploy-time value.
			parts := get(t, name, "Fn::Join").([]any)[1].([]any)
			hash := parts[0].(string)
			if len(parts) != 2 || !regexp.MustCompile(`^[a-z2-7]{12}-$`).MatchString(hash) || asJSON(parts[1]) != `{"Ref":"AWS::Region"}` {
				t.Fatalf("role %s: RoleName %s, want <12 base32 characters>-<AWS::Region>", id, asJSON(name))
			}
			roles = append(roles, named{hash, map[string]any{"Fn::Join": []any{"", []any{"arn:", map[string]any{"Ref": "AWS::Partition"}, ":iam::",
				map[string]any{"Ref": "AWS::AccountId"}, ":role" + rolePath + hash, map[string]any{"Ref": "AWS::Region"}}}}})
		}
	}
	slices.SortFunc(roles, func(a, b named) int { return strings.Compare(a.name, b.name) })
	var out []any
	for _, r := range roles {
		out = append(out, r.arn)
	}
	if len(out) == 0 {
		t.Fatalf("no role under %s", rolePath)
	}
	return out
}

// exactRolesFlat is exactRoles as flatten writes it, each ARN quoted, comma-separated.
func exactRolesFlat(t *testing.T, rolePath string, tpls ...map[string]any) string {
	t.Helper()
	var out []string
	for _, r := range exactRoles(t, rolePath, tpls...) {
		out = append(out, strconv.Quote(flatten(t, r)))
	}
	return strings.Join(out, ",")
}

// appTemplates are the templates of every stack of the app.
func appTemplates(t *testing.T, built *stacks.App) []map[string]any {
	t.Helper()
	var all []awscdk.Stack
	if built.Ingest != nil {
		all = append(all, built.Ingest)
	}
	all = append(append(all, built.TenantStacks...), built.PoolStacks...)
	if built.CoreSystemStack != nil && built.CoreSystemStack != built.Ingest {
		all = append(all, built.CoreSystemStack)
	}
	var out []map[string]any
	for _, s := range all {
		out = append(out, templateJSON(assertions.Template_FromStack(s, nil)))
	}
	return out
}

// TestBucketDeniesNameEachRole: the bucket's Denies exempt each of the pipeline's roles by its
// exact ARN while three lists of them fit the bucket policy's 20 KB; past that, or when the app
// asks (ExemptRolePath), they exempt the path, and synth warns; two constructs under one path
// that disagree fail synth, and a policy that cannot fit either way fails synth. The same app in
// two regions gets two sets of role names.
func TestBucketDeniesNameEachRole(t *testing.T) {
	longPath := "/" + strings.Repeat("p", 400) + "/" // about 460 bytes an ARN: 11 roles fill the lists
	ops := func(n int) tenantpipeline.Operators {
		var o tenantpipeline.Operators
		for i := range n {
			o.PrincipalARNs = append(o.PrincipalARNs, fmt.Sprintf("arn:aws:iam::123456789012:role/operators-of-the-pipeline/oncall-%03d", i))
		}
		return o
	}
	for _, tc := range []struct {
		name      string
		rolePath  string
		silos     int
		asked     []bool // ExemptRolePath of each silo tenant (nil: none asks)
		operators int
		byPath    bool
		warn      string // a warning, or an error when fail is set
		fail      bool
	}{
		{name: "three silo tenants and a pool", rolePath: tenantpipeline.DefaultRolePath, silos: 3},
		{name: "one silo tenant under a long path", rolePath: longPath, silos: 1},
		{name: "four silo tenants under a long path", rolePath: longPath, silos: 4, byPath: true,
			warn: "the app's 19 roles under it do not fit a bucket policy's 20 KB three times over"},
		{name: "asked", rolePath: tenantpipeline.DefaultRolePath, silos: 2, asked: []bool{true, true}, byPath: true,
			warn: "because SharedProps.ExemptRolePath is set"},
		{name: "asked by one only", rolePath: tenantpipeline.DefaultRolePath, silos: 2, asked: []bool{true, false}, fail: true,
			warn: "SharedProps.ExemptRolePath is false here and true for"},
		{name: "too many operators", rolePath: tenantpipeline.DefaultRolePath, silos: 1, operators: 80, fail: true,
			warn: "would be up to \\d+ bytes, over S3's 20480"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := testApp(t)
			stack := awscdk.NewStack(app, jsii.String("Names"), nil)
			bucket := awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true), EnforceSSL: jsii.Bool(true)})
			for i := range tc.silos {
				shared := tenantpipeline.SharedProps{RolePath: tc.rolePath, Operators: ops(tc.operators)}
				if tc.asked != nil {
					shared.ExemptRolePath = tc.asked[i]
				}
				tenantpipeline.New(stack, fmt.Sprintf("Tenant-t%d", i), &tenantpipeline.Props{
					Tenant: tenantpipeline.Tenant{ID: fmt.Sprintf("t%d", i), RegisterURL: "https://core.example.com/r"}, Bucket: bucket, SharedProps: shared})
			}
			tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{Name: "p", Bucket: bucket, IntakeGroups: 1,
				Tenants: []tenantpipeline.Tenant{{ID: "hooli", RegisterURL: "https://core.example.com/h"}},
				Shared:  tenantpipeline.SharedProps{RolePath: tc.rolePath, Operators: ops(tc.operators), ExemptRolePath: tc.asked != nil && tc.asked[0]}})
			if tc.fail {
				errs := assertions.Annotations_FromStack(stack).FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String(tc.warn)))
				if len(*errs) == 0 {
					t.Fatalf("got no error matching %q", tc.warn)
				}
				return
			}
			tj := templateJSON(assertions.Template_FromStack(stack, nil))
			want := []any{map[string]any{"Fn::Join": []any{"", []any{"arn:", map[string]any{"Ref": "AWS::Partition"}, ":iam::",
				map[string]any{"Ref": "AWS::AccountId"}, ":role" + tc.rolePath + "*"}}}}
			if !tc.byPath {
				want = exactRoles(t, tc.rolePath, tj)
				if n := len(want); n != 3*tc.silos+7 {
					t.Errorf("got %d roles under the path, want %d: 3 a silo tenant, 7 the pool (its intake has no API)", n, 3*tc.silos+7)
				}
			}
			for _, pol := range byType(tj, "AWS::S3::BucketPolicy") {
				for _, st := range get(t, props(pol), "PolicyDocument", "Statement").([]any) {
					sid, _ := st.(map[string]any)["Sid"].(string)
					if sid != sidControlWrites && sid != sidReadDeny && sid != sidNoOverwrite {
						continue
					}
					if got := get(t, st, "Condition", "ArnNotLike", "aws:PrincipalArn"); asJSON(got) != asJSON(want) {
						t.Errorf("%s exempts %s, want %s", sid, asJSON(got), asJSON(want))
					}
				}
			}
			warnings := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"),
				assertions.Match_StringLikeRegexp(jsii.String("the ingest bucket's Denies exempt every role under the path")))
			if got, want := len(*warnings), map[bool]int{false: 0, true: 1}[tc.byPath]; got != want {
				t.Errorf("got %d warnings that the Denies exempt the path, want %d", got, want)
			}
			if tc.warn != "" {
				if w := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String(tc.warn))); len(*w) != 1 {
					t.Errorf("got %d warnings matching %q, want 1", len(*w), tc.warn)
				}
			}
		})
	}

	// A bucket the app imports: its owner adds the …JSON statements, which list the same roles,
	// and synth warns when they exempt the path.
	for _, silos := range []int{1, 4} {
		t.Run(fmt.Sprintf("an imported bucket, %d silo tenants under a long path", silos), func(t *testing.T) {
			app := testApp(t)
			stack := awscdk.NewStack(app, jsii.String("Imported"), nil)
			bucket := awss3.Bucket_FromBucketName(stack, jsii.String("Bucket"), jsii.String("corp-ingest"))
			for i := range silos {
				tenantpipeline.New(stack, fmt.Sprintf("Tenant-t%d", i), &tenantpipeline.Props{
					Tenant: tenantpipeline.Tenant{ID: fmt.Sprintf("t%d", i), RegisterURL: "https://core.example.com/r"}, Bucket: bucket,
					SharedProps: tenantpipeline.SharedProps{RolePath: longPath}})
			}
			tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{Name: "p", Bucket: bucket, IntakeGroups: 1,
				Tenants: []tenantpipeline.Tenant{{ID: "hooli", RegisterURL: "https://core.example.com/h"}}, Shared: tenantpipeline.SharedProps{RolePath: longPath}})
			got := flatten(t, stack.Resolve(jsii.String(tenantpipeline.BucketReadDenyJSON(bucket, longPath, tenantpipeline.Operators{}))))
			want := `"aws:PrincipalArn":["arn:<Ref:AWS::Partition>:iam::<Ref:AWS::AccountId>:role` + longPath + `*"]`
			byPath := silos == 4
			if !byPath {
				want = `"aws:PrincipalArn":[` + exactRolesFlat(t, longPath, templateJSON(assertions.Template_FromStack(stack, nil))) + `]`
			}
			if !strings.Contains(got, want) {
				t.Errorf("got\n%s\nwant it to hold\n%s", got, want)
			}
			warnings := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"),
				assertions.Match_StringLikeRegexp(jsii.String("the ingest bucket's Denies exempt every role under the path")))
			if n, want := len(*warnings), map[bool]int{false: 0, true: 1}[byPath]; n != want {
				t.Errorf("got %d warnings that the Denies exempt the path, want %d", n, want)
			}
		})
	}

	t.Run("two regions", func(t *testing.T) {
		names := map[string]string{}
		var all []awscdk.Stack
		for _, region := range []string{"eu-west-1", "us-east-1"} {
			// One app each, as two deployments of the same app are.
			stack := awscdk.NewStack(testApp(t), jsii.String("Same-"+region), &awscdk.StackProps{
				StackName: jsii.String("Same"), Env: &awscdk.Environment{Account: jsii.String("123456789012"), Region: jsii.String(region)}})
			bucket := awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true), EnforceSSL: jsii.Bool(true)})
			tenantpipeline.New(stack, "Tenant-a", &tenantpipeline.Props{
				Tenant: tenantpipeline.Tenant{ID: "a", RegisterURL: "https://core.example.com/r"}, Bucket: bucket})
			all = append(all, stack)
		}
		for _, stack := range all {
			region := *stack.Region()
			for id, r := range byType(templateJSON(assertions.Template_FromStack(stack, nil)), "AWS::IAM::Role") {
				name, _ := props(r)["RoleName"].(string)
				if name == "" {
					continue
				}
				if other, ok := names[name]; ok {
					t.Errorf("role %s in %s has the name %s of %s", id, region, name, other)
				}
				if !strings.HasSuffix(name, "-"+region) || len(name) > 64 {
					t.Errorf("role %s: name %q, want one ending in its region, of at most 64 characters", id, name)
				}
				names[name] = region + "/" + id
			}
		}
		if len(names) != 6 {
			t.Errorf("got %d named roles, want 3 in each region", len(names))
		}
	})
}

// TestExemptRolePathFromContext: the app's context exemptRolePath=true reaches every Deny of the
// ingest bucket as the role path's pattern, with the warning; a value other than true or false is
// refused, naming the key.
func TestExemptRolePathFromContext(t *testing.T) {
	app := testAppWithContext(t, map[string]any{stacks.CtxExemptRolePath: "true", stacks.CtxStackPrefix: "Wide"})
	o, err := stacks.OptionsFromContext(app)
	if err != nil {
		t.Fatal(err)
	}
	if !o.ExemptRolePath {
		t.Fatal("exemptRolePath=true did not set Options.ExemptRolePath")
	}
	o.TenantsFile, o.AssignmentFile = "testdata/one-tenant.json", "testdata/one-tenant.stacks.json"
	built, err := stacks.Build(app, o)
	if err != nil {
		t.Fatal(err)
	}
	ingest := assertions.Template_FromStack(built.Ingest, nil)
	want := asJSON([]any{map[string]any{"Fn::Join": []any{"", []any{"arn:", map[string]any{"Ref": "AWS::Partition"}, ":iam::",
		map[string]any{"Ref": "AWS::AccountId"}, ":role/tenantpipeline/Wide/*"}}}})
	n := 0
	for _, pol := range byType(templateJSON(ingest), "AWS::S3::BucketPolicy") {
		for _, st := range get(t, props(pol), "PolicyDocument", "Statement").([]any) {
			if arns, ok := st.(map[string]any)["Condition"].(map[string]any)["ArnNotLike"]; ok {
				n++
				if got := asJSON(arns.(map[string]any)["aws:PrincipalArn"]); got != want {
					t.Errorf("%v exempts %s, want the path's pattern %s", st.(map[string]any)["Sid"], got, want)
				}
			}
		}
	}
	if n != 3 {
		t.Errorf("got %d statements exempting by aws:PrincipalArn, want the write, read and overwrite Denies", n)
	}
	var warned int
	for _, s := range append([]awscdk.Stack{built.Ingest}, built.TenantStacks...) {
		warned += len(*assertions.Annotations_FromStack(s).FindWarning(jsii.String("*"),
			assertions.Match_StringLikeRegexp(jsii.String("because SharedProps.ExemptRolePath is set"))))
	}
	if warned != 1 {
		t.Errorf("got %d warnings that the path is exempted on request, want 1", warned)
	}

	bad := testAppWithContext(t, map[string]any{stacks.CtxExemptRolePath: "yes"})
	if _, err := stacks.OptionsFromContext(bad); err == nil || !strings.Contains(err.Error(), `context exemptRolePath: "yes" is not true or false`) {
		t.Errorf("got %v, want the context key and value named", err)
	}
}
