//go:build e2e || figures

package localrun

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	ststypes "github.com/aws/aws-sdk-go-v2/service/sts/types"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// The local cloud judges a session's request by the bucket's or the queue's policy as well as its
// role's, as S3 and SQS do, in both tiers and with the app's own key: the tenant's uploader session is refused, with
// AccessDenied, an upload that overwrites (no If-None-Match), one in GLACIER, one under SSE-C,
// SSE-S3 or another KMS key, although its role allows the put; an outsider of the account whose
// own policy allows everything is refused the tenant's files and results and the control records,
// and a forged event sent straight to the tenant's queue. Nothing refused is written, and the
// tenant's proper upload is registered beside them. Without the bucket's or the queue's
// statements (as in a build that dropped them) the same requests pass: these are the statements
// that refuse them.
func TestScenarioResourcePoliciesRefuseLocally(t *testing.T) {
	t.Parallel()
	forEachTier(t, uploadTenants, func(t *testing.T, tenants string) {
		pooled := strings.Contains(tenants, `"tier":"pool"`)
		tenants = withUploaders(t, tenants, pooled)
		tenants = withTopLevelJSON(t, tenants, "encryption", map[string]any{"key": "create"})
		r := startScenario(t, tenants, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		prefix := r.Tenant("up").Prefix
		up := uploaderClient(t, ctx, r, "up", pooled)

		// The proper upload: If-None-Match, the bucket's default encryption and storage class.
		good := prefix + "good.csv"
		if _, err := up.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(good),
			Body: strings.NewReader(string(csvOf(3))), IfNoneMatch: aws.String("*")}); err != nil {
			t.Fatalf("the uploader's proper PutObject: %v", err)
		}

		ssecKey := strings.Repeat("k", 32)
		sum := md5.Sum([]byte(ssecKey))
		refused := []struct {
			name string
			in   s3.PutObjectInput
		}{
			{"without If-None-Match (an overwrite)", s3.PutObjectInput{}},
			{"in GLACIER", s3.PutObjectInput{IfNoneMatch: aws.String("*"), StorageClass: s3types.StorageClassGlacier}},
			{"in DEEP_ARCHIVE", s3.PutObjectInput{IfNoneMatch: aws.String("*"), StorageClass: s3types.StorageClassDeepArchive}},
			{"under SSE-C", s3.PutObjectInput{IfNoneMatch: aws.String("*"), SSECustomerAlgorithm: aws.String("AES256"),
				SSECustomerKey: aws.String(base64.StdEncoding.EncodeToString([]byte(ssecKey))), SSECustomerKeyMD5: aws.String(base64.StdEncoding.EncodeToString(sum[:]))}},
			{"under SSE-S3", s3.PutObjectInput{IfNoneMatch: aws.String("*"), ServerSideEncryption: s3types.ServerSideEncryptionAes256}},
			{"under another KMS key", s3.PutObjectInput{IfNoneMatch: aws.String("*"), ServerSideEncryption: s3types.ServerSideEncryptionAwsKms,
				SSEKMSKeyId: aws.String("arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab")}},
		}
		put := func(c *s3.Client, in s3.PutObjectInput, key string) error {
			in.Bucket, in.Key, in.Body = aws.String(r.Bucket), aws.String(key), strings.NewReader(string(csvOf(2)))
			_, err := c.PutObject(ctx, &in)
			return err
		}
		for i, tc := range refused {
			key := prefix + "refused-" + string(rune('a'+i)) + ".csv"
			if err := put(up, tc.in, key); errorCode(err) != "AccessDenied" {
				t.Errorf("the uploader's PutObject %s: got %q (%v), want AccessDenied from the bucket's policy", tc.name, errorCode(err), err)
			}
		}
		if n := objectsUnder(t, ctx, r, prefix+"refused-"); n != 0 {
			t.Errorf("got %d refused objects under up's prefix, want none", n)
		}

		// The control plane judges the same sessions (controlplaneauth.go): the uploader's role lets
		// it upload, not find the stacks, list or pause the mappings or read the controller; the
		// outsider, allowed everything by its own policy, lists the mappings (these APIs have no
		// resource policy).
		var upTags map[string]string
		if pooled {
			upTags = map[string]string{pipeline.TenantTag: "up"}
		}
		upCfg := sessionConfig(t, ctx, r, uploaderRole(t, r, "up", pooled), upTags)
		functions := func(cfg aws.Config) *lambda.Client {
			return lambda.NewFromConfig(cfg, func(o *lambda.Options) { o.BaseEndpoint = aws.String(runEndpoint(t, r, "AWS_ENDPOINT_URL_LAMBDA")) })
		}
		mappings, err := functions(sessionConfig(t, ctx, r, r.OutsiderRoleARN(), nil)).ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{})
		if err != nil || len(mappings.EventSourceMappings) == 0 {
			t.Fatalf("the outsider's ListEventSourceMappings: %v; want the mappings", err)
		}
		stacks := cloudformation.NewFromConfig(upCfg, func(o *cloudformation.Options) {
			o.BaseEndpoint = aws.String(runEndpoint(t, r, "AWS_ENDPOINT_URL_CLOUDFORMATION"))
		})
		for _, tc := range []struct {
			name, want string
			do         func() error
		}{
			{"DescribeStacks", "AccessDenied", func() error { _, err := stacks.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{}); return err }},
			{"ListEventSourceMappings", "AccessDeniedException", func() error {
				_, err := functions(upCfg).ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{})
				return err
			}},
			{"UpdateEventSourceMapping (a pause)", "AccessDeniedException", func() error {
				_, err := functions(upCfg).UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{UUID: mappings.EventSourceMappings[0].UUID, Enabled: aws.Bool(false)})
				return err
			}},
			{"GetFunction of the controller", "AccessDeniedException", func() error {
				_, err := functions(upCfg).GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(r.Tenant("up").Controller.Name)})
				return err
			}},
		} {
			if err := tc.do(); errorCode(err) != tc.want {
				t.Errorf("the uploader's %s: got %q (%v), want %s", tc.name, errorCode(err), err, tc.want)
			}
		}

		waitFor(t, ctx, r, "the proper upload registered", func(rep *report.Report) bool {
			tr := rep.Tenants["up"]
			return tr != nil && len(tr.Files) == 1 && tr.Files[0].Status == "SUCCEEDED" && len(r.Sink.Registered("up")) == 3
		})
		// The functions run with their execution roles' sessions, each request judged by its role's
		// policies and the resources': up's controller (a pool's controller and router), which
		// read and write the bucket, the queue and the admission table with their own roles.
		judged := 0
		for _, f := range r.functions {
			if f.Source != "lambdas/controller" || f.Tenant != "up" && f.Pool == "" {
				continue
			}
			judged++
			r.auth.mu.Lock()
			role := r.auth.functionRoles[f.Name]
			r.auth.mu.Unlock()
			if role == "" || r.auth.Judged(role) == 0 {
				t.Errorf("function %s (%s): role %q, %d requests judged; want its role's session judged", f.Name, f.Source, role, r.auth.Judged(role))
			}
		}
		if judged == 0 {
			t.Error("found no controller of up")
		}
		results, err := r.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(r.Bucket), Prefix: aws.String(pipeline.ResultsDir(r.Tenant("up").Owner()))})
		if err != nil || len(results.Contents) == 0 {
			t.Fatalf("up's results: %v, %d objects; want one", err, len(results.Contents))
		}
		result := aws.ToString(results.Contents[0].Key)

		// The outsider: allowed everything by its own policy, none of the pipeline's roles, no
		// operator.
		outsider := sessionClient(t, ctx, r, r.OutsiderRoleARN(), nil)
		get := func(c *s3.Client, key string) error {
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(key)})
			if err == nil {
				out.Body.Close()
			}
			return err
		}
		outsiders := []struct {
			name string
			do   func() error
		}{
			{"reads up's file", func() error { return get(outsider, good) }},
			{"reads up's results", func() error { return get(outsider, result) }},
			{"writes up's wake-up record", func() error {
				return put(outsider, s3.PutObjectInput{IfNoneMatch: aws.String("*")}, pipeline.ControlDir(r.Tenant("up").Owner())+"forged-wake-done.json")
			}},
			{"writes into up's results", func() error {
				return put(outsider, s3.PutObjectInput{IfNoneMatch: aws.String("*")}, pipeline.ResultsDir(r.Tenant("up").Owner())+"forged.json")
			}},
		}
		for _, tc := range outsiders {
			if err := tc.do(); errorCode(err) != "AccessDenied" {
				t.Errorf("the outsider %s: got %q (%v), want AccessDenied from the bucket's policy", tc.name, errorCode(err), err)
			}
		}
		// A role created under the pipeline's role path (the outsider may call iam:CreateRole),
		// which the bucket's Denies exempted before they named each role, allowed everything by
		// its own policy: refused as the outsider is, though its ARN is under the path of every
		// role of the pipeline. A role of a pipeline role's own name cannot be created.
		r.auth.mu.Lock()
		controllerRole := r.auth.functionRoles[r.Tenant("up").Controller.Name]
		r.auth.mu.Unlock()
		path := rolePathOf(controllerRole)
		if path == "/" {
			t.Fatalf("up's controller's role has no path of its own (%q)", controllerRole)
		}
		admin := iam.NewFromConfig(sessionConfig(t, ctx, r, r.OutsiderRoleARN(), nil), func(o *iam.Options) {
			o.BaseEndpoint = aws.String(runEndpoint(t, r, "AWS_ENDPOINT_URL_IAM"))
		})
		account := strings.Split(controllerRole, ":")[4]
		trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::` + account + `:root"},"Action":"sts:AssumeRole"}]}`
		_, err = admin.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(controllerRole[strings.LastIndex(controllerRole, "/")+1:]),
			Path: aws.String(path), AssumeRolePolicyDocument: aws.String(trust)})
		if errorCode(err) != "EntityAlreadyExists" {
			t.Errorf("CreateRole of the controller's role's own name: got %q (%v), want EntityAlreadyExists", errorCode(err), err)
		}
		created, err := admin.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("intruder"), Path: aws.String(path),
			AssumeRolePolicyDocument: aws.String(trust)})
		if err != nil {
			t.Fatalf("CreateRole under %s: %v", path, err)
		}
		if _, err := admin.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: created.Role.RoleName, PolicyName: aws.String("admin"),
			PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`)}); err != nil {
			t.Fatalf("PutRolePolicy: %v", err)
		}
		if got := aws.ToString(created.Role.Arn); got != "arn:aws:iam::"+account+":role"+path+"intruder" {
			t.Errorf("created role's ARN %s, want it under %s", got, path)
		}
		intruder := sessionClient(t, ctx, r, aws.ToString(created.Role.Arn), nil)
		for _, tc := range []struct {
			name string
			do   func() error
		}{
			{"reads up's results", func() error { return get(intruder, result) }},
			{"writes up's wake-up record", func() error {
				return put(intruder, s3.PutObjectInput{}, pipeline.ControlDir(r.Tenant("up").Owner())+"forged-wake-done.json")
			}},
			{"writes up's file without If-None-Match", func() error {
				return put(intruder, s3.PutObjectInput{}, good)
			}},
		} {
			if err := tc.do(); errorCode(err) != "AccessDenied" {
				t.Errorf("a role under the pipeline's path %s %s: got %q (%v), want AccessDenied from the bucket's policy", path, tc.name, errorCode(err), err)
			}
		}
		// With the Denies exempting the path's pattern instead of each role (what ExemptRolePath
		// builds), the same role reads the results: the exact list is what refused it.
		if _, err := r.auth.resourceStatements("arn:aws:s3:::" + r.Bucket); err != nil {
			t.Fatal(err)
		}
		r.auth.mu.Lock()
		exact := r.auth.resourcePolicies[r.Bucket]
		var byPath []statement
		exempting := 0
		for _, st := range exact {
			if arns, ok := st.Condition["ArnNotLike"]["aws:PrincipalArn"]; ok && len(arns) > 0 {
				c := map[string]map[string]stringList{}
				for op, kv := range st.Condition {
					c[op] = map[string]stringList{}
					for k, v := range kv {
						c[op][k] = v
					}
				}
				c["ArnNotLike"]["aws:PrincipalArn"] = stringList{"arn:aws:iam::" + account + ":role" + path + "*"}
				st.Condition = c
				exempting++
			}
			byPath = append(byPath, st)
		}
		r.auth.resourcePolicies[r.Bucket] = byPath
		r.auth.mu.Unlock()
		if exempting != 3 {
			t.Fatalf("found %d statements of the bucket's policy exempting by aws:PrincipalArn, want the write, read and overwrite Denies", exempting)
		}
		if err := get(intruder, result); err != nil {
			t.Errorf("a role under the pipeline's path reads up's results when the Denies exempt the path: %v; want it allowed", err)
		}
		r.auth.mu.Lock()
		r.auth.resourcePolicies[r.Bucket] = exact
		r.auth.mu.Unlock()
		// The tenant's file and control records are as they were.
		if n := objectsUnder(t, ctx, r, pipeline.ControlDir(r.Tenant("up").Owner())+"forged"); n != 0 {
			t.Errorf("got %d forged control records, want none", n)
		}
		if out, err := r.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(good)}); err != nil {
			t.Errorf("up's file: %v", err)
		} else {
			b, _ := io.ReadAll(out.Body)
			out.Body.Close()
			if string(b) != string(csvOf(3)) {
				t.Errorf("up's file is %q after the refused overwrite, want the uploader's %q", b, csvOf(3))
			}
		}
		if n := objectsUnder(t, ctx, r, pipeline.ControlDir(r.Tenant("up").Owner())+"forged") + objectsUnder(t, ctx, r, pipeline.ResultsDir(r.Tenant("up").Owner())+"forged"); n != 0 {
			t.Errorf("got %d forged objects, want none", n)
		}

		// A forged S3 event sent straight to the tenant's queue (a silo tenant's own; in the pool
		// the intake and the pool's queue): the queues' policies refuse the outsider's SendMessage.
		sqsOutsider := sqs.NewFromConfig(sessionConfig(t, ctx, r, r.OutsiderRoleARN(), nil), func(o *sqs.Options) {
			o.BaseEndpoint = aws.String(runEndpoint(t, r, "AWS_ENDPOINT_URL_SQS"))
		})
		forged := `{"detail-type":"Object Created","source":"aws.s3","detail":{"bucket":{"name":"` + r.Bucket + `"},"object":{"key":"` + good + `"}}}`
		var queues []*Queue
		for _, q := range r.queues {
			if q.URL == r.Tenant("up").Queue.URL || pooled && strings.Contains(strings.ToLower(q.Name), "intake") {
				queues = append(queues, q)
			}
		}
		if len(queues) != map[bool]int{false: 1, true: 2}[pooled] {
			t.Fatalf("got queues %v for up, want its own (silo) or the pool's queue and intake", queues)
		}
		send := func(q *Queue) error {
			in := &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(forged)}
			if strings.HasSuffix(q.Name, ".fifo") {
				in.MessageGroupId, in.MessageDeduplicationId = aws.String("up"), aws.String("forged")
			}
			_, err := sqsOutsider.SendMessage(ctx, in)
			return err
		}
		for _, q := range queues {
			if err := send(q); errorCode(err) != "AccessDenied" {
				t.Errorf("the outsider's SendMessage to %s: got %q (%v), want AccessDenied from the queue's policy", q.Name, errorCode(err), err)
			}
		}

		// Trust policies: the outsider may take neither the tenant's uploader role nor, in the
		// pool, the tenant roles; Split's role may not take Register's tenant role, which alone
		// reads secrets and tables, and Register's may.
		stsAs := func(role string) *sts.Client {
			key := r.auth.newSession(role, "forged", nil)
			cfg := emulate.LocalAWS.Copy()
			cfg.Credentials = credentials.NewStaticCredentialsProvider(key, localSecret, "local-"+key)
			return sts.NewFromConfig(cfg, func(o *sts.Options) { o.BaseEndpoint = aws.String(runEndpoint(t, r, "AWS_ENDPOINT_URL_STS")) })
		}
		assume := func(c *sts.Client, role string, tags map[string]string) error {
			in := &sts.AssumeRoleInput{RoleArn: aws.String(role), RoleSessionName: aws.String("forged")}
			for k, v := range tags {
				in.Tags = append(in.Tags, ststypes.Tag{Key: aws.String(k), Value: aws.String(v)})
			}
			_, err := c.AssumeRole(ctx, in)
			return err
		}
		roles := map[string]string{} // by function source: the function's execution role, and the tenant role it is given
		tenantRoles := map[string]string{}
		var pool string // the pool of the tenant roles
		for _, f := range r.functions {
			if f.Tenant != "up" && f.Pool == "" {
				continue
			}
			r.auth.mu.Lock()
			roles[f.Source] = r.auth.functionRoles[f.Name]
			r.auth.mu.Unlock()
			for _, kv := range f.Env {
				switch k, v, _ := strings.Cut(kv, "="); k {
				case pipeline.EnvTenantRoleARN:
					tenantRoles[f.Source] = v
				case pipeline.EnvTenantRolePool:
					pool = v
				}
			}
		}
		upTag := map[string]string{pipeline.TenantTag: "up"} // an uploader's
		tenantTags := map[string]string{pipeline.TenantTag: "up", pipeline.PoolTag: pool}
		type assumption struct {
			name, by, role string
			tags           map[string]string
			want           string
		}
		assumptions := []assumption{{"the outsider takes up's uploader role", r.OutsiderRoleARN(), uploaderRole(t, r, "up", pooled), upTag, "AccessDenied"}}
		if !pooled {
			assumptions[0].tags = nil
		} else {
			assumptions = append(assumptions,
				assumption{"the outsider takes the tenant role", r.OutsiderRoleARN(), tenantRoles["lambdas/split"], tenantTags, "AccessDenied"},
				assumption{"Split takes Register's tenant role", roles["lambdas/split"], tenantRoles["lambdas/register"], tenantTags, "AccessDenied"},
				assumption{"Split takes its tenant role", roles["lambdas/split"], tenantRoles["lambdas/split"], tenantTags, ""},
				assumption{"Register takes its tenant role", roles["lambdas/register"], tenantRoles["lambdas/register"], tenantTags, ""},
			)
		}
		for _, a := range assumptions {
			if a.by == "" || a.role == "" {
				t.Fatalf("%s: no role found (by %q, role %q)", a.name, a.by, a.role)
			}
			if err := assume(stsAs(a.by), a.role, a.tags); errorCode(err) != a.want {
				t.Errorf("%s: got %q (%v), want %q", a.name, errorCode(err), err, a.want)
			}
		}
		if pooled {
			// Each function's tenant role holds what its function does for the tenant and no more:
			// Split's session reads the file and writes no control key (a request's record), the
			// controller's reads its control keys and no file.
			split := sessionClient(t, ctx, r, tenantRoles["lambdas/split"], tenantTags)
			controller := sessionClient(t, ctx, r, tenantRoles["lambdas/controller"], tenantTags)
			if err := get(split, good); err != nil {
				t.Errorf("Split's tenant session reads up's file: %v, want it allowed", err)
			}
			if err := put(split, s3.PutObjectInput{IfNoneMatch: aws.String("*")}, pipeline.ControlRequestKey(r.Tenant("up").Owner(), "forged-by-split")); errorCode(err) != "AccessDenied" {
				t.Errorf("Split's tenant session writes a control record: got %q (%v), want AccessDenied from its role", errorCode(err), err)
			}
			if err := get(controller, good); errorCode(err) != "AccessDenied" {
				t.Errorf("the controller's tenant session reads up's file: got %q (%v), want AccessDenied from its role", errorCode(err), err)
			}
			if err := put(controller, s3.PutObjectInput{IfNoneMatch: aws.String("*")}, pipeline.ControlRequestKey(r.Tenant("up").Owner(), "by-the-controller")); err != nil {
				t.Errorf("the controller's tenant session writes a control record: %v, want it allowed", err)
			}
		}

		// Without the bucket's statements the same requests pass: the policy is what refused them.
		r.auth.mu.Lock()
		kept := r.auth.resourcePolicies[r.Bucket]
		r.auth.resourcePolicies[r.Bucket] = nil
		r.auth.mu.Unlock()
		if err := get(outsider, result); err != nil {
			t.Errorf("the outsider reads up's results without the bucket's policy: %v; want it allowed by its own policy", err)
		}
		if err := put(up, s3.PutObjectInput{StorageClass: s3types.StorageClassGlacier}, prefix+"unrefused.csv"); err != nil {
			t.Errorf("the uploader's put in GLACIER without If-None-Match, without the bucket's policy: %v; want it allowed by its role", err)
		}
		// And without the key's policy, whose root statement is what lets IAM policies use the key,
		// the uploader's proper upload is refused: S3 cannot make the data key for it.
		key, _ := r.auth.bucketKMS(r.Bucket, "", nil)
		if key == "" {
			t.Fatal("the bucket has no key of the templates; the scenario creates one")
		}
		if _, err := r.auth.resourceStatements(key); err != nil {
			t.Fatal(err)
		}
		r.auth.mu.Lock()
		keyPolicy := r.auth.resourcePolicies[key]
		r.auth.resourcePolicies[key] = nil
		r.auth.mu.Unlock()
		if err := put(up, s3.PutObjectInput{IfNoneMatch: aws.String("*")}, prefix+"without-key-policy.csv"); errorCode(err) != "AccessDenied" {
			t.Errorf("the uploader's proper PutObject without the key's policy: got %q (%v), want AccessDenied", errorCode(err), err)
		}
		r.auth.mu.Lock()
		r.auth.resourcePolicies[key] = keyPolicy
		r.auth.mu.Unlock()

		r.auth.mu.Lock()
		r.auth.resourcePolicies[r.Bucket] = kept
		// And without the queue's: the first queue takes the outsider's message.
		r.auth.resourcePolicies["sqs:"+queues[0].Name] = nil
		r.auth.mu.Unlock()
		if err := send(queues[0]); err != nil {
			t.Errorf("the outsider's SendMessage to %s without the queue's policy: %v; want it allowed by its own policy", queues[0].Name, err)
		}
	})
}

// withTopLevelJSON sets a top-level field of a tenants file.
func withTopLevelJSON(t *testing.T, tenantsJSON, field string, value any) string {
	t.Helper()
	var f map[string]any
	if err := json.Unmarshal([]byte(tenantsJSON), &f); err != nil {
		t.Fatal(err)
	}
	f[field] = value
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rolePathOf is the IAM path of the role whose ARN is arn ("/a/b/" of arn:aws:iam::1:role/a/b/name).
func rolePathOf(arn string) string {
	_, rest, _ := strings.Cut(arn, ":role")
	return rest[:strings.LastIndex(rest, "/")+1]
}
