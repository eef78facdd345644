package source

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

func TestGetInputPins(t *testing.T) {
	tests := []struct {
		name        string
		version     string
		etag        string
		wantVersion string // "" for none
		wantIfMatch string // "" for none
		wantErr     bool
	}{
		{"version and etag", "v1", "e1", "v1", `"e1"`, false},
		{"versioning suspended: version null and etag", "null", "e1", "null", `"e1"`, false},
		{"etag only (unversioned)", "", "e1", "", `"e1"`, false},
		{"version only", "v1", "", "v1", "", false},
		{"quoted etag kept", "", `"e1"`, "", `"e1"`, false},
		{"neither", "", "", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := GetInput(pipeline.Source{Bucket: "b", Key: "k", VersionID: tt.version, ETag: tt.etag})
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got %+v, want an error", in)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := aws.ToString(in.VersionId); got != tt.wantVersion {
				t.Errorf("got VersionId %q, want %q", got, tt.wantVersion)
			}
			if got := aws.ToString(in.IfMatch); got != tt.wantIfMatch {
				t.Errorf("got If-Match %q, want %q", got, tt.wantIfMatch)
			}
		})
	}
}

// TestReadDetectsChange reads sources through the fake S3 and classifies the failures. The case
// "version null overwritten" is a bucket whose versioning is suspended: the event pins version
// "null", the next PUT replaced it, and only If-Match on the ETag can tell.
func TestReadDetectsChange(t *testing.T) {
	tests := []struct {
		name         string
		obj          *sourcetest.Object // stored at "k"; nil for none
		src          pipeline.Source
		noListBucket bool
		wantType     string // "" for success
		wantMsg      string
	}{
		{"version null unchanged", &sourcetest.Object{Versions: map[string][]byte{"null": []byte("a")}, VersionETags: map[string]string{"null": "e1"}},
			pipeline.Source{VersionID: "null", ETag: "e1"}, false, "", ""},
		{"version null overwritten", &sourcetest.Object{Versions: map[string][]byte{"null": []byte("b")}, VersionETags: map[string]string{"null": "e2"}},
			pipeline.Source{VersionID: "null", ETag: "e1"}, false, pipeline.ErrObjectChanged, "the object changed after the event: its ETag is no longer e1"},
		{"unversioned overwritten", &sourcetest.Object{Data: []byte("b"), ETag: "e2"},
			pipeline.Source{ETag: "e1"}, false, pipeline.ErrObjectChanged, "its ETag is no longer e1"},
		{"version deleted", &sourcetest.Object{Versions: map[string][]byte{"v2": []byte("b")}},
			pipeline.Source{VersionID: "v1", ETag: "e1"}, false, pipeline.ErrObjectChanged, "no longer exists (NoSuchVersion"},
		{"object deleted", nil,
			pipeline.Source{VersionID: "v1", ETag: "e1"}, false, pipeline.ErrObjectChanged, "no longer exists (NoSuchKey"},
		{"object deleted, no s3:ListBucket", nil,
			pipeline.Source{VersionID: "v1", ETag: "e1"}, true, pipeline.ErrPermanent, "without s3:ListBucket on the bucket a deleted object or version also reads as access denied"},
		{"version deleted, no s3:ListBucket", &sourcetest.Object{Versions: map[string][]byte{"v2": []byte("b")}},
			pipeline.Source{VersionID: "v1", ETag: "e1"}, true, pipeline.ErrPermanent, "access denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s3 := sourcetest.NewFakeS3()
			s3.NoListBucket = tt.noListBucket
			if tt.obj != nil {
				s3.Put("b", "k", tt.obj)
			}
			src := tt.src
			src.Bucket, src.Key = "b", "k"
			in, err := GetInput(src)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s3.GetObject(context.Background(), in)
			if tt.wantType == "" {
				if err != nil {
					t.Fatalf("got %v, want success", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got success, want %s", tt.wantType)
			}
			got := GetError(src, err)
			if ErrorType(got) != tt.wantType || !strings.Contains(got.Error(), tt.wantMsg) {
				t.Errorf("got %s %q, want %s containing %q", ErrorType(got), got, tt.wantType, tt.wantMsg)
			}
		})
	}
}

// formEncode is the key as a classic S3 notification carries it: application/x-www-form-urlencoded
// ("red flower.jpg" → "red+flower.jpg"), '/' kept or, with all set, encoded as well.
func formEncode(key string, all bool) string {
	if all {
		return url.QueryEscape(key)
	}
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = url.QueryEscape(p)
	}
	return strings.Join(parts, "/")
}

// TestOpenKeyForms: an event may carry the key raw or form-encoded; Open reads the event's object
// either way, and returns the key that S3 stores. The bucket also holds the other objects a wrong
// guess would read: "a b.csv" next to "a+b.csv", "100%.csv" next to "100%25.csv".
func TestOpenKeyForms(t *testing.T) {
	keys := []string{
		"inbox/t1/red flower.csv",
		"inbox/t1/a+b.csv",
		"inbox/t1/a b.csv",
		"inbox/t1/100%.csv",
		"inbox/t1/100%25.csv",
		"inbox/t1/請求書 ①.csv",
		"inbox/t1/plain.csv",
	}
	for _, tc := range []struct {
		versioning string
		// noListBucket: the reader lacks s3:ListBucket, so the form of the key that holds no
		// object answers 403 AccessDenied instead of 404.
		noListBucket bool
	}{{"enabled", false}, {"suspended", false}, {"off", false}, {"enabled", true}, {"off", true}} {
		versioning := tc.versioning
		s3 := sourcetest.NewFakeS3()
		s3.NoListBucket = tc.noListBucket
		srcs := map[string]pipeline.Source{}
		for i, key := range keys {
			etag := fmt.Sprintf("etag-%d", i)
			o := &sourcetest.Object{Data: []byte("data of " + key), ETag: etag}
			src := pipeline.Source{Bucket: "b", Key: key, ETag: etag}
			switch versioning {
			case "enabled":
				src.VersionID = fmt.Sprintf("v-%d", i)
			case "suspended":
				src.VersionID = "null"
			}
			if src.VersionID != "" {
				o.Versions = map[string][]byte{src.VersionID: o.Data}
				o.VersionETags = map[string]string{src.VersionID: etag}
			}
			s3.Put("b", key, o)
			srcs[key] = src
		}
		for _, key := range keys {
			forms := map[string]string{"raw": key, "form-encoded": formEncode(key, false), "form-encoded with /": formEncode(key, true)}
			for form, eventKey := range forms {
				t.Run(fmt.Sprintf("versioning %s/no ListBucket %v/%s/%s", versioning, tc.noListBucket, key, form), func(t *testing.T) {
					src := srcs[key]
					src.Key = eventKey
					out, got, err := Open(context.Background(), s3, src, "inbox/t1/")
					if err != nil {
						t.Fatalf("got %v, want the object of %q", err, key)
					}
					b, _ := io.ReadAll(out.Body)
					if string(b) != "data of "+key {
						t.Errorf("got %q, want %q", b, "data of "+key)
					}
					want := srcs[key]
					if got != want {
						t.Errorf("got source %+v, want %+v", got, want)
					}
				})
			}
		}
	}
}

func TestOpenErrors(t *testing.T) {
	tests := []struct {
		name     string
		eventKey string
		mutate   func(*sourcetest.FakeS3)
		wantType string
		wantMsg  string
		wantGets int
	}{
		{"gone under both forms", "inbox/a+b.csv", func(s *sourcetest.FakeS3) {}, pipeline.ErrObjectChanged,
			`s3://b/inbox/a+b.csv: the object version of the event no longer exists (NoSuchKey; versionId "v1", etag "e1"); the form-decoded key "inbox/a b.csv" answered 404 NoSuchKey too`, 2},
		{"changed under the decoded form", "inbox/a+b.csv", func(s *sourcetest.FakeS3) {
			s.Put("b", "inbox/a b.csv", &sourcetest.Object{Versions: map[string][]byte{"v1": []byte("x")}, VersionETags: map[string]string{"v1": "e2"}})
		}, pipeline.ErrObjectChanged, `the form-decoded key "inbox/a b.csv" answered 412 PreconditionFailed too`, 2},
		{"no decoded form to try", "inbox/plain.csv", func(s *sourcetest.FakeS3) {}, pipeline.ErrObjectChanged, "no longer exists (NoSuchKey", 1},
		{"not form-encoded (bad escape)", "inbox/100%.csv", func(s *sourcetest.FakeS3) {}, pipeline.ErrObjectChanged, "no longer exists", 1},
		{"decoded read throttled", "inbox/a+b.csv", func(s *sourcetest.FakeS3) {
			s.Put("b", "inbox/a b.csv", &sourcetest.Object{})
			s.GetErrFor = map[string]error{"inbox/a b.csv": sourcetest.APIError("GetObject", 503, "SlowDown")}
		}, pipeline.ErrRetryable, `s3://b/inbox/a b.csv: reading the object failed`, 2},
		{"denied under both forms (no s3:ListBucket)", "inbox/a+b.csv", func(s *sourcetest.FakeS3) { s.NoListBucket = true }, pipeline.ErrPermanent,
			`access denied reading the object; without s3:ListBucket on the bucket a deleted object or version also reads as access denied, so check that the role has both s3:GetObject(Version) and s3:ListBucket; the form-decoded key "inbox/a b.csv" answered 403 AccessDenied too`, 2},
		{"denied as given, gone under the decoded form", "inbox/a+b.csv", func(s *sourcetest.FakeS3) {
			s.GetErrFor = map[string]error{"inbox/a+b.csv": sourcetest.APIError("GetObject", 403, "AccessDenied")}
		}, pipeline.ErrObjectChanged, `s3://b/inbox/a+b.csv: the object version of the event no longer exists (the key as given answered 403 AccessDenied; versionId "v1", etag "e1"); the form-decoded key "inbox/a b.csv" answered 404 NoSuchKey too`, 2},
		{"denied as given, decoded read fails otherwise", "inbox/a+b.csv", func(s *sourcetest.FakeS3) {
			s.GetErrFor = map[string]error{"inbox/a+b.csv": sourcetest.APIError("GetObject", 403, "AccessDenied"), "inbox/a b.csv": sourcetest.APIError("GetObject", 503, "SlowDown")}
		}, pipeline.ErrRetryable, `s3://b/inbox/a b.csv: reading the object failed`, 2},
		{"a real access problem is not a key form: 400 is not retried under the other form", "inbox/a+b.csv", func(s *sourcetest.FakeS3) {
			s.GetErrFor = map[string]error{"inbox/a+b.csv": sourcetest.APIError("GetObject", 400, "InvalidRequest")}
		}, pipeline.ErrPermanent, "S3 rejected the request", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s3 := sourcetest.NewFakeS3()
			tt.mutate(s3)
			_, _, err := Open(context.Background(), s3, pipeline.Source{Bucket: "b", Key: tt.eventKey, VersionID: "v1", ETag: "e1"}, "inbox/")
			if ErrorType(err) != tt.wantType || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("got %s %q, want %s containing %q", ErrorType(err), err, tt.wantType, tt.wantMsg)
			}
			if len(s3.Gets) != tt.wantGets {
				t.Errorf("got %d GetObject calls, want %d", len(s3.Gets), tt.wantGets)
			}
		})
	}
}
