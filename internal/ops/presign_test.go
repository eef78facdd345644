package ops_test

import (
	"context"
	"errors"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/example/tenantpipeline/internal/ops"
)

const bucketKey = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"

// A presigned upload signs If-None-Match: * always, Content-Length with Bytes, and the encryption
// headers of a bucket with a customer-managed key (none for SSE-S3 or the AWS managed key); the
// headers it reports are exactly the ones the URL signs, Host aside.
func TestPresignUploadHeaders(t *testing.T) {
	for _, tc := range []struct {
		name        string
		opt         ops.PresignOptions
		encryption  *s3types.ServerSideEncryptionByDefault // nil: opsfake's (BucketKeys)
		bucketKey   string
		wantHeaders map[string]string
	}{
		{"SSE-S3", ops.PresignOptions{}, nil, "", map[string]string{"If-None-Match": "*"}},
		{"an exact size", ops.PresignOptions{Bytes: 1}, nil, "", map[string]string{"If-None-Match": "*", "Content-Length": "1"}},
		{"a customer-managed key", ops.PresignOptions{}, nil, bucketKey,
			map[string]string{"If-None-Match": "*", "x-amz-server-side-encryption": "aws:kms", "x-amz-server-side-encryption-aws-kms-key-id": bucketKey}},
		{"a key and a size, by role", ops.PresignOptions{Bytes: 5 << 30, Role: true, Expires: time.Hour}, nil, bucketKey,
			map[string]string{"If-None-Match": "*", "Content-Length": "5368709120", "x-amz-server-side-encryption": "aws:kms", "x-amz-server-side-encryption-aws-kms-key-id": bucketKey}},
		{"the AWS managed key", ops.PresignOptions{}, &s3types.ServerSideEncryptionByDefault{SSEAlgorithm: s3types.ServerSideEncryptionAwsKms}, "",
			map[string]string{"If-None-Match": "*"}},
		{"DSSE-KMS", ops.PresignOptions{}, &s3types.ServerSideEncryptionByDefault{SSEAlgorithm: s3types.ServerSideEncryptionAwsKmsDsse, KMSMasterKeyID: aws.String(bucketKey)}, "",
			map[string]string{"If-None-Match": "*", "x-amz-server-side-encryption": "aws:kms:dsse", "x-amz-server-side-encryption-aws-kms-key-id": bucketKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := uploadWorld()
			w.BucketKeys = map[string]string{"ingest": tc.bucketKey}
			o := ops.New(w.Clients(), "TenantPipeline")
			o.Now, o.HTTP = func() time.Time { return w.Now }, w.HTTPClient()
			if tc.encryption != nil {
				o.S3 = encryptedS3{S3: o.S3, rule: tc.encryption}
			}
			up, err := o.PresignUpload(context.Background(), "acme", "a.csv", tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(up.Headers, tc.wantHeaders) {
				t.Errorf("got headers %v, want %v", up.Headers, tc.wantHeaders)
			}
			signed := signedHeaders(t, up.URL)
			for k := range up.Headers {
				if !signed[strings.ToLower(k)] {
					t.Errorf("got X-Amz-SignedHeaders %v, want %s signed", signed, k)
				}
			}
			if len(signed) != len(up.Headers)+1 || !signed["host"] {
				t.Errorf("got X-Amz-SignedHeaders %v, want host and the headers %v", signed, up.Headers)
			}
			if sized := up.Bytes != nil; sized != (tc.opt.Bytes > 0) || sized && *up.Bytes != tc.opt.Bytes {
				t.Errorf("got bytes %v, want %d", up.Bytes, tc.opt.Bytes)
			}
		})
	}
}

// encryptedS3 answers GetBucketEncryption with one rule.
type encryptedS3 struct {
	ops.S3
	rule *s3types.ServerSideEncryptionByDefault
}

func (e encryptedS3) GetBucketEncryption(context.Context, *s3.GetBucketEncryptionInput, ...func(*s3.Options)) (*s3.GetBucketEncryptionOutput, error) {
	return &s3.GetBucketEncryptionOutput{ServerSideEncryptionConfiguration: &s3types.ServerSideEncryptionConfiguration{
		Rules: []s3types.ServerSideEncryptionRule{{ApplyServerSideEncryptionByDefault: e.rule}}}}, nil
}

// The bounds of a presigned upload, before any call: sizes, S3's limits, and the 1-hour cap that
// --allow-long lifts, except with a role.
func TestCheckPresign(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  ops.PresignOptions
		want string // "": accepted
	}{
		{"the default", ops.PresignOptions{Expires: 15 * time.Minute}, ""},
		{"an hour", ops.PresignOptions{Expires: time.Hour}, ""},
		{"over an hour", ops.PresignOptions{Expires: time.Hour + time.Second}, "is over 1h: a presigned URL is a bearer token"},
		{"over an hour, allowed long", ops.PresignOptions{Expires: 48 * time.Hour, AllowLong: true}, ""},
		{"7 days, allowed long", ops.PresignOptions{Expires: ops.MaxPresignExpiry, AllowLong: true}, ""},
		{"past 7 days, allowed long", ops.PresignOptions{Expires: ops.MaxPresignExpiry + time.Second, AllowLong: true}, "past S3's limit of 7 days"},
		{"a role's hour", ops.PresignOptions{Expires: time.Hour, Role: true}, ""},
		{"over a role's hour, allowed long", ops.PresignOptions{Expires: 61 * time.Minute, Role: true, AllowLong: true}, "a session of the uploader role lasts at most 1h"},
		{"under a second", ops.PresignOptions{Expires: time.Millisecond}, "too short"},
		{"a size", ops.PresignOptions{Expires: time.Minute, Bytes: 1}, ""},
		{"one PUT's size", ops.PresignOptions{Expires: time.Minute, Bytes: ops.MaxPutBytes}, ""},
		{"over one PUT's size", ops.PresignOptions{Expires: time.Minute, Bytes: ops.MaxPutBytes + 1}, "is over --max-bytes 5368709120"},
		{"a size at --max-bytes", ops.PresignOptions{Expires: time.Minute, Bytes: 10, MaxBytes: 10}, ""},
		{"a size over --max-bytes", ops.PresignOptions{Expires: time.Minute, Bytes: 11, MaxBytes: 10}, "--bytes 11 is over --max-bytes 10"},
		{"--max-bytes without a size", ops.PresignOptions{Expires: time.Minute, MaxBytes: 10}, ""},
		{"--max-bytes over one PUT's", ops.PresignOptions{Expires: time.Minute, Bytes: 1, MaxBytes: ops.MaxPutBytes + 1}, "is out of range"},
		{"a negative size", ops.PresignOptions{Expires: time.Minute, Bytes: -1}, "is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ops.CheckPresign(tc.opt)
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// PresignUpload refuses what CheckPresign refuses before taking a session, and an --allow-long
// URL past the operator's temporary credentials; a bucket whose encryption cannot be read is
// refused (fail closed: the headers the URL must sign are unknown).
func TestPresignUploadRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opt   ops.PresignOptions
		temp  bool
		errOn string
		want  string
	}{
		{"over a role's hour", ops.PresignOptions{Expires: 2 * time.Hour, Role: true, AllowLong: true}, false, "", "lasts at most 1h"},
		{"allowed long past the credentials", ops.PresignOptions{Expires: 3 * time.Hour, AllowLong: true}, true, "", "outlives the temporary credentials"},
		{"the encryption unreadable", ops.PresignOptions{}, false, "GetBucketEncryption", "s3:GetEncryptionConfiguration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := uploadWorld()
			if tc.temp {
				w.Creds = aws.Credentials{AccessKeyID: "ASIA", SecretAccessKey: "s", SessionToken: "t", CanExpire: true, Expires: w.Now.Add(2 * time.Hour)}
			}
			if tc.errOn != "" {
				w.Err[tc.errOn] = errors.New("AccessDenied: Access Denied")
			}
			o := ops.New(w.Clients(), "TenantPipeline")
			o.Now, o.HTTP = func() time.Time { return w.Now }, w.HTTPClient()
			_, err := o.PresignUpload(context.Background(), "acme", "a.csv", tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
			if len(w.AssumeRoles) != 0 {
				t.Errorf("got %d AssumeRole calls, want none", len(w.AssumeRoles))
			}
		})
	}
}

// Upload creates each object once: it sends If-None-Match: * and the bucket key's headers, and a
// name that exists is refused with ExistsError, the files before it put.
func TestUploadCreatesOnly(t *testing.T) {
	w := uploadWorld()
	w.BucketKeys = map[string]string{"ingest": bucketKey}
	o := ops.New(w.Clients(), "TenantPipeline")
	o.HTTP = w.HTTPClient()
	dir := t.TempDir()
	var files []ops.UploadFile
	for _, n := range []string{"a.csv", "b.csv"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte("id\n1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, ops.UploadFile{Path: p})
	}
	if _, err := o.Upload(context.Background(), "acme", files[:1], nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range w.Puts {
		if aws.ToString(p.IfNoneMatch) != "*" || p.ServerSideEncryption != s3types.ServerSideEncryptionAwsKms || aws.ToString(p.SSEKMSKeyId) != bucketKey {
			t.Errorf("got If-None-Match %q, encryption %q, key %q; want *, aws:kms and the bucket's key", aws.ToString(p.IfNoneMatch), p.ServerSideEncryption, aws.ToString(p.SSEKMSKeyId))
		}
	}
	got, err := o.Upload(context.Background(), "acme", []ops.UploadFile{files[1], files[0]}, nil)
	var exists *ops.ExistsError
	if !errors.As(err, &exists) || exists.Key != "inbox/acme/a.csv" || !strings.Contains(err.Error(), "choose another name") {
		t.Errorf("got %v, want a.csv refused as existing", err)
	}
	if len(got) != 1 || got[0].Key != "inbox/acme/b.csv" {
		t.Errorf("got %+v, want b.csv put before a.csv was refused", got)
	}
	if body, _ := w.Body("ingest", "inbox/acme/a.csv"); body != "id\n1\n" || len(w.Puts) != 2 {
		t.Errorf("got a.csv %q after %d puts, want the first upload's, after 2", body, len(w.Puts))
	}
}

// signedHeaders are a presigned URL's X-Amz-SignedHeaders.
func signedHeaders(t *testing.T, u string) map[string]bool {
	t.Helper()
	q, err := urlQuery(u)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, h := range strings.Split(q.Get("X-Amz-SignedHeaders"), ";") {
		out[h] = true
	}
	return out
}

func urlQuery(u string) (url.Values, error) {
	p, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	return p.Query(), nil
}
