package ops

import (
	"archive/zip"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
)

// Pooled tenants. A pool stack has one output (pipeline.PoolOutput) and no tenant list: its
// tenants are the rows of pipeline.PoolSettingsFile in the pool controller's code. pipectl reads
// that file as Lambda hands out the code: GetFunction's Code.Location is a presigned URL of the
// deployment package, valid for 10 minutes.
// https://docs.aws.amazon.com/lambda/latest/api/API_GetFunction.html
// A pool is read once per run (Ops caches it), whatever the command does with its tenants.

// maxCodeBytes bounds the package pipectl downloads: a zipped deployment package may hold at most
// 50 MB (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html).
const maxCodeBytes = 50 << 20

// poolInfo is one pool as its stack and its controller's code describe it.
type poolInfo struct {
	stack    string
	out      pipeline.PoolOutput
	settings *poolsettings.Index
	env      map[string]string // the pool controller's environment
	// uploaderRole is the ARN of the pool's uploader role (the output's uploaderRoleArn); empty:
	// the pool has none.
	uploaderRole string
}

// discovery is what one run found in the stacks, read once.
type discovery struct {
	once    sync.Once
	tenants []pipeline.TenantOutput
	pools   []poolInfo
	err     error

	mu        sync.Mutex
	described map[string]*sfn.DescribeExecutionOutput // closed executions only: they do not change
	envs      map[string]map[string]string            // functions' environments, by function name
	caller    string                                  // the caller's ARN, once asked
}

// poolTenants reads the pool's settings file from its controller's code and describes each tenant
// as a silo stack's output would, with Pool set.
func (o *Ops) poolTenants(ctx context.Context, stack string, p pipeline.PoolOutput) (poolInfo, []pipeline.TenantOutput, error) {
	info := poolInfo{stack: stack, out: p}
	fn, err := o.Lambda.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(p.ControllerFunction)})
	if err != nil {
		return info, nil, fmt.Errorf("pool %s: get function %s (its tenants are in its code's %s): %w", p.Pool, p.ControllerFunction, pipeline.PoolSettingsFile, err)
	}
	if fn.Code == nil || aws.ToString(fn.Code.Location) == "" {
		return info, nil, fmt.Errorf("pool %s: GetFunction of %s gave no code location", p.Pool, p.ControllerFunction)
	}
	b, err := o.download(ctx, aws.ToString(fn.Code.Location))
	if err != nil {
		return info, nil, fmt.Errorf("pool %s: download the code of %s: %w", p.Pool, p.ControllerFunction, err)
	}
	settings, err := settingsFromZip(b)
	if err != nil {
		return info, nil, fmt.Errorf("pool %s: code of %s: %w", p.Pool, p.ControllerFunction, err)
	}
	if settings.Pool != p.Pool {
		return info, nil, fmt.Errorf("pool %s: the code of %s holds the settings of pool %q", p.Pool, p.ControllerFunction, settings.Pool)
	}
	info.settings, info.env = settings, envOf(fn)
	var ts []pipeline.TenantOutput
	var bad []error
	for e := range settings.All() {
		pt, err := settings.Tenant(e.ID)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		ts = append(ts, pipeline.TenantOutput{
			Version: pipeline.TenantOutputVersion, ID: pt.ID(),
			Policy:         cmp.Or(pt.OnFailure, pipeline.OnFailureContinue),
			IdempotencyKey: cmp.Or(pt.IdempotencyKey, pipeline.IdempotencyEventID),
			Bucket:         p.Bucket, Prefix: pt.Prefix, QueueURL: p.QueueURL, QueueARN: p.QueueARN,
			StateMachineARN: p.StateMachineARN, SegmentStateMachineARN: p.SegmentStateMachineARN,
			ControllerFunction: p.ControllerFunction, EventSourceMappingUUID: p.EventSourceMappingUUID,
			DLQURL: p.DLQURL, Pool: p.Pool, KeysPool: p.KeysPool(),
		})
	}
	// An operator must not act on a tenant whose policy cannot be read: the pool's commands fail,
	// naming each bad row, until a deployment fixes them.
	if err := errors.Join(bad...); err != nil {
		return info, nil, fmt.Errorf("pool %s: code of %s: %w", p.Pool, p.ControllerFunction, err)
	}
	return info, ts, nil
}

func (o *Ops) download(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	client := o.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxCodeBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxCodeBytes {
		return nil, fmt.Errorf("more than %d bytes", maxCodeBytes)
	}
	return b, nil
}

// settingsFromZip finds the pool's settings file in a deployment package: at its root, where the
// construct puts it beside bootstrap, or else the one file of that name anywhere in it.
func settingsFromZip(b []byte) (*poolsettings.Index, error) {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("not a zip: %w", err)
	}
	var found *zip.File
	for _, f := range zr.File {
		if f.Name == pipeline.PoolSettingsFile {
			found = f
			break
		}
		if path.Base(f.Name) == pipeline.PoolSettingsFile && found == nil {
			found = f
		}
	}
	if found == nil {
		return nil, fmt.Errorf("no %s in the package", pipeline.PoolSettingsFile)
	}
	rc, err := found.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxCodeBytes))
	if err != nil {
		return nil, err
	}
	return poolsettings.Parse(data)
}

// maxPoolScan bounds the executions of a pool's shared state machine that one look at a pooled
// tenant describes: its executions are told from the other tenants' by their input only.
const maxPoolScan = 1000

// executions returns the tenant's newest executions (with status, if set), at most limit. A silo
// tenant's are one ListExecutions page. A pooled tenant shares its pool's state machine, so its
// executions are found among the pool's, newest first, by the tenant in their input
// (DescribeExecution), describing at most maxPoolScan of them.
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_ListExecutions.html
func (o *Ops) executions(ctx context.Context, t pipeline.TenantOutput, status sfntypes.ExecutionStatus, limit int) ([]sfntypes.ExecutionListItem, error) {
	if t.Pool == "" {
		out, err := o.StepFunctions.ListExecutions(ctx, &sfn.ListExecutionsInput{
			StateMachineArn: aws.String(t.StateMachineARN), StatusFilter: status, MaxResults: int32(limit)})
		if err != nil {
			return nil, err
		}
		return out.Executions, nil
	}
	var mine []sfntypes.ExecutionListItem
	var token *string
	scanned := 0
	for {
		out, err := o.StepFunctions.ListExecutions(ctx, &sfn.ListExecutionsInput{
			StateMachineArn: aws.String(t.StateMachineARN), StatusFilter: status, MaxResults: 100, NextToken: token})
		if err != nil {
			return nil, err
		}
		for _, e := range out.Executions {
			if scanned == maxPoolScan || len(mine) == limit {
				return mine, nil
			}
			scanned++
			d, err := o.describe(ctx, aws.ToString(e.ExecutionArn))
			if err != nil {
				return nil, err
			}
			if in, ok := workflowInput(d); ok && in.Tenant.ID == t.ID {
				mine = append(mine, e)
			}
		}
		if aws.ToString(out.NextToken) == "" {
			return mine, nil
		}
		token = out.NextToken
	}
}

// ownExecution refuses an execution of a pooled tenant's pool that is another tenant's.
func ownExecution(t pipeline.TenantOutput, d *sfn.DescribeExecutionOutput, name string) error {
	if t.Pool == "" {
		return nil
	}
	if in, ok := workflowInput(d); !ok || in.Tenant.ID != t.ID {
		return refuse("tenant %s has no execution %s (it is another tenant's of pool %s)", t.ID, name, t.Pool)
	}
	return nil
}

// poolsOf returns the pools of the given tenants, in name order.
func (o *Ops) poolsOf(ts []pipeline.TenantOutput) []poolInfo {
	want := map[string]bool{}
	for _, t := range ts {
		if t.Pool != "" {
			want[t.Pool] = true
		}
	}
	var out []poolInfo
	for _, p := range o.found.pools {
		if want[p.out.Pool] {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].out.Pool < out[j].out.Pool })
	return out
}

// tier names a tenant's tier as status reports it.
func tier(t pipeline.TenantOutput) string {
	if t.Pool != "" {
		return "pool"
	}
	return "silo"
}

func poolTenantIDs(p poolInfo) []string {
	ids := make([]string, 0, p.settings.Len())
	for e := range p.settings.All() {
		ids = append(ids, e.ID)
	}
	sort.Strings(ids)
	return ids
}

// wakeState reads the tenant's wake state (pipeline.WakeStateKey); ok is false when there is none.
func (o *Ops) wakeState(ctx context.Context, t pipeline.TenantOutput) (pipeline.WakeState, bool, error) {
	key := pipeline.WakeStateKey(t.Owner())
	out, err := o.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(t.Bucket), Key: aws.String(key)})
	if _, nk := errorsAs[*s3types.NoSuchKey](err); nk {
		return pipeline.WakeState{}, false, nil
	}
	if _, nf := errorsAs[*s3types.NotFound](err); nf {
		return pipeline.WakeState{}, false, nil
	}
	if err != nil {
		return pipeline.WakeState{}, false, fmt.Errorf("get s3://%s/%s: %w", t.Bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, pipeline.MaxWakeObjectBytes+1))
	if err != nil {
		return pipeline.WakeState{}, false, fmt.Errorf("read s3://%s/%s: %w", t.Bucket, key, err)
	}
	ws, err := pipeline.DecodeWakeState(b)
	if err != nil {
		return pipeline.WakeState{}, false, fmt.Errorf("s3://%s/%s: %w", t.Bucket, key, err)
	}
	return ws, true, nil
}

// setPooledPaused pauses or resumes one pooled tenant: its message group, not the pool's mapping.
// Pause writes the pause marker, whose body is the audit record (who, from STS; when; why); the
// controller then starts nothing for the tenant and holds its next message. Resume deletes the
// marker and makes the held message visible at once (ChangeMessageVisibility 0 with the receipt
// handle the controller recorded), so it takes effect within seconds, not after the safety net.
func (o *Ops) setPooledPaused(ctx context.Context, t pipeline.TenantOutput, paused bool, reason string) (MappingResult, error) {
	key := pipeline.PauseMarkerKey(t.Owner())
	res := MappingResult{Tenant: t.ID, UUID: t.EventSourceMappingUUID, Tier: tier(t), Pool: t.Pool, Bucket: t.Bucket, MarkerKey: key}
	isPaused, err := o.exists(ctx, t.Bucket, key)
	if err != nil {
		return res, err
	}
	res.State = map[bool]string{true: "Disabled", false: "Enabled"}[isPaused]
	if paused {
		if isPaused {
			return res, nil
		}
		who, err := o.caller(ctx)
		if err != nil {
			return res, err
		}
		body, err := pipeline.EncodePauseRecord(pipeline.PauseRecord{Version: pipeline.PauseRecordVersion, Tenant: t.ID,
			RequestedBy: who, RequestedAt: o.Now().UTC().Truncate(time.Second), Reason: oneLine(reason)})
		if err != nil {
			return res, err
		}
		out, err := o.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(t.Bucket), Key: aws.String(key),
			Body: bytes.NewReader(body), ContentType: aws.String("application/json")})
		if err != nil {
			return res, fmt.Errorf("put s3://%s/%s: %w", t.Bucket, key, err)
		}
		res.State, res.Changed, res.RequestedBy, res.VersionID = "Disabled", true, who, aws.ToString(out.VersionId)
		return res, nil
	}
	if isPaused {
		if _, err := o.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(t.Bucket), Key: aws.String(key)}); err != nil {
			return res, fmt.Errorf("delete s3://%s/%s: %w", t.Bucket, key, err)
		}
		res.State, res.Changed = "Enabled", true
	}
	// Also when the marker was already gone: a message held before may still wait for its safety net.
	ws, ok, err := o.wakeState(ctx, t)
	if err != nil || !ok || !ws.Paused || ws.QueueURL != t.QueueURL {
		return res, err
	}
	_, err = o.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(ws.QueueURL), ReceiptHandle: aws.String(ws.ReceiptHandle), VisibilityTimeout: 0})
	switch {
	case err == nil:
		res.Released = true
	case staleReceipt(err):
		// The held delivery is over (the message came back, or was deleted): nothing waits.
	default:
		return res, fmt.Errorf("make the held message of %s visible (it returns after the safety net anyway): %w", t.ID, err)
	}
	return res, nil
}

// staleReceipt reports whether SQS rejected a receipt handle that is no longer current.
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ChangeMessageVisibility.html
func staleReceipt(err error) bool {
	if _, ok := errorsAs[*sqstypes.ReceiptHandleIsInvalid](err); ok {
		return true
	}
	if _, ok := errorsAs[*sqstypes.MessageNotInflight](err); ok {
		return true
	}
	api, ok := errorsAs[smithy.APIError](err)
	if !ok {
		return false
	}
	code := api.ErrorCode()
	for _, c := range []string{"ReceiptHandleIsInvalid", "MessageNotInflight", "InvalidParameterValue"} {
		if code == c || strings.HasSuffix(code, "."+c) {
			return true
		}
	}
	return false
}
