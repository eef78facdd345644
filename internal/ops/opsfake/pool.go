package opsfake

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
)

// codeHost is the host of the fake presigned code URLs (HTTPClient serves them).
const codeHost = "code.opsfake.example"

// Pool is a pool stack's output as the construct writes it, in account 123456789012.
func Pool(name string) pipeline.PoolOutput {
	return pipeline.PoolOutput{
		Version: pipeline.PoolOutputVersion, Pool: name, Bucket: "ingest", Prefix: "pool/" + name + "/",
		QueueURL:               "https://sqs.eu-west-1.amazonaws.com/123456789012/pool-" + name + ".fifo",
		QueueARN:               "arn:aws:sqs:eu-west-1:123456789012:pool-" + name + ".fifo",
		StateMachineARN:        "arn:aws:states:eu-west-1:123456789012:stateMachine:pool-" + name + "-files",
		SegmentStateMachineARN: "arn:aws:states:eu-west-1:123456789012:stateMachine:pool-" + name + "-segments",
		ControllerFunction:     "pool-" + name + "-controller",
		RouterFunction:         "pool-" + name + "-router",
		EventSourceMappingUUID: "esm-pool-" + name,
		Keys:                   pipeline.KeysPerPool,
	}
}

// AddPool adds the pool's output to the stack, its controller's code with the settings file of
// the tenants (id → policy), its queue and its mapping. It returns each tenant's descriptor as
// pipectl builds it.
func (w *World) AddPool(stack string, p pipeline.PoolOutput, tenants map[string]string) map[string]pipeline.TenantOutput {
	w.mu.Lock()
	defer w.mu.Unlock()
	settings := pipeline.PoolSettings{Version: pipeline.PoolSettingsVersion, Pool: p.Pool, Prefix: p.Prefix}
	out := map[string]pipeline.TenantOutput{}
	for id, policy := range tenants {
		w.poolOf[id] = p.KeysPool()
		pt := pipeline.PoolTenant{Settings: w.settingsOf(id), Prefix: p.Prefix + id + "/", OnFailure: policy}
		settings.Tenants = append(settings.Tenants, pt)
		out[id] = pipeline.TenantOutput{Version: pipeline.TenantOutputVersion, ID: id, Policy: policy, IdempotencyKey: pipeline.IdempotencyEventID,
			Bucket: p.Bucket, Prefix: pt.Prefix, QueueURL: p.QueueURL, QueueARN: p.QueueARN, StateMachineARN: p.StateMachineARN,
			SegmentStateMachineARN: p.SegmentStateMachineARN, ControllerFunction: p.ControllerFunction,
			EventSourceMappingUUID: p.EventSourceMappingUUID, DLQURL: p.DLQURL, Pool: p.Pool, KeysPool: p.KeysPool()}
	}
	p.Tenants = len(tenants)
	js, err := poolsettings.Encode(&settings)
	if err != nil {
		panic(err)
	}
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	for name, body := range map[string][]byte{"bootstrap": []byte("\x7fELF"), pipeline.PoolSettingsFile: js} {
		f, _ := zw.Create(name)
		f.Write(body)
	}
	zw.Close()
	w.Code[p.ControllerFunction] = zb.Bytes()
	if w.Env[p.ControllerFunction] == nil {
		w.Env[p.ControllerFunction] = map[string]string{pipeline.EnvPool: p.Pool}
	}

	v, _ := json.Marshal(p)
	o := cftypes.Output{OutputKey: aws.String(pipeline.PoolOutputKey(p.Pool)), OutputValue: aws.String(string(v))}
	found := false
	for i := range w.Stacks {
		if aws.ToString(w.Stacks[i].StackName) == stack {
			w.Stacks[i].Outputs = append(w.Stacks[i].Outputs, o)
			found = true
		}
	}
	if !found {
		w.Stacks = append(w.Stacks, cftypes.Stack{StackName: aws.String(stack), Outputs: []cftypes.Output{o}})
	}
	w.Queues[p.QueueURL] = &Queue{}
	if p.DLQURL != "" {
		w.Queues[p.DLQURL] = &Queue{}
	}
	w.Mappings = append(w.Mappings, lambdatypes.EventSourceMappingConfiguration{
		UUID: aws.String(p.EventSourceMappingUUID), State: aws.String("Enabled"), EventSourceArn: aws.String(p.QueueARN),
		FunctionArn: aws.String("arn:aws:lambda:eu-west-1:123456789012:function:" + p.ControllerFunction),
	})
	return out
}

// GetFunction answers with the function's environment and, for a function with code, a code
// location HTTPClient serves.
func (w *World) GetFunction(_ context.Context, in *lambda.GetFunctionInput, _ ...func(*lambda.Options)) (*lambda.GetFunctionOutput, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.fail("GetFunction"); err != nil {
		return nil, err
	}
	name := aws.ToString(in.FunctionName)
	_, code := w.Code[name]
	env, known := w.Env[name]
	if !code && !known {
		return nil, &lambdatypes.ResourceNotFoundException{Message: aws.String("Function not found: " + name)}
	}
	out := &lambda.GetFunctionOutput{Configuration: &lambdatypes.FunctionConfiguration{
		FunctionName: aws.String(name), Environment: &lambdatypes.EnvironmentResponse{Variables: env},
	}}
	if code {
		out.Code = &lambdatypes.FunctionCodeLocation{RepositoryType: aws.String("S3"), Location: aws.String("https://" + codeHost + "/" + name + ".zip?X-Amz-Signature=x")}
	}
	return out, nil
}

// HTTPClient downloads the code locations GetFunction gives.
func (w *World) HTTPClient() *http.Client {
	return &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		w.mu.Lock()
		b, ok := w.Code[strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/"), ".zip")]
		w.mu.Unlock()
		if r.URL.Host != codeHost || !ok {
			return &http.Response{StatusCode: 404, Status: "404 Not Found", Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
		}
		return &http.Response{StatusCode: 200, Status: "200 OK", Body: io.NopCloser(bytes.NewReader(b)), Request: r}, nil
	})}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// GetObject reads an object; NoSuchKey for a missing one. Gets records the keys read.
func (w *World) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Gets = append(w.Gets, aws.ToString(in.Key))
	if err := w.fail("GetObject"); err != nil {
		return nil, err
	}
	o, ok := w.Objects[aws.ToString(in.Bucket)+"/"+aws.ToString(in.Key)]
	if !ok {
		return nil, &s3types.NoSuchKey{Message: aws.String("The specified key does not exist.")}
	}
	return &s3.GetObjectOutput{Body: io.NopCloser(strings.NewReader(o.Body)), VersionId: aws.String(o.VersionID), ETag: aws.String(o.ETag)}, nil
}

// ListObjectsV2 lists the bucket's keys under the prefix in UTF-8 binary order, at most MaxKeys
// (default and most 1,000) a page, as S3 does; Lists records the calls.
// https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html
func (w *World) ListObjectsV2(_ context.Context, in *s3.ListObjectsV2Input, _ ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Lists = append(w.Lists, *in)
	if err := w.fail("ListObjectsV2"); err != nil {
		return nil, err
	}
	bucket := aws.ToString(in.Bucket) + "/"
	after := aws.ToString(in.StartAfter)
	if in.ContinuationToken != nil {
		after = aws.ToString(in.ContinuationToken)
	}
	var keys []string
	for k := range w.Objects {
		if key, ok := strings.CutPrefix(k, bucket); ok && strings.HasPrefix(key, aws.ToString(in.Prefix)) && key > after {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	size := int(aws.ToInt32(in.MaxKeys))
	if size <= 0 || size > 1000 {
		size = 1000
	}
	out := &s3.ListObjectsV2Output{Name: in.Bucket, Prefix: in.Prefix, MaxKeys: aws.Int32(int32(size))}
	if len(keys) > size {
		keys = keys[:size]
		out.IsTruncated, out.NextContinuationToken = aws.Bool(true), aws.String(keys[size-1])
	}
	for _, k := range keys {
		o := w.Objects[bucket+k]
		out.Contents = append(out.Contents, s3types.Object{Key: aws.String(k), Size: aws.Int64(int64(len(o.Body))), LastModified: aws.Time(o.LastModified)})
	}
	out.KeyCount = aws.Int32(int32(len(out.Contents)))
	return out, nil
}

// DeleteObject removes an object (a delete marker, on a versioned bucket).
func (w *World) DeleteObject(_ context.Context, in *s3.DeleteObjectInput, _ ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.Objects, aws.ToString(in.Bucket)+"/"+aws.ToString(in.Key))
	return &s3.DeleteObjectOutput{}, nil
}

// ChangeMessageVisibility records the call.
func (f *sqsFake) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Visibility = append(f.Visibility, *in)
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}
