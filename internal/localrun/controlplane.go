package localrun

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// The control plane is what an operator's tool calls besides the data services: CloudFormation
// DescribeStacks (how pipectl finds the tenants), STS GetCallerIdentity (the skip marker's audit
// identity), Lambda's event source mapping API (pause and resume) and GetFunction with its code
// (a pool's tenants, getfunction.go) and CloudWatch GetInsightRuleReport (pipectl health,
// insightrules.go). It is one HTTP endpoint;
// Lambda requests other than event source mappings go on to the Lambda Invoke API. The wire
// formats are those of cmd/pipectl/sdk_test.go.

// esm is one event source mapping as the Lambda API shows it; Enabled is honoured by its pollers.
type esm struct {
	UUID           string
	FunctionArn    string
	EventSourceArn string
	BatchSize      int
	mu             sync.Mutex
	enabled        bool
	modified       time.Time
	wake           chan struct{} // closed and replaced when the mapping is enabled
}

func newESM(uuid, functionArn, sourceArn string, batch int, enabled bool) *esm {
	return &esm{UUID: uuid, FunctionArn: functionArn, EventSourceArn: sourceArn, BatchSize: batch, enabled: enabled, modified: time.Now(), wake: make(chan struct{})}
}

// Enabled reports whether the mapping polls.
func (e *esm) Enabled() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.enabled
}

// SetEnabled enables or disables the mapping.
func (e *esm) SetEnabled(on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if on && !e.enabled {
		close(e.wake)
		e.wake = make(chan struct{})
	}
	e.enabled, e.modified = on, time.Now()
}

// waitEnabled blocks while the mapping is disabled; false when ctx ended.
func (e *esm) waitEnabled(ctx context.Context) bool {
	for {
		e.mu.Lock()
		on, wake := e.enabled, e.wake
		e.mu.Unlock()
		if on {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-wake:
		}
	}
}

// json is the mapping in the shape of the Lambda API's EventSourceMappingConfiguration
// (https://docs.aws.amazon.com/lambda/latest/api/API_EventSourceMappingConfiguration.html).
// A change of Enabled answers "Enabling"/"Disabling", as Lambda does; the local pollers act on it
// at once, so every later read shows "Enabled"/"Disabled".
func (e *esm) json(transition bool) map[string]any {
	e.mu.Lock()
	defer e.mu.Unlock()
	state := map[bool]string{true: "Enabled", false: "Disabled"}[e.enabled]
	if transition {
		state = map[bool]string{true: "Enabling", false: "Disabling"}[e.enabled]
	}
	return map[string]any{
		"UUID": e.UUID, "FunctionArn": e.FunctionArn, "EventSourceArn": e.EventSourceArn, "BatchSize": e.BatchSize,
		"State": state, "StateTransitionReason": "USER_INITIATED", "LastModified": float64(e.modified.UnixMilli()) / 1000,
	}
}

// mappingFor returns the event source mapping state of a poller (nil for none: always enabled).
func (c *Cloud) mappingFor(m *mapping) *esm {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.esmOf[m]
}

// pollGate is the event source mapping's Enabled, as the poller sees it: before a receive it
// blocks while the mapping is disabled (false when ctx ended).
func (c *Cloud) pollGate(ctx context.Context, m *mapping) bool {
	if e := c.mappingFor(m); e != nil {
		return e.waitEnabled(ctx)
	}
	return true
}

// releaseIfDisabled returns messages that a long poll received after the mapping was disabled:
// their visibility is set to 0, so they stay queued and visible, and the function is not invoked.
func (c *Cloud) releaseIfDisabled(ctx context.Context, m *mapping, msgs []sqstypes.Message) bool {
	e := c.mappingFor(m)
	if e == nil || e.Enabled() {
		return false
	}
	for _, msg := range msgs {
		if _, err := c.sqsAdmin.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(m.queue.URL), ReceiptHandle: msg.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
			fmt.Fprintf(c.logs, "event source mapping %s: release after disable: %v\n", m.queue.Name, err)
		}
	}
	return true
}

// Mapping returns the event source mapping of a tenant's controller.
func (r *Run) Mapping(tenantID string) *esm {
	t := r.Tenant(tenantID)
	if t == nil {
		return nil
	}
	return r.mappingOf(t.Queue.ARN)
}

// mappingOf returns the event source mapping of a queue.
func (c *Cloud) mappingOf(queueARN string) *esm {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.esms {
		if e.EventSourceArn == queueARN {
			return e
		}
	}
	return nil
}

// controlPlane serves CloudFormation, STS, CloudWatch's Contributor Insights reports and the
// Lambda API (event source mappings; the rest goes to the Invoke API).
func (r *Run) controlPlane() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasPrefix(req.URL.Path, "/2015-03-31/event-source-mappings") {
			r.serveESM(w, req)
			return
		}
		if strings.HasPrefix(req.URL.Path, codePath) {
			r.serveCode(w, req)
			return
		}
		if strings.HasPrefix(req.URL.Path, cloudWatchPath) { // insightrules.go
			r.serveCloudWatch(w, req)
			return
		}
		if r.serveGetFunction(w, req) { // getfunction.go
			return
		}
		if strings.HasPrefix(req.URL.Path, "/2015-03-31/") || strings.HasPrefix(req.URL.Path, "/2019-09-25/") {
			r.auth.guardLambda(r.Lambda).ServeHTTP(w, req)
			return
		}
		body, _ := io.ReadAll(req.Body)
		form, _ := url.ParseQuery(string(body))
		switch form.Get("Action") {
		case "DescribeStacks":
			r.serveDescribeStacks(w, form.Get("StackName"))
		case "GetCallerIdentity":
			writeXML(w, http.StatusOK, callerIdentity(req, r.auth))
		case "AssumeRole": // an operator's session of a role, e.g. a pool's uploader role (tenantauth.go)
			r.auth.assumeRole(w, req, form)
		case "CreateRole", "PutRolePolicy", "GetRole", "DeleteRole": // iam.go
			r.auth.serveIAM(w, form)
		default:
			queryError(w, http.StatusBadRequest, "InvalidAction", fmt.Sprintf("the local run does not emulate %q", form.Get("Action")))
		}
	})
}

// serveESM answers ListEventSourceMappings, GetEventSourceMapping and UpdateEventSourceMapping
// (Enabled only) (https://docs.aws.amazon.com/lambda/latest/api/API_ListEventSourceMappings.html,
// API_UpdateEventSourceMapping.html: 202 Accepted with the configuration).
func (c *Cloud) serveESM(w http.ResponseWriter, req *http.Request) {
	id := strings.Trim(strings.TrimPrefix(req.URL.Path, "/2015-03-31/event-source-mappings"), "/")
	writeJSON := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	notFound := func() {
		w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
		writeJSON(http.StatusNotFound, map[string]string{"Type": "User", "Message": "The resource you requested does not exist. (Service: Lambda, Status Code: 404)"})
	}
	c.mu.Lock()
	all := append([]*esm(nil), c.esms...)
	c.mu.Unlock()
	if id == "" {
		if req.Method != http.MethodGet {
			writeJSON(http.StatusMethodNotAllowed, map[string]string{"Message": "creating event source mappings is not emulated"})
			return
		}
		fn, src := req.URL.Query().Get("FunctionName"), req.URL.Query().Get("EventSourceArn")
		list := []map[string]any{}
		for _, e := range all {
			if fn != "" && e.FunctionArn != fn && !strings.HasSuffix(e.FunctionArn, ":function:"+fn) {
				continue
			}
			if src != "" && e.EventSourceArn != src {
				continue
			}
			list = append(list, e.json(false))
		}
		writeJSON(http.StatusOK, map[string]any{"EventSourceMappings": list})
		return
	}
	var e *esm
	for _, m := range all {
		if m.UUID == id {
			e = m
		}
	}
	if e == nil {
		notFound()
		return
	}
	switch req.Method {
	case http.MethodGet:
		writeJSON(http.StatusOK, e.json(false))
	case http.MethodPut:
		var in struct{ Enabled *bool }
		if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
			w.Header().Set("X-Amzn-ErrorType", "InvalidParameterValueException")
			writeJSON(http.StatusBadRequest, map[string]string{"Type": "User", "Message": err.Error()})
			return
		}
		changed := in.Enabled != nil && *in.Enabled != e.Enabled()
		if in.Enabled != nil {
			e.SetEnabled(*in.Enabled)
			fmt.Fprintf(c.logs, "lambda: event source mapping %s enabled=%v\n", e.UUID, *in.Enabled)
		}
		writeJSON(http.StatusAccepted, e.json(changed))
	default:
		writeJSON(http.StatusMethodNotAllowed, map[string]string{"Message": "not emulated"})
	}
}

type xmlOutput struct {
	OutputKey   string
	OutputValue string
}

type xmlStack struct {
	StackName    string
	StackId      string
	StackStatus  string
	CreationTime string
	Outputs      []xmlOutput `xml:"Outputs>member"`
}

// serveDescribeStacks answers with every synthesized stack and its outputs resolved to the local
// identities, in one page (https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_DescribeStacks.html).
func (r *Run) serveDescribeStacks(w http.ResponseWriter, name string) {
	type result struct {
		XMLName xml.Name   `xml:"DescribeStacksResponse"`
		NS      string     `xml:"xmlns,attr"`
		Stacks  []xmlStack `xml:"DescribeStacksResult>Stacks>member"`
		Request string     `xml:"ResponseMetadata>RequestId"`
	}
	out := result{NS: "http://cloudformation.amazonaws.com/doc/2010-05-15/", Request: uuid()}
	for _, s := range r.StackOutputs() {
		if name != "" && s.StackName != name && s.StackId != name {
			continue
		}
		out.Stacks = append(out.Stacks, s)
	}
	if name != "" && len(out.Stacks) == 0 {
		queryError(w, http.StatusBadRequest, "ValidationError", fmt.Sprintf("Stack with id %s does not exist", name))
		return
	}
	writeXML(w, http.StatusOK, out)
}

// StackOutputs lists the synthesized stacks with their outputs as a deployment would show them:
// each template output resolved against the local identities, and, for a tenant whose stack has
// no tenant output (templates synthesized before the construct wrote one), the same descriptor
// built from the template's resources.
func (r *Run) StackOutputs() []xmlStack {
	var stacks []xmlStack
	described := map[string]bool{}
	for _, s := range r.asm.Stacks {
		st := xmlStack{StackName: s.Name, StackId: fmt.Sprintf("arn:aws:cloudformation:%s:%s:stack/%s/%s", emulate.Region, emulate.Account, s.Name, uuidFor(s.Name)),
			StackStatus: "CREATE_COMPLETE", CreationTime: r.created.UTC().Format(time.RFC3339)}
		for _, k := range slices.Sorted(maps.Keys(s.Outputs)) {
			v, err := r.res.Resolve(s, s.Outputs[k].Value)
			if err != nil {
				fmt.Fprintf(r.cfg.Logs, "cloudformation: output %s of %s: %v\n", k, s.Name, err)
				continue
			}
			str, ok := v.(string)
			if !ok {
				b, _ := json.Marshal(v)
				str = string(b)
			}
			if strings.HasPrefix(k, pipeline.TenantOutputKeyPrefix) {
				if o, err := pipeline.DecodeTenantOutput(str); err == nil {
					described[o.ID] = true
				}
			}
			st.Outputs = append(st.Outputs, xmlOutput{k, str})
		}
		for _, t := range r.Tenants {
			// A pooled tenant has no output of its own: pipectl finds it from its pool's output
			// and its controller's code (GetFunction), as on AWS.
			if t.Stack != s.Name || described[t.ID] || t.Pooled() {
				continue
			}
			b, _ := json.Marshal(r.tenantOutput(t))
			st.Outputs = append(st.Outputs, xmlOutput{pipeline.TenantOutputKey(t.ID), string(b)})
		}
		stacks = append(stacks, st)
	}
	return stacks
}

// tenantOutput is the tenant's descriptor built from the template's resources.
func (r *Run) tenantOutput(t *Tenant) pipeline.TenantOutput {
	o := pipeline.TenantOutput{Version: pipeline.TenantOutputVersion, ID: t.ID, Policy: t.Policy(), IdempotencyKey: pipeline.IdempotencyEventID,
		Bucket: r.Bucket, Prefix: t.Prefix, QueueURL: t.Queue.URL, QueueARN: t.Queue.ARN, StateMachineARN: t.FileMachine,
		ControllerFunction: t.Controller.Name}
	if k, _ := t.Config["idempotencyKey"].(string); k != "" {
		o.IdempotencyKey = k
	}
	for _, kv := range t.Controller.Env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case pipeline.EnvSegmentStateMachineARN:
			o.SegmentStateMachineARN = v
		case pipeline.EnvIdempotencyKey:
			o.IdempotencyKey = cmp.Or(v, o.IdempotencyKey)
		}
	}
	if e := r.Mapping(t.ID); e != nil {
		o.EventSourceMappingUUID = e.UUID
	}
	return o
}

// callerIdentity is the caller as STS names it from the request's credentials: locally the IAM
// user named by the access key id of the SigV4 Authorization header
// ("Credential=<access key id>/<date>/<region>/<service>/aws4_request",
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-signing-request.html), in the
// account of the local ARNs.
func callerIdentity(req *http.Request, auth *tenantAuth) any {
	user := "anonymous"
	if _, cred, ok := strings.Cut(req.Header.Get("Authorization"), "Credential="); ok {
		if akid, _, _ := strings.Cut(cred, "/"); akid != "" {
			user = akid
		}
	}
	arn, id := "arn:aws:iam::"+emulate.Account+":user/"+user, "AIDALOCAL"+strings.ToUpper(user)
	if s, ok := auth.session(req); ok && s.role != "unknown session" {
		// A session of a role is its assumed-role ARN, as STS answers it.
		// https://docs.aws.amazon.com/STS/latest/APIReference/API_GetCallerIdentity.html
		arn, id = s.assumedRoleARN(), "AROALOCAL:"+s.name
	}
	return struct {
		XMLName xml.Name `xml:"GetCallerIdentityResponse"`
		NS      string   `xml:"xmlns,attr"`
		Arn     string   `xml:"GetCallerIdentityResult>Arn"`
		UserID  string   `xml:"GetCallerIdentityResult>UserId"`
		Account string   `xml:"GetCallerIdentityResult>Account"`
		Request string   `xml:"ResponseMetadata>RequestId"`
	}{NS: "https://sts.amazonaws.com/doc/2011-06-15/", Arn: arn, UserID: id, Account: emulate.Account, Request: uuid()}
}

func writeXML(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	io.WriteString(w, xml.Header)
	xml.NewEncoder(w).Encode(v)
}

// queryError is an awsQuery error response.
func queryError(w http.ResponseWriter, status int, code, msg string) {
	writeXML(w, status, struct {
		XMLName xml.Name `xml:"ErrorResponse"`
		Type    string   `xml:"Error>Type"`
		Code    string   `xml:"Error>Code"`
		Message string   `xml:"Error>Message"`
	}{Type: "Sender", Code: code, Message: msg})
}

// uuidFor is a stable UUID-shaped id derived from a name.
func uuidFor(name string) string {
	h := fmt.Sprintf("%x", sha256.Sum256([]byte(name)))
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Endpoints are the local endpoints an operator's client uses (--serve), by the SDK's service
// names in AWS_ENDPOINT_URL_<SERVICE> (https://docs.aws.amazon.com/sdkref/latest/guide/ss-endpoints-table.html).
type Endpoints struct {
	S3, SQS, SFN, Lambda, CloudFormation, STS, CloudWatch string
}

// Env is the environment that points the AWS SDKs, the aws CLI and pipectl at the run: one
// AWS_ENDPOINT_URL_<SERVICE> per emulated service (DYNAMODB when a tenant has a DynamoDB sink), region, dummy credentials, S3 path style, and
// INGEST_BUCKET. Sorted, NAME=value.
func (r *Run) Env() []string {
	e := r.endpoints
	env := []string{
		"AWS_ENDPOINT_URL_S3=" + e.S3,
		"AWS_ENDPOINT_URL_SQS=" + e.SQS,
		"AWS_ENDPOINT_URL_SFN=" + e.SFN,
		"AWS_ENDPOINT_URL_LAMBDA=" + e.Lambda,
		"AWS_ENDPOINT_URL_CLOUDFORMATION=" + e.CloudFormation,
		"AWS_ENDPOINT_URL_STS=" + e.STS,
		"AWS_ENDPOINT_URL_IAM=" + e.STS, // the same control plane (iam.go)
		"AWS_ENDPOINT_URL_CLOUDWATCH=" + e.CloudWatch,
		"AWS_REGION=" + emulate.Region,
		"AWS_DEFAULT_REGION=" + emulate.Region,
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
		"AWS_EC2_METADATA_DISABLED=true",
		"S3_USE_PATH_STYLE=true",
		"INGEST_BUCKET=" + r.Bucket,
	}
	if r.dynamo != nil { // a DynamoDB sink's tables (dynamodb.go), direct to dynalite
		env = append(env, "AWS_ENDPOINT_URL_DYNAMODB="+aws.ToString(r.dynamo.admin.Options().BaseEndpoint))
	}
	sort.Strings(env)
	return env
}
