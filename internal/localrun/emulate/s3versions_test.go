package emulate

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/johannesboyne/gofakes3"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// The local S3 answers version ids as S3 does: a version of the key is served, headers and all; an
// id of its own shape that names no version is 404 (NoSuchVersion); an id it cannot read is 400
// (InvalidArgument, "Invalid version id specified"). gofakes3 alone served the current version to a
// HEAD with any id, so `pipectl replay --version-id bogus` was accepted.
func TestS3VersionIDs(t *testing.T) {
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
	s.Backend.SetVersioningConfiguration("ingest", gofakes3.VersioningConfiguration{Status: gofakes3.VersioningEnabled})
	c := s3.NewFromConfig(LocalAWS, func(o *s3.Options) { o.BaseEndpoint = aws.String(u); o.UsePathStyle = true })
	put := func(body string) string {
		out, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("ingest"), Key: aws.String("inbox/a/x.csv"), Body: strings.NewReader(body)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.VersionId)
	}
	v1, v2 := put("first\n"), put("second, longer\n")
	unknown := "3/" + strings.Repeat("0", 16) // the local shape, no such version
	if !localVersionID(v1) || !localVersionID(unknown) {
		t.Fatalf("got version ids %q, %q, want the local shape", v1, unknown)
	}

	for _, tc := range []struct {
		name       string
		version    string
		wantStatus int    // 0: success
		wantSize   int64  // on success
		wantCode   string // GetObject's error code
	}{
		{"the older version", v1, 0, 6, ""},
		{"the current version", v2, 0, 15, ""},
		{"an id of the local shape that names no version", unknown, 404, 0, "NoSuchVersion"},
		{"an id S3 cannot read", "bogus", 400, 0, "InvalidArgument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("ingest"), Key: aws.String("inbox/a/x.csv"), VersionId: aws.String(tc.version)})
			if got := status(err); got != tc.wantStatus {
				t.Fatalf("HeadObject: got status %d (%v), want %d", got, err, tc.wantStatus)
			}
			get, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("ingest"), Key: aws.String("inbox/a/x.csv"), VersionId: aws.String(tc.version)})
			if got := status(err); got != tc.wantStatus {
				t.Fatalf("GetObject: got status %d (%v), want %d", got, err, tc.wantStatus)
			}
			if tc.wantStatus != 0 {
				var ae smithy.APIError
				if !errors.As(err, &ae) || ae.ErrorCode() != tc.wantCode {
					t.Errorf("GetObject: got %v, want error code %s", err, tc.wantCode)
				}
				if tc.wantCode == "InvalidArgument" && ae.ErrorMessage() != "Invalid version id specified" {
					t.Errorf("GetObject: got message %q, want S3's %q", ae.ErrorMessage(), "Invalid version id specified")
				}
				return
			}
			defer get.Body.Close()
			body, _ := io.ReadAll(get.Body)
			if aws.ToInt64(head.ContentLength) != tc.wantSize || int64(len(body)) != tc.wantSize || aws.ToString(head.ETag) != aws.ToString(get.ETag) {
				t.Errorf("got HEAD %d bytes, ETag %s; GET %d bytes, ETag %s; want %d bytes and one ETag",
					aws.ToInt64(head.ContentLength), aws.ToString(head.ETag), len(body), aws.ToString(get.ETag), tc.wantSize)
			}
			if aws.ToString(head.VersionId) != tc.version {
				t.Errorf("got HEAD of version %s, want %s", aws.ToString(head.VersionId), tc.version)
			}
		})
	}
}

// pipectl's replay reads the object through the local S3 as through S3, and names what is wrong
// (the tenant's stack, queue and caller are fakes; S3 is the local one).
func TestS3VersionIDsReplay(t *testing.T) {
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
	s.Backend.SetVersioningConfiguration("ingest", gofakes3.VersioningConfiguration{Status: gofakes3.VersioningEnabled})
	c := s3.NewFromConfig(LocalAWS, func(o *s3.Options) { o.BaseEndpoint = aws.String(u); o.UsePathStyle = true })
	out, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("ingest"), Key: aws.String("inbox/acme/x.csv"), Body: strings.NewReader("id\n1\n")})
	if err != nil {
		t.Fatal(err)
	}
	w := opsfake.New(time.Now())
	tn := opsfake.Tenant("acme", pipeline.OnFailureContinue)
	w.AddTenant("TenantPipeline-Tenants-1", tn)
	clients := w.Clients()
	clients.S3 = c
	o := ops.New(clients, "TenantPipeline")
	for _, tc := range []struct {
		name, key, version, want string
	}{
		{"no such key", "inbox/acme/none.csv", "", "no such object: s3://ingest/inbox/acme/none.csv"},
		{"an id S3 cannot read", "inbox/acme/x.csv", "bogus", "version id bogus is not valid for s3://ingest/inbox/acme/x.csv (S3 answers 400 InvalidArgument)"},
		{"no such version", "inbox/acme/x.csv", "3/0000000000000000", "no such object version: s3://ingest/inbox/acme/x.csv has no version 3/0000000000000000 (S3 answers 404)"},
		{"the version", "inbox/acme/x.csv", aws.ToString(out.VersionId), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := o.Replay(ctx, "acme", tc.key, tc.version, "")
			if tc.want == "" {
				if err != nil || res.VersionID != tc.version {
					t.Errorf("got %+v, %v, want a replay of version %s", res, err, tc.version)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("got %v, want an error starting %q", err, tc.want)
			}
		})
	}
	if n := len(w.Queues[tn.QueueURL].Sent); n != 1 {
		t.Errorf("got %d control messages sent, want 1 (the version's)", n)
	}
}

// status is the HTTP status of an SDK error, 0 for none.
func status(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
