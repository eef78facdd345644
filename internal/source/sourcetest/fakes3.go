// Package sourcetest is an in-memory S3 for the Lambdas' tests, with the GetObject semantics the
// pipeline relies on (VersionId, If-Match, Range) and failures shaped as the SDK returns them.
package sourcetest

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// FakeS3 is an in-memory bucket store with S3's GetObject semantics for VersionId, If-Match and
// Range, failing the way the SDK does (an OperationError around an HTTP ResponseError).
type FakeS3 struct {
	mu      sync.Mutex
	Objects map[string]*Object // "bucket/key", the key exactly as stored
	Puts    map[string][]byte
	Gets    []s3.GetObjectInput
	PutErr  error
	GetErr  error
	// GetErrFor fails GetObject of one key (any bucket) with its error.
	GetErrFor map[string]error
	FailRead  int // if > 0, bodies fail after this many bytes
	// NoListBucket makes the caller lack s3:ListBucket: S3 then answers a missing key or version
	// with 403 AccessDenied instead of 404 NoSuchKey/NoSuchVersion.
	// https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html ("Permissions")
	NoListBucket bool
	// Versioning makes PutObject keep every write as a new version and answer its version id, as
	// a versioned bucket does; without it a write replaces the key's object.
	Versioning bool
	versions   int
}

// Object is one stored object: its current data and ETag, and versions by id. A bucket whose
// versioning is suspended stores a new object as the version "null", and the next PUT of the key
// replaces it: model that as Versions["null"] with its VersionETags["null"].
type Object struct {
	Data         []byte
	ETag         string            // bare
	Versions     map[string][]byte // version id -> data
	VersionETags map[string]string // version id -> bare ETag (a version not listed has the ETag "")
	Metadata     map[string]string // user metadata, as GetObject returns it (x-amz-meta- left off)
}

// NewFakeS3 returns an empty store.
func NewFakeS3() *FakeS3 {
	return &FakeS3{Objects: map[string]*Object{}, Puts: map[string][]byte{}}
}

// Put stores an object under its raw key.
func (f *FakeS3) Put(bucket, key string, o *Object) { f.Objects[bucket+"/"+key] = o }

// APIError is a failed call as the SDK returns it.
func APIError(op string, status int, code string) error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: op, Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err:      &smithy.GenericAPIError{Code: code, Message: code},
		},
		RequestID: "req-1",
	}}
}

// GetObject implements s3.Client.GetObject for the semantics above.
func (f *FakeS3) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Gets = append(f.Gets, *in)
	if f.GetErr != nil {
		return nil, f.GetErr
	}
	if err := f.GetErrFor[aws.ToString(in.Key)]; err != nil {
		return nil, err
	}
	missing := func(code string) error {
		if f.NoListBucket {
			return APIError("GetObject", 403, "AccessDenied")
		}
		return APIError("GetObject", 404, code)
	}
	o, ok := f.Objects[aws.ToString(in.Bucket)+"/"+aws.ToString(in.Key)]
	if !ok {
		return nil, missing("NoSuchKey")
	}
	data, etag := o.Data, o.ETag
	if v := aws.ToString(in.VersionId); v != "" {
		if data, ok = o.Versions[v]; !ok {
			return nil, missing("NoSuchVersion")
		}
		etag = o.VersionETags[v]
	}
	// If-Match holds for the version read (the current one without VersionId).
	if m := aws.ToString(in.IfMatch); m != "" && m != `"`+etag+`"` {
		return nil, APIError("GetObject", 412, "PreconditionFailed")
	}
	if r := aws.ToString(in.Range); r != "" {
		var start, end int64
		if _, err := fmt.Sscanf(r, "bytes=%d-%d", &start, &end); err != nil || start > end || start >= int64(len(data)) {
			return nil, APIError("GetObject", 416, "InvalidRange")
		}
		data = data[start:min(end+1, int64(len(data)))]
	}
	var body io.Reader = bytes.NewReader(data)
	if f.FailRead > 0 {
		body = io.MultiReader(io.LimitReader(body, int64(f.FailRead)), errReader{})
	}
	return &s3.GetObjectOutput{Body: io.NopCloser(body), ContentLength: aws.Int64(int64(len(data))), Metadata: o.Metadata}, nil
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

// PutObject records the body under Puts and stores it as the key's current object, with an MD5
// ETag (as S3 gives a single-part upload) and, with Versioning, as a new version. It answers the
// ETag (quoted, as S3 sends it) and the version id.
func (f *FakeS3) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.PutErr != nil {
		return nil, f.PutErr
	}
	b, err := io.ReadAll(in.Body)
	if err != nil {
		return nil, err
	}
	k := aws.ToString(in.Bucket) + "/" + aws.ToString(in.Key)
	f.Puts[k] = b
	etag := fmt.Sprintf("%x", md5.Sum(b))
	o := f.Objects[k]
	if o == nil || !f.Versioning {
		o = &Object{Versions: map[string][]byte{}, VersionETags: map[string]string{}}
		f.Objects[k] = o
	}
	if o.Versions == nil {
		o.Versions, o.VersionETags = map[string][]byte{}, map[string]string{}
	}
	o.Data, o.ETag = b, etag
	out := &s3.PutObjectOutput{ETag: aws.String(`"` + etag + `"`)}
	if f.Versioning {
		f.versions++
		v := fmt.Sprintf("pv%d", f.versions)
		o.Versions[v], o.VersionETags[v] = b, etag
		out.VersionId = aws.String(v)
	}
	return out, nil
}

// ListObjectsV2 lists the current objects under a prefix in key order, in one page.
func (f *FakeS3) ListObjectsV2(_ context.Context, in *s3.ListObjectsV2Input, _ ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	bucket, prefix := aws.ToString(in.Bucket)+"/", aws.ToString(in.Prefix)
	var keys []string
	for k := range f.Objects {
		if key, ok := strings.CutPrefix(k, bucket); ok && strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	out := &s3.ListObjectsV2Output{IsTruncated: aws.Bool(false)}
	for _, k := range keys {
		out.Contents = append(out.Contents, types.Object{Key: aws.String(k)})
	}
	return out, nil
}
