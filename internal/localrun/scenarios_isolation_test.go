//go:build e2e || figures

package localrun

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	ststypes "github.com/aws/aws-sdk-go-v2/service/sts/types"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/tenantcreds"
)

const isolatedTenants = `{"pools": {"other": {"keys": "tenant"}}, "tenants": [
  {"id": "ta", "tier": "pool", "smallFileBytes": -1, "registerUrl": "https://core.example.com/records"},
  {"id": "tb", "tier": "pool", "smallFileBytes": -1, "registerUrl": "https://core.example.com/records"},
  {"id": "sx", "registerUrl": "https://core.example.com/records"},
  {"id": "oc", "tier": "pool", "pool": "other", "smallFileBytes": -1, "registerUrl": "https://core.example.com/records"}
]}`

// A pool's functions act for each tenant with a session of the synthesized tenant role tagged
// with it: both tenants' files succeed through those sessions, nothing of theirs is refused, and a
// session of ta (made as the functions make it, against the run's STS and S3) is refused tb's
// file and tb's work/ objects, the policy read from the synthesized template; a session tagged
// with the silo tenant's id is refused that tenant's keys, and one tagged with another pool's
// tenant's id reaches none of that tenant's keys. Pool default's keys carry the pool (a new
// pool's layout); pool other keeps the earlier layout ("keys": "tenant"), whose roles only the
// NoSiloTenantSessions Deny keeps from a silo tenant's keys.
func TestScenarioPoolTenantSessions(t *testing.T) {
	t.Parallel()
	r := startScenario(t, isolatedTenants, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// No small-file path (smallFileBytes -1), so that each file takes Split and leaves work/
	// objects (the SmallFile task writes none).
	uploadAll(t, ctx, r, []upload{{"ta", "a.csv", csvOf(150)}, {"tb", "b.csv", csvOf(150)}, {"oc", "c.csv", csvOf(150)}})
	rep := waitFor(t, ctx, r, "the three files succeed", func(rep *report.Report) bool {
		for _, id := range []string{"ta", "tb", "oc"} {
			if tr := rep.Tenants[id]; tr == nil || len(tr.Files) != 1 || tr.Files[0].Status != "SUCCEEDED" {
				return false
			}
		}
		return true
	})
	tags := r.auth.SessionTenants()
	for _, id := range []string{"ta", "tb"} {
		if !slices.Contains(tags, id) {
			t.Errorf("got sessions of %v, want one of %s: its files were not processed as the tenant", tags, id)
		}
	}
	if n := r.auth.Refused(); n != 0 {
		t.Errorf("got %d refused requests, want 0: a function asked for what its tenant's policy does not allow", n)
	}

	// The roles the functions were given (each its own: Register's alone reads secrets and tables,
	// the controller's no file), and the run's STS and S3 endpoints.
	roles, endpoints := poolFunctionRoles(r, "default")
	role, stsURL := roles["Split"], endpoints["AWS_ENDPOINT_URL_STS"]
	if role.ARN == "" || role.Pool == "" || stsURL == "" {
		t.Fatalf("got roles %v, STS %q: the pool's functions were not given the tenant role", roles, stsURL)
	}
	if roles["Controller"].ARN == "" || roles["Register"].ARN == "" || roles["Controller"].ARN == role.ARN || roles["Register"].ARN == role.ARN || roles["Controller"].ARN == roles["Register"].ARN {
		t.Errorf("got roles %v, want one of its own for each of the controller, Split and Register", roles)
	}
	creds, err := tenantcreds.New(sts.NewFromConfig(emulate.LocalAWS, func(o *sts.Options) { o.BaseEndpoint = aws.String(stsURL) }), role, 0).For("ta")
	if err != nil {
		t.Fatal(err)
	}
	cfg := emulate.LocalAWS.Copy()
	cfg.Credentials = creds
	asA := s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint = aws.String(r.pipe.s3); o.UsePathStyle = true })
	keys := func(tenant, prefix string) []string {
		out, err := r.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(r.Bucket), Prefix: aws.String(prefix)})
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, o := range out.Contents {
			ks = append(ks, aws.ToString(o.Key))
		}
		if len(ks) == 0 {
			t.Fatalf("no object of %s under %s", tenant, prefix)
		}
		return ks
	}
	poolPrefix := strings.TrimSuffix(r.Tenant("ta").Prefix, "ta/")
	for _, tc := range []struct {
		name, key, wantCode string
	}{
		{"ta's file", keys("ta", poolPrefix+"ta/")[0], ""},
		{"ta's work/", keys("ta", pipeline.WorkDir(r.Tenant("ta").Owner()))[0], ""},
		{"tb's file", keys("tb", poolPrefix+"tb/")[0], "AccessDenied"},
		{"tb's work/ (tb's execution read with ta's tag)", keys("tb", pipeline.WorkDir(r.Tenant("tb").Owner()))[0], "AccessDenied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := asA.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(tc.key)})
			if err == nil {
				out.Body.Close()
			}
			if got := errorCode(err); got != tc.wantCode {
				t.Errorf("GetObject %s as ta: got %q (%v), want %q", tc.key, got, err, tc.wantCode)
			}
		})
	}

	// The tenant roles' trust wants the pool's own tag beside the tenant's: a session asked with
	// another pool's name, or without one, is refused at AssumeRole, and the trust's condition on
	// the pool tag, nothing else, refuses the first (without it, it passes).
	assume := func(tags map[string]string) string {
		in := &sts.AssumeRoleInput{RoleArn: aws.String(role.ARN), RoleSessionName: aws.String("forged")}
		for _, k := range slices.Sorted(maps.Keys(tags)) {
			in.Tags = append(in.Tags, ststypes.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
		}
		_, err := sts.NewFromConfig(emulate.LocalAWS, func(o *sts.Options) { o.BaseEndpoint = aws.String(stsURL) }).AssumeRole(ctx, in)
		return errorCode(err)
	}
	otherPool := map[string]string{pipeline.TenantTag: "ta", pipeline.PoolTag: role.Pool + "x"}
	for _, tc := range []struct {
		name     string
		tags     map[string]string
		wantCode string
	}{
		{"its own pool's tag", map[string]string{pipeline.TenantTag: "ta", pipeline.PoolTag: role.Pool}, ""},
		{"another pool's tag", otherPool, "AccessDenied"},
		{"no pool tag", map[string]string{pipeline.TenantTag: "ta"}, "AccessDenied"},
	} {
		if got := assume(tc.tags); got != tc.wantCode {
			t.Errorf("Split's tenant role with %s: AssumeRole got %q, want %q", tc.name, got, tc.wantCode)
		}
	}
	r.auth.mu.Lock()
	trust := r.auth.trust[role.ARN]
	var loose []statement
	for _, st := range trust {
		st.Condition = maps.Clone(st.Condition)
		delete(st.Condition, "StringEquals")
		loose = append(loose, st)
	}
	r.auth.trust[role.ARN] = loose
	r.auth.mu.Unlock()
	got := assume(otherPool)
	r.auth.mu.Lock()
	r.auth.trust[role.ARN] = trust
	r.auth.mu.Unlock()
	if got != "" {
		t.Errorf("Split's tenant role without the trust's pool condition, another pool's tag: AssumeRole got %q, want it to pass", got)
	}

	// A session of one pool's tenant roles tagged with another pool's tenant (which the pools'
	// functions never ask for, and a compromised one could) names keys under its own pool's root
	// only. Pool default's session tagged oc is refused oc's manifest and a forged wake-up record
	// of oc (oc's keys are <area>/oc/, the earlier layout), while it may write default's root for
	// that id, where oc has nothing; pool other's session tagged ta is refused ta's manifest, under
	// <area>/pool.default/ta/. Each tenant's own pool's session reads its manifest.
	ocManifest := keys("oc", pipeline.WorkDir(r.Tenant("oc").Owner()))[0]
	taManifest := keys("ta", pipeline.WorkDir(r.Tenant("ta").Owner()))[0]
	if !strings.HasPrefix(taManifest, pipeline.WorkPrefix+pipeline.PoolRootPrefix+"default/ta/") || !strings.HasPrefix(ocManifest, pipeline.WorkPrefix+"oc/") {
		t.Errorf("work objects %s and %s, want ta's under its pool's root and oc's under its id", taManifest, ocManifest)
	}
	otherRoles, _ := poolFunctionRoles(r, "other")
	sessionOf := func(role tenantcreds.Role, tenant string) *s3.Client {
		t.Helper()
		creds, err := tenantcreds.New(sts.NewFromConfig(emulate.LocalAWS, func(o *sts.Options) { o.BaseEndpoint = aws.String(stsURL) }), role, 0).For(tenant)
		if err != nil {
			t.Fatal(err)
		}
		cfg := emulate.LocalAWS.Copy()
		cfg.Credentials = creds
		return s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint = aws.String(r.pipe.s3); o.UsePathStyle = true })
	}
	get := func(c *s3.Client, key string) string {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(key)})
		if err == nil {
			out.Body.Close()
		}
		return errorCode(err)
	}
	putAs := func(c *s3.Client, key string) string {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(key), Body: strings.NewReader("{}")})
		return errorCode(err)
	}
	if got := get(sessionOf(roles["Split"], "oc"), ocManifest); got != "AccessDenied" {
		t.Errorf("pool default's Split session tagged oc: GetObject %s got %q, want AccessDenied", ocManifest, got)
	}
	if got := putAs(sessionOf(roles["Controller"], "oc"), pipeline.WakeDoneKey(r.Tenant("oc").Owner())); got != "AccessDenied" {
		t.Errorf("pool default's controller session tagged oc: PutObject oc's wake-up record got %q, want AccessDenied", got)
	}
	if got := putAs(sessionOf(roles["Controller"], "oc"), pipeline.WakeDoneKey(pipeline.PoolOwner("default", "oc"))); got != "" {
		t.Errorf("pool default's controller session tagged oc: PutObject under default's own root got %q, want it allowed", got)
	}
	if got := get(sessionOf(otherRoles["Split"], "oc"), ocManifest); got != "" {
		t.Errorf("pool other's Split session of oc: GetObject %s got %q, want it allowed", ocManifest, got)
	}
	if got := get(sessionOf(otherRoles["Split"], "ta"), taManifest); got != "AccessDenied" {
		t.Errorf("pool other's Split session tagged ta: GetObject %s got %q, want AccessDenied", taManifest, got)
	}
	if got := get(sessionOf(roles["Split"], "ta"), taManifest); got != "" {
		t.Errorf("pool default's Split session of ta: GetObject %s got %q, want it allowed", taManifest, got)
	}

	// A session of a pool's tenant roles tagged with the silo tenant's id (which the pools'
	// functions never ask for, and a compromised one could) is refused the silo tenant's keys its
	// tag would otherwise name: the controller's a forged wake-up record, Split's a manifest. Pool
	// other's roles (the earlier layout, whose grants name <area>/<tag>/) are refused by their
	// NoSiloTenantSessions Deny and nothing else: without it, both pass (the bucket's Denies exempt
	// the pipeline's roles). Pool default's are refused with or without it: their grants name
	// <area>/pool.default/<tag>/ only.
	forged := []struct{ fn, key string }{
		{"Controller", pipeline.WakeDoneKey(r.Tenant("sx").Owner())},
		{"Split", pipeline.ManifestKey(r.Tenant("sx").Owner(), "forged")},
	}
	put := func(role tenantcreds.Role, key string) string {
		return putAs(sessionOf(role, "sx"), key)
	}
	withoutDeny := func(role string, do func()) {
		t.Helper()
		deployed, err := r.auth.roleStatements(role)
		if err != nil {
			t.Fatal(err)
		}
		var without []statement
		for _, st := range deployed {
			if st.Sid != tenantpipeline.SidNoSiloTenantSessions {
				without = append(without, st)
			}
		}
		if len(without) != len(deployed)-1 {
			t.Fatalf("tenant role %s: %d statements, want its %s Deny among them", role, len(deployed), tenantpipeline.SidNoSiloTenantSessions)
		}
		r.auth.mu.Lock()
		r.auth.policies[role] = without
		r.auth.mu.Unlock()
		do()
		r.auth.mu.Lock()
		r.auth.policies[role] = deployed
		r.auth.mu.Unlock()
	}
	for _, f := range forged {
		for pool, rs := range map[string]map[string]tenantcreds.Role{"default": roles, "other": otherRoles} {
			role := rs[f.fn]
			if got := put(role, f.key); got != "AccessDenied" {
				t.Errorf("pool %s's %s tenant role tagged sx: PutObject %s got %q, want AccessDenied", pool, f.fn, f.key, got)
			}
			want := map[string]string{"default": "AccessDenied", "other": ""}[pool]
			withoutDeny(role.ARN, func() {
				if got := put(role, f.key); got != want {
					t.Errorf("pool %s's %s tenant role without its Deny: PutObject %s got %q, want %q", pool, f.fn, f.key, got, want)
				}
			})
		}
	}
	t.Logf("sessions %v; tenants %d", tags, len(rep.Tenants))
}

const deployedTenants = `{"tenants": [
  {"id": "sa", "registerUrl": "https://core.example.com/records"},
  {"id": "pa", "tier": "pool", "registerUrl": "https://core.example.com/records"},
  {"id": "pb", "tier": "pool", "registerUrl": "https://core.example.com/records"}
]}`

// Split and Register take where records go from their deployed settings, never from the request
// alone: in both tiers the tenants' files are registered (the run's settings and the request's
// agree), and a direct invoke of either with the tenant's settings but another registerUrl, or a
// tenant it was not deployed for (a silo tenant's id sent to the pool's), fails as a
// PermanentError naming the field, with nothing sent and no tenant session asked for. The
// executions' input carries no URL and no secret's ARN.
func TestScenarioSplitAndRegisterTakeDeployedSettings(t *testing.T) {
	t.Parallel()
	r := startScenario(t, deployedTenants, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	uploadAll(t, ctx, r, []upload{{"sa", "a.csv", csvOf(20)}, {"pa", "a.csv", csvOf(20)}, {"pb", "a.csv", csvOf(20)}})
	waitFor(t, ctx, r, "every file succeeds", func(rep *report.Report) bool {
		for _, id := range []string{"sa", "pa", "pb"} {
			if tr := rep.Tenants[id]; tr == nil || len(tr.Files) != 1 || tr.Files[0].Status != "SUCCEEDED" {
				return false
			}
		}
		return true
	})
	// The executions' input, which Step Functions puts in its status events and history, names
	// no core system URL and no secret: Split and Register took them from their deployed settings.
	st, err := r.sfnStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var inputs int
	for _, e := range st.Executions {
		if e.ParentArn != "" {
			continue // a segment execution's input is its parent's Map item
		}
		out, err := r.StepFunctions().DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(e.ExecutionArn)})
		if err != nil {
			t.Fatal(err)
		}
		inputs++
		if in := aws.ToString(out.Input); strings.Contains(in, "registerUrl") || strings.Contains(in, "registerAuthSecretArn") || strings.Contains(in, r.sinkURL) {
			t.Errorf("execution %s: got input %s, want no core system URL or secret in it", e.Name, in)
		}
	}
	if inputs != 3 {
		t.Errorf("checked the input of %d file executions, want 3", inputs)
	}
	sent := r.Sink.Total()
	evil := func(cfg map[string]any) { cfg["registerUrl"] = "https://evil.example.net/records" }
	for _, tc := range []struct {
		name, pkg, function, tenant string
		edit                        func(cfg map[string]any)
		want                        string
	}{
		{"silo Register, another URL", registerPkg, "sa", "sa", evil, `the request's registerUrl "https://evil.example.net/records"`},
		{"silo Register, another tenant", registerPkg, "sa", "pa", nil, `this function was deployed for tenant "sa"`},
		{"pool Register, another URL", registerPkg, "pa", "pb", evil, `the request's registerUrl "https://evil.example.net/records"`},
		{"pool Register, a silo tenant", registerPkg, "pa", "sa", nil, `tenant "sa" is not a tenant of pool`},
		{"silo Split, another URL", "lambdas/split", "sa", "sa", evil, `the request's registerUrl "https://evil.example.net/records"`},
		{"pool Split, a silo tenant", "lambdas/split", "pa", "sa", nil, `tenant "sa" is not a tenant of pool`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := r.Function(tc.pkg, tc.function)
			if f == nil {
				t.Fatalf("no %s serves %s", tc.pkg, tc.function)
			}
			cfg := maps.Clone(r.Tenant(tc.tenant).Config)
			if tc.edit != nil {
				tc.edit(cfg)
			}
			payload, _ := json.Marshal(map[string]any{"tenant": cfg, "executionName": "forged", "chunk": 0,
				"source": map[string]any{"bucket": r.Bucket, "key": r.Tenant(tc.tenant).Prefix + "a.csv"}})
			res, err := f.Invoke(ctx, payload)
			if err != nil {
				t.Fatal(err)
			}
			var e struct{ ErrorMessage string }
			json.Unmarshal(res.Payload, &e)
			if res.ErrorType != "PermanentError" || !strings.Contains(e.ErrorMessage, tc.want) {
				t.Errorf("got %s %s, want a PermanentError containing %q", res.ErrorType, res.Payload, tc.want)
			}
		})
	}
	if got := r.Sink.Total(); got != sent {
		t.Errorf("the sink got %d records after the forged requests, want none", got-sent)
	}
	// A silo tenant has no pool session: none was asked for in its name.
	if got := r.auth.SessionTenants(); slices.Contains(got, "sa") {
		t.Errorf("got tenant sessions %v, want none of the silo tenant sa", got)
	}
}

const secretTenants = `{"pools": {"default": {"secretPrefix": "tenantpipeline/"}}, "tenants": [
  {"id": "sa", "tier": "pool", "smallFileBytes": -1, "registerUrl": "https://core.example.com/records",
   "registerAuthSecretArn": "arn:aws:secretsmanager:us-east-1:000000000000:secret:tenantpipeline/sa-AbCdEf"},
  {"id": "sb", "tier": "pool", "smallFileBytes": -1, "registerUrl": "https://core.example.com/records"},
  {"id": "sc", "tier": "silo", "registerUrl": "https://core.example.com/records",
   "registerAuthSecretArn": "arn:aws:secretsmanager:us-east-1:000000000000:secret:core/sc-AbCdEf"}
]}`

// Register reads a tenant's secret through the local Secrets Manager, judged by its role: the
// pooled tenant's Register session reads its own secret (under the pool's secretPrefix), the silo
// Register its tenant's, each record carries its own tenant's secret and no other, a tenant
// without a secret sends none, and nothing is refused. A session of the pool's Split role is
// refused the secret (AccessDeniedException).
func TestScenarioRegisterReadsOnlyItsTenantsSecret(t *testing.T) {
	t.Parallel()
	r := startScenario(t, secretTenants, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	uploadAll(t, ctx, r, []upload{{"sa", "a.csv", csvOf(30)}, {"sb", "b.csv", csvOf(30)}, {"sc", "c.csv", csvOf(30)}})
	waitFor(t, ctx, r, "every file succeeds", func(rep *report.Report) bool {
		for _, id := range []string{"sa", "sb", "sc"} {
			if tr := rep.Tenants[id]; tr == nil || len(tr.Files) != 1 || tr.Files[0].Status != "SUCCEEDED" {
				return false
			}
		}
		return true
	})
	if n := r.auth.Refused(); n != 0 {
		t.Errorf("got %d refused requests, want 0", n)
	}
	for id, want := range map[string]string{"sa": "local-secret:tenantpipeline/sa", "sb": "", "sc": "local-secret:core/sc"} {
		reqs := r.Sink.Requests(id)
		if len(reqs) == 0 {
			t.Errorf("%s: got no request at the core system", id)
		}
		for _, q := range reqs {
			if q.Authorization != want {
				t.Errorf("%s: record %d sent Authorization %q, want %q", id, q.RecordNumber, q.Authorization, want)
				break
			}
		}
	}
	// The pool's Split, which parses untrusted files, is refused the secret by its tenant role, and
	// Register's session of another tenant is refused it too.
	roles, endpoints := poolFunctionRoles(r, "default")
	stsClient := sts.NewFromConfig(emulate.LocalAWS, func(o *sts.Options) { o.BaseEndpoint = aws.String(endpoints["AWS_ENDPOINT_URL_STS"]) })
	const secret = "arn:aws:secretsmanager:us-east-1:000000000000:secret:tenantpipeline/sa-AbCdEf"
	for _, tc := range []struct {
		function, tenant string
		want             bool
	}{{"Register", "sa", true}, {"Split", "sa", false}, {"Register", "sb", false}} {
		creds, err := tenantcreds.New(stsClient, roles[tc.function], 0).For(tc.tenant)
		if err != nil {
			t.Fatalf("%s's session of %s: %v", tc.function, tc.tenant, err)
		}
		cfg := emulate.LocalAWS.Copy()
		cfg.Credentials = creds
		_, err = secretsmanager.NewFromConfig(cfg, func(o *secretsmanager.Options) {
			o.BaseEndpoint = aws.String(endpoints["AWS_ENDPOINT_URL_SECRETS_MANAGER"])
		}).
			GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(secret)})
		t.Logf("%s's session of %s reads sa's secret: %v", tc.function, tc.tenant, err)
		wantAllowed(t, err, tc.want, "AccessDeniedException")
	}
}

// poolFunctionRoles are the tenant roles the functions of pool were given, with their pool, by
// function (Controller, Split, Register), and the functions' AWS endpoints, by variable.
func poolFunctionRoles(r *Run, pool string) (roles map[string]tenantcreds.Role, endpoints map[string]string) {
	roles, endpoints = map[string]tenantcreds.Role{}, map[string]string{}
	for _, f := range r.functions {
		var fn string
		for _, name := range []string{"Controller", "Split", "Register"} {
			if strings.Contains(strings.ToLower(f.Name), strings.ToLower(name)) {
				fn = name
			}
		}
		var role tenantcreds.Role
		for _, kv := range f.Env {
			k, v, _ := strings.Cut(kv, "=")
			switch {
			case k == pipeline.EnvTenantRoleARN:
				role.ARN = v
			case k == pipeline.EnvTenantRolePool:
				role.Pool = v
			case strings.HasPrefix(k, "AWS_ENDPOINT_URL_"):
				endpoints[k] = v
			}
		}
		if fn != "" && role.ARN != "" && role.Pool == pool {
			roles[fn] = role
		}
	}
	return roles, endpoints
}
