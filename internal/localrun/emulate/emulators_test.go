package emulate

import (
	"context"
	"encoding/base32"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/source"
)

// With S3MissingKeyForbidden, the pipeline's endpoint answers a read of a missing key or version
// as S3 answers a caller without s3:ListBucket (403 AccessDenied), through the real SDK client;
// existing objects and the harness's endpoint are unchanged.
func TestS3MissingKeyForbidden(t *testing.T) {
	s := NewS3(&APICounter{}, &RequestMeter{}, NewSequencers("", 1))
	s.MissingKeyForbidden = true
	if err := s.Backend.CreateBucket("b"); err != nil {
		t.Fatal(err)
	}
	pipe := httptest.NewServer(s.Handler(true))
	defer pipe.Close()
	harness := httptest.NewServer(s.Handler(false))
	defer harness.Close()
	client := func(url string) *s3.Client {
		return s3.NewFromConfig(LocalAWS, func(o *s3.Options) { o.BaseEndpoint = aws.String(url); o.UsePathStyle = true })
	}
	ctx := context.Background()
	put, err := client(harness.URL).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Body: strings.NewReader("x")})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		url        string
		key        string
		version    string
		head       bool
		wantStatus int // 0: success
		wantCode   string
	}{
		{"existing key", pipe.URL, "k", "", false, 0, ""},
		{"existing version", pipe.URL, "k", aws.ToString(put.VersionId), false, 0, ""},
		{"missing key", pipe.URL, "nope", "", false, 403, "AccessDenied"},
		{"missing key, HEAD", pipe.URL, "nope", "", true, 403, "Forbidden"},
		// A well-formed id that names no version: 404 NoSuchVersion, so 403 here. A malformed id
		// stays S3's 400 InvalidArgument, which is not "absent".
		{"missing version", pipe.URL, "k", "3/" + base32.HexEncoding.EncodeToString([]byte("no such version")), false, 403, "AccessDenied"},
		{"harness endpoint keeps 404", harness.URL, "nope", "", false, 404, "NoSuchKey"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.head {
				_, err = client(tt.url).HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("b"), Key: aws.String(tt.key)})
			} else {
				in := &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String(tt.key)}
				if tt.version != "" {
					in.VersionId = aws.String(tt.version)
				}
				var out *s3.GetObjectOutput
				if out, err = client(tt.url).GetObject(ctx, in); err == nil {
					out.Body.Close()
				}
			}
			if tt.wantStatus == 0 {
				if err != nil {
					t.Fatalf("got %v, want success", err)
				}
				return
			}
			if got := source.HTTPStatus(err); got != tt.wantStatus {
				t.Errorf("got status %d (%v), want %d", got, err, tt.wantStatus)
			}
			if got := source.ErrorCode(err); got != tt.wantCode {
				t.Errorf("got code %q, want %q", got, tt.wantCode)
			}
			if !source.Absent(err) {
				t.Errorf("got Absent false for %v, want true", err)
			}
		})
	}
}
