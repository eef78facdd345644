package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// fakeS3 is an in-memory bucket store with S3's GetObject semantics for VersionId, If-Match and
// Range, failing the way the SDK does (an OperationError around an HTTP ResponseError).
type fakeS3 struct {
	mu       sync.Mutex
	objects  map[string]*fakeObject // "bucket/key", the key exactly as stored
	gets     []s3.GetObjectInput
	getErr   error
	failRead int // if > 0, bodies fail after this many bytes
}

type fakeObject struct {
	data     []byte
	etag     string            // bare
	versions map[string][]byte // version id -> data
}

func newFakeS3() *fakeS3 {
	return &fakeS3{objects: map[string]*fakeObject{}}
}

func (f *fakeS3) put(bucket, key string, o *fakeObject) { f.objects[bucket+"/"+key] = o }

// apiError is a failed call as the SDK returns it.
func apiError(op string, status int, code string) error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: op, Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err:      &smithy.GenericAPIError{Code: code, Message: code},
		},
		RequestID: "req-1",
	}}
}

func (f *fakeS3) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets = append(f.gets, *in)
	if f.getErr != nil {
		return nil, f.getErr
	}
	o, ok := f.objects[aws.ToString(in.Bucket)+"/"+aws.ToString(in.Key)]
	if !ok {
		return nil, apiError("GetObject", 404, "NoSuchKey")
	}
	data := o.data
	if v := aws.ToString(in.VersionId); v != "" {
		if data, ok = o.versions[v]; !ok {
			return nil, apiError("GetObject", 404, "NoSuchVersion")
		}
	}
	if m := aws.ToString(in.IfMatch); m != "" && m != `"`+o.etag+`"` {
		return nil, apiError("GetObject", 412, "PreconditionFailed")
	}
	if r := aws.ToString(in.Range); r != "" {
		var start, end int64
		if _, err := fmt.Sscanf(r, "bytes=%d-%d", &start, &end); err != nil || start > end || start >= int64(len(data)) {
			return nil, apiError("GetObject", 416, "InvalidRange")
		}
		data = data[start:min(end+1, int64(len(data)))]
	}
	var body io.Reader = bytes.NewReader(data)
	if f.failRead > 0 {
		body = io.MultiReader(io.LimitReader(body, int64(f.failRead)), errReader{})
	}
	return &s3.GetObjectOutput{Body: io.NopCloser(body), ContentLength: aws.Int64(int64(len(data)))}, nil
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

// fakeSecrets is Secrets Manager with one value per ARN that tests may change (a rotation).
type fakeSecrets struct {
	mu     sync.Mutex
	values map[string]string
	calls  int
	err    error
}

func (f *fakeSecrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	v, ok := f.values[aws.ToString(in.SecretId)]
	if !ok {
		return nil, &smithy.OperationError{ServiceID: "Secrets Manager", OperationName: "GetSecretValue",
			Err: &smithy.GenericAPIError{Code: "ResourceNotFoundException", Message: "not found"}}
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(v)}, nil
}
