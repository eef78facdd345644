package awsconfig

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"
)

// A ranged GetObject answered without a checksum, as S3 answers one, writes no SDK log line
// (run.log and CloudWatch filled with "Response has no supported checksum" DEBUG lines).
func TestS3OptionsRangedGetLogsNothing(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Range", "bytes 0-3/10")
		w.WriteHeader(http.StatusPartialContent)
		io.WriteString(w, "id,n")
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name    string
		options func(*s3.Options)
		wantLog bool
	}{
		{"SDK default (the line this removes)", func(*s3.Options) {}, true},
		{"S3Options", S3Options, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""),
				Logger: logging.NewStandardLogger(&logs), ResponseChecksumValidation: aws.ResponseChecksumValidationWhenSupported} // LoadDefaultConfig's default
			c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint = aws.String(srv.URL); o.UsePathStyle = true }, tc.options)
			out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Range: aws.String("bytes=0-3")})
			if err != nil {
				t.Fatal(err)
			}
			io.ReadAll(out.Body)
			out.Body.Close()
			if got := strings.Contains(logs.String(), "no supported checksum"); got != tc.wantLog {
				t.Errorf("got log %q, want the checksum line logged: %v", logs.String(), tc.wantLog)
			}
		})
	}
}
