package localrun

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	ststypes "github.com/aws/aws-sdk-go-v2/service/sts/types"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// The local S3 verifies a presigned PUT's signature as S3 does: the URL as signed, with the
// headers it signs, is taken (signed with the run's own key or an uploader session's); an edited
// key, expiry or query, a missing signed header, another size than the signed Content-Length, an
// x-amz-* header the URL does not sign, or a session key the local STS never handed out is
// refused with 403 and S3's code, an expiry past a week or a session that has ended with 400, and
// nothing is
// written. Any other access key id with the run's secret is the operator's, as at the local STS.
func TestTenantAuthPresignedSignature(t *testing.T) {
	r := newTenantAuthRig(t)
	ctx := context.Background()
	role := "arn:aws:iam::123456789012:role/uploader"
	r.auth.mu.Lock()
	r.auth.policies[role] = uploaderStatements
	r.auth.trust[role] = poolUploaderTrust(role)
	r.auth.mu.Unlock()
	session := aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(r.stsClient(), role, func(o *stscreds.AssumeRoleOptions) {
		o.Tags = []ststypes.Tag{{Key: aws.String("tenant"), Value: aws.String("a")}}
	}))
	// A session of its own, ended by the case that uses it.
	ended := aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(r.stsClient(), role, func(o *stscreds.AssumeRoleOptions) {
		o.Tags = []ststypes.Tag{{Key: aws.String("tenant"), Value: aws.String("a")}}
	}))
	endSession := func(q url.Values, p string, _ http.Header) (url.Values, string) {
		key, _, _ := strings.Cut(q.Get("X-Amz-Credential"), "/")
		r.auth.mu.Lock()
		s := r.auth.sessions[key]
		s.expires = time.Now().Add(-time.Second)
		r.auth.sessions[key] = s
		r.auth.mu.Unlock()
		return q, p
	}
	const body = "id\n1\n"
	for _, tc := range []struct {
		name   string
		creds  aws.CredentialsProvider
		key    string
		edit   func(u url.Values, path string, h http.Header) (url.Values, string) // the URL as the uploader sends it
		body   string
		want   int
		wantIn string // in the error body
	}{
		{"the run's own key", emulate.LocalAWS.Credentials, "pools/p/a/own.csv", nil, body, 200, ""},
		{"an uploader session", session, "pools/p/a/session.csv", nil, body, 200, ""},
		{"a name with spaces, Japanese and S3's safe punctuation", session, "pools/p/a/受注 11月 (v2)!_-.*'.csv", nil, body, 200, ""},
		{"another key in the path", session, "pools/p/a/edited.csv", func(q url.Values, p string, _ http.Header) (url.Values, string) {
			return q, strings.Replace(p, "edited.csv", "other.csv", 1)
		}, body, 403, "<Code>SignatureDoesNotMatch</Code>"},
		{"a longer expiry", emulate.LocalAWS.Credentials, "pools/p/a/longer.csv", func(q url.Values, p string, _ http.Header) (url.Values, string) {
			q.Set("X-Amz-Expires", "604800")
			return q, p
		}, body, 403, "<Code>SignatureDoesNotMatch</Code>"},
		{"without If-None-Match", session, "pools/p/a/unconditional.csv", func(q url.Values, p string, h http.Header) (url.Values, string) {
			h.Del("If-None-Match")
			return q, p
		}, body, 403, "<Code>SignatureDoesNotMatch</Code>"},
		{"another size than signed", session, "pools/p/a/bigger.csv", nil, body + "2\n", 403, "<Code>SignatureDoesNotMatch</Code>"},
		{"an x-amz-* header the URL does not sign", session, "pools/p/a/glacier.csv", func(q url.Values, p string, h http.Header) (url.Values, string) {
			h.Set("X-Amz-Storage-Class", "GLACIER")
			h.Set("x-amz-meta-max-bytes", "5368709120")
			return q, p
		}, body, 403, "<Code>AccessDenied</Code><Message>There were headers present in the request which were not signed: x-amz-meta-max-bytes, x-amz-storage-class</Message>"},
		{"past a week", emulate.LocalAWS.Credentials, "pools/p/a/week.csv", func(q url.Values, p string, _ http.Header) (url.Values, string) {
			q.Set("X-Amz-Expires", "604801")
			return q, p
		}, body, 400, "<Code>AuthorizationQueryParametersError</Code>"},
		{"signed by a session that has ended", ended, "pools/p/a/ended.csv", endSession, body, 400,
			"<Code>ExpiredToken</Code><Message>The provided token has expired.</Message>"},
		{"the payload's hash, unsigned", session, "pools/p/a/sha.csv", func(q url.Values, p string, h http.Header) (url.Values, string) {
			h.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
			return q, p
		}, body, 200, ""},
		{"an operator's key id", credentials.NewStaticCredentialsProvider("tester", "local", ""), "pools/p/a/operator.csv", nil, body, 200, ""},
		{"a session the STS never handed out", credentials.NewStaticCredentialsProvider(sessionKeyPrefix+"FORGED", "local", "local-forged"), "pools/p/a/stranger.csv", nil, body, 403,
			"<Code>InvalidAccessKeyId</Code>"},
		{"another secret", credentials.NewStaticCredentialsProvider("local", "guessed", ""), "pools/p/a/guessed.csv", nil, body, 403,
			"<Code>SignatureDoesNotMatch</Code>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := s3.NewPresignClient(r.client(tc.creds))
			req, err := ps.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("ingest"), Key: aws.String(tc.key), IfNoneMatch: aws.String("*"),
				ContentLength: aws.Int64(int64(len(body)))})
			if err != nil {
				t.Fatal(err)
			}
			u, err := url.Parse(req.URL)
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{"If-None-Match": {"*"}}
			if tc.edit != nil {
				q, p := tc.edit(u.Query(), u.Path, h)
				u.RawQuery, u.Path, u.RawPath = q.Encode(), p, ""
			}
			hr, _ := http.NewRequestWithContext(ctx, http.MethodPut, u.String(), strings.NewReader(tc.body))
			hr.Header = h
			resp, err := http.DefaultClient.Do(hr)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.want || !strings.Contains(string(got), tc.wantIn) {
				t.Errorf("got HTTP %d %s, want %d %s", resp.StatusCode, got, tc.want, tc.wantIn)
			}
			_, err = r.own.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("ingest"), Key: aws.String(tc.key)})
			if written := err == nil; written != (tc.want == 200) {
				t.Errorf("got %s written %v, want %v", tc.key, written, tc.want == 200)
			}
		})
	}
}
