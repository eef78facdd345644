package test

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/stacks"
)

// poolPolicyStatements returns the statements of the policies (AWS::IAM::Policy) whose logical id starts
// with prefix.
func poolPolicyStatements(t *testing.T, tpl map[string]any, prefix string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for id, pol := range byType(tpl, "AWS::IAM::Policy") {
		if !strings.HasPrefix(id, prefix) {
			continue
		}
		for _, s := range get(t, props(pol), "PolicyDocument", "Statement").([]any) {
			out = append(out, s.(map[string]any))
		}
	}
	return out
}

// tenantData says whether a resource (its template JSON) is one tenant's data: an object or listing of the ingest
// bucket, a secret, or a table under the pool's table prefix.
func tenantData(resource string) bool {
	return strings.Contains(resource, "TenantPipeline-Ingest:") || strings.Contains(resource, ":secret:") ||
		strings.Contains(resource, ":table/pool-")
}

// TestPoolTenantRole: the pool's tenant roles, one per function, trust exactly their function's
// role (TenantRole the controller's, SplitTenantRole Split's, RegisterTenantRole Register's), with
// sts:TagSession and exactly the tenant tag; each of their data statements names
// ${aws:PrincipalTag/tenant}; each grants what its function does for a tenant and nothing else:
// the controller's no file and no work object, Split's and Register's no control or quarantine
// key; only Register's reads the tenant's secret and writes its table; each denies everything to
// a session tagged with the app's silo tenant's id; no function role keeps a grant on tenant data; each function may assume its role alone and is told its ARN, the router
// neither. The silo tier has none of it.
func TestPoolTenantRole(t *testing.T) {
	_, tpl := poolTemplate(t)
	secret := "secretsmanager:GetSecretValue arn:<Ref:AWS::Partition>:secretsmanager:<Ref:AWS::Region>:<Ref:AWS::AccountId>:secret:tenantpipeline/${aws:PrincipalTag/tenant}-??????"
	table := "dynamodb:PutItem arn:<Ref:AWS::Partition>:dynamodb:<Ref:AWS::Region>:<Ref:AWS::AccountId>:table/pool-${aws:PrincipalTag/tenant}"
	const bucket = "<Import:TenantPipeline-Ingest:ExportsOutputFnGetAttBucket83908E77Arn063C8555>"
	files := []string{
		"s3:GetObject,s3:GetObjectVersion " + bucket + "/pools/default/${aws:PrincipalTag/tenant}/*",
		"s3:GetObject,s3:GetObjectVersion,s3:PutObject " + bucket + "/work/pool.default/${aws:PrincipalTag/tenant}/*",
		// The results task and Register: the rejection parts and the results files.
		"s3:GetObject,s3:PutObject " + bucket + "/results/pool.default/${aws:PrincipalTag/tenant}/*",
	}
	filesList := `{"StringLike":{"s3:prefix":["pools/default/${aws:PrincipalTag/tenant}/*","work/pool.default/${aws:PrincipalTag/tenant}/*","results/pool.default/${aws:PrincipalTag/tenant}/*"]}}`
	controller := []string{
		"s3:PutObject " + bucket + "/quarantine/pool.default/${aws:PrincipalTag/tenant}/*",
		"/control/pool.default/${aws:PrincipalTag/tenant}/paused.json",
		"/control/pool.default/${aws:PrincipalTag/tenant}/order.json",
		"s3:GetObject,s3:PutObject " + bucket + "/control/pool.default/${aws:PrincipalTag/tenant}/requests/*",
		"s3:GetObject,s3:PutObject " + bucket + "/results/pool.default/${aws:PrincipalTag/tenant}/*/summary.json",
	}
	controllerList := `{"StringLike":{"s3:prefix":["control/pool.default/${aws:PrincipalTag/tenant}/*","results/pool.default/${aws:PrincipalTag/tenant}/*"]}}`
	roleIDs := map[string]string{}
	for _, tc := range []struct {
		role       string
		principals []string // the functions' roles it trusts, sorted
		assumedBy  []string // function id prefixes
		register   bool     // the secret and the table
		want       []string // grants it holds
		list       string   // its ListBucket condition
		never      []string // key fragments it may not reach
	}{
		{"PoolTenantRole", []string{"<GetAtt:PoolControllerServiceRole"}, []string{"PoolController"}, false, controller, controllerList,
			[]string{"/pools/default/", "/work/", "/results/pool.default/${aws:PrincipalTag/tenant}/*\n"}},
		{"PoolSplitTenantRole", []string{"<GetAtt:PoolSplitServiceRole"}, []string{"PoolSplit"}, false, files, filesList,
			[]string{"/control/", "/quarantine/"}},
		{"PoolRegisterTenantRole", []string{"<GetAtt:PoolRegisterServiceRole"}, []string{"PoolRegister"}, true, files, filesList,
			[]string{"/control/", "/quarantine/"}},
	} {
		t.Run(tc.role, func(t *testing.T) {
			var roleID string
			var trust []any
			for id, r := range byType(tpl, "AWS::IAM::Role") {
				if strings.HasPrefix(id, tc.role) {
					roleID, trust = id, get(t, props(r), "AssumeRolePolicyDocument", "Statement").([]any)
				}
			}
			if roleID == "" {
				t.Fatalf("no %s", tc.role)
			}
			roleIDs[tc.role] = roleID
			var principals []string
			for _, s := range trust {
				st := s.(map[string]any)
				if got := asJSON(st["Action"]); got != `["sts:AssumeRole","sts:TagSession"]` {
					t.Errorf("got actions %s, want sts:AssumeRole and sts:TagSession", got)
				}
				want := `{"ForAllValues:StringEquals":{"aws:TagKeys":["tenant","pool"]},"Null":{"aws:RequestTag/tenant":"false"},` +
					`"StringEquals":{"aws:RequestTag/pool":"default"},"StringLike":{"aws:RequestTag/tenant":"?*"}}`
				if got := asJSON(st["Condition"]); got != want {
					t.Errorf("got conditions %s, want %s", got, want)
				}
				p := get(t, st, "Principal", "AWS")
				if l, ok := p.([]any); ok {
					for _, e := range l {
						principals = append(principals, flatten(t, e))
					}
				} else {
					principals = append(principals, flatten(t, p))
				}
			}
			slices.Sort(principals)
			ok := len(principals) == len(tc.principals)
			for i := range principals {
				ok = ok && strings.HasPrefix(principals[i], tc.principals[i])
			}
			if !ok {
				t.Errorf("got principals %v, want exactly %v", principals, tc.principals)
			}

			stmts := poolPolicyStatements(t, tpl, tc.role)
			// The app's silo tenant (acme) is denied to every session of the role, exactly.
			wantDeny := `{"Action":"*","Condition":{"StringEquals":{"aws:PrincipalTag/tenant":["acme"]}},"Effect":"Deny","Resource":"*","Sid":"` + tenantpipeline.SidNoSiloTenantSessions + `"}`
			denies := 0
			var granted []string
			for _, st := range stmts {
				if st["Effect"] == "Deny" {
					if got := asJSON(st); got != wantDeny {
						t.Errorf("%s: got Deny %s, want only %s", tc.role, got, wantDeny)
					}
					denies++
					continue
				}
				for _, r := range resources(t, st) {
					named := strings.Contains(r, "${aws:PrincipalTag/tenant}")
					if a := actions(st); slices.Equal(a, []string{"s3:ListBucket"}) {
						named = asJSON(st["Condition"]) == tc.list
					}
					if !named {
						t.Errorf("statement %s: resource %s is not conditioned on the tenant tag", asJSON(st["Action"]), r)
					}
					// The pipeline's keys of a tenant carry the pool: a session tagged with another
					// pool's tenant's id names none of that tenant's objects.
					for _, area := range pipeline.ReservedPrefixes {
						if strings.Contains(r, "/"+area) && !strings.Contains(r, "/"+area+"pool.default/${aws:PrincipalTag/tenant}/") {
							t.Errorf("statement %s: resource %s is under %s without the pool: pool.default/${aws:PrincipalTag/tenant}/", asJSON(st["Action"]), r, area)
						}
					}
					granted = append(granted, strings.Join(actions(st), ",")+" "+r)
				}
			}
			if denies != 1 {
				t.Errorf("%s: got %d Deny statements, want the one naming the app's silo tenants", tc.role, denies)
			}
			all := strings.Join(granted, "\n") + "\n"
			for _, want := range tc.want {
				if !strings.Contains(all, want) {
					t.Errorf("%s grants\n%s\nwant %q", tc.role, all, want)
				}
			}
			for _, never := range tc.never {
				if strings.Contains(all, never) {
					t.Errorf("%s grants\n%s\nwant nothing on %q", tc.role, all, never)
				}
			}
			for _, own := range []string{secret, table} {
				if strings.Contains(all, own) != tc.register {
					t.Errorf("%s grants %q: %v, want %v (Register's role alone)", tc.role, own, !tc.register, tc.register)
				}
			}

			for _, fn := range []string{"PoolController", "PoolSplit", "PoolRegister", "PoolRouter"} {
				want := slices.Contains(tc.assumedBy, fn)
				assumes := slices.ContainsFunc(poolPolicyStatements(t, tpl, fn+"ServiceRole"), func(st map[string]any) bool {
					return asJSON(st["Action"]) == `["sts:AssumeRole","sts:TagSession"]` && slices.Equal(resources(t, st), []string{"<GetAtt:" + roleID + ".Arn>"})
				})
				if assumes != want {
					t.Errorf("%s may assume %s: got %v, want %v", fn, tc.role, assumes, want)
				}
				for id, f := range byType(tpl, "AWS::Lambda::Function") {
					if !strings.HasPrefix(id, fn) || !want {
						continue
					}
					v, ok := get(t, props(f), "Environment", "Variables").(map[string]any)[pipeline.EnvTenantRoleARN]
					if !ok || flatten(t, v) != "<GetAtt:"+roleID+".Arn>" {
						t.Errorf("%s: got %s=%v (set %v), want it set to %s", id, pipeline.EnvTenantRoleARN, v, ok, tc.role)
					}
					if v := get(t, props(f), "Environment", "Variables").(map[string]any)[pipeline.EnvTenantRolePool]; v != "default" {
						t.Errorf("%s: got %s=%v, want the pool's name, default, the tag its role's trust wants", id, pipeline.EnvTenantRolePool, v)
					}
				}
			}
		})
	}

	t.Run("the router assumes neither", func(t *testing.T) {
		for id, f := range byType(tpl, "AWS::Lambda::Function") {
			if !strings.HasPrefix(id, "PoolRouter") {
				continue
			}
			for _, name := range []string{pipeline.EnvTenantRoleARN, pipeline.EnvTenantRolePool} {
				if v, ok := get(t, props(f), "Environment", "Variables").(map[string]any)[name]; ok {
					t.Errorf("%s: got %s=%v, want none", id, name, v)
				}
			}
		}
		if strings.Contains(asJSON(poolPolicyStatements(t, tpl, "PoolRouterServiceRole")), "sts:TagSession") {
			t.Error("the router may tag a session, want not")
		}
	})

	t.Run("function roles keep no tenant data", func(t *testing.T) {
		for _, fn := range []string{"PoolController", "PoolSplit", "PoolRegister", "PoolRouter"} {
			for _, st := range poolPolicyStatements(t, tpl, fn+"ServiceRole") {
				rs, ok := st["Resource"].([]any)
				if !ok {
					rs = []any{st["Resource"]}
				}
				for _, r := range rs {
					// The parked files are the router's own state, the S3 events it could not queue
					// yet (a key and its metadata, no file content), written before any tenant is
					// known to the router and read back by the controller: pool-wide, like the queue.
					if strings.HasSuffix(asJSON(r), `/control/pool.default/*/parked/*"]]}`) {
						continue
					}
					if tenantData(asJSON(r)) {
						t.Errorf("%s: %s on %s: a function role grants tenant data without the tenant tag", fn, asJSON(st["Action"]), r)
					}
				}
			}
		}
	})

	t.Run("silo tier unchanged", func(t *testing.T) {
		sharedApp(t)
		all := asJSON(shared.template)
		for _, absent := range []string{"sts:TagSession", pipeline.EnvTenantRoleARN, pipeline.EnvTenantRolePool, "${aws:PrincipalTag/tenant}"} {
			if strings.Contains(all, absent) {
				t.Errorf("the silo template has %q, want none", absent)
			}
		}
	})
}

// TestPoolPropsDerivedNames: a Go app's NewPool gets the tenants file's checks of the derived
// names, each message naming the prop: the prefix, the secret, the table, and the name prefixes'
// shape.
func TestPoolPropsDerivedNames(t *testing.T) {
	app := testApp(t)
	stack := awscdk.NewStack(app, jsii.String("BadNames"), nil)
	msg := propsFailure(t, app, func() {
		tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{
			Name: "shared", Bucket: stacks.NewIngestBucket(stack, "Bucket"), SecretPrefix: "p/", TablePrefix: "pool-",
			Tenants: []tenantpipeline.Tenant{
				{ID: "a", RegisterURL: "https://core.example.com/a", Prefix: "pools/shared/b/"},
				{ID: "b", RegisterURL: "https://core.example.com/b", RegisterAuthSecretARN: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:p/b-AbCdEf"},
				{ID: "c", DynamoDB: &tenantpipeline.DynamoDB{Key: []string{"id"}, Table: "pool-shared"}},
			},
		})
	})
	for _, want := range []string{
		`.Prefix (tenant "a"): "pools/shared/b/" is not "pools/shared/a/"`,
		`pool "shared": PoolProps.SecretPrefix "p/" is invalid: use at least 3`,
		`.DynamoDB.Table (tenant "c"): "pool-shared" is not "pool-c"`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("synth message\n%s\nlacks %q", msg, want)
		}
	}
}

// TestPoolsNamePrefixesDisjoint: in a Go app, a pool whose secret or table name prefix starts
// another pool's fails synth, told on the later pool, as two such pools of a tenants file do: a
// session of the first pool's tenant role tagged "q-y" would name the second pool's tenant y's
// secret or table. Disjoint prefixes pass.
func TestPoolsNamePrefixesDisjoint(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second tenantpipeline.PoolProps
		want   string
	}{
		{"secret prefixes overlap", tenantpipeline.PoolProps{SecretPrefix: "tp/q-"},
			`[Names/Pool-q] pool "q": PoolProps.SecretPrefix "tp/q-" overlaps the PoolProps.SecretPrefix "tp/" of pool "p" (Names/Pool-p), ` +
				`so a session of one pool's tenant role could name the other pool's tenants' secrets: make the prefixes disjoint`},
		{"table prefixes equal", tenantpipeline.PoolProps{TablePrefix: "pool-p-"},
			`[Names/Pool-q] pool "q": PoolProps.TablePrefix "pool-p-" overlaps the PoolProps.TablePrefix "pool-p-" of pool "p" (Names/Pool-p)`},
		{"disjoint", tenantpipeline.PoolProps{SecretPrefix: "tq/", TablePrefix: "pool-q-"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := testApp(t)
			stack := awscdk.NewStack(app, jsii.String("Names"), nil)
			bucket := stacks.NewIngestBucket(stack, "Bucket")
			tenantpipeline.NewPool(stack, "Pool-p", &tenantpipeline.PoolProps{Name: "p", Bucket: bucket, SecretPrefix: "tp/", TablePrefix: "pool-p-",
				Tenants: []tenantpipeline.Tenant{{ID: "x", RegisterURL: "https://core.example.com/x"}}})
			second := tc.second
			second.Name, second.Bucket = "q", bucket
			second.Tenants = []tenantpipeline.Tenant{{ID: "y", RegisterURL: "https://core.example.com/y"}}
			tenantpipeline.NewPool(stack, "Pool-q", &second)
			checkValidation(t, synthPanic(app), tc.want, "[Names/Pool-p]")
		})
	}
}

// TestPoolTenantRolesDenySiloTenants: in a Go app that imports the constructs, a pool's three
// tenant roles deny everything to a session tagged with the id of any silo tenant of the app, the
// ones created after the pool included (the Deny is added when the app is complete), sorted; a
// pool in an app without silo tenants has no Deny.
func TestPoolTenantRolesDenySiloTenants(t *testing.T) {
	denies := func(t *testing.T, silos ...string) map[string]string {
		t.Helper()
		app := testApp(t)
		stack := awscdk.NewStack(app, jsii.String("Silos"), nil)
		bucket := stacks.NewIngestBucket(stack, "Bucket")
		tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{
			Name: "shared", Bucket: bucket,
			Tenants: []tenantpipeline.Tenant{{ID: "hooli", RegisterURL: "https://core.example.com/hooli"}},
		})
		for _, id := range silos {
			tenantpipeline.New(stack, "Tenant-"+id, &tenantpipeline.Props{
				Tenant: tenantpipeline.Tenant{ID: id, RegisterURL: "https://core.example.com/" + id}, Bucket: bucket,
			})
		}
		tpl := templateJSON(assertions.Template_FromStack(stack, nil))
		out := map[string]string{}
		for _, role := range []string{"PoolTenantRole", "PoolSplitTenantRole", "PoolRegisterTenantRole"} {
			for _, st := range poolPolicyStatements(t, tpl, role) {
				if st["Effect"] == "Deny" {
					out[role] += asJSON(st)
				}
			}
		}
		return out
	}
	want := `{"Action":"*","Condition":{"StringEquals":{"aws:PrincipalTag/tenant":["acme","zeta"]}},"Effect":"Deny","Resource":"*","Sid":"NoSiloTenantSessions"}`
	got := denies(t, "zeta", "acme")
	for _, role := range []string{"PoolTenantRole", "PoolSplitTenantRole", "PoolRegisterTenantRole"} {
		if got[role] != want {
			t.Errorf("%s: got Deny %s, want %s", role, got[role], want)
		}
	}
	if got := denies(t); len(got) != 0 {
		t.Errorf("a pool without silo tenants: got Denies %v, want none", got)
	}
}

// TestPoolKeysInAGoApp: a Go app's pool's tenant roles trust only sessions tagged with its name;
// with Keys KeysPerPool it names its tenants' keys under "<area>/pool.<name>/" in every grant of
// its tenant roles and its parked files, and tells its four functions KEYS_POOL; without Keys, a pool keeps the earlier layout (KeysPerTenant) and
// sets no KEYS_POOL; any other value fails synth.
func TestPoolKeysInAGoApp(t *testing.T) {
	synth := func(t *testing.T, keys string) map[string]any {
		t.Helper()
		app := testApp(t)
		stack := awscdk.NewStack(app, jsii.String("Keys"), nil)
		tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{
			Name: "shared", Bucket: stacks.NewIngestBucket(stack, "Bucket"), Keys: keys,
			Tenants: []tenantpipeline.Tenant{{ID: "hooli", RegisterURL: "https://core.example.com/hooli"}},
		})
		return templateJSON(assertions.Template_FromStack(stack, nil))
	}
	for _, tc := range []struct {
		name, keys, root, keysPool string
	}{
		{"per pool", tenantpipeline.KeysPerPool, "pool.shared/${aws:PrincipalTag/tenant}/", "shared"},
		{"default: per tenant", "", "${aws:PrincipalTag/tenant}/", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpl := synth(t, tc.keys)
			for _, role := range []string{"PoolTenantRole", "PoolSplitTenantRole", "PoolRegisterTenantRole"} {
				// Whatever the layout, the trust wants the pool's own tag beside the tenant's.
				for id, r := range byType(tpl, "AWS::IAM::Role") {
					if !strings.HasPrefix(id, role) {
						continue
					}
					for _, st := range get(t, props(r), "AssumeRolePolicyDocument", "Statement").([]any) {
						want := `{"ForAllValues:StringEquals":{"aws:TagKeys":["tenant","pool"]},"Null":{"aws:RequestTag/tenant":"false"},` +
							`"StringEquals":{"aws:RequestTag/pool":"shared"},"StringLike":{"aws:RequestTag/tenant":"?*"}}`
						if got := asJSON(st.(map[string]any)["Condition"]); got != want {
							t.Errorf("%s: got trust conditions %s, want %s", id, got, want)
						}
					}
				}
				for _, st := range poolPolicyStatements(t, tpl, role) {
					for _, r := range resources(t, st) {
						for _, area := range pipeline.ReservedPrefixes {
							if strings.Contains(r, "/"+area) && !strings.Contains(r, "/"+area+tc.root) {
								t.Errorf("%s: %s on %s, want it under %s%s", role, asJSON(st["Action"]), r, area, tc.root)
							}
						}
					}
				}
			}
			parked := `/control/` + strings.TrimSuffix(strings.TrimSuffix(tc.root, "${aws:PrincipalTag/tenant}/"), "/")
			for _, fn := range []string{"PoolRouter", "PoolController"} {
				all := asJSON(poolPolicyStatements(t, tpl, fn+"ServiceRole"))
				want := parked + `/*/parked/*`
				if tc.keysPool == "" {
					want = `/control/*/parked/*`
				}
				if !strings.Contains(all, want) {
					t.Errorf("%s's role: want parked files under %s, in\n%s", fn, want, all)
				}
				if tc.keysPool != "" && strings.Contains(all, `/control/*/parked/*`) {
					t.Errorf("%s's role: parked files of every pool's tenants, want its pool's only", fn)
				}
			}
			for _, fn := range []string{"PoolRouter", "PoolController", "PoolSplit", "PoolRegister"} {
				for id, f := range byType(tpl, "AWS::Lambda::Function") {
					if !strings.HasPrefix(id, fn) {
						continue
					}
					v, ok := get(t, props(f), "Environment", "Variables").(map[string]any)[pipeline.EnvKeysPool]
					if tc.keysPool == "" && ok || tc.keysPool != "" && v != tc.keysPool {
						t.Errorf("%s: got %s=%v (set %v), want %q", id, pipeline.EnvKeysPool, v, ok, tc.keysPool)
					}
				}
			}
		})
	}
	t.Run("another value", func(t *testing.T) {
		app := testApp(t)
		stack := awscdk.NewStack(app, jsii.String("BadKeys"), nil)
		msg := propsFailure(t, app, func() {
			tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{
				Name: "shared", Bucket: stacks.NewIngestBucket(stack, "Bucket"), Keys: "pool-scoped",
				Tenants: []tenantpipeline.Tenant{{ID: "hooli", RegisterURL: "https://core.example.com/hooli"}},
			})
		})
		if !strings.Contains(msg, `pool "shared": PoolProps.Keys "pool-scoped" is not a layout: use "pool"`) {
			t.Errorf("synth message\n%s\nlacks the layout's refusal", msg)
		}
	})
}
