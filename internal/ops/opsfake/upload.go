package opsfake

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	ststypes "github.com/aws/aws-sdk-go-v2/service/sts/types"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// Presigning and role sessions (pipectl upload-url). The presigner is the SDK's own, which signs
// without calling anything, over the endpoint of region eu-west-1.

// presigner signs with creds, as the real client does.
func presigner(creds aws.CredentialsProvider) ops.Presigner {
	return s3.NewPresignClient(s3.New(s3.Options{Region: "eu-west-1", Credentials: creds}))
}

// Retrieve hands out the operator's credentials, w.Creds.
func (w *World) Retrieve(context.Context) (aws.Credentials, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.fail("Retrieve"); err != nil {
		return aws.Credentials{}, err
	}
	return w.Creds, nil
}

// AssumeRole answers a session of the role for DurationSeconds, as STS does, and records the call.
func (w *World) AssumeRole(_ context.Context, in *sts.AssumeRoleInput, _ ...func(*sts.Options)) (*sts.AssumeRoleOutput, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.fail("AssumeRole"); err != nil {
		return nil, err
	}
	w.AssumeRoles = append(w.AssumeRoles, *in)
	seconds := aws.ToInt32(in.DurationSeconds)
	if seconds == 0 {
		seconds = 3600
	}
	if seconds > 3600 {
		// Every uploader role's MaxSessionDuration is one hour (constructs/tenantpipeline).
		return nil, &smithy.GenericAPIError{Code: "ValidationError", Message: "The requested DurationSeconds exceeds the MaxSessionDuration set for this role."}
	}
	// STS counts the session from its own clock and answers its expiry in whole seconds
	// (https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html, the example's
	// Expiration): a session asked for exactly a URL's lifetime ends before the URL.
	return &sts.AssumeRoleOutput{Credentials: &ststypes.Credentials{
		AccessKeyId: aws.String(fmt.Sprintf("ASIASESSION%d", len(w.AssumeRoles))), SecretAccessKey: aws.String("session-secret"),
		SessionToken: aws.String("session-token"), Expiration: aws.Time(w.Now.Add(time.Duration(seconds) * time.Second).Truncate(time.Second)),
	}}, nil
}

// SetUploaderRole writes the uploader role's ARN into the pool's output, as a pool stack with
// uploaders does.
func (w *World) SetUploaderRole(pool, arn string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.Stacks {
		for j, o := range w.Stacks[i].Outputs {
			if aws.ToString(o.OutputKey) != pipeline.PoolOutputKey(pool) {
				continue
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(aws.ToString(o.OutputValue)), &v); err != nil {
				panic(err)
			}
			v["uploaderRoleArn"] = arn
			b, _ := json.Marshal(v)
			w.Stacks[i].Outputs[j].OutputValue = aws.String(string(b))
		}
	}
}

// GetBucketEncryption answers the bucket's default encryption: SSE-KMS with its key in
// w.BucketKeys and S3 Bucket Keys on, as the app's bucket is, or else SSE-S3, S3's default for
// every bucket. https://docs.aws.amazon.com/AmazonS3/latest/userguide/default-encryption-faq.html
func (w *World) GetBucketEncryption(_ context.Context, in *s3.GetBucketEncryptionInput, _ ...func(*s3.Options)) (*s3.GetBucketEncryptionOutput, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.fail("GetBucketEncryption"); err != nil {
		return nil, err
	}
	rule := s3types.ServerSideEncryptionRule{ApplyServerSideEncryptionByDefault: &s3types.ServerSideEncryptionByDefault{SSEAlgorithm: s3types.ServerSideEncryptionAes256}}
	if key := w.BucketKeys[aws.ToString(in.Bucket)]; key != "" {
		rule = s3types.ServerSideEncryptionRule{BucketKeyEnabled: aws.Bool(true),
			ApplyServerSideEncryptionByDefault: &s3types.ServerSideEncryptionByDefault{SSEAlgorithm: s3types.ServerSideEncryptionAwsKms, KMSMasterKeyID: aws.String(key)}}
	}
	return &s3.GetBucketEncryptionOutput{ServerSideEncryptionConfiguration: &s3types.ServerSideEncryptionConfiguration{Rules: []s3types.ServerSideEncryptionRule{rule}}}, nil
}
