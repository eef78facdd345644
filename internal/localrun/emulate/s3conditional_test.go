package emulate

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/johannesboyne/gofakes3"
)

// The local S3 answers a write's If-None-Match as S3 does: with *, PutObject and
// CompleteMultipartUpload create the key or answer 412 PreconditionFailed, the object unchanged;
// another value is 501 NotImplemented. gofakes3 alone completed a multipart upload over an
// existing key and ignored a value other than *. No PutObject refused becomes an event.
func TestS3ConditionalWrites(t *testing.T) {
	ctx := context.Background()
	s := NewS3(&APICounter{}, &RequestMeter{}, NewSequencers("", 1))
	var events []string
	s.OnPut = func(_, key, _, _ string, _ int64) { events = append(events, key) }
	u, stop, err := Serve(s.Handler(false))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := s.Backend.CreateBucket("ingest"); err != nil {
		t.Fatal(err)
	}
	s.Backend.SetVersioningConfiguration("ingest", gofakes3.VersioningConfiguration{Status: gofakes3.VersioningEnabled})
	c := s3.NewFromConfig(LocalAWS, func(o *s3.Options) { o.BaseEndpoint = aws.String(u); o.UsePathStyle = true })
	put := func(key, body string, ifNoneMatch *string) error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("ingest"), Key: aws.String(key), Body: strings.NewReader(body), IfNoneMatch: ifNoneMatch})
		return err
	}
	multipart := func(key, body string, ifNoneMatch *string) error {
		up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("ingest"), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		part, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("ingest"), Key: aws.String(key), UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader(body)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("ingest"), Key: aws.String(key), UploadId: up.UploadId, IfNoneMatch: ifNoneMatch,
			MultipartUpload: &s3types.CompletedMultipartUpload{Parts: []s3types.CompletedPart{{ETag: part.ETag, PartNumber: aws.Int32(1)}}}})
		return err
	}
	if err := put("inbox/a/exists.csv", "first\n", nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		write       func(key, body string, ifNoneMatch *string) error
		key         string
		ifNoneMatch *string
		wantStatus  int // 0: written
		wantCode    string
	}{
		{"PutObject of a new key, *", put, "inbox/a/new.csv", aws.String("*"), 0, ""},
		{"PutObject over a key, *", put, "inbox/a/exists.csv", aws.String("*"), 412, "PreconditionFailed"},
		{"PutObject over a key, an ETag", put, "inbox/a/exists.csv", aws.String(`"abc"`), 501, "NotImplemented"},
		{"PutObject of a new key, an ETag", put, "inbox/a/other.csv", aws.String(`"abc"`), 501, "NotImplemented"},
		{"PutObject over a key, unconditional", put, "inbox/a/overwritten.csv", nil, 0, ""},
		{"CompleteMultipartUpload of a new key, *", multipart, "inbox/a/new-multipart.csv", aws.String("*"), 0, ""},
		{"CompleteMultipartUpload over a key, *", multipart, "inbox/a/exists.csv", aws.String("*"), 412, "PreconditionFailed"},
		{"CompleteMultipartUpload over a key, an ETag", multipart, "inbox/a/exists.csv", aws.String(`"abc"`), 501, "NotImplemented"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events = nil
			err := tc.write(tc.key, "second\n", tc.ifNoneMatch)
			if got := status(err); got != tc.wantStatus {
				t.Fatalf("got status %d (%v), want %d", got, err, tc.wantStatus)
			}
			if tc.wantStatus == 0 {
				return
			}
			var ae smithy.APIError
			if !errors.As(err, &ae) || ae.ErrorCode() != tc.wantCode {
				t.Errorf("got %v, want error code %s", err, tc.wantCode)
			}
			if tc.wantCode == "PreconditionFailed" && ae.ErrorMessage() != "At least one of the pre-conditions you specified did not hold" {
				t.Errorf("got message %q, want S3's", ae.ErrorMessage())
			}
			obj, err := s.Backend.HeadObject("ingest", tc.key)
			if tc.key == "inbox/a/exists.csv" && (err != nil || obj.Size != int64(len("first\n"))) {
				t.Errorf("got %v, %v; want the first object unchanged", obj, err)
			}
			if len(events) != 0 {
				t.Errorf("got events %v, want none for a refused write", events)
			}
		})
	}
}

// The local S3 answers GetBucketEncryption with S3's default, SSE-S3, where gofakes3 answered a
// listing; a bucket that does not exist is 404.
func TestS3BucketEncryption(t *testing.T) {
	ctx := context.Background()
	s := NewS3(&APICounter{}, &RequestMeter{}, NewSequencers("", 1))
	u, stop, err := Serve(s.Handler(false))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := s.Backend.CreateBucket("ingest"); err != nil {
		t.Fatal(err)
	}
	c := s3.NewFromConfig(LocalAWS, func(o *s3.Options) { o.BaseEndpoint = aws.String(u); o.UsePathStyle = true })
	out, err := c.GetBucketEncryption(ctx, &s3.GetBucketEncryptionInput{Bucket: aws.String("ingest")})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := out.ServerSideEncryptionConfiguration; cfg == nil || len(cfg.Rules) != 1 || cfg.Rules[0].ApplyServerSideEncryptionByDefault == nil ||
		cfg.Rules[0].ApplyServerSideEncryptionByDefault.SSEAlgorithm != s3types.ServerSideEncryptionAes256 {
		t.Errorf("got %+v, want one rule, SSE-S3 (AES256)", out.ServerSideEncryptionConfiguration)
	}
	_, err = c.GetBucketEncryption(ctx, &s3.GetBucketEncryptionInput{Bucket: aws.String("none")})
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusNotFound {
		t.Errorf("got %v, want 404 for a bucket that does not exist", err)
	}
}
