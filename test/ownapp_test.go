//go:build e2e

package test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// ownApp builds, once, a user's own Go CDK app in a module outside this one (its own go.mod, a
// replace directive to this module), using both constructs in a stack named MyPipeline.
// OWN_CASE picks what it builds: "" a valid app, or one of the failing cases of
// TestOwnAppFailsAsCDKDoes.
var ownApp = sync.OnceValues(func() (string, error) {
	root, err := filepath.Abs("..")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, ".build", "test", "own")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		return "", err
	}
	// Same requirements as this module, so the module cache has them all.
	mod := strings.Replace(string(goMod), "module github.com/example/tenantpipeline", "module example.org/own", 1) +
		"\nrequire github.com/example/tenantpipeline v0.0.0\nreplace github.com/example/tenantpipeline => " + root + "\n"
	for name, body := range map[string]string{"go.mod": mod, "go.sum": string(sum), "main.go": ownAppMain} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(dir, "own")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build of an app in a module outside this one: %v\n%s", err, out)
	}
	return bin, nil
})

const ownAppMain = `package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
)

func main() {
	app := awscdk.NewApp(nil)
	if os.Getenv("OWN_PLAIN") != "" {
		// As most Go CDK apps do: no tenantpipeline.Synth, nothing recovers.
		build(app)()
		app.Synth(nil)
		jsii.Close()
		return
	}
	err := tenantpipeline.Synth(app, build(app))
	jsii.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func build(app awscdk.App) func() error {
	return func() error {
		stack := awscdk.NewStack(app, jsii.String("MyPipeline"), nil)
		props := &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true), Versioned: jsii.Bool(true), EnforceSSL: jsii.Bool(true)}
		if os.Getenv("OWN_CASE") == "denies" {
			// The app's own key encrypts the bucket.
			key := awskms.NewKey(stack, jsii.String("Key"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
			props.Encryption, props.EncryptionKey, props.BucketKeyEnabled = awss3.BucketEncryption_KMS, key, jsii.Bool(true)
		}
		bucket := awss3.NewBucket(stack, jsii.String("Ingest"), props)
		silo := func(id, prefix string) {
			tenantpipeline.New(stack, "Tenant-"+id, &tenantpipeline.Props{
				Tenant: tenantpipeline.Tenant{ID: id, Prefix: prefix, RegisterURL: "https://core.example.com/" + id},
				Bucket: bucket,
			})
		}
		pool := &tenantpipeline.PoolProps{
			Name:   "default",
			Bucket: bucket,
			Tenants: []tenantpipeline.Tenant{
				{ID: "hooli", RegisterURL: "https://core.example.com/hooli"},
				{ID: "umbrella", RegisterURL: "https://core.example.com/umbrella"},
			},
		}
		switch os.Getenv("OWN_CASE") {
		case "":
			silo("acme", "")
		case "invalid-pool":
			pool.MaximumConcurrency = 1
			pool.Tenants = append(pool.Tenants, tenantpipeline.Tenant{ID: "initech"})
		case "no-tenants":
			pool.Tenants = nil
		case "overlap":
			silo("acme", "pools/")
		case "duplicate":
			silo("acme", "inbox/acme/")
			silo("acme2", "inbox/acme2/")
			tenantpipeline.New(stack, "Tenant-acme-again", &tenantpipeline.Props{
				Tenant: tenantpipeline.Tenant{ID: "acme", Prefix: "inbox/other/", RegisterURL: "https://core.example.com/acme"},
				Bucket: bucket,
			})
			silo("hooli", "inbox/hooli/")
		case "root-uploader":
			pool.Uploaders = []awsiam.IPrincipal{awsiam.NewAccountRootPrincipal()}
		case "grant-imported-key":
			// A partner's role of another account, and a key the app imports: its policy cannot
			// take the statement the partner needs.
			pool.Shared.EncryptionKey = awskms.Key_FromKeyArn(stack, jsii.String("Key"),
				jsii.String("arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"))
			p := tenantpipeline.NewPool(stack, "Pool", pool)
			p.GrantUpload("hooli", awsiam.NewArnPrincipal(jsii.String("arn:aws:iam::210987654321:role/partner")))
			return nil
		case "uploads":
			// Operators by ARN, a customer's uploads in both tiers, a platform's uploader role.
			ops := tenantpipeline.Operators{PrincipalARNs: []string{"arn:aws:iam::123456789012:role/ops/*"}}
			acme := tenantpipeline.New(stack, "Tenant-acme", &tenantpipeline.Props{
				Tenant: tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/acme"},
				Bucket: bucket, SharedProps: tenantpipeline.SharedProps{Operators: ops},
			})
			pool.Shared.Operators = ops
			pool.Uploaders = []awsiam.IPrincipal{awsiam.NewArnPrincipal(jsii.String("arn:aws:iam::123456789012:role/platform"))}
			p := tenantpipeline.NewPool(stack, "Pool", pool)
			customer := awsiam.NewRole(stack, jsii.String("Customer"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
			acme.GrantUpload(customer)
			p.GrantUpload("hooli", customer)
			return nil
		case "denies":
			// Both tiers, with operators, on the key's bucket; the constructs add its Denies.
			ops := tenantpipeline.Operators{PrincipalARNs: []string{"arn:aws:iam::123456789012:role/ops/*"}}
			tenantpipeline.New(stack, "Tenant-acme", &tenantpipeline.Props{
				Tenant: tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/acme"},
				Bucket: bucket, SharedProps: tenantpipeline.SharedProps{Operators: ops},
			})
			pool.Shared.Operators = ops
		}
		tenantpipeline.NewPool(stack, "Pool", pool)
		return nil
	}
}
`

// runOwnApp synthesizes the own app for one case into outdir; it returns the exit status and
// everything the app printed.
func runOwnApp(t *testing.T, ownCase, outdir string, env ...string) (int, string) {
	t.Helper()
	bin, err := ownApp()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	// In the app's folder, as the CDK CLI runs it: the constructs find this module's Lambda
	// sources through the app's go.mod.
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = append(os.Environ(), "OWN_CASE="+ownCase, "CDK_OUTDIR="+outdir,
		// The asset metadata the CDK CLI turns on, by which the local run finds each function's code.
		`CDK_CONTEXT_JSON={"aws:cdk:enable-asset-metadata":true}`, "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// TestOwnAppFailsAsCDKDoes: a user's own app that synthesizes through tenantpipeline.Synth fails
// on a pool's invalid props (before anything is bundled), a pool without tenants, a silo prefix
// that overlaps the pool's, and a tenant id used twice (two silo tenants, or a silo and a pooled
// tenant) with CDK's validation message, one line per problem, status 1 and no goroutine dump;
// each message names the construct props and both constructs. An uploader that is a whole account,
// and an upload grant that no policy the app can change would carry, fail the same way. Invalid props reach it as CDK's
// validation error too: the construct stays an empty scope, nothing panics.
func TestOwnAppFailsAsCDKDoes(t *testing.T) {
	t.Parallel() // child processes only, never this binary's jsii runtime
	for _, tc := range []struct {
		ownCase string
		want    []string
	}{
		{"invalid-pool", []string{
			`[MyPipeline/Pool] pool "default": PoolProps.MaximumConcurrency 1 is out of range`,
			`[MyPipeline/Pool] PoolProps.Tenants[2].RegisterURL (tenant "initech"): required unless the tenant has a DynamoDB sink`,
		}},
		{"no-tenants", []string{
			`[MyPipeline/Pool] pool "default": Tenants is empty: a pool needs at least one tenant`,
		}},
		{"overlap", []string{
			`[MyPipeline/Pool] pool "default": prefix "pools/default/" overlaps the prefix "pools/" of tenant "acme" (MyPipeline/Tenant-acme) on the same bucket`,
			`make the prefixes disjoint (PoolProps.Prefix or Tenant.Prefix)`,
		}},
		{"root-uploader", []string{
			`[MyPipeline/Pool] PoolProps.Uploaders[0]: `, `is a whole account or a wildcard: an uploader is an IAM role or user`,
		}},
		{"grant-imported-key", []string{
			`[MyPipeline/Pool] GrantUpload to {"AWS":["arn:aws:iam::210987654321:role/partner"]}: `,
			`add to the key policy a statement allowing kms:GenerateDataKey, kms:Decrypt to that principal`,
		}},
		{"duplicate", []string{
			`[MyPipeline/Tenant-acme-again] tenant "acme": tenant id "acme" is also used by tenant "acme" (MyPipeline/Tenant-acme)`,
			`[MyPipeline/Pool] pool "default": tenant id "hooli" is also used by tenant "hooli" (MyPipeline/Tenant-hooli)`,
		}},
	} {
		for _, plain := range []bool{false, true} {
			name, env := tc.ownCase, []string(nil)
			if plain {
				// An app that calls app.Synth itself fails the same way, without a goroutine dump.
				name, env = tc.ownCase+"/app.Synth", []string{"OWN_PLAIN=1"}
			}
			t.Run(name, func(t *testing.T) {
				outdir := t.TempDir()
				code, out := runOwnApp(t, tc.ownCase, outdir, env...)
				if code != 1 {
					t.Errorf("got exit status %d, want 1:\n%s", code, out)
				}
				for _, bad := range []string{"goroutine ", "panic:", "    at ", "SectionAlreadyContains"} {
					if strings.Contains(out, bad) {
						t.Errorf("got output containing %q, want CDK's message alone:\n%s", bad, out)
					}
				}
				for _, want := range append([]string{"Validation failed with the following errors:\n"}, tc.want...) {
					if !strings.Contains(out, want) {
						t.Errorf("got output %q, want it to contain %q", out, want)
					}
				}
				// Invalid props fail before anything is bundled: the pool is the app's only construct.
				if left, _ := os.ReadDir(outdir); (tc.ownCase == "invalid-pool" || tc.ownCase == "no-tenants" || tc.ownCase == "root-uploader") && len(left) != 0 {
					t.Errorf("got %d entries in the assembly directory, want nothing bundled or staged", len(left))
				}
				// The valid constructs' assets are staged as they are built; no template or manifest
				// may follow.
				for _, name := range []string{"manifest.json", "MyPipeline.template.json"} {
					if _, err := os.Stat(filepath.Join(outdir, name)); err == nil {
						t.Errorf("got %s in the assembly directory, want no assembly written", name)
					}
				}
			})
		}
	}
}

// TestOwnAppUploadsAndOperators: in a user's own app, GrantUpload gives a customer's role the
// uploads of a silo tenant and of a pooled tenant and nothing else, the pool's uploader role and
// output exist, and every Deny exempts the operators by ARN alone.
func TestOwnAppUploadsAndOperators(t *testing.T) {
	t.Parallel() // child processes only, never this binary's jsii runtime
	outdir := t.TempDir()
	if code, out := runOwnApp(t, "uploads", outdir); code != 0 {
		t.Fatalf("got exit status %d, want 0:\n%s", code, out)
	}
	var tpl map[string]any
	b, err := os.ReadFile(filepath.Join(outdir, "MyPipeline.template.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &tpl); err != nil {
		t.Fatal(err)
	}
	bucket := getAtt(onlyID(t, tpl, "AWS::S3::Bucket", "Ingest"))
	got := tierStatements(tpl, "CustomerDefaultPolicy")
	if want := []string{uploadStatement(bucket, "inbox/acme/"), uploadStatement(bucket, "pools/default/hooli/")}; !slices.Equal(got, want) {
		t.Errorf("got the customer's statements\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got, want := tierStatements(tpl, "PoolUploaderRoleDefaultPolicy"), []string{uploadStatement(bucket, "pools/default/${aws:PrincipalTag/tenant}/")}; !slices.Equal(got, want) {
		t.Errorf("got the uploader role's statements\n%s\nwant\n%s", strings.Join(got, "\n"), want[0])
	}
	checkOperatorDenies(t, tpl, map[string]any{
		"Ingest": controlWriteActions, "TenantacmeQueue": "sqs:SendMessage", "TenantacmeRuleDeadLetterQueue": "sqs:SendMessage",
		"PoolQueue": "sqs:SendMessage", "PoolIntake": "sqs:SendMessage", "PoolRuleDeadLetterQueue": "sqs:SendMessage",
	})
}

// TestOwnAppBucketRefusesWhatThePipelineCannotHonour: in a user's own app whose bucket is
// encrypted with the app's own key, a silo tenant and a pool add the bucket's upload Denies, each
// once and exact: SSE-C, another encryption or key, another storage class, and a write without
// If-None-Match by anyone but the pipeline's roles and the operators.
func TestOwnAppBucketRefusesWhatThePipelineCannotHonour(t *testing.T) {
	t.Parallel() // child processes only, never this binary's jsii runtime
	outdir := t.TempDir()
	if code, out := runOwnApp(t, "denies", outdir); code != 0 {
		t.Fatalf("got exit status %d, want 0:\n%s", code, out)
	}
	var tpl map[string]any
	b, err := os.ReadFile(filepath.Join(outdir, "MyPipeline.template.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &tpl); err != nil {
		t.Fatal(err)
	}
	want := uploadDenies(getAtt(onlyID(t, tpl, "AWS::S3::Bucket", "Ingest")), getAtt(onlyID(t, tpl, "AWS::KMS::Key", "Key")),
		exactRoles(t, "/tenantpipeline/", tpl), "arn:aws:iam::123456789012:role/ops/*")
	got := map[string][]any{}
	for _, pol := range byType(tpl, "AWS::S3::BucketPolicy") {
		for _, st := range get(t, props(pol), "PolicyDocument", "Statement").([]any) {
			if sid, _ := st.(map[string]any)["Sid"].(string); want[sid] != nil {
				got[sid] = append(got[sid], st)
			}
		}
	}
	for sid, w := range want {
		if len(got[sid]) != 1 || asJSON(got[sid][0]) != asJSON(w) {
			t.Errorf("got statements %s\n%s\nwant one\n%s", sid, asJSON(got[sid]), asJSON(w))
		}
	}
}

// TestOwnAppSynthesizesAndPipectlFindsItsTenants: the valid own app synthesizes with the bucket's
// write Deny, which the constructs added; the local run serves its assembly, and pipectl, with no
// stack flag, finds the tenants of the stack MyPipeline by the constructs' outputs; --stack
// narrows to it.
func TestOwnAppSynthesizesAndPipectlFindsItsTenants(t *testing.T) {
	t.Parallel() // child processes only, never this binary's jsii runtime
	outdir := t.TempDir()
	code, out := runOwnApp(t, "", outdir)
	if code != 0 {
		t.Fatalf("got exit status %d, want 0:\n%s", code, out)
	}
	var tpl map[string]any
	b, err := os.ReadFile(filepath.Join(outdir, "MyPipeline.template.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &tpl); err != nil {
		t.Fatal(err)
	}
	denies := 0
	for _, pol := range byType(tpl, "AWS::S3::BucketPolicy") {
		for _, st := range get(t, props(pol), "PolicyDocument", "Statement").([]any) {
			s := st.(map[string]any)
			if s["Sid"] == "OnlyThePipelineAndOperatorsWriteControlWorkQuarantine" && s["Effect"] == "Deny" {
				denies++
			}
		}
	}
	if denies != 1 {
		t.Errorf("got %d write Denies in the bucket policy, want 1", denies)
	}

	if testing.Short() {
		t.Skip("starts the local emulators")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bins := t.TempDir()
	for _, c := range []string{"local", "pipectl"} {
		if out, err := exec.Command("go", "build", "-C", root, "-o", filepath.Join(bins, c), "./cmd/"+c).CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/%s: %v\n%s", c, err, out)
		}
	}
	work := t.TempDir()
	envFile := filepath.Join(work, "env")
	serve := exec.Command(filepath.Join(bins, "local"), "--cdk-out", outdir, "--serve", "--env-file", envFile, "--work", filepath.Join(work, "run"))
	serve.Dir = root
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	serve.Stderr = serve.Stdout
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		serve.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- serve.Wait() }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			serve.Process.Kill()
			<-done
		}
	})
	// The env file is written once the run serves.
	var log strings.Builder
	serving := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if !sent && strings.HasPrefix(sc.Text(), "serving;") {
				serving <- true
				sent = true
			}
		}
		if !sent {
			serving <- false
		}
	}()
	if !<-serving {
		t.Fatalf("the local run ended before serving:\n%s", log.String())
	}
	lines, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "credentials")}
	for _, l := range strings.Split(string(lines), "\n") {
		if kv, ok := strings.CutPrefix(l, "export "); ok {
			k, v, _ := strings.Cut(kv, "=")
			env = append(env, k+"="+strings.Trim(v, "'"))
		}
	}
	for _, args := range [][]string{{"status", "--json"}, {"status", "--json", "--stack", "MyPipeline"}} {
		cmd := exec.Command(filepath.Join(bins, "pipectl"), args...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("pipectl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
		}
		var st struct {
			Tenants []struct {
				ID   string `json:"id"`
				Tier string `json:"tier"`
			} `json:"tenants"`
		}
		if err := json.Unmarshal(out, &st); err != nil {
			t.Fatalf("pipectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		var got []string
		for _, tn := range st.Tenants {
			got = append(got, tn.ID+" "+tn.Tier)
		}
		if want := []string{"acme silo", "hooli pool", "umbrella pool"}; !slices.Equal(got, want) {
			t.Errorf("pipectl %s: got tenants %v, want %v", strings.Join(args, " "), got, want)
		}
	}
}
