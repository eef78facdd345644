package localrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	ststypes "github.com/aws/aws-sdk-go-v2/service/sts/types"
	"github.com/aws/smithy-go"
	"github.com/johannesboyne/gofakes3"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/tenantcreds"
)

// tenantAuthRig is the pool template of testdata/tenantrole with its bucket, the local STS and
// the guarded S3 endpoint.
type tenantAuthRig struct {
	auth *tenantAuth
	role string
	sts  *httptest.Server
	s3   *httptest.Server
	own  *s3.Client // the function's own credentials ("local")
}

func newTenantAuthRig(t *testing.T) *tenantAuthRig {
	t.Helper()
	asm, err := deploy.LoadAssembly("testdata/tenantrole")
	if err != nil {
		t.Fatal(err)
	}
	res, err := deploy.NewResolver(asm, emulate.Region, "123456789012")
	if err != nil {
		t.Fatal(err)
	}
	s := emulate.NewS3(&emulate.APICounter{}, &emulate.RequestMeter{}, emulate.NewSequencers("", 1))
	if err := s.Backend.CreateBucket("ingest"); err != nil {
		t.Fatal(err)
	}
	s.Backend.SetVersioningConfiguration("ingest", gofakes3.VersioningConfiguration{Status: gofakes3.VersioningEnabled})
	res.Set(asm.OfType("AWS::S3::Bucket")[0], deploy.Identity{Ref: "ingest", Attrs: map[string]string{"Arn": "arn:aws:s3:::ingest"}})
	role, err := res.ResolveString(asm.OfType("AWS::IAM::Role")[0].Stack, []byte(`{"Fn::GetAtt":["PoolTenantRole0DA6EF0C","Arn"]}`))
	if err != nil {
		t.Fatal(err)
	}
	r := &tenantAuthRig{auth: newTenantAuth(asm, res), role: role}
	r.sts = httptest.NewServer(http.HandlerFunc(r.auth.serveSTS))
	r.s3 = httptest.NewServer(r.auth.guardS3(s.Handler(true)))
	t.Cleanup(func() { r.sts.Close(); r.s3.Close() })
	r.own = r.client(aws.NewCredentialsCache(emulate.LocalAWS.Credentials))
	for _, k := range []string{"pools/p/a/x.csv", "pools/p/b/x.csv", "work/a/e/manifest", "work/b/e/manifest"} {
		if _, err := r.own.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("ingest"), Key: aws.String(k), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r *tenantAuthRig) client(creds aws.CredentialsProvider) *s3.Client {
	cfg := emulate.LocalAWS.Copy()
	cfg.Credentials = creds
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint = aws.String(r.s3.URL); o.UsePathStyle = true })
}

func (r *tenantAuthRig) stsClient() *sts.Client {
	return sts.NewFromConfig(emulate.LocalAWS, func(o *sts.Options) { o.BaseEndpoint = aws.String(r.sts.URL) })
}

func errorCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// A session for tenant a (made as the functions make it, tenantcreds over the local STS) reads
// and writes a's keys and is refused b's with S3's AccessDenied: a wrong key, or an execution of
// b processed with a's tag, cannot reach b's objects. The function's own credentials are unchanged.
func TestTenantSessionReadsOnlyItsTenant(t *testing.T) {
	r := newTenantAuthRig(t)
	creds, err := tenantcreds.New(r.stsClient(), tenantcreds.Role{ARN: r.role, Pool: "p"}, 0).For("a")
	if err != nil {
		t.Fatal(err)
	}
	a := r.client(creds)
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		client   *s3.Client
		get, put string
		wantCode string // "": allowed
	}{
		{"a's file", a, "pools/p/a/x.csv", "", ""},
		{"a's manifest", a, "work/a/e/manifest", "", ""},
		{"a writes its manifest", a, "", "work/a/e2/manifest", ""},
		{"b's file", a, "pools/p/b/x.csv", "", "AccessDenied"},
		{"b's manifest (b's execution with a's tag)", a, "work/b/e/manifest", "", "AccessDenied"},
		{"a writes b's manifest", a, "", "work/b/e2/manifest", "AccessDenied"},
		{"a's id further down b's key", a, "pools/p/b/a/x.csv", "", "AccessDenied"},
		{"control objects are not granted here", a, "control/a/paused.json", "", "AccessDenied"},
		{"the function's own credentials read b's file", r.own, "pools/p/b/x.csv", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.get != "" {
				var out *s3.GetObjectOutput
				if out, err = tc.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("ingest"), Key: aws.String(tc.get)}); err == nil {
					out.Body.Close()
				}
			} else {
				_, err = tc.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("ingest"), Key: aws.String(tc.put), Body: strings.NewReader("m")})
			}
			if got := errorCode(err); got != tc.wantCode {
				t.Errorf("got error %q (%v), want %q", got, err, tc.wantCode)
			}
		})
	}
}

// The policy evaluation, for what the local run has no emulator of (Secrets Manager) and for
// DynamoDB tables and listings: a's session gets a's secret, table and prefixes, never b's.
func TestTenantSessionPolicy(t *testing.T) {
	r := newTenantAuthRig(t)
	a := tenantSession{role: r.role, tags: map[string]string{"tenant": "a"}}
	secret := func(name string) string {
		return "arn:aws:secretsmanager:" + emulate.Region + ":123456789012:secret:" + name
	}
	table := func(name string) string { return "arn:aws:dynamodb:" + emulate.Region + ":123456789012:table/" + name }
	for _, tc := range []struct {
		name             string
		s                tenantSession
		action, resource string
		keys             map[string]string
		want             bool
	}{
		{"a's secret", a, "secretsmanager:GetSecretValue", secret("pipeline/a-AbCdEf"), nil, true},
		{"b's secret", a, "secretsmanager:GetSecretValue", secret("pipeline/b-AbCdEf"), nil, false},
		{"a-b's secret is not a's", a, "secretsmanager:GetSecretValue", secret("pipeline/a-b-AbCdEf"), nil, false},
		{"a's table", a, "dynamodb:PutItem", table("pool-a"), nil, true},
		{"b's table", a, "dynamodb:PutItem", table("pool-b"), nil, false},
		{"a's table, another action", a, "dynamodb:DeleteItem", table("pool-a"), nil, false},
		{"listing a's prefix", a, "s3:ListBucket", "arn:aws:s3:::ingest", map[string]string{"s3:prefix": "pools/p/a/x"}, true},
		{"listing b's prefix", a, "s3:ListBucket", "arn:aws:s3:::ingest", map[string]string{"s3:prefix": "pools/p/b/"}, false},
		{"listing without a prefix", a, "s3:ListBucket", "arn:aws:s3:::ingest", nil, false},
		{"a session without the tag", tenantSession{role: r.role, tags: map[string]string{"team": "a"}}, "s3:GetObject", "arn:aws:s3:::ingest/pools/p/a/x.csv", nil, false},
		{"a tag value with a wildcard is literal", tenantSession{role: r.role, tags: map[string]string{"tenant": "*"}}, "s3:GetObject", "arn:aws:s3:::ingest/pools/p/a/x.csv", nil, false},
		{"an unknown role", tenantSession{role: "arn:aws:iam::123456789012:role/other", tags: a.tags}, "s3:GetObject", "arn:aws:s3:::ingest/pools/p/a/x.csv", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.auth.allowed(tc.s, tc.action, tc.resource, tc.keys); got != tc.want {
				t.Errorf("got allowed %v, want %v", got, tc.want)
			}
		})
	}
}

// The local STS refuses a session without exactly the tenant tag and its pool's tag, as the role's
// trust policy does, and one longer than the role's MaxSessionDuration (none in the template: 3600)
// or shorter than 900 seconds, as STS does.
func TestLocalAssumeRoleNeedsTheTenantTag(t *testing.T) {
	r := newTenantAuthRig(t)
	tag := func(kv ...string) []ststypes.Tag {
		var out []ststypes.Tag
		for i := 0; i < len(kv); i += 2 {
			out = append(out, ststypes.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
		}
		return out
	}
	tenantA := tag("tenant", "a", "pool", "p")
	for _, tc := range []struct {
		name     string
		role     string
		tags     []ststypes.Tag
		wantCode string
		duration time.Duration
	}{
		{"the role's maximum session", "", tenantA, "", time.Hour},
		{"past the role's maximum session", "", tenantA, "ValidationError", time.Hour + time.Second},
		{"under 900 seconds", "", tenantA, "ValidationError", 899 * time.Second},
		{"tenant and pool tags", "", tenantA, "", 0},
		{"no tag", "", nil, "AccessDenied", 0},
		{"the tenant tag alone", "", tag("tenant", "a"), "AccessDenied", 0},
		{"another pool's tag", "", tag("tenant", "a", "pool", "q"), "AccessDenied", 0},
		{"another tag too", "", tag("tenant", "a", "pool", "p", "team", "x"), "AccessDenied", 0},
		{"empty tenant", "", tag("tenant", "", "pool", "p"), "AccessDenied", 0},
		{"unknown role", "arn:aws:iam::123456789012:role/other", tenantA, "AccessDenied", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			role := tc.role
			if role == "" {
				role = r.role
			}
			p := stscreds.NewAssumeRoleProvider(r.stsClient(), role, func(o *stscreds.AssumeRoleOptions) { o.Tags, o.Duration = tc.tags, tc.duration })
			_, err := p.Retrieve(context.Background())
			if got := errorCode(err); got != tc.wantCode {
				t.Errorf("got %q (%v), want %q", got, err, tc.wantCode)
			}
		})
	}
}

// synthetic gives the rig a role of the given statements (as roleStatements would resolve them
// from a template) and returns a session of it for tenant a, with its S3 client.
func (r *tenantAuthRig) synthetic(t *testing.T, name string, stmts []statement) (tenantSession, *s3.Client) {
	t.Helper()
	arn := "arn:aws:iam::123456789012:role/" + name
	s := tenantSession{role: arn, tags: map[string]string{"tenant": "a"}}
	key := sessionKeyPrefix + strings.ToUpper(name)
	r.auth.mu.Lock()
	r.auth.policies[arn] = stmts
	r.auth.sessions[key] = s
	r.auth.mu.Unlock()
	return s, r.client(credentials.NewStaticCredentialsProvider(key, "local", "local-"+key))
}

// sessionConfig is the SDK configuration of a session named name whose role holds stmts (synthetic),
// for a client of any service the rig's guards judge.
func (r *tenantAuthRig) sessionConfig(t *testing.T, name string, stmts []statement) aws.Config {
	t.Helper()
	r.synthetic(t, name, stmts)
	cfg := emulate.LocalAWS.Copy()
	cfg.Credentials = credentials.NewStaticCredentialsProvider(sessionKeyPrefix+strings.ToUpper(name), "local", "local")
	return cfg
}

// serveTest serves h for the length of the test and returns its URL.
func serveTest(t *testing.T, h http.Handler) string {
	t.Helper()
	server := httptest.NewServer(h)
	t.Cleanup(server.Close)
	return server.URL
}

// serveGuarded serves guard in front of a service that answers every request with body, of
// contentType, and returns its URL.
func serveGuarded(t *testing.T, guard func(http.Handler) http.Handler, contentType, body string) string {
	t.Helper()
	return serveTest(t, guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Write([]byte(body))
	})))
}

// setKeyPolicy makes stmts the policy of the KMS key key.
func (r *tenantAuthRig) setKeyPolicy(key string, stmts ...statement) {
	r.auth.mu.Lock()
	r.auth.resourcePolicies = map[string][]statement{key: stmts}
	r.auth.mu.Unlock()
}

// rootKeyStatement is the default key policy's account statement.
const rootKeyStatement = `{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"kms:*","Resource":"*"}`

// wantAllowed fails t unless err is nil when want is true, and the service's error code when it
// is false.
func wantAllowed(t *testing.T, err error, want bool, code string) {
	t.Helper()
	var api smithy.APIError
	switch {
	case want && err != nil:
		t.Errorf("got %v, want the call allowed", err)
	case !want && (!errors.As(err, &api) || api.ErrorCode() != code):
		t.Errorf("got %v, want %s", err, code)
	}
}

func allow(actions, resources []string, cond map[string]map[string]stringList) statement {
	return statement{Effect: "Allow", Action: actions, Resource: resources, Condition: cond}
}

func deny(actions, resources []string, cond map[string]map[string]stringList) statement {
	return statement{Effect: "Deny", Action: actions, Resource: resources, Condition: cond}
}

// A GET or HEAD of an object version is s3:GetObjectVersion: a role with s3:GetObject alone reads
// the current object and is refused a version by its id, as S3 refuses it.
func TestTenantAuthGetObjectVersion(t *testing.T) {
	r := newTenantAuthRig(t)
	ctx := context.Background()
	put, err := r.own.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("ingest"), Key: aws.String("pools/p/a/v.csv"), Body: strings.NewReader("v1")})
	if err != nil || aws.ToString(put.VersionId) == "" {
		t.Fatalf("put: %v, version %q; want a version id", err, aws.ToString(put.VersionId))
	}
	files := []string{"arn:aws:s3:::ingest/pools/p/${aws:PrincipalTag/tenant}/*"}
	_, current := r.synthetic(t, "current", []statement{allow([]string{"s3:GetObject"}, files, nil)})
	_, versions := r.synthetic(t, "versions", []statement{allow([]string{"s3:GetObject", "s3:GetObjectVersion"}, files, nil)})
	for _, tc := range []struct {
		name     string
		client   *s3.Client
		version  *string
		head     bool
		wantCode string
	}{
		{"GetObject, current", current, nil, false, ""},
		{"GetObject, by version id", current, put.VersionId, false, "AccessDenied"},
		{"HeadObject, by version id", current, put.VersionId, true, "Forbidden"},
		{"GetObjectVersion, by version id", versions, put.VersionId, false, ""},
		{"GetObjectVersion, HeadObject by version id", versions, put.VersionId, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.head {
				_, err = tc.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("ingest"), Key: aws.String("pools/p/a/v.csv"), VersionId: tc.version})
			} else {
				var out *s3.GetObjectOutput
				if out, err = tc.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("ingest"), Key: aws.String("pools/p/a/v.csv"), VersionId: tc.version}); err == nil {
					out.Body.Close()
				}
			}
			if got := errorCode(err); got != tc.wantCode {
				t.Errorf("got %q (%v), want %q", got, err, tc.wantCode)
			}
		})
	}
}

// An explicit Deny wins over any Allow, and a condition the emulation cannot evaluate fails
// closed: its Allow does not apply, its Deny does. A condition on a key the request lacks is false.
func TestTenantAuthDenyAndConditions(t *testing.T) {
	r := newTenantAuthRig(t)
	all := []string{"arn:aws:s3:::ingest/*"}
	control := []string{"arn:aws:s3:::ingest/control/*"}
	object := "arn:aws:s3:::ingest/pools/p/a/x.csv"
	secure := map[string]string{"aws:SecureTransport": "true"}
	plain := map[string]string{"aws:SecureTransport": "false"}
	cond := func(op, key string, values ...string) map[string]map[string]stringList {
		return map[string]map[string]stringList{op: {key: values}}
	}
	for _, tc := range []struct {
		name     string
		stmts    []statement
		action   string
		resource string
		keys     map[string]string
		want     bool
	}{
		{"an Allow", []statement{allow([]string{"s3:*"}, all, nil)}, "s3:PutObject", object, secure, true},
		{"no statement", nil, "s3:GetObject", object, secure, false},
		{"a Deny wins, after the Allow", []statement{allow([]string{"s3:*"}, all, nil), deny([]string{"s3:PutObject"}, control, nil)},
			"s3:PutObject", "arn:aws:s3:::ingest/control/a/paused.json", secure, false},
		{"a Deny wins, before the Allow", []statement{deny([]string{"s3:PutObject"}, control, nil), allow([]string{"s3:*"}, all, nil)},
			"s3:PutObject", "arn:aws:s3:::ingest/control/a/paused.json", secure, false},
		{"a Deny of other actions", []statement{allow([]string{"s3:*"}, all, nil), deny([]string{"s3:PutObject"}, control, nil)},
			"s3:GetObject", "arn:aws:s3:::ingest/control/a/paused.json", secure, true},
		{"a Deny of other resources", []statement{allow([]string{"s3:*"}, all, nil), deny([]string{"s3:PutObject"}, control, nil)},
			"s3:PutObject", object, secure, true},
		{"Bool on TLS, over TLS", []statement{allow([]string{"s3:PutObject"}, all, cond("Bool", "aws:SecureTransport", "true"))}, "s3:PutObject", object, secure, true},
		{"Bool on TLS, without TLS", []statement{allow([]string{"s3:PutObject"}, all, cond("Bool", "aws:SecureTransport", "true"))}, "s3:PutObject", object, plain, false},
		{"Bool on TLS, the key missing", []statement{allow([]string{"s3:PutObject"}, all, cond("Bool", "aws:SecureTransport", "true"))}, "s3:PutObject", object, nil, false},
		{"a TLS Deny, without TLS", []statement{allow([]string{"s3:*"}, all, nil), deny([]string{"s3:*"}, all, cond("Bool", "aws:SecureTransport", "false"))},
			"s3:PutObject", object, plain, false},
		{"a TLS Deny, over TLS", []statement{allow([]string{"s3:*"}, all, nil), deny([]string{"s3:*"}, all, cond("Bool", "aws:SecureTransport", "false"))},
			"s3:PutObject", object, secure, true},
		{"an Allow, unknown operator", []statement{allow([]string{"s3:*"}, all, cond("ArnLike", "aws:SecureTransport", "arn:*"))}, "s3:PutObject", object, secure, false},
		{"an Allow, set operator", []statement{allow([]string{"s3:*"}, all, cond("ForAnyValue:StringLike", "s3:prefix", "*"))}, "s3:PutObject", object, secure, false},
		{"an Allow, unknown key", []statement{allow([]string{"s3:*"}, all, cond("StringEquals", "aws:SourceVpce", "vpce-1"))}, "s3:PutObject", object, secure, false},
		{"a Deny, unknown operator", []statement{allow([]string{"s3:*"}, all, nil), deny([]string{"s3:*"}, all, cond("IpAddress", "aws:SecureTransport", "10.0.0.0/8"))},
			"s3:PutObject", object, secure, false},
		{"a Deny, unknown key", []statement{allow([]string{"s3:*"}, all, nil), deny([]string{"s3:*"}, all, cond("StringNotEquals", "aws:PrincipalArn", "arn:aws:iam::123456789012:role/op"))},
			"s3:PutObject", object, secure, false},
		{"a Deny, unknown key, other resources", []statement{allow([]string{"s3:*"}, all, nil), deny([]string{"s3:*"}, control, cond("StringNotEquals", "aws:PrincipalArn", "x"))},
			"s3:PutObject", object, secure, true},
		{"a Deny on s3:prefix, the key missing", []statement{allow([]string{"s3:*"}, all, nil), deny([]string{"s3:*"}, all, cond("StringLike", "s3:prefix", "*"))},
			"s3:PutObject", object, secure, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := r.synthetic(t, strings.NewReplacer(" ", "", ",", "").Replace(tc.name), tc.stmts)
			if got := r.auth.allowed(s, tc.action, tc.resource, tc.keys); got != tc.want {
				t.Errorf("got allowed %v, want %v", got, tc.want)
			}
		})
	}
}

// uploaderStatements are a pool uploader role's policy as TenantPool.UploaderRole writes it: put
// and the multipart actions under <pool prefix>${aws:PrincipalTag/tenant}/, TLS only.
var uploaderStatements = []statement{allow(
	[]string{"s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"},
	[]string{"arn:aws:s3:::ingest/pools/p/${aws:PrincipalTag/tenant}/*"},
	map[string]map[string]stringList{"Bool": {"aws:SecureTransport": {"true"}}})}

// An upload session (the local STS's AssumeRole with tenant=a, as pipectl upload-url --role
// makes it) is checked like any other request: it puts under a's prefix, by a PUT, a presigned
// URL or a multipart upload, and is refused b's prefix, control/, results/, a key outside every
// prefix and any read; a presigned URL is refused once it expired.
func TestTenantAuthUploaderSession(t *testing.T) {
	r := newTenantAuthRig(t)
	ctx := context.Background()
	role := "arn:aws:iam::123456789012:role/uploader"
	r.auth.mu.Lock()
	r.auth.policies[role] = uploaderStatements
	r.auth.trust[role] = poolUploaderTrust(role) // the pool's trust policy allows sts:TagSession
	r.auth.mu.Unlock()
	p := stscreds.NewAssumeRoleProvider(r.stsClient(), role, func(o *stscreds.AssumeRoleOptions) {
		o.Tags = []ststypes.Tag{{Key: aws.String("tenant"), Value: aws.String("a")}}
	})
	creds := aws.NewCredentialsCache(p)
	up := r.client(creds)
	presign := s3.NewPresignClient(up)
	put := func(key, how string) error {
		switch how {
		case "put":
			_, err := up.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("ingest"), Key: aws.String(key), Body: strings.NewReader("id\n1\n")})
			return err
		case "multipart":
			mp, err := up.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("ingest"), Key: aws.String(key)})
			if err != nil {
				return err
			}
			part, err := up.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("ingest"), Key: aws.String(key), UploadId: mp.UploadId,
				PartNumber: aws.Int32(1), Body: strings.NewReader("id\n1\n")})
			if err != nil {
				return err
			}
			_, err = up.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("ingest"), Key: aws.String(key), UploadId: mp.UploadId,
				MultipartUpload: &s3types.CompletedMultipartUpload{Parts: []s3types.CompletedPart{{ETag: part.ETag, PartNumber: aws.Int32(1)}}}})
			return err
		}
		// A presigned PUT, sent as curl -T sends it.
		req, err := presign.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("ingest"), Key: aws.String(key)})
		if err != nil {
			return err
		}
		u := req.URL
		if how == "expired presigned" {
			q, _ := url.ParseQuery(strings.SplitN(u, "?", 2)[1])
			q.Set("X-Amz-Date", time.Now().Add(-time.Hour).UTC().Format("20060102T150405Z"))
			u = strings.SplitN(u, "?", 2)[0] + "?" + q.Encode()
		}
		hr, _ := http.NewRequestWithContext(ctx, http.MethodPut, u, strings.NewReader("id\n1\n"))
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
		}
		return nil
	}
	for _, tc := range []struct {
		key, how string
		want     string // "": allowed; else the error's text
	}{
		{"pools/p/a/new.csv", "put", ""},
		{"pools/p/a/受注 11月.csv", "put", ""},
		{"pools/p/a/by-url.csv", "presigned", ""},
		{"pools/p/a/big.csv", "multipart", ""},
		{"pools/p/b/new.csv", "put", "AccessDenied"},
		{"pools/p/b/by-url.csv", "presigned", "HTTP 403"},
		{"pools/p/b/big.csv", "multipart", "AccessDenied"},
		{"pools/p/a/late.csv", "expired presigned", "Request has expired"},
		{"control/a/paused.json", "put", "AccessDenied"},
		{"results/b/e/summary.json", "put", "AccessDenied"},
		{"work/a/e/manifest", "put", "AccessDenied"},
		{"outside.csv", "put", "AccessDenied"},
	} {
		t.Run(tc.how+" "+tc.key, func(t *testing.T) {
			err := put(tc.key, tc.how)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want the upload allowed", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want %s", err, tc.want)
			}
		})
	}
	out, err := up.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("ingest"), Key: aws.String("pools/p/a/x.csv")})
	if err == nil {
		out.Body.Close()
	}
	if got := errorCode(err); got != "AccessDenied" {
		t.Errorf("uploader reads a's file: got %q (%v), want AccessDenied", got, err)
	}
}

// siloUploaderStatements are a silo tenant's uploader role's policy as TenantPipeline.UploaderRole
// writes it: put and the multipart actions under the tenant's own prefix, TLS only.
var siloUploaderStatements = []statement{allow(
	[]string{"s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"},
	[]string{"arn:aws:s3:::ingest/pools/p/a/*"},
	map[string]map[string]stringList{"Bool": {"aws:SecureTransport": {"true"}}})}

// A silo tenant's uploader role trusts its uploaders without sts:TagSession: the local STS gives
// it sessions without tags and refuses a tagged AssumeRole, as STS does; the session puts under
// the tenant's prefix and is refused another tenant's prefix, control/, results/ and a key
// outside every prefix.
func TestTenantAuthSiloUploaderSession(t *testing.T) {
	r := newTenantAuthRig(t)
	ctx := context.Background()
	role := "arn:aws:iam::123456789012:role/silo-uploader"
	r.auth.mu.Lock()
	r.auth.policies[role] = siloUploaderStatements
	r.auth.trust[role] = siloUploaderTrust(role)
	r.auth.mu.Unlock()
	tagged := stscreds.NewAssumeRoleProvider(r.stsClient(), role, func(o *stscreds.AssumeRoleOptions) {
		o.Tags = []ststypes.Tag{{Key: aws.String("tenant"), Value: aws.String("a")}}
	})
	if _, err := tagged.Retrieve(ctx); errorCode(err) != "AccessDenied" {
		t.Errorf("tagged AssumeRole: got %v, want AccessDenied (the trust policy allows no sts:TagSession)", err)
	}
	up := r.client(aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(r.stsClient(), role)))
	for _, tc := range []struct {
		key  string
		want string // "": allowed
	}{
		{"pools/p/a/new.csv", ""},
		{"pools/p/b/new.csv", "AccessDenied"},
		{"control/a/paused.json", "AccessDenied"},
		{"results/b/e/summary.json", "AccessDenied"},
		{"outside.csv", "AccessDenied"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			_, err := up.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("ingest"), Key: aws.String(tc.key), Body: strings.NewReader("id\n1\n")})
			if got := errorCode(err); got != tc.want {
				t.Errorf("got %q (%v), want %q", got, err, tc.want)
			}
		})
	}
}

// poolUploaderTrust is a pool uploader role's trust policy as the constructs write it: its
// uploaders may assume it with exactly one session tag, tenant, whose value is a tenant's id.
func poolUploaderTrust(role string) []statement {
	st := mustStatement(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:role/platform"},"Action":["sts:AssumeRole","sts:TagSession"],
		"Condition":{"ForAllValues:StringEquals":{"aws:TagKeys":["tenant"]},"Null":{"aws:RequestTag/tenant":"false"},"StringLike":{"aws:RequestTag/tenant":"?*"},
		"StringNotLike":{"aws:RequestTag/tenant":["*/*"]}}}`)
	st.Resource = stringList{role}
	return []statement{st}
}

// siloUploaderTrust is a silo tenant's uploader role's trust policy: its uploaders, without tags.
func siloUploaderTrust(role string) []statement {
	st := mustStatement(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:role/platform"},"Action":"sts:AssumeRole"}`)
	st.Resource = stringList{role}
	return []statement{st}
}

// A session's aws:userid is its role's unique id and its name, as STS gives it (AssumedRoleId),
// so a resource policy can exempt exact roles by id: the bucket's Deny on every other userid
// lets the tenant role's session read and refuses a role of any other id, whatever its own
// policy allows; a Deny naming another id refuses the tenant role's session too.
func TestUserIDNamesTheRoleExactly(t *testing.T) {
	r := newTenantAuthRig(t)
	const roleID = "AROALOCALPOOLTENANTROLE0DA6EF0C" // deploy: AROALOCAL<logical id>
	out, err := r.stsClient().AssumeRole(context.Background(), &sts.AssumeRoleInput{
		RoleArn: aws.String(r.role), RoleSessionName: aws.String("tenant-a"),
		Tags: []ststypes.Tag{{Key: aws.String("tenant"), Value: aws.String("a")}, {Key: aws.String("pool"), Value: aws.String("p")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(out.AssumedRoleUser.AssumedRoleId); got != roleID+":tenant-a" {
		t.Errorf("got AssumedRoleId %q, want %s:tenant-a", got, roleID)
	}
	c := *out.Credentials
	tenant := r.client(credentials.NewStaticCredentialsProvider(aws.ToString(c.AccessKeyId), aws.ToString(c.SecretAccessKey), aws.ToString(c.SessionToken)))
	_, other := r.synthetic(t, "other", []statement{allow([]string{"s3:GetObject"}, []string{"*"}, nil)})
	read := func(c *s3.Client) string {
		out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("ingest"), Key: aws.String("pools/p/a/x.csv")})
		if err == nil {
			out.Body.Close()
		}
		return errorCode(err)
	}
	for _, tc := range []struct {
		name              string
		exempt            string
		wantTenant, wantO string
	}{
		{"the tenant role's id exempt", roleID + ":*", "", "AccessDenied"},
		{"another id exempt", "AROALOCALOTHER:*", "AccessDenied", "AccessDenied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.auth.mu.Lock()
			if r.auth.resourcePolicies == nil {
				r.auth.resourcePolicies = map[string][]statement{}
			}
			st := deny([]string{"s3:GetObject"}, []string{"arn:aws:s3:::ingest/*"}, map[string]map[string]stringList{"StringNotLike": {"aws:userid": {tc.exempt}}})
			st.Principal = json.RawMessage(`"*"`)
			r.auth.resourcePolicies["ingest"] = []statement{st}
			r.auth.mu.Unlock()
			if got := read(tenant); got != tc.wantTenant {
				t.Errorf("the tenant role's session: got %q, want %q", got, tc.wantTenant)
			}
			if got := read(other); got != tc.wantO {
				t.Errorf("a role of another id: got %q, want %q", got, tc.wantO)
			}
		})
	}
}
