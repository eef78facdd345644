package test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/stacks"
	"github.com/example/tenantpipeline/internal/templatecheck"
)

const (
	importedKeyARN = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	// keyAdmin is testdata/encryption.json's encryption.admins.
	keyAdmin = "arn:aws:iam::123456789012:role/key-admin"
)

// encryptedApp synthesizes testdata/encryption.json (both tiers, a core system, a DynamoDB sink,
// secrets), with the key it creates or, with keyARN, an imported one; it returns every stack.
func encryptedApp(t *testing.T, keyARN string, o stacks.Options) (*stacks.App, []awscdk.Stack) {
	t.Helper()
	file := "encryption.json"
	if keyARN != "" {
		dir := t.TempDir()
		b, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.Replace(string(b), `{"key": "create", "admins": ["`+keyAdmin+`"]}`, `{"keyArn": "`+keyARN+`"}`, 1))
		file = filepath.Join(dir, file)
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		copyFile(t, filepath.Join("testdata", "encryption.stacks.json"), filepath.Join(dir, "encryption.stacks.json"))
	} else {
		file = filepath.Join("testdata", file)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	o.TenantsFile = file
	built, err := stacks.Build(app, o)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	var all []awscdk.Stack
	for _, c := range *app.Node().Children() {
		if s, ok := c.(awscdk.Stack); ok && *awscdk.Stack_IsStack(c) {
			all = append(all, s)
		}
	}
	if len(built.PoolStacks) < 2 || len(built.TenantStacks) == 0 || len(built.CoreSystems) == 0 {
		t.Fatalf("got %d pool stacks, %d tenant stacks, %d core systems; want both tiers and a core system", len(built.PoolStacks), len(built.TenantStacks), len(built.CoreSystems))
	}
	return built, all
}

// keyProperty is where each type of store names its key.
var keyProperty = map[string]func(props map[string]any) (any, string){
	"AWS::S3::Bucket": func(p map[string]any) (any, string) {
		rules, _ := dig(p, "BucketEncryption", "ServerSideEncryptionConfiguration").([]any)
		if len(rules) != 1 {
			return nil, "want one ServerSideEncryptionConfiguration rule"
		}
		r := rules[0].(map[string]any)
		if dig(r, "ServerSideEncryptionByDefault", "SSEAlgorithm") != "aws:kms" || r["BucketKeyEnabled"] != true {
			return nil, fmt.Sprintf("got %v, want SSE-KMS with BucketKeyEnabled true", r)
		}
		return dig(r, "ServerSideEncryptionByDefault", "KMSMasterKeyID"), ""
	},
	"AWS::SQS::Queue": func(p map[string]any) (any, string) {
		if _, ok := p["SqsManagedSseEnabled"]; ok {
			return nil, "got SqsManagedSseEnabled beside the key"
		}
		if p["KmsDataKeyReusePeriodSeconds"] != float64(tenantpipeline.DataKeyReusePeriod.Seconds()) {
			return nil, fmt.Sprintf("got KmsDataKeyReusePeriodSeconds %v, want %v", p["KmsDataKeyReusePeriodSeconds"], tenantpipeline.DataKeyReusePeriod.Seconds())
		}
		return p["KmsMasterKeyId"], ""
	},
	"AWS::Logs::LogGroup": func(p map[string]any) (any, string) { return p["KmsKeyId"], "" },
	"AWS::StepFunctions::StateMachine": func(p map[string]any) (any, string) {
		if dig(p, "EncryptionConfiguration", "Type") != "CUSTOMER_MANAGED_KMS_KEY" {
			return nil, "want EncryptionConfiguration CUSTOMER_MANAGED_KMS_KEY"
		}
		return dig(p, "EncryptionConfiguration", "KmsKeyId"), ""
	},
	"AWS::DynamoDB::Table": func(p map[string]any) (any, string) {
		if dig(p, "SSESpecification", "SSEType") != "KMS" || dig(p, "SSESpecification", "SSEEnabled") != true {
			return nil, "want SSESpecification SSEType KMS"
		}
		return dig(p, "SSESpecification", "KMSMasterKeyId"), ""
	},
	"AWS::DynamoDB::GlobalTable": func(p map[string]any) (any, string) {
		return dig(p, "SSESpecification", "KMSMasterKeyId"), ""
	},
	"AWS::SecretsManager::Secret": func(p map[string]any) (any, string) { return p["KmsKeyId"], "" },
	// The functions' environments: a controller's holds its tenant's settings.
	"AWS::Lambda::Function": func(p map[string]any) (any, string) { return p["KmsKeyArn"], "" },
}

func dig(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// namesKey reports whether a property value is the app's key: the created key's ARN (GetAtt in its
// stack, an import elsewhere) or the imported key's ARN.
func namesKey(v any, keyARN string) bool {
	b, _ := json.Marshal(v)
	s := string(b)
	if keyARN != "" {
		return s == `"`+keyARN+`"`
	}
	return strings.Contains(s, "EncryptionKey") && strings.Contains(s, "Arn")
}

// TestEncryptionEveryStoreNamesTheKey: with "encryption", every bucket, queue, log group, state
// machine, table, secret and function environment of every stack of an app with both tiers and a
// core system names the key, created or imported.
func TestEncryptionEveryStoreNamesTheKey(t *testing.T) {
	for _, keyARN := range []string{"", importedKeyARN} {
		t.Run("key "+cmpOr(keyARN, "create"), func(t *testing.T) {
			_, all := encryptedApp(t, keyARN, stacks.Options{})
			seen := map[string]int{}
			for _, stack := range all {
				tpl := templateJSON(assertions.Template_FromStack(stack, nil))
				res, _ := tpl["Resources"].(map[string]any)
				for id, r := range res {
					r := r.(map[string]any)
					typ, _ := r["Type"].(string)
					prop, ok := keyProperty[typ]
					if !ok {
						continue
					}
					if typ == "AWS::Lambda::Function" && dig(r, "Properties", "Environment") == nil {
						continue // CDK's bucket notifications handler: no environment to encrypt
					}
					seen[typ]++
					props, _ := r["Properties"].(map[string]any)
					v, problem := prop(props)
					if problem != "" {
						t.Errorf("%s %s (%s): %s", *stack.StackName(), id, typ, problem)
					} else if !namesKey(v, keyARN) {
						t.Errorf("%s %s (%s): got key %v, want the app's key", *stack.StackName(), id, typ, v)
					}
				}
			}
			for _, typ := range []string{"AWS::S3::Bucket", "AWS::SQS::Queue", "AWS::Logs::LogGroup", "AWS::StepFunctions::StateMachine", "AWS::DynamoDB::Table", "AWS::Lambda::Function"} {
				if seen[typ] == 0 {
					t.Errorf("got no %s in the app, want some: the test would check nothing", typ)
				}
			}
			t.Logf("checked %v", seen)
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// keyPolicyStatements returns the key policy statements of the app's created key.
func keyPolicyStatements(t *testing.T, built *stacks.App) []map[string]any {
	t.Helper()
	tpl := templateJSON(assertions.Template_FromStack(awscdk.Stack_Of(built.Key), nil))
	var out []map[string]any
	for _, r := range tpl["Resources"].(map[string]any) {
		r := r.(map[string]any)
		if r["Type"] != "AWS::KMS::Key" {
			continue
		}
		if dig(r, "Properties", "EnableKeyRotation") != true || r["DeletionPolicy"] != "Retain" {
			t.Errorf("got key %v, want EnableKeyRotation true and DeletionPolicy Retain", r)
		}
		for _, s := range dig(r, "Properties", "KeyPolicy", "Statement").([]any) {
			out = append(out, s.(map[string]any))
		}
	}
	if len(out) == 0 {
		t.Fatal("got no key policy")
	}
	return out
}

// TestEncryptionKeyPolicyLetsOnlyTheAppsRulesAndLogGroups: EventBridge may use the key only for
// the app's rules, CloudWatch Logs only for its log groups, vended log delivery only for the key's
// account; with an existing bucket the key gets a stack of its own and the same policy.
func TestEncryptionKeyPolicyLetsOnlyTheAppsRulesAndLogGroups(t *testing.T) {
	for _, o := range []stacks.Options{{}, {BucketName: "existing-ingest-bucket"}} {
		t.Run(cmpOr(o.BucketName, "ingest stack"), func(t *testing.T) {
			built, _ := encryptedApp(t, "", o)
			found := map[string]bool{}
			for _, s := range keyPolicyStatements(t, built) {
				principal, _ := json.Marshal(s["Principal"])
				cond, _ := json.Marshal(s["Condition"])
				switch {
				case strings.Contains(string(principal), "events.amazonaws.com"):
					found["events"] = true
					if !strings.Contains(string(cond), `"aws:SourceArn"`) || !strings.Contains(string(cond), `:rule/TenantPipeline-*`) ||
						!strings.Contains(string(cond), `"aws:SourceAccount"`) {
						t.Errorf("got EventBridge's condition %s, want aws:SourceArn the app's rules (rule/TenantPipeline-*) and aws:SourceAccount", cond)
					}
					if acts, _ := json.Marshal(s["Action"]); string(acts) != `["kms:Decrypt","kms:GenerateDataKey"]` {
						t.Errorf("got EventBridge's actions %s, want kms:Decrypt and kms:GenerateDataKey", acts)
					}
				case strings.Contains(string(principal), "delivery.logs.amazonaws.com"):
					// CDK's state machine adds an Allow of its own without a condition; the Deny of
					// every other encryption context is what scopes the service to the account.
					if s["Effect"] == "Deny" {
						found["delivery"] = true
						if !strings.Contains(string(cond), `{"StringNotEquals":{"kms:EncryptionContext:SourceArn":`) || !strings.Contains(string(cond), `:logs:`) {
							t.Errorf("got vended log delivery's Deny condition %s, want StringNotEquals kms:EncryptionContext:SourceArn the account's logs", cond)
						}
						if acts, _ := json.Marshal(s["Action"]); string(acts) != `"kms:Decrypt*"` {
							t.Errorf("got vended log delivery's Deny of %s, want kms:Decrypt*, what its Allows grant", acts)
						}
					}
				case strings.Contains(string(principal), `"logs.`):
					found["logs"] = true
					if !strings.Contains(string(cond), `"kms:EncryptionContext:aws:logs:arn"`) || !strings.Contains(string(cond), `log-group:TenantPipeline-*`) ||
						!strings.Contains(string(cond), `log-group:/aws/vendedlogs/states/TenantPipeline-*`) {
						t.Errorf("got CloudWatch Logs' condition %s, want the app's log groups", cond)
					}
				}
			}
			if !found["events"] || !found["logs"] || !found["delivery"] {
				t.Errorf("got statements for %v, want EventBridge, CloudWatch Logs and vended log delivery", found)
			}
			// The pattern must match the names CloudFormation gives: every stack of the app starts
			// with the prefix, so do its rules' and log groups' generated names.
			for _, s := range append(append([]awscdk.Stack{}, built.TenantStacks...), built.PoolStacks...) {
				if !strings.HasPrefix(*s.StackName(), "TenantPipeline-") {
					t.Errorf("got stack %s, want it to start with the stack prefix the key policy names", *s.StackName())
				}
			}
		})
	}
}

// TestEncryptionGrantsAreConditioned: every KMS statement of every role names the key alone and
// carries the encryption context or service condition of the store it is for; the roles that
// send to, receive from or read the stores have them.
func TestEncryptionGrantsAreConditioned(t *testing.T) {
	_, all := encryptedApp(t, "", stacks.Options{})
	contexts := map[string]int{}
	for _, stack := range all {
		tpl := templateJSON(assertions.Template_FromStack(stack, nil))
		for id, r := range tpl["Resources"].(map[string]any) {
			r := r.(map[string]any)
			if r["Type"] != "AWS::IAM::Policy" {
				continue
			}
			for _, st := range dig(r, "Properties", "PolicyDocument", "Statement").([]any) {
				st := st.(map[string]any)
				acts, _ := json.Marshal(st["Action"])
				if !strings.Contains(string(acts), "kms:") {
					continue
				}
				res, _ := json.Marshal(st["Resource"])
				if !strings.Contains(string(res), "EncryptionKey") {
					t.Errorf("%s %s: got KMS on %s, want the app's key alone", *stack.StackName(), id, res)
				}
				cond, ok := st["Condition"].(map[string]any)
				if !ok {
					t.Errorf("%s %s: got %s with no condition, want the store's encryption context or service", *stack.StackName(), id, acts)
					continue
				}
				b, _ := json.Marshal(cond)
				for _, c := range []string{"aws:sqs:arn", "aws:s3:arn", "aws:dynamodb:tableName", "aws:states:stateMachineArn", "SecretARN", "kms:EncryptionContext:SourceArn", "kms:ViaService"} {
					if strings.Contains(string(b), c) {
						contexts[c]++
						break
					}
				}
			}
		}
	}
	for _, c := range []string{"aws:sqs:arn", "aws:s3:arn", "aws:dynamodb:tableName", "aws:states:stateMachineArn", "SecretARN", "kms:EncryptionContext:SourceArn"} {
		if contexts[c] == 0 {
			t.Errorf("got no grant under %s, want the roles of that store to have one", c)
		}
	}
	t.Logf("KMS statements by condition: %v", contexts)
}

// TestEncryptionGrantsPerRole pins who may use the key for what, in both tiers: a missing grant
// here is a file that cannot be read, a message that cannot be sent, an execution that cannot start.
func TestEncryptionGrantsPerRole(t *testing.T) {
	built, _ := encryptedApp(t, "", stacks.Options{})
	silo := assertions.Template_FromStack(built.TenantStacks[0], nil)
	var pool assertions.Template
	for _, s := range built.PoolStacks {
		if *s.StackName() == "TenantPipeline-Pool-default" {
			pool = assertions.Template_FromStack(s, nil)
		}
	}
	const ownExecutions = "kms:EncryptionContext:aws:states:stateMachineArn"
	for _, tc := range []struct {
		name      string
		tpl       assertions.Template
		role      string
		actions   []string
		condition string
	}{
		{"silo controller receives from its queue", silo, "TenantacmeControllerServiceRole", []string{"kms:Decrypt"}, "kms:EncryptionContext:aws:sqs:arn"},
		{"silo split reads and writes the bucket", silo, "TenantacmeSplitServiceRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:s3:arn"},
		{"silo register reads the bucket", silo, "TenantacmeRegisterServiceRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:s3:arn"},
		{"silo register reads its secret", silo, "TenantacmeRegisterServiceRole", []string{"kms:Decrypt"}, "kms:EncryptionContext:SecretARN"},
		{"silo register keeps the request shares", silo, "TenantacmeRegisterServiceRole", []string{"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:dynamodb:tableName"},
		{"silo controller takes leases", silo, "TenantacmeControllerServiceRole", []string{"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:dynamodb:tableName"},
		{"silo controller starts executions", silo, "TenantacmeControllerServiceRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:states:stateMachineArn"},
		{"silo sink register writes its table", silo, "TenantglobexRegisterServiceRole", []string{"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:dynamodb:tableName"},
		{"silo controller reads and writes the bucket", silo, "TenantacmeControllerServiceRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:s3:arn"},
		{"silo file state machine", silo, "TenantacmeWorkflowFileRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:states:stateMachineArn"},
		// The state machines' own executions: CDK's statement for the state machine's own ARN
		// names no state machine (it has no name of its own), so the ArnLike grant is the one.
		{"silo file state machine runs its executions", silo, "TenantacmeWorkflowFileRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, "ArnLike:" + ownExecutions},
		{"silo segment state machine runs its executions", silo, "TenantacmeWorkflowSegmentRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, "ArnLike:" + ownExecutions},
		{"silo file state machine logs", silo, "TenantacmeWorkflowFileRole", []string{"kms:GenerateDataKey"}, "kms:EncryptionContext:SourceArn"},
		{"silo segment state machine logs", silo, "TenantacmeWorkflowSegmentRole", []string{"kms:GenerateDataKey"}, "kms:EncryptionContext:SourceArn"},
		{"pool router receives from the intake", pool, "PoolRouterServiceRole", []string{"kms:Decrypt"}, "kms:EncryptionContext:aws:sqs:arn"},
		{"pool router sends to the queue", pool, "PoolRouterServiceRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:sqs:arn"},
		{"pool router parks files", pool, "PoolRouterServiceRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:s3:arn"},
		{"pool router keeps the backlog", pool, "PoolRouterServiceRole", []string{"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:dynamodb:tableName"},
		{"pool controller sends and receives", pool, "PoolControllerServiceRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:sqs:arn"},
		{"pool controller starts executions", pool, "PoolControllerServiceRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:states:stateMachineArn"},
		{"pool controller takes leases", pool, "PoolControllerServiceRole", []string{"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:dynamodb:tableName"},
		{"pool register keeps the request shares", pool, "PoolRegisterServiceRole", []string{"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:dynamodb:tableName"},
		{"pool controller's tenant role reads and writes the bucket", pool, "PoolTenantRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:s3:arn"},
		{"pool split tenant role reads and writes the bucket", pool, "PoolSplitTenantRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:s3:arn"},
		{"pool register tenant role reads and writes the bucket", pool, "PoolRegisterTenantRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:s3:arn"},
		{"pool register tenant role reads its tenant's secret", pool, "PoolRegisterTenantRole", []string{"kms:Decrypt"}, "kms:EncryptionContext:SecretARN"},
		{"pool controller reads and writes the bucket", pool, "PoolControllerServiceRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:s3:arn"},
		{"pool file state machine", pool, "PoolWorkflowFileRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:states:stateMachineArn"},
		{"pool file state machine runs its executions", pool, "PoolWorkflowFileRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, "ArnLike:" + ownExecutions},
		{"pool segment state machine runs its executions", pool, "PoolWorkflowSegmentRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, "ArnLike:" + ownExecutions},
		{"pool file state machine logs", pool, "PoolWorkflowFileRole", []string{"kms:GenerateDataKey"}, "kms:EncryptionContext:SourceArn"},
		{"pool segment state machine logs", pool, "PoolWorkflowSegmentRole", []string{"kms:GenerateDataKey"}, "kms:EncryptionContext:SourceArn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !hasKMSGrant(tc.tpl, tc.role, tc.actions, tc.condition) {
				t.Errorf("got no policy of %s* with %v under %s", tc.role, tc.actions, tc.condition)
			}
		})
	}
	// Split's and the controller's tenant sessions never decrypt a secret.
	for _, role := range []string{"PoolTenantRole", "PoolSplitTenantRole"} {
		if hasKMSGrant(pool, role, []string{"kms:Decrypt"}, "kms:EncryptionContext:SecretARN") {
			t.Errorf("the pool's %s may decrypt secrets, want Register's role alone", role)
		}
	}
}

// hasKMSGrant reports whether a policy attached to a role whose logical id starts with role has
// a statement of exactly actions under condition key: a StringEquals or StringLike key, or,
// for a condition "ArnLike:<key>", an ArnLike key.
func hasKMSGrant(tpl assertions.Template, role string, actions []string, condition string) bool {
	operators := []string{"StringEquals", "StringLike"}
	if key, ok := strings.CutPrefix(condition, "ArnLike:"); ok {
		operators, condition = []string{"ArnLike"}, key
	}
	policies := tpl.FindResources(jsii.String("AWS::IAM::Policy"), &map[string]any{"Properties": assertions.Match_ObjectLike(&map[string]any{
		"Roles": assertions.Match_ArrayWith(&[]any{map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^" + role))}}),
	})})
	want, _ := json.Marshal(actions)
	for _, pol := range *policies {
		sts, _ := dig(*pol, "Properties", "PolicyDocument", "Statement").([]any)
		for _, st := range sts {
			action := dig(st, "Action")
			if a, ok := action.(string); ok {
				action = []string{a} // one action renders as a string
			}
			got, _ := json.Marshal(action)
			if string(got) != string(want) {
				continue
			}
			for _, op := range operators {
				if dig(st, "Condition", op, condition) != nil {
					return true
				}
			}
		}
	}
	return false
}

// TestEncryptionStaticSharesNoTableGrant: the encryption fixture's core system keeps no breaker
// and no adaptive limit, so Register's KMS calls on its table are for the request shares alone;
// with static shares it keeps no item there and gets none, in either tier.
func TestEncryptionStaticSharesNoTableGrant(t *testing.T) {
	built, _ := encryptedApp(t, "", stacks.Options{RequestShares: pipeline.RequestSharesStatic})
	silo := assertions.Template_FromStack(built.TenantStacks[0], nil)
	for _, s := range built.PoolStacks {
		if *s.StackName() != "TenantPipeline-Pool-default" {
			continue
		}
		pool := assertions.Template_FromStack(s, nil)
		for _, c := range []struct {
			tpl  assertions.Template
			role string
		}{{silo, "TenantacmeRegisterServiceRole"}, {pool, "PoolRegisterServiceRole"}} {
			if hasKMSGrant(c.tpl, c.role, []string{"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"}, "kms:EncryptionContext:aws:dynamodb:tableName") {
				t.Errorf("%s: got the core system table's KMS calls with static shares, want none", c.role)
			}
		}
		return
	}
	t.Fatal("got no pool stack TenantPipeline-Pool-default")
}

// TestEncryptionAddsNoResourcePerTenant: a key adds properties and policy statements, never a
// resource per tenant, so 11 tenants of at most 45 resources still fit a stack (MaxTenantsPerStack).
func TestEncryptionAddsNoResourcePerTenant(t *testing.T) {
	built, _ := encryptedApp(t, "", stacks.Options{})
	tpl := templateJSON(assertions.Template_FromStack(built.TenantStacks[0], nil))
	for tenant, want := range map[string]int{"acme": 44, "globex": 45} { // globex: and its created table
		n := 0
		for id := range tpl["Resources"].(map[string]any) {
			if strings.HasPrefix(id, "Tenant"+tenant) {
				n++
			}
		}
		if n != want {
			t.Errorf("tenant %s: got %d resources, want %d", tenant, n, want)
		}
	}
}

// TestEncryptionImportedKeyWarnsWithTheStatements: an imported key's policy cannot be changed, so
// synth warns with the exact statements, in the key's partition, region and account.
func TestEncryptionImportedKeyWarnsWithTheStatements(t *testing.T) {
	built, _ := encryptedApp(t, importedKeyARN, stacks.Options{})
	first := built.TenantStacks[0]
	msgs := assertions.Annotations_FromStack(first).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("encryption key .* is not managed by this app")))
	if len(*msgs) != 1 {
		t.Fatalf("got %d warnings about the imported key, want 1", len(*msgs))
	}
	msg := fmt.Sprint((*msgs)[0].Entry.Data)
	if k := strings.LastIndex(msg, " [ack: "); k >= 0 {
		msg = msg[:k] // CDK appends how to acknowledge the warning
	}
	i := strings.Index(msg, "): [")
	if i < 0 {
		t.Fatalf("got %q, want the statements as a JSON array", msg)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(msg[i+3:]), &got); err != nil {
		t.Fatalf("got statements that are not JSON: %v\n%s", err, msg[i+3:])
	}
	want := tenantpipeline.AppKeyPolicy("aws", "eu-west-1", "111122223333", "TenantPipeline").Statements()
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("got statements %s, want %s", gotJSON, wantJSON)
	}
	for _, w := range []string{`"events.amazonaws.com"`, `arn:aws:events:eu-west-1:111122223333:rule/TenantPipeline-*`, `"logs.eu-west-1.amazonaws.com"`,
		`arn:aws:logs:eu-west-1:111122223333:log-group:/aws/vendedlogs/states/TenantPipeline-*`} {
		if !strings.Contains(msg, w) {
			t.Errorf("got %q, want it to contain %s", msg, w)
		}
	}
	// The constructs, told that the app keeps the key policy, add no warning of their own.
	for _, s := range append(append([]awscdk.Stack{}, built.TenantStacks...), built.PoolStacks...) {
		if n := len(*assertions.Annotations_FromStack(s).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("policy cannot be changed from this stack")))); n > 0 {
			t.Errorf("%s: got %d construct warnings about the key policy, want none (KeyPolicyCovered)", *s.StackName(), n)
		}
	}
}

// TestEncryptionInYourOwnApp: a construct given a key of its own stack adds to the key policy
// EventBridge's statement for exactly its rule and CloudWatch Logs' for exactly its log groups; given
// an imported key, it warns with the statements its owner must add.
func TestEncryptionInYourOwnApp(t *testing.T) {
	for _, imported := range []bool{false, true} {
		t.Run(fmt.Sprintf("imported %v", imported), func(t *testing.T) {
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
			stack := awscdk.NewStack(app, jsii.String("MyPipeline"), &awscdk.StackProps{Env: &awscdk.Environment{Account: jsii.String("111122223333"), Region: jsii.String("eu-west-1")}})
			var key awskms.IKey
			if imported {
				key = awskms.Key_FromKeyArn(stack, jsii.String("Key"), jsii.String(importedKeyARN))
			} else {
				key = awskms.NewKey(stack, jsii.String("Key"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
			}
			bucket := awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{
				EventBridgeEnabled: jsii.Bool(true), Versioned: jsii.Bool(true),
				Encryption: awss3.BucketEncryption_KMS, EncryptionKey: key, BucketKeyEnabled: jsii.Bool(true),
			})
			p := tenantpipeline.New(stack, "Acme", &tenantpipeline.Props{
				Tenant:      tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/records"},
				Bucket:      bucket,
				SharedProps: tenantpipeline.SharedProps{EncryptionKey: key},
			})
			tpl := assertions.Template_FromStack(stack, nil)
			// Every role of the construct that calls a store holds the key for it.
			missing, checked := rolesMissingTheKey(stack)
			for _, m := range missing {
				t.Error(m)
			}
			if checked < 5 {
				t.Errorf("checked %d role needs of the construct, want at least 5", checked)
			}
			warnings := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("policy cannot be changed from this stack")))
			if imported {
				if len(*warnings) != 1 {
					t.Fatalf("got %d key policy warnings, want 1", len(*warnings))
				}
				msg := fmt.Sprint((*warnings)[0].Entry.Data)
				for _, w := range []string{"arn:aws:events:eu-west-1:111122223333:rule/MyPipeline-*", "events.amazonaws.com", "logs.eu-west-1.amazonaws.com"} {
					if !strings.Contains(msg, w) {
						t.Errorf("got %q, want it to contain %s", msg, w)
					}
				}
				return
			}
			if len(*warnings) != 0 {
				t.Errorf("got %d key policy warnings, want none for a key of the construct's stack", len(*warnings))
			}
			// The key policy cannot name the rule (the rule names the bucket, which names the key):
			// it names the rules of the construct's stack.
			found := false
			for _, k := range *tpl.FindResources(jsii.String("AWS::KMS::Key"), nil) {
				sts, _ := dig(*k, "Properties", "KeyPolicy", "Statement").([]any)
				for _, st := range sts {
					b, _ := json.Marshal(st)
					if strings.Contains(string(b), `"events.amazonaws.com"`) {
						found = true
						if !strings.Contains(string(b), ":rule/MyPipeline-*") || !strings.Contains(string(b), `"aws:SourceArn"`) {
							t.Errorf("got EventBridge's statement %s, want it scoped to the rules of stack MyPipeline", b)
						}
					}
				}
			}
			if !found {
				t.Error("got no EventBridge statement in the key policy")
			}
			_ = p.Rule
			// The bucket's own key (Bucket.EncryptionKey) is what Split is granted on the bucket.
			templatecheck.Assert(t, func() {
				tpl.HasResourceProperties(jsii.String("AWS::IAM::Policy"), &map[string]any{"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{
					assertions.Match_ObjectLike(&map[string]any{"Action": []string{"kms:Decrypt", "kms:GenerateDataKey"},
						"Condition": assertions.Match_ObjectLike(&map[string]any{"StringLike": map[string]any{"kms:EncryptionContext:aws:s3:arn": assertions.Match_AnyValue()}})}),
				})}})
			})
		})
	}
}

// TestEncryptionNagSuppressesNothingAboutKMS: with a key, no cdk-nag rule about encryption with
// KMS (SSE on queues, key rotation, topics) is suppressed anywhere; TestCdkNag runs the pack on
// encryption.json.
func TestEncryptionNagSuppressesNothingAboutKMS(t *testing.T) {
	_, all := encryptedApp(t, "", stacks.Options{})
	for _, stack := range all {
		tpl := templateJSON(assertions.Template_FromStack(stack, nil))
		b, _ := json.Marshal(tpl["Resources"])
		for _, rule := range []string{"AwsSolutions-SQS2", "AwsSolutions-KMS5", "AwsSolutions-SNS2"} {
			if strings.Contains(string(b), `"`+rule+`"`) {
				t.Errorf("%s: got a suppression of %s, want none with a key", *stack.StackName(), rule)
			}
		}
	}
}

// TestEncryptionDefaultIsUnchanged: without "encryption" no key exists and no construct warns
// about one (the snapshots pin the templates: TestSnapshot).
func TestEncryptionDefaultIsUnchanged(t *testing.T) {
	app, built := synthApp(t, "coresystems.json", stacks.Options{})
	if built.Key != nil {
		t.Errorf("got a key without encryption, want none")
	}
	for _, c := range *app.Node().Children() {
		s, ok := c.(awscdk.Stack)
		if !ok || !*awscdk.Stack_IsStack(c) {
			continue
		}
		templatecheck.Assert(t, func() {
			assertions.Template_FromStack(s, nil).ResourceCountIs(jsii.String("AWS::KMS::Key"), jsii.Number(0))
		})
		for id, f := range byType(templateJSON(assertions.Template_FromStack(s, nil)), "AWS::Lambda::Function") {
			if k, ok := props(f)["KmsKeyArn"]; ok {
				t.Errorf("%s %s: got KmsKeyArn %v without encryption, want Lambda's own key", *s.StackName(), id, k)
			}
		}
		var found []*cxapi.SynthesisMessage
		found = append(found, *assertions.Annotations_FromStack(s).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("[Kk]ey policy")))...)
		if len(found) > 0 {
			t.Errorf("%s: got %d key warnings without encryption", *s.StackName(), len(found))
		}
	}
}

// TestEncryptionKeyAdministrationIsSeparated: the created key's account statement lets IAM
// policies grant every KMS action but deleting, disabling or unrotating the key; only the named
// administrators hold those, and they may not encrypt or decrypt. A key without administrators
// warns; a construct user's NewKey refuses an administrator that is no role or user ARN.
func TestEncryptionKeyAdministrationIsSeparated(t *testing.T) {
	built, _ := encryptedApp(t, "", stacks.Options{})
	statements := keyPolicyStatements(t, built)
	grants := func(s map[string]any, action string) bool {
		list := func(k string) []string {
			var out []string
			switch v := s[k].(type) {
			case string:
				out = []string{v}
			case []any:
				for _, a := range v {
					out = append(out, a.(string))
				}
			}
			return out
		}
		matches := func(patterns []string) bool {
			for _, p := range patterns {
				if ok, _ := filepath.Match(p, action); ok {
					return true
				}
			}
			return false
		}
		if s["NotAction"] != nil {
			return !matches(list("NotAction"))
		}
		return matches(list("Action"))
	}
	accountStatements := 0
	for _, s := range statements {
		principal, _ := json.Marshal(s["Principal"])
		if strings.Contains(string(principal), ":root") {
			accountStatements++
			if s["Sid"] != tenantpipeline.KeyAccountStatementSid || s["Action"] != nil {
				t.Errorf("got the account statement %v, want Sid %s and NotAction, no Action", s, tenantpipeline.KeyAccountStatementSid)
			}
			for _, a := range []string{"kms:Decrypt", "kms:GenerateDataKey", "kms:CreateGrant", "kms:PutKeyPolicy", "kms:DescribeKey"} {
				if !grants(s, a) {
					t.Errorf("the account statement leaves out %s, which IAM policies (and CloudFormation's role) need", a)
				}
			}
		}
		if s["Effect"] != "Allow" {
			continue
		}
		for _, a := range tenantpipeline.KeyAdminOnlyActions {
			if grants(s, a) && string(principal) != `{"AWS":"`+keyAdmin+`"}` {
				t.Errorf("statement %v grants %s to %s, want only the key administrator %s", s["Sid"], a, principal, keyAdmin)
			}
		}
		if string(principal) == `{"AWS":"`+keyAdmin+`"}` {
			for _, a := range []string{"kms:ScheduleKeyDeletion", "kms:DisableKey", "kms:CancelKeyDeletion", "kms:PutKeyPolicy"} {
				if !grants(s, a) {
					t.Errorf("the key administrator lacks %s", a)
				}
			}
			for _, a := range []string{"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:ReEncryptFrom"} {
				if grants(s, a) {
					t.Errorf("the key administrator may %s, want administration without use", a)
				}
			}
		}
	}
	if accountStatements != 1 {
		t.Errorf("got %d account statements, want 1", accountStatements)
	}
	admins := 0
	for _, s := range statements {
		if p, _ := json.Marshal(s["Principal"]); string(p) == `{"AWS":"`+keyAdmin+`"}` && grants(s, "kms:ScheduleKeyDeletion") {
			admins++
		}
	}
	if admins != 1 {
		t.Errorf("got %d statements letting %s schedule the deletion, want 1", admins, keyAdmin)
	}
	warned := assertions.Annotations_FromStack(awscdk.Stack_Of(built.Key)).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("the key has no administrators")))
	if len(*warned) != 0 {
		t.Errorf("got %d warnings about the key's administrators, want none: it has one", len(*warned))
	}

	t.Run("a construct user's key without administrators", func(t *testing.T) {
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
		stack := awscdk.NewStack(app, jsii.String("MyKey"), nil)
		tenantpipeline.NewKey(stack, "Key", nil)
		warned := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("the key has no administrators")))
		if len(*warned) != 1 {
			t.Errorf("got %d warnings about the key's administrators, want 1", len(*warned))
		}
		tpl := templateJSON(assertions.Template_FromStack(stack, nil))
		for _, r := range tpl["Resources"].(map[string]any) {
			for _, s := range dig(r.(map[string]any), "Properties", "KeyPolicy", "Statement").([]any) {
				for _, a := range tenantpipeline.KeyAdminOnlyActions {
					if grants(s.(map[string]any), a) {
						t.Errorf("statement %v grants %s with no administrator named", s, a)
					}
				}
			}
		}
	})
	t.Run("a construct user's administrator that is no role", func(t *testing.T) {
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
		err := tenantpipeline.Synth(app, func() error {
			stack := awscdk.NewStack(app, jsii.String("MyKey"), nil)
			tenantpipeline.NewKey(stack, "Key", &tenantpipeline.KeyProps{Admins: []string{"arn:aws:iam::123456789012:root"}})
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), "Validation failed with the following errors:") ||
			!strings.Contains(err.Error(), `KeyProps.Admins: "arn:aws:iam::123456789012:root" is not an IAM role or user ARN`) {
			t.Errorf("got %v, want CDK's validation failure naming KeyProps.Admins", err)
		}
	})
}
