// Package ops is what pipectl does, without its command line: find a tenant's resources from the
// deployed stacks, read its state, and perform the operator actions (pause, resume, skip, redrive,
// replay, a sequenced tenant's sequence skip and set) in ways that keep the tenant's file order. Every AWS call goes through the small
// interfaces below, which the SDK clients satisfy, so the logic is tested with fakes
// (internal/ops/opsfake) and works the same against AWS and the local run. docs/operations.md.
package ops

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/example/tenantpipeline/internal/admission"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// The slices of the SDK clients pipectl uses.
type (
	CloudFormation interface {
		DescribeStacks(ctx context.Context, in *cloudformation.DescribeStacksInput, optFns ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
	}
	SQS interface {
		GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
		SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
		ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
		DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
		ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	}
	StepFunctions interface {
		ListExecutions(ctx context.Context, in *sfn.ListExecutionsInput, optFns ...func(*sfn.Options)) (*sfn.ListExecutionsOutput, error)
		DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, optFns ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error)
		RedriveExecution(ctx context.Context, in *sfn.RedriveExecutionInput, optFns ...func(*sfn.Options)) (*sfn.RedriveExecutionOutput, error)
		GetExecutionHistory(ctx context.Context, in *sfn.GetExecutionHistoryInput, optFns ...func(*sfn.Options)) (*sfn.GetExecutionHistoryOutput, error)
	}
	Lambda interface {
		ListEventSourceMappings(ctx context.Context, in *lambda.ListEventSourceMappingsInput, optFns ...func(*lambda.Options)) (*lambda.ListEventSourceMappingsOutput, error)
		UpdateEventSourceMapping(ctx context.Context, in *lambda.UpdateEventSourceMappingInput, optFns ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error)
		GetFunction(ctx context.Context, in *lambda.GetFunctionInput, optFns ...func(*lambda.Options)) (*lambda.GetFunctionOutput, error)
	}
	S3 interface {
		PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
		HeadObject(ctx context.Context, in *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
		GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
		DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
		// ListObjectsV2 lists a sequenced tenant's held files (internal/sequence).
		ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
		// GetBucketEncryption names the bucket's customer-managed key, whose headers an upload
		// sends (upload.go).
		GetBucketEncryption(ctx context.Context, in *s3.GetBucketEncryptionInput, optFns ...func(*s3.Options)) (*s3.GetBucketEncryptionOutput, error)
	}
	STS interface {
		GetCallerIdentity(ctx context.Context, in *sts.GetCallerIdentityInput, optFns ...func(*sts.Options)) (*sts.GetCallerIdentityOutput, error)
		AssumeRole(ctx context.Context, in *sts.AssumeRoleInput, optFns ...func(*sts.Options)) (*sts.AssumeRoleOutput, error)
	}
)

var (
	_ CloudFormation = (*cloudformation.Client)(nil)
	_ SQS            = (*sqs.Client)(nil)
	_ StepFunctions  = (*sfn.Client)(nil)
	_ Lambda         = (*lambda.Client)(nil)
	_ S3             = (*s3.Client)(nil)
	_ STS            = (*sts.Client)(nil)
)

// Clients are the AWS clients Ops calls.
type Clients struct {
	CloudFormation CloudFormation
	SQS            SQS
	StepFunctions  StepFunctions
	Lambda         Lambda
	S3             S3
	STS            STS
	// DynamoDB reads the core systems' and pools' admission tables (status).
	DynamoDB admission.ItemAPI
	// CloudWatch reads the pools' Contributor Insights reports (health.go).
	CloudWatch CloudWatch
	// Credentials are the operator's: upload-url signs with them, and bounds a URL's life by
	// theirs (upload.go).
	Credentials aws.CredentialsProvider
	// Presigner returns an S3 presigner that signs with creds (upload-url).
	Presigner func(creds aws.CredentialsProvider) Presigner
}

// Ops performs pipectl's operations for the stacks whose names start with StackPrefix + "-".
type Ops struct {
	Clients
	StackPrefix string
	// Stack, when set, is the one stack whose outputs describe the tenants: StackPrefix is then
	// ignored.
	Stack string
	// AnyStack finds the tenants of an app that names its stacks otherwise (a TenantPipeline or
	// TenantPool in a user's own CDK app): when no stack named StackPrefix-* has a tenant or pool
	// output, every stack's outputs are read. The outputs' logical ids
	// (pipeline.TenantOutputKeyPrefix, pipeline.PoolOutputKeyPrefix) and their versioned JSON
	// tell the constructs' stacks apart.
	AnyStack bool
	Now      func() time.Time
	// NewRequestID returns a unique request id (a random UUID unless a test sets it).
	NewRequestID func() string
	// HTTP downloads a pool controller's code (GetFunction's Code.Location); nil: http.DefaultClient.
	HTTP *http.Client

	found discovery // the stacks' tenants and pools, read once per Ops
}

// New returns Ops with the real clock and random request ids.
func New(c Clients, stackPrefix string) *Ops {
	return &Ops{Clients: c, StackPrefix: stackPrefix, Now: time.Now, NewRequestID: randomUUID}
}

// RefusedError is an operation that pipectl refuses, because AWS would or because it would break
// the tenant's order. The message says why.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

func refuse(format string, args ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// NotFoundError is a tenant no stack describes.
type NotFoundError struct {
	Tenant, StackPrefix string
	Known               []string
}

func (e *NotFoundError) Error() string {
	if len(e.Known) == 0 {
		return fmt.Sprintf("tenant %q not found: no stack named %s-* has an output %s*", e.Tenant, e.StackPrefix, pipeline.TenantOutputKeyPrefix)
	}
	return fmt.Sprintf("tenant %q not found; tenants: %s", e.Tenant, strings.Join(e.Known, ", "))
}

// NoTenantsError is a stack prefix that describes no tenant at all: a mistyped --stack-prefix, or
// stacks not deployed yet.
type NoTenantsError struct{ StackPrefix string }

func (e *NoTenantsError) Error() string {
	return fmt.Sprintf("no tenants found in stacks named %s-* (none has an output %s*); check --stack-prefix and the region",
		e.StackPrefix, pipeline.TenantOutputKeyPrefix)
}

// Tenants returns every tenant the stacks describe, sorted by id: silo and pooled. It pages
// through DescribeStacks and reads the TenantOutput outputs of the stacks named StackPrefix-*, and
// the tenants of each PoolOutput's pool (pool.go). It reads the stacks once per Ops.
// https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_DescribeStacks.html
func (o *Ops) Tenants(ctx context.Context) ([]pipeline.TenantOutput, error) {
	o.found.once.Do(func() { o.found.tenants, o.found.pools, o.found.err = o.discover(ctx) })
	return o.found.tenants, o.found.err
}

func (o *Ops) discover(ctx context.Context) ([]pipeline.TenantOutput, []poolInfo, error) {
	byID := map[string]string{} // tenant id → stack name
	var out []pipeline.TenantOutput
	var pools []poolInfo
	add := func(stack string, t pipeline.TenantOutput) error {
		if other, dup := byID[t.ID]; dup {
			return fmt.Errorf("tenant %q is described by two stacks, %s and %s", t.ID, other, stack)
		}
		byID[t.ID] = stack
		out = append(out, t)
		return nil
	}
	prefixed, others, err := o.candidateStacks(ctx)
	if err != nil {
		return nil, nil, err
	}
	stacks := prefixed
	if o.Stack == "" && o.AnyStack && !slices.ContainsFunc(prefixed, describesTenants) {
		stacks = others
	}
	for _, st := range stacks {
		name := deref(st.StackName)
		for _, op := range st.Outputs {
			key := deref(op.OutputKey)
			if strings.HasPrefix(key, pipeline.PoolOutputKeyPrefix) {
				var p pipeline.PoolOutput
				if err := json.Unmarshal([]byte(deref(op.OutputValue)), &p); err != nil || p.Version != pipeline.PoolOutputVersion {
					return nil, nil, fmt.Errorf("stack %s, output %s: not a pool output of version %d (%v)", name, key, pipeline.PoolOutputVersion, err)
				}
				info, ts, err := o.poolTenants(ctx, name, p)
				if err != nil {
					return nil, nil, fmt.Errorf("stack %s: %w", name, err)
				}
				// The pool's uploader role, when it has one (TenantPool.UploaderRole).
				var up struct {
					UploaderRoleARN string `json:"uploaderRoleArn"`
				}
				json.Unmarshal([]byte(deref(op.OutputValue)), &up) // the same JSON, read above
				info.uploaderRole = up.UploaderRoleARN
				pools = append(pools, info)
				for _, t := range ts {
					if err := add(name, t); err != nil {
						return nil, nil, err
					}
				}
				continue
			}
			if !strings.HasPrefix(key, pipeline.TenantOutputKeyPrefix) {
				continue
			}
			t, err := pipeline.DecodeTenantOutput(deref(op.OutputValue))
			if err != nil {
				return nil, nil, fmt.Errorf("stack %s, output %s: %w", name, key, err)
			}
			if err := add(name, t); err != nil {
				return nil, nil, err
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, pools, nil
}

// candidateStacks pages through DescribeStacks once: prefixed are the stacks Stack or StackPrefix
// selects, others the remaining stacks that have a tenant or pool output (kept only for AnyStack).
func (o *Ops) candidateStacks(ctx context.Context) (prefixed, others []cftypes.Stack, err error) {
	in := &cloudformation.DescribeStacksInput{}
	for {
		page, err := o.CloudFormation.DescribeStacks(ctx, in)
		if err != nil {
			return nil, nil, fmt.Errorf("describe stacks: %w", err)
		}
		for _, st := range page.Stacks {
			name := deref(st.StackName)
			switch {
			case o.Stack != "":
				if name == o.Stack {
					prefixed = append(prefixed, st)
				}
			case strings.HasPrefix(name, o.StackPrefix+"-"):
				prefixed = append(prefixed, st)
			case o.AnyStack && describesTenants(st):
				others = append(others, st)
			}
		}
		if deref(page.NextToken) == "" {
			return prefixed, others, nil
		}
		in.NextToken = page.NextToken
	}
}

// describesTenants reports whether st has an output a TenantPipeline or a TenantPool writes.
func describesTenants(st cftypes.Stack) bool {
	return slices.ContainsFunc(st.Outputs, func(op cftypes.Output) bool {
		key := deref(op.OutputKey)
		return strings.HasPrefix(key, pipeline.TenantOutputKeyPrefix) || strings.HasPrefix(key, pipeline.PoolOutputKeyPrefix)
	})
}

// Tenant returns one tenant's descriptor.
func (o *Ops) Tenant(ctx context.Context, id string) (pipeline.TenantOutput, error) {
	all, err := o.Tenants(ctx)
	if err != nil {
		return pipeline.TenantOutput{}, err
	}
	return o.pick(all, id)
}

func (o *Ops) pick(all []pipeline.TenantOutput, id string) (pipeline.TenantOutput, error) {
	for _, t := range all {
		if t.ID == id {
			return t, nil
		}
	}
	known := make([]string, 0, len(all))
	for _, t := range all {
		known = append(known, t.ID)
	}
	return pipeline.TenantOutput{}, &NotFoundError{Tenant: id, StackPrefix: o.StackPrefix, Known: known}
}

// skipMarkerKey is where the controller looks for an operator's skip of a halted file.
var skipMarkerKey = pipeline.SkipMarkerKey

// randomUUID is a version 4 UUID (RFC 9562).
func randomUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// errorsAs is errors.As for a target type T.
func errorsAs[T error](err error) (T, bool) {
	var t T
	ok := errors.As(err, &t)
	return t, ok
}
