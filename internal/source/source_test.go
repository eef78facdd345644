package source

import (
	"context"
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
