//go:build e2e || figures

package localrun

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	ststypes "github.com/aws/aws-sdk-go-v2/service/sts/types"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/pipeline"
)

const uploadTenants = `{"tenants": [
  {"id": "up", "registerUrl": "https://core.example.com/records"},
  {"id": "other", "registerUrl": "https://core.example.com/records"}
]}`

// Customers' uploads through pipectl, against the served stack, in both tiers: a presigned URL
// from upload-url, PUT with net/http as curl -T would, is processed end to end; pipectl upload of
// two files is processed in the order given (not the names' order); bad input writes nothing. The
// tenant's uploader role (a silo tenant's own, assumed without tags, or the pool's, assumed with
// the session tag tenant=up) signs upload-url --role, whose PUT is processed, and its session is
// refused another tenant's prefix, control/, another tenant's results and a key outside every
// prefix; a silo tenant without uploaders is told to set them. In the pool, the operator's STS
// hands out a tagged session of the tenant role too, and the operator's S3 endpoint holds it to
// its role: another tenant's file is refused.
func TestScenarioUpload(t *testing.T) {
	t.Parallel() // a serial test holds back every parallel scenario until it ends
	forEachTier(t, uploadTenants, func(t *testing.T, tenants string) {
		pooled := strings.Contains(tenants, `"tier":"pool"`)
		tenants = withUploaders(t, tenants, pooled)
		r := startScenario(t, tenants, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		prefix := r.Tenant("up").Prefix

		// upload-url, then a plain HTTP PUT of the file with the headers it signs, as its curl line
		// does: the file is processed. The URL is single-use: a second PUT is refused with 412
		// PreconditionFailed, and the object stays the first.
		byURL := "by url 受注.csv"
		var up ops.PresignedUpload
		if err := json.Unmarshal([]byte(pipectl(t, r, "upload-url", "up", byURL, "--expires", "5m", "--bytes", strconv.Itoa(len(csvOf(3))), "--json", "--stack-prefix", opsPrefix)), &up); err != nil {
			t.Fatal(err)
		}
		if up.Headers["If-None-Match"] != "*" || up.Headers["Content-Length"] != strconv.Itoa(len(csvOf(3))) {
			t.Fatalf("upload-url --json: got headers %v, want If-None-Match: * and the Content-Length", up.Headers)
		}
		// Another size than the one signed (--bytes) is refused, as S3 refuses it.
		if code, body := putSigned(t, ctx, up, csvOf(4)); code != http.StatusForbidden || !strings.Contains(body, "<Code>SignatureDoesNotMatch</Code>") {
			t.Errorf("PUT of another size than signed: got HTTP %d (%s), want 403 SignatureDoesNotMatch", code, body)
		}
		if code, body := putSigned(t, ctx, up, csvOf(3)); code != http.StatusOK {
			t.Fatalf("PUT to the presigned URL: got HTTP %d (%s), want 200", code, body)
		}
		if err := waitRegistered(ctx, r, "up", 3); err != nil {
			t.Fatalf("the presigned upload: %v", err)
		}
		if code, body := putSigned(t, ctx, up, csvOf(3)); code != http.StatusPreconditionFailed || !strings.Contains(body, "<Code>PreconditionFailed</Code>") {
			t.Errorf("the presigned URL's second PUT: got HTTP %d (%s), want 412 PreconditionFailed", code, body)
		}

		// pipectl upload: the second name sorts first, and is processed second.
		dir := t.TempDir()
		first, second := filepath.Join(dir, "z first.csv"), filepath.Join(dir, "a second.csv")
		os.WriteFile(first, csvOf(4), 0o644)
		os.WriteFile(second, csvOf(5), 0o644)
		var put []ops.Uploaded
		if err := json.Unmarshal([]byte(pipectl(t, r, "upload", "up", first, second, "--json", "--stack-prefix", opsPrefix)), &put); err != nil {
			t.Fatal(err)
		}
		if len(put) != 2 || put[0].Key != prefix+"z first.csv" || put[1].Key != prefix+"a second.csv" || put[0].VersionID == "" {
			t.Fatalf("upload --json: got %+v, want z first.csv then a second.csv with versions", put)
		}
		// An upload never overwrites: the same name again is refused, and nothing is put.
		if code, stdout, stderr := pipectlIn(t, r, "", "upload", "up", first, "--stack-prefix", opsPrefix); code != 1 || stdout != "" ||
			!strings.Contains(stderr, "already exists (S3 answered 412 PreconditionFailed to If-None-Match: *)") {
			t.Errorf("upload of a name that exists: got exit %d, stdout %q, stderr %q; want 1 and already exists", code, stdout, stderr)
		}
		waitFor(t, ctx, r, "the three files registered", func(rep *report.Report) bool {
			tr := rep.Tenants["up"]
			if tr == nil || len(tr.Files) != 3 {
				return false
			}
			for _, f := range tr.Files {
				if f.Status != "SUCCEEDED" {
					return false
				}
			}
			return len(r.Sink.Registered("up")) == 12
		})
		// Registered file by file, in arrival order.
		var order []string
		for _, rec := range r.Sink.Registered("up") {
			if len(order) == 0 || order[len(order)-1] != rec.Source {
				order = append(order, rec.Source)
			}
		}
		if want := []string{prefix + byURL, prefix + "z first.csv", prefix + "a second.csv"}; strings.Join(order, "|") != strings.Join(want, "|") {
			t.Errorf("got records registered from %q, want each file's in turn: %q", order, want)
		}

		// Bad input: a clear error, and no object.
		for _, tc := range []struct {
			args     []string
			wantCode int
			want     string
		}{
			{[]string{"upload-url", "other", "../up/x.csv"}, 2, `has a ".." segment`},
			{[]string{"upload-url", "other", "x.csv", "--expires", "200h"}, 2, "past S3's limit of 7 days"},
			{[]string{"upload-url", "other", "x.csv", "--expires", "2h"}, 2, "is over 1h: a presigned URL is a bearer token"},
			{[]string{"upload-url", "other", "x.csv", "--max-bytes", "0"}, 2, "--max-bytes 0 is out of range"},
			{[]string{"upload-url", "nobody", "x.csv"}, 1, `tenant "nobody" not found`},
			{[]string{"upload", "other", first, filepath.Join(dir, "missing.csv")}, 1, "nothing uploaded"},
		} {
			code, stdout, stderr := pipectlIn(t, r, "", append(tc.args, "--stack-prefix", opsPrefix)...)
			if code != tc.wantCode || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Errorf("pipectl %s: got exit %d, stdout %q, stderr %q; want %d and %q", strings.Join(tc.args, " "), code, stdout, stderr, tc.wantCode, tc.want)
			}
		}
		if n := objectsUnder(t, ctx, r, r.Tenant("other").Prefix); n != 0 {
			t.Errorf("got %d objects under other's prefix, want none: bad input wrote something", n)
		}

		if !pooled {
			// other names no uploaders, so has no uploader role.
			code, stdout, stderr := pipectlIn(t, r, "", "upload-url", "other", "x.csv", "--role", "--stack-prefix", opsPrefix)
			if code != 1 || !strings.Contains(stderr, "tenant other is a silo tenant without an uploader role") || !strings.Contains(stderr, `set "uploaders" on the tenant`) || stdout != "" {
				t.Errorf("upload-url --role of a silo tenant without uploaders: got exit %d, stdout %q, stderr %q; want 1 and the uploaders field named", code, stdout, stderr)
			}
		} else {
			operatorSessionRefused(t, ctx, r)
		}

		// The tenant's uploader role: upload-url --role presigns with a session of it (tagged
		// tenant=up in the pool), and that URL's PUT is processed like any other.
		byRole := "by role.csv"
		// Its text output: the URL, then the headers to send.
		out := pipectl(t, r, "upload-url", "up", byRole, "--role", "--expires", "5m", "--stack-prefix", opsPrefix)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		byRoleURL := ops.PresignedUpload{URL: lines[0], Headers: map[string]string{}}
		for _, l := range lines[1:] {
			k, v, ok := strings.Cut(l, ": ")
			if !ok {
				break // the blank line before the curl command
			}
			byRoleURL.Headers[k] = v
		}
		if byRoleURL.Headers["If-None-Match"] != "*" {
			t.Fatalf("upload-url --role: got %q, want the URL then If-None-Match: *", out)
		}
		if code, body := putSigned(t, ctx, byRoleURL, csvOf(2)); code != http.StatusOK {
			t.Fatalf("PUT to the uploader role's presigned URL: got HTTP %d (%s), want 200", code, body)
		}
		if err := waitRegistered(ctx, r, "up", 14); err != nil {
			t.Fatalf("the uploader role's upload: %v", err)
		}
		// The same session may write nowhere else: another tenant's prefix, control/, another
		// tenant's results, a key outside every prefix. Each presigned URL is signed fine; S3 (here
		// the local policy check) refuses the PUT with AccessDenied.
		for _, key := range []string{
			r.Tenant("other").Prefix + "forged.csv",
			pipeline.ControlDir(r.Tenant("up").Owner()) + "forged.json",
			pipeline.ResultsDir(r.Tenant("other").Owner()) + "forged.json",
			"outside.csv",
		} {
			u := presignAsUploader(t, ctx, r, "up", key, pooled)
			if code := putURL(t, ctx, u, []byte("x")); code != http.StatusForbidden {
				t.Errorf("PUT %s with up's uploader session: got HTTP %d, want 403 AccessDenied", key, code)
			}
		}
		if n := objectsUnder(t, ctx, r, r.Tenant("other").Prefix+"forged"); n != 0 {
			t.Errorf("got %d forged objects under other's prefix, want none", n)
		}

		// --max-bytes without --bytes: the URL signs the bound as x-amz-meta-max-bytes, which the
		// PUT must send as signed. A file within it is processed; S3 stores a larger one, which the
		// pipeline fails before registering anything. Last, as the failed file halts up.
		bounded := func(name string, max int) ops.PresignedUpload {
			var u ops.PresignedUpload
			if err := json.Unmarshal([]byte(pipectl(t, r, "upload-url", "up", name, "--max-bytes", strconv.Itoa(max), "--json", "--stack-prefix", opsPrefix)), &u); err != nil {
				t.Fatal(err)
			}
			if u.Headers["x-amz-meta-max-bytes"] != strconv.Itoa(max) || u.MaxBytes == nil || *u.MaxBytes != int64(max) {
				t.Fatalf("upload-url --max-bytes %d: got headers %v, maxBytes %v; want the bound signed", max, u.Headers, u.MaxBytes)
			}
			return u
		}
		within := bounded("within.csv", len(csvOf(2)))
		if code, body := putSigned(t, ctx, within, csvOf(2)); code != http.StatusOK {
			t.Fatalf("PUT within the URL's bound: got HTTP %d (%s), want 200", code, body)
		}
		if err := waitRegistered(ctx, r, "up", 16); err != nil {
			t.Fatalf("the upload within its bound: %v", err)
		}
		over := bounded("over.csv", len(csvOf(2)))
		// The bound cannot be dropped or raised: each is a signature that does not match.
		for _, headers := range []map[string]string{
			{"If-None-Match": "*"},
			{"If-None-Match": "*", "x-amz-meta-max-bytes": strconv.Itoa(1 << 20)},
		} {
			if code, body := putSigned(t, ctx, ops.PresignedUpload{URL: over.URL, Headers: headers}, csvOf(5)); code != http.StatusForbidden || !strings.Contains(body, "<Code>SignatureDoesNotMatch</Code>") {
				t.Errorf("PUT with headers %v instead of the signed bound: got HTTP %d (%s), want 403 SignatureDoesNotMatch", headers, code, body)
			}
		}
		if code, body := putSigned(t, ctx, over, csvOf(5)); code != http.StatusOK {
			t.Fatalf("PUT over the URL's bound: got HTTP %d (%s), want 200: a presigned PUT binds no range", code, body)
		}
		waitFor(t, ctx, r, "over.csv ended", func(rep *report.Report) bool {
			for _, f := range rep.Tenants["up"].Files {
				if f.Key == prefix+"over.csv" && f.Status == "SUCCEEDED" {
					t.Errorf("over.csv: got SUCCEEDED with %d records, want it failed over its URL's bound", f.Records)
					return true
				}
				if f.Key == prefix+"over.csv" && f.Status == "FAILED" {
					want := fmt.Sprintf("the object has %d bytes, more than the %d its upload URL allowed", len(csvOf(5)), len(csvOf(2)))
					if f.Error != pipeline.ErrValidation || !strings.Contains(f.Cause, want) {
						t.Errorf("over.csv: got %s (%s), want ValidationError and %q", f.Error, f.Cause, want)
					}
					return true
				}
			}
			return false
		})
		if n := len(r.Sink.Registered("up")); n != 16 {
			t.Errorf("got %d records of up registered, want 16: nothing of the file over its bound", n)
		}
	})
}

// withUploaders gives the tenants file's pool, or in the silo tier its tenant up, an uploader (the
// platform's own role), so that the pool or up has an UploaderRole.
func withUploaders(t *testing.T, tenants string, pooled bool) string {
	t.Helper()
	var f map[string]any
	if err := json.Unmarshal([]byte(tenants), &f); err != nil {
		t.Fatal(err)
	}
	uploaders := []string{"arn:aws:iam::000000000000:role/platform"}
	if pooled {
		f["pools"] = map[string]any{"default": map[string]any{"uploaders": uploaders}}
	} else {
		for _, e := range f["tenants"].([]any) {
			if tn := e.(map[string]any); tn["id"] == "up" {
				tn["uploaders"] = uploaders
			}
		}
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// putURL PUTs body to a presigned URL, as curl -T would, and returns the HTTP status.
func putURL(t *testing.T, ctx context.Context, url string, body []byte) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// putSigned PUTs body to a presigned upload's URL with the headers it signs, as its curl line
// does, and returns the HTTP status and the response body.
func putSigned(t *testing.T, ctx context.Context, up ops.PresignedUpload, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, up.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range up.Headers {
		if strings.EqualFold(k, "Content-Length") {
			continue // net/http sends the body's length, which the signed one must match
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// presignAsUploader presigns a PUT of any key with a session of the tenant's uploader role, from
// the run's STS, as a platform's token vending service would: the pool's role (pooled) with the
// session tag tenant=<tenant>, or the silo tenant's own role without tags.
func presignAsUploader(t *testing.T, ctx context.Context, r *Run, tenant, key string, pooled bool) string {
	t.Helper()
	ps := s3.NewPresignClient(uploaderClient(t, ctx, r, tenant, pooled))
	req, err := ps.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(key)}, s3.WithPresignExpires(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return req.URL
}

// uploaderClient is an S3 client of the run's operator endpoint with a session of the tenant's
// uploader role (presignAsUploader).
func uploaderClient(t *testing.T, ctx context.Context, r *Run, tenant string, pooled bool) *s3.Client {
	t.Helper()
	var tags map[string]string
	if pooled {
		tags = map[string]string{pipeline.TenantTag: tenant}
	}
	return sessionClient(t, ctx, r, uploaderRole(t, r, tenant, pooled), tags)
}

// uploaderRole is the ARN of the tenant's uploader role: the pool's (pooled), or the silo tenant's
// own, from the stack outputs.
func uploaderRole(t *testing.T, r *Run, tenant string, pooled bool) string {
	t.Helper()
	var role string
	for _, st := range r.StackOutputs() {
		for _, o := range st.Outputs {
			var out struct {
				UploaderRoleARN string `json:"uploaderRoleArn"`
			}
			mine := strings.HasPrefix(o.OutputKey, pipeline.PoolOutputKeyPrefix)
			if !pooled {
				mine = o.OutputKey == pipeline.TenantOutputKey(tenant)
			}
			if mine && json.Unmarshal([]byte(o.OutputValue), &out) == nil && out.UploaderRoleARN != "" {
				role = out.UploaderRoleARN
			}
		}
	}
	if role == "" {
		t.Fatalf("no stack output names an uploader role of tenant %s (pooled: %v)", tenant, pooled)
	}
	return role
}

// sessionClient is an S3 client of the run's operator endpoint with a session of role from the
// run's STS, with the session tags given.
func sessionClient(t *testing.T, ctx context.Context, r *Run, role string, tags map[string]string) *s3.Client {
	t.Helper()
	return s3.NewFromConfig(sessionConfig(t, ctx, r, role, tags), func(o *s3.Options) {
		o.BaseEndpoint = aws.String(runEndpoint(t, r, "AWS_ENDPOINT_URL_S3"))
		o.UsePathStyle = true
	})
}

// sessionConfig is the SDK's configuration with a session of role from the run's STS.
func sessionConfig(t *testing.T, ctx context.Context, r *Run, role string, tags map[string]string) aws.Config {
	t.Helper()
	stsClient := sts.NewFromConfig(emulate.LocalAWS, func(o *sts.Options) { o.BaseEndpoint = aws.String(runEndpoint(t, r, "AWS_ENDPOINT_URL_STS")) })
	in := &sts.AssumeRoleInput{RoleArn: aws.String(role), RoleSessionName: aws.String("test-session")}
	for k, v := range tags {
		in.Tags = append(in.Tags, ststypes.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	out, err := stsClient.AssumeRole(ctx, in)
	if err != nil {
		t.Fatalf("AssumeRole %s: %v", role, err)
	}
	cfg := emulate.LocalAWS.Copy()
	cfg.Credentials = aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		c := out.Credentials
		return aws.Credentials{AccessKeyID: *c.AccessKeyId, SecretAccessKey: *c.SecretAccessKey, SessionToken: *c.SessionToken, CanExpire: true, Expires: *c.Expiration}, nil
	}))
	return cfg
}

// runEndpoint is one AWS_ENDPOINT_URL_<SERVICE> of the run's environment (Run.Env).
func runEndpoint(t *testing.T, r *Run, name string) string {
	t.Helper()
	for _, kv := range r.Env() {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v
		}
	}
	t.Fatalf("the run's environment has no %s", name)
	return ""
}

// operatorSessionRefused takes a session of the pool's tenant role for "up" from the operator's
// STS (the control plane's AssumeRole) and reads through the operator's S3 endpoint: up's file is
// read, other's is refused, and a put the role does not grant is refused.
func operatorSessionRefused(t *testing.T, ctx context.Context, r *Run) {
	t.Helper()
	var role, pool string
	for _, f := range r.functions {
		for _, kv := range f.Env {
			switch k, v, _ := strings.Cut(kv, "="); k {
			case pipeline.EnvTenantRoleARN:
				role = v
			case pipeline.EnvTenantRolePool:
				pool = v
			}
		}
	}
	endpoint := func(name string) string {
		for _, kv := range r.Env() {
			if k, v, _ := strings.Cut(kv, "="); k == name {
				return v
			}
		}
		t.Fatalf("the run's environment has no %s", name)
		return ""
	}
	stsClient := sts.NewFromConfig(emulate.LocalAWS, func(o *sts.Options) { o.BaseEndpoint = aws.String(endpoint("AWS_ENDPOINT_URL_STS")) })
	cfg := emulate.LocalAWS.Copy()
	cfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(stsClient, role, func(o *stscreds.AssumeRoleOptions) {
		o.Tags = []ststypes.Tag{{Key: aws.String(pipeline.TenantTag), Value: aws.String("up")}, {Key: aws.String(pipeline.PoolTag), Value: aws.String(pool)}}
	}))
	asUp := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint("AWS_ENDPOINT_URL_S3"))
		o.UsePathStyle = true
	})
	r.Upload(ctx, "other", "theirs.csv", csvOf(1))
	for _, tc := range []struct{ name, key, put, wantCode string }{
		{"up's file", r.Tenant("up").Prefix + "z first.csv", "", ""},
		{"other's file", r.Tenant("other").Prefix + "theirs.csv", "", "AccessDenied"},
		{"a put under other's prefix", "", r.Tenant("other").Prefix + "forged.csv", "AccessDenied"},
		{"a put outside every prefix", "", "outside.csv", "AccessDenied"},
	} {
		var err error
		if tc.key != "" {
			var out *s3.GetObjectOutput
			if out, err = asUp.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(tc.key)}); err == nil {
				out.Body.Close()
			}
		} else {
			_, err = asUp.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(tc.put), Body: strings.NewReader("x")})
		}
		if got := errorCode(err); got != tc.wantCode {
			t.Errorf("%s as up's session, at the operator's endpoint: got %q (%v), want %q", tc.name, got, err, tc.wantCode)
		}
	}
}

// waitRegistered waits until n records of the tenant are registered.
func waitRegistered(ctx context.Context, r *Run, tenant string, n int) error {
	for len(r.Sink.Registered(tenant)) < n {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

func objectsUnder(t *testing.T, ctx context.Context, r *Run, prefix string) int {
	t.Helper()
	out, err := r.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(r.Bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Contents)
}
