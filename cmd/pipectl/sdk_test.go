package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// These tests run pipectl with the real SDK clients against stub servers named by
// AWS_ENDPOINT_URL_<SERVICE>, so they pin the wire format of every call pipectl makes: the request
// each service gets and the smallest response pipectl needs. The local run's emulators must answer
// the same (docs/operations.md).

// wire is one stub service: it answers a request by its operation name and records the operations.
type wire struct {
	t      *testing.T
	mu     sync.Mutex
	ops    []string
	bodies map[string]string
	answer func(op string, r *http.Request, body []byte) (status int, header map[string]string, resp string)
	// name derives the operation from the request.
	name func(r *http.Request, body []byte) string
}

func (s *wire) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	op := s.name(r, body)
	s.mu.Lock()
	s.ops = append(s.ops, op)
	s.bodies[op] = string(body)
	s.mu.Unlock()
	status, header, resp := s.answer(op, r, body)
	for k, v := range header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(status)
	io.WriteString(w, resp)
}

// awsQueryName is the Action of a form-encoded awsQuery request (CloudFormation, STS).
func awsQueryName(_ *http.Request, body []byte) string {
	v, _ := url.ParseQuery(string(body))
	return v.Get("Action")
}

// jsonTargetName is the X-Amz-Target of an awsJson request (SQS, Step Functions).
func jsonTargetName(r *http.Request, _ []byte) string { return r.Header.Get("X-Amz-Target") }

// restName is METHOD PATH?QUERY (Lambda, S3 path-style).
func restName(r *http.Request, _ []byte) string {
	n := r.Method + " " + r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		q := r.URL.Query()
		q.Del("x-id")
		if e := q.Encode(); e != "" {
			n += "?" + e
		}
	}
	return n
}

func newWire(t *testing.T, env string, name func(*http.Request, []byte) string,
	answer func(op string, r *http.Request, body []byte) (int, map[string]string, string)) *wire {
	s := &wire{t: t, name: name, answer: answer, bodies: map[string]string{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	t.Setenv(env, srv.URL)
	return s
}

const (
	acmeOutput = `{"version":1,"id":"acme","policy":"halt","idempotencyKey":"event-id","bucket":"ingest","prefix":"inbox/acme/",` +
		`"queueUrl":"https://sqs.eu-west-1.amazonaws.com/123456789012/acme.fifo","queueArn":"arn:aws:sqs:eu-west-1:123456789012:acme.fifo",` +
		`"stateMachineArn":"arn:aws:states:eu-west-1:123456789012:stateMachine:acme-files",` +
		`"segmentStateMachineArn":"arn:aws:states:eu-west-1:123456789012:stateMachine:acme-segments",` +
		`"controllerFunction":"acme-controller","eventSourceMappingUuid":"esm-acme"}`
	acme2ARN = "arn:aws:states:eu-west-1:123456789012:execution:acme-files:acme-2"
	acme1ARN = "arn:aws:states:eu-west-1:123456789012:execution:acme-files:acme-1"
)

// stubAWS starts one stub per service pipectl calls, for the tenant acme blocked at acme-2.
func stubAWS(t *testing.T) map[string]*wire {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED": "true", "S3_USE_PATH_STYLE": "true", "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
	} {
		t.Setenv(k, v)
	}
	ok := func(s string) (int, map[string]string, string) {
		return 200, map[string]string{"Content-Type": "text/xml"}, s
	}
	js := func(s string) (int, map[string]string, string) {
		return 200, map[string]string{"Content-Type": "application/x-amz-json-1.0"}, s
	}
	failedInput, _ := json.Marshal(pipeline.WorkflowInput{Source: pipeline.Source{Bucket: "ingest", Key: "inbox/acme/bad.csv", VersionID: "v2"}})
	w := map[string]*wire{}

	// CloudFormation (awsQuery): two pages, the ingest stack without tenant outputs first.
	w["cfn"] = newWire(t, "AWS_ENDPOINT_URL_CLOUDFORMATION", awsQueryName, func(op string, _ *http.Request, body []byte) (int, map[string]string, string) {
		if op != "DescribeStacks" {
			return 400, nil, ""
		}
		v, _ := url.ParseQuery(string(body))
		if v.Get("NextToken") == "" {
			return ok(`<DescribeStacksResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/"><DescribeStacksResult>
<Stacks><member><StackName>TenantPipeline-Ingest</StackName><StackStatus>CREATE_COMPLETE</StackStatus><CreationTime>2026-11-29T10:00:00Z</CreationTime>
<Outputs><member><OutputKey>BucketName</OutputKey><OutputValue>ingest</OutputValue></member></Outputs></member></Stacks>
<NextToken>page-2</NextToken></DescribeStacksResult><ResponseMetadata><RequestId>r1</RequestId></ResponseMetadata></DescribeStacksResponse>`)
		}
		var esc bytes.Buffer
		xmlEscape(&esc, acmeOutput)
		return ok(`<DescribeStacksResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/"><DescribeStacksResult>
<Stacks><member><StackName>TenantPipeline-Tenants-1</StackName><StackStatus>UPDATE_COMPLETE</StackStatus><CreationTime>2026-11-29T10:00:00Z</CreationTime>
<Outputs><member><OutputKey>PipelineTenant61636d65</OutputKey><OutputValue>` + esc.String() + `</OutputValue></member></Outputs></member></Stacks>
</DescribeStacksResult><ResponseMetadata><RequestId>r2</RequestId></ResponseMetadata></DescribeStacksResponse>`)
	})
	// STS (awsQuery).
	w["sts"] = newWire(t, "AWS_ENDPOINT_URL_STS", awsQueryName, func(string, *http.Request, []byte) (int, map[string]string, string) {
		return ok(`<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult>
<Arn>arn:aws:sts::123456789012:assumed-role/Operator/alice</Arn><UserId>AROAEXAMPLE:alice</UserId><Account>123456789012</Account>
</GetCallerIdentityResult><ResponseMetadata><RequestId>r3</RequestId></ResponseMetadata></GetCallerIdentityResponse>`)
	})
	// Lambda (restJson1).
	w["lambda"] = newWire(t, "AWS_ENDPOINT_URL_LAMBDA", restName, func(op string, _ *http.Request, _ []byte) (int, map[string]string, string) {
		if strings.HasPrefix(op, "PUT ") {
			return 202, map[string]string{"Content-Type": "application/json"}, `{"UUID":"esm-acme","State":"Disabling"}`
		}
		return 200, map[string]string{"Content-Type": "application/json"},
			`{"EventSourceMappings":[{"UUID":"esm-acme","State":"Enabled","EventSourceArn":"arn:aws:sqs:eu-west-1:123456789012:acme.fifo","FunctionArn":"arn:aws:lambda:eu-west-1:123456789012:function:acme-controller"}]}`
	})
	// SQS (awsJson1_0).
	w["sqs"] = newWire(t, "AWS_ENDPOINT_URL_SQS", jsonTargetName, func(op string, _ *http.Request, _ []byte) (int, map[string]string, string) {
		switch op {
		case "AmazonSQS.GetQueueAttributes":
			return js(`{"Attributes":{"ApproximateNumberOfMessages":"2","ApproximateNumberOfMessagesNotVisible":"1"}}`)
		case "AmazonSQS.SendMessage":
			return js(`{"MessageId":"m-1","MD5OfMessageBody":"x","SequenceNumber":"1"}`)
		}
		return 400, nil, `{}`
	})
	// Step Functions (awsJson1_0).
	w["sfn"] = newWire(t, "AWS_ENDPOINT_URL_SFN", jsonTargetName, func(op string, _ *http.Request, body []byte) (int, map[string]string, string) {
		var in map[string]any
		json.Unmarshal(body, &in)
		switch op {
		case "AWSStepFunctions.ListExecutions":
			if in["statusFilter"] == "RUNNING" {
				return js(`{"executions":[]}`)
			}
			return js(fmt.Sprintf(`{"executions":[
{"executionArn":%q,"stateMachineArn":"arn:aws:states:eu-west-1:123456789012:stateMachine:acme-files","name":"acme-2","status":"FAILED","startDate":1796032800,"stopDate":1796032860},
{"executionArn":%q,"stateMachineArn":"arn:aws:states:eu-west-1:123456789012:stateMachine:acme-files","name":"acme-1","status":"SUCCEEDED","startDate":1796032200,"stopDate":1796032260}]}`, acme2ARN, acme1ARN))
		case "AWSStepFunctions.DescribeExecution":
			return js(fmt.Sprintf(`{"executionArn":%q,"stateMachineArn":"arn:aws:states:eu-west-1:123456789012:stateMachine:acme-files","name":"acme-2",
"status":"FAILED","startDate":1796032800,"stopDate":1796032860,"input":%q,"error":"ValidationError",
"cause":"{\"errorMessage\":\"inbox/acme/bad.csv line 3: 2 fields, want 3\",\"errorType\":\"ValidationError\"}",
"redriveStatus":"REDRIVABLE"}`, acme2ARN, string(failedInput)))
		case "AWSStepFunctions.GetExecutionHistory":
			split, _ := json.Marshal(map[string]any{"split": pipeline.SplitResult{Records: 150_000, Segments: make([]pipeline.Segment, 2)}})
			return js(fmt.Sprintf(`{"events":[
{"id":1,"type":"ExecutionStarted","timestamp":1796032800},
{"id":6,"type":"TaskStateExited","timestamp":1796032801,"stateExitedEventDetails":{"name":"Split","output":%q}},
{"id":14,"type":"MapIterationSucceeded","timestamp":1796032830,"mapIterationSucceededEventDetails":{"name":"Segments","index":0}},
{"id":22,"type":"MapIterationFailed","timestamp":1796032860,"mapIterationFailedEventDetails":{"name":"Segments","index":1}}]}`, split))
		case "AWSStepFunctions.RedriveExecution":
			return js(`{"redriveDate":1796033400}`)
		}
		return 400, nil, `{}`
	})
	// S3 (restXml, path style).
	w["s3"] = newWire(t, "AWS_ENDPOINT_URL_S3", restName, func(op string, r *http.Request, _ []byte) (int, map[string]string, string) {
		switch {
		case strings.HasPrefix(op, "HEAD /ingest/control/"):
			return 404, nil, ""
		case op == "HEAD /ingest/inbox/acme/bad.csv?versionId=v2":
			return 200, map[string]string{"Last-Modified": "Mon, 30 Nov 2026 11:49:00 GMT", "ETag": `"e"`, "x-amz-version-id": "v2", "Content-Length": "0"}, ""
		case strings.HasPrefix(op, "PUT /ingest/control/acme/skip/acme-2"):
			return 200, map[string]string{"x-amz-version-id": "marker-v1", "ETag": `"m"`}, ""
		case strings.HasPrefix(op, "PUT /ingest/control/acme/requests/"):
			// A control record is created once: pipectl sends If-None-Match: *.
			if r.Header.Get("If-None-Match") != "*" {
				return 400, nil, ""
			}
			return 200, map[string]string{"x-amz-version-id": "record-v1", "ETag": `"r"`}, ""
		case op == "HEAD /ingest/inbox/acme/bad.csv?versionId=bogus":
			// A version id S3 cannot read: 400 (InvalidArgument), without a body on HEAD.
			return 400, map[string]string{"x-amz-request-id": "R400", "x-amz-id-2": "HOST400"}, ""
		}
		return 404, map[string]string{"x-amz-request-id": "R404", "x-amz-id-2": "HOST404"}, ""
	})
	return w
}

// xmlEscape escapes s as XML character data.
func xmlEscape(b *bytes.Buffer, s string) {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
	b.WriteString(r.Replace(s))
}

func TestSDKStatus(t *testing.T) {
	w := stubAWS(t)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"status", "acme", "--json"}, &out, &errOut, awsOps); code != 0 {
		t.Fatalf("got exit %d (%s), want 0", code, errOut.String())
	}
	var rep struct {
		Tenants []struct {
			ID      string `json:"id"`
			Paused  *bool  `json:"paused"`
			Blocked bool   `json:"blocked"`
			Queue   struct {
				Visible, InFlight int
			} `json:"queue"`
			Head struct {
				Key, ExecutionName, Status string
				QueuedSeconds              *float64
			} `json:"head"`
			LastFailure struct {
				Error, Cause, ErrorType, ErrorMessage string
			} `json:"lastFailure"`
		} `json:"tenants"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Tenants) != 1 {
		t.Fatalf("got %s (%v), want one tenant", out.String(), err)
	}
	got := rep.Tenants[0]
	if got.ID != "acme" || got.Paused == nil || *got.Paused || !got.Blocked || got.Queue.Visible != 2 || got.Queue.InFlight != 1 ||
		got.Head.Key != "inbox/acme/bad.csv" || got.Head.ExecutionName != "acme-2" || got.Head.Status != "FAILED" || got.Head.QueuedSeconds == nil ||
		got.LastFailure.Error != "ValidationError" {
		t.Errorf("got %s, want acme blocked at acme-2 with 2 visible and 1 in flight", out.String())
	}
	if f := got.LastFailure; f.ErrorType != "ValidationError" || f.ErrorMessage != "inbox/acme/bad.csv line 3: 2 fields, want 3" ||
		f.Cause != `{"errorMessage":"inbox/acme/bad.csv line 3: 2 fields, want 3","errorType":"ValidationError"}` {
		t.Errorf("got last failure %+v, want the Lambda's error type and message beside Step Functions' error and cause", f)
	}
	for svc, want := range map[string][]string{
		"cfn": {"DescribeStacks", "DescribeStacks"},
		// The controller's environment names its tenant's core system, if any (coreSystems).
		"lambda": {"GET /2015-03-31/event-source-mappings?EventSourceArn=arn%3Aaws%3Asqs%3Aeu-west-1%3A123456789012%3Aacme.fifo&FunctionName=acme-controller",
			"GET /2015-03-31/functions/acme-controller"},
		"sqs": {"AmazonSQS.GetQueueAttributes"},
		// The blocking execution is closed: described once, for its head and its last failure.
		"sfn": {"AWSStepFunctions.ListExecutions", "AWSStepFunctions.ListExecutions", "AWSStepFunctions.DescribeExecution",
			"AWSStepFunctions.GetExecutionHistory"},
		"s3": {"HEAD /ingest/control/acme/skip/acme-2", "HEAD /ingest/inbox/acme/bad.csv?versionId=v2"},
	} {
		if got := w[svc].ops; !slices.Equal(got, want) {
			t.Errorf("%s: got requests %q, want %q", svc, got, want)
		}
	}
	if b := w["sfn"].bodies["AWSStepFunctions.GetExecutionHistory"]; !strings.Contains(b, `"includeExecutionData":true`) || !strings.Contains(b, `"maxResults":1000`) {
		t.Errorf("got GetExecutionHistory %s, want execution data, 1000 events a page", b)
	}
	out.Reset()
	if code := run(context.Background(), []string{"status", "acme"}, &out, &errOut, awsOps); code != 0 || !strings.Contains(out.String(), ">=100000/150000") {
		t.Errorf("got exit %d, %s, want the head's records from the wire history (>=100000/150000)", code, out.String())
	}
	if b := w["sqs"].bodies["AmazonSQS.GetQueueAttributes"]; !strings.Contains(b, `"AttributeNames":["ApproximateNumberOfMessages","ApproximateNumberOfMessagesNotVisible"]`) {
		t.Errorf("got GetQueueAttributes %s, want both counts asked for", b)
	}
}

func TestSDKPauseSkipRedrive(t *testing.T) {
	w := stubAWS(t)
	// acme-2 failed validation: a redrive would fail the same way, so it takes --force.
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"redrive", "acme"}, &out, &errOut, awsOps); code != 1 ||
		!strings.Contains(errOut.String(), "execution acme-2 failed validation (ValidationError: inbox/acme/bad.csv line 3: 2 fields, want 3)") {
		t.Errorf("got exit %d, %q, want 1 and the validation failure named", code, errOut.String())
	}
	if slices.Contains(w["sfn"].ops, "AWSStepFunctions.RedriveExecution") {
		t.Fatalf("got RedriveExecution without --force, want none")
	}
	for _, args := range [][]string{
		{"pause", "acme"},
		{"skip", "acme", "acme-2", "--reason", "fixed upstream"},
		{"redrive", "acme", "--force", "--json"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut, awsOps); code != 0 {
			t.Fatalf("%v: got exit %d (%s), want 0", args, code, errOut.String())
		}
	}
	if b := w["lambda"].bodies["PUT /2015-03-31/event-source-mappings/esm-acme"]; b != `{"Enabled":false}` {
		t.Errorf("got UpdateEventSourceMapping body %q, want {\"Enabled\":false}", b)
	}
	if !slices.Contains(w["sts"].ops, "GetCallerIdentity") {
		t.Errorf("got STS requests %v, want GetCallerIdentity", w["sts"].ops)
	}
	if b := w["s3"].bodies["PUT /ingest/control/acme/skip/acme-2"]; !strings.HasPrefix(b, "fixed upstream\nrequested-by: arn:aws:sts::123456789012:assumed-role/Operator/alice\n") {
		t.Errorf("got marker body %q, want the reason and the caller", b)
	}
	var redrive map[string]any
	json.Unmarshal([]byte(w["sfn"].bodies["AWSStepFunctions.RedriveExecution"]), &redrive)
	if redrive["executionArn"] != acme2ARN || redrive["clientToken"] == nil {
		t.Errorf("got RedriveExecution %v, want %s with a client token", redrive, acme2ARN)
	}
}

// A replay of an object S3 does not have says so, not the SDK's raw 404 with its request and host ids.
func TestSDKReplayMissingObject(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no such key", []string{"replay", "acme", "inbox/acme/none.csv"}, "pipectl: no such object: s3://ingest/inbox/acme/none.csv\n"},
		{"an unknown version", []string{"replay", "acme", "inbox/acme/bad.csv", "--version-id", "3LgTYf0k0FVELBxCi3bfG7dXXGrl7cdc"},
			"pipectl: no such object version: s3://ingest/inbox/acme/bad.csv has no version 3LgTYf0k0FVELBxCi3bfG7dXXGrl7cdc (S3 answers 404); its versions: aws s3api list-object-versions --bucket ingest --prefix inbox/acme/bad.csv\n"},
		{"a malformed version id", []string{"replay", "acme", "inbox/acme/bad.csv", "--version-id", "bogus"},
			"pipectl: version id bogus is not valid for s3://ingest/inbox/acme/bad.csv (S3 answers 400 InvalidArgument); its versions: aws s3api list-object-versions --bucket ingest --prefix inbox/acme/bad.csv\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := stubAWS(t)
			var out, errOut bytes.Buffer
			code := run(context.Background(), tc.args, &out, &errOut, awsOps)
			if code != 1 || errOut.String() != tc.want {
				t.Errorf("got exit %d, %q, want 1, %q", code, errOut.String(), tc.want)
			}
			if slices.Contains(w["sqs"].ops, "AmazonSQS.SendMessage") {
				t.Errorf("got a control message sent, want none")
			}
		})
	}
}

// Without credentials (the env file of --serve not sourced), pipectl says so in one line, before
// any call, and the SDK's IMDS warnings do not reach the terminal. The instance role is still
// asked, through an IMDS stub that has none, as outside EC2.
func TestSDKNoCredentials(t *testing.T) {
	w := stubAWS(t)
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "false")
	imds := newWire(t, "AWS_EC2_METADATA_SERVICE_ENDPOINT", restName, func(string, *http.Request, []byte) (int, map[string]string, string) {
		return 404, nil, "" // no token (IMDSv2), no role
	})
	// The SDK's default logger writes to os.Stderr.
	sdkLog, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = sdkLog
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"status"}, &out, &errOut, awsOps)
	os.Stderr = stderr

	want := "pipectl: no AWS credentials found (environment, profile, SSO, container or instance role); " +
		"for the local stack, source the env file that --serve wrote (make serve: . .build/local/env)\n"
	if code != 1 || errOut.String() != want || out.Len() != 0 {
		t.Errorf("got exit %d, stdout %q, stderr %q, want 1, nothing, %q", code, out.String(), errOut.String(), want)
	}
	if logged, _ := os.ReadFile(sdkLog.Name()); len(logged) != 0 {
		t.Errorf("got SDK output %q, want none", logged)
	}
	if len(w["cfn"].ops) != 0 {
		t.Errorf("got CloudFormation calls %v, want none before credentials", w["cfn"].ops)
	}
	if !slices.Contains(imds.ops, "GET /latest/meta-data/iam/security-credentials/") {
		t.Errorf("got IMDS requests %v, want the instance role asked for", imds.ops)
	}
}

// A sequenced tenant over the wire: status reads the tenant's sequence from its controller's
// TENANT (the one GetFunction status makes anyway), GETs its state and lists its held files a page
// at a time from the keys alone; sequence skip reads the state and the held file of N, then sends
// the control message into the tenant's group.
func TestSDKSequence(t *testing.T) {
	w := stubAWS(t)
	settings, _ := json.Marshal(map[string]any{"id": "acme", "sequence": map[string]any{"pattern": `^(?P<seq>[0-9]+)\.csv$`}})
	fn, _ := json.Marshal(map[string]any{"Configuration": map[string]any{"FunctionName": "acme-controller",
		"Environment": map[string]any{"Variables": map[string]string{pipeline.EnvTenant: string(settings)}}}})
	listESM := w["lambda"].answer
	w["lambda"].answer = func(op string, r *http.Request, body []byte) (int, map[string]string, string) {
		if op == "GET /2015-03-31/functions/acme-controller" {
			return 200, map[string]string{"Content-Type": "application/json"}, string(fn)
		}
		return listESM(op, r, body)
	}
	heldPrefix := "control/acme/sequence/held/"
	page := func(token string, keys ...string) string {
		var b strings.Builder
		b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>ingest</Name><Prefix>` + heldPrefix + `</Prefix>`)
		fmt.Fprintf(&b, "<KeyCount>%d</KeyCount><MaxKeys>1000</MaxKeys>", len(keys))
		if token != "" {
			b.WriteString("<IsTruncated>true</IsTruncated><NextContinuationToken>" + token + "</NextContinuationToken>")
		} else {
			b.WriteString("<IsTruncated>false</IsTruncated>")
		}
		for _, k := range keys {
			b.WriteString("<Contents><Key>" + heldPrefix + k + "</Key><Size>10</Size><LastModified>2026-11-30T11:00:00.000Z</LastModified></Contents>")
		}
		return b.String() + "</ListBucketResult>"
	}
	noSuchKey := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>`
	objects := w["s3"].answer
	w["s3"].answer = func(op string, r *http.Request, body []byte) (int, map[string]string, string) {
		xml := map[string]string{"Content-Type": "application/xml"}
		switch op {
		case "GET /ingest/control/acme/sequence/state.json":
			return 200, map[string]string{"Content-Type": "application/json", "ETag": `"s1"`},
				`{"version":1,"kind":"number","next":7,"gapSince":"2026-11-30T11:00:00Z","updated":"2026-11-30T11:00:00Z"}`
		case "GET /ingest?list-type=2&prefix=control%2Facme%2Fsequence%2Fheld%2F":
			return 200, xml, page("t2", "0000000000000000009.json", "0000000000000000010.json")
		case "GET /ingest?continuation-token=t2&list-type=2&prefix=control%2Facme%2Fsequence%2Fheld%2F":
			return 200, xml, page("", "0000000000000000012.json")
		case "GET /ingest/control/acme/sequence/held/0000000000000000008.json":
			return 404, xml, noSuchKey
		}
		return objects(op, r, body)
	}

	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"status", "acme", "--json"}, &out, &errOut, awsOps); code != 0 {
		t.Fatalf("got exit %d (%s), want 0", code, errOut.String())
	}
	var rep struct {
		Tenants []struct {
			Sequence json.RawMessage `json:"sequence"`
		} `json:"tenants"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Tenants) != 1 {
		t.Fatalf("got %s (%v), want one tenant", out.String(), err)
	}
	var seq bytes.Buffer
	json.Compact(&seq, rep.Tenants[0].Sequence)
	if want := `{"kind":"number","next":7,"last":null,"running":null,"held":[9,10,12],"heldCount":3,"gapSince":"2026-11-30T11:00:00Z"}`; seq.String() != want {
		t.Errorf("got sequence %s, want %s", seq.String(), want)
	}
	wantS3 := []string{"HEAD /ingest/control/acme/skip/acme-2", "HEAD /ingest/inbox/acme/bad.csv?versionId=v2",
		"GET /ingest/control/acme/sequence/state.json",
		"GET /ingest?list-type=2&prefix=control%2Facme%2Fsequence%2Fheld%2F",
		"GET /ingest?continuation-token=t2&list-type=2&prefix=control%2Facme%2Fsequence%2Fheld%2F"}
	if got := w["s3"].ops; !slices.Equal(got, wantS3) {
		t.Errorf("got S3 requests %q, want %q", got, wantS3)
	}
	if got := w["lambda"].ops; len(got) != 2 || got[1] != "GET /2015-03-31/functions/acme-controller" {
		t.Errorf("got Lambda requests %q, want the mappings and one GetFunction", got)
	}

	// SQS answers with the MD5 of the body it took (MD5OfMessageBody), which the SDK checks.
	// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html
	queue := w["sqs"].answer
	w["sqs"].answer = func(op string, r *http.Request, body []byte) (int, map[string]string, string) {
		if op != "AmazonSQS.SendMessage" {
			return queue(op, r, body)
		}
		var in struct{ MessageBody string }
		json.Unmarshal(body, &in)
		return 200, map[string]string{"Content-Type": "application/x-amz-json-1.0"},
			fmt.Sprintf(`{"MessageId":"m-1","MD5OfMessageBody":"%x","SequenceNumber":"1"}`, md5.Sum([]byte(in.MessageBody)))
	}
	w["s3"].ops = nil
	out.Reset()
	if code := run(context.Background(), []string{"sequence", "skip", "acme", "8", "--reason", "file 8 was never sent"}, &out, &errOut, awsOps); code != 0 {
		t.Fatalf("got exit %d (%s), want 0", code, errOut.String())
	}
	var sent struct {
		QueueURL, MessageGroupID, MessageDeduplicationID, MessageBody string
	}
	var raw map[string]string
	json.Unmarshal([]byte(w["sqs"].bodies["AmazonSQS.SendMessage"]), &raw)
	sent.QueueURL, sent.MessageGroupID, sent.MessageDeduplicationID, sent.MessageBody = raw["QueueUrl"], raw["MessageGroupId"], raw["MessageDeduplicationId"], raw["MessageBody"]
	m, err := pipeline.DecodeControl([]byte(sent.MessageBody))
	if err != nil {
		t.Fatalf("got body %q: %v", sent.MessageBody, err)
	}
	if sent.QueueURL != "https://sqs.eu-west-1.amazonaws.com/123456789012/acme.fifo" || sent.MessageGroupID != "acme" || sent.MessageDeduplicationID != m.RequestID ||
		m.Version != 3 || m.Action != pipeline.ControlSequenceSkip || m.Number == nil || *m.Number != 8 || m.Reason != "file 8 was never sent" ||
		m.RequestedBy != "arn:aws:sts::123456789012:assumed-role/Operator/alice" {
		t.Errorf("got SendMessage %+v, want sequence-skip of 8 in acme's group, deduplicated by its request id, audited", sent)
	}
	// Before the message, its control record: the same body, which the controller checks.
	record := "PUT /ingest/control/acme/requests/" + m.RequestID + ".json"
	if want := []string{"GET /ingest/control/acme/sequence/state.json", "GET /ingest/control/acme/sequence/held/0000000000000000008.json", record}; !slices.Equal(w["s3"].ops, want) {
		t.Errorf("got S3 requests %q, want %q", w["s3"].ops, want)
	}
	if got := w["s3"].bodies[record]; got != sent.MessageBody {
		t.Errorf("got control record %q, want the message's body %q", got, sent.MessageBody)
	}
}

// upload reads the bucket's default encryption (GetBucketEncryption), then puts each file with
// If-None-Match: * and, for a customer-managed key, the SSE-KMS headers; S3's 412 to a key that
// exists is told as such. upload-url signs the same headers into its URL, without a call but
// GetBucketEncryption.
func TestSDKUpload(t *testing.T) {
	const key = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	w := stubAWS(t)
	var mu sync.Mutex
	headers := map[string]http.Header{}
	w["s3"].answer = func(op string, r *http.Request, _ []byte) (int, map[string]string, string) {
		mu.Lock()
		headers[op] = r.Header.Clone()
		mu.Unlock()
		switch op {
		case "GET /ingest?encryption=":
			return 200, map[string]string{"Content-Type": "application/xml"}, `<ServerSideEncryptionConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">` +
				`<Rule><ApplyServerSideEncryptionByDefault><SSEAlgorithm>aws:kms</SSEAlgorithm><KMSMasterKeyID>` + key + `</KMSMasterKeyID>` +
				`</ApplyServerSideEncryptionByDefault><BucketKeyEnabled>true</BucketKeyEnabled></Rule></ServerSideEncryptionConfiguration>`
		case "PUT /ingest/inbox/acme/new.csv":
			return 200, map[string]string{"x-amz-version-id": "v1", "ETag": `"e"`}, ""
		case "PUT /ingest/inbox/acme/old.csv":
			return 412, map[string]string{"Content-Type": "application/xml"}, `<Error><Code>PreconditionFailed</Code>` +
				`<Message>At least one of the pre-conditions you specified did not hold</Message><Condition>If-None-Match</Condition></Error>`
		}
		return 404, nil, ""
	}
	files := writeFiles(t, "new.csv", "old.csv")
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"upload", "acme", files[0], files[1]}, &out, &errOut, awsOps); code != 1 ||
		!strings.Contains(errOut.String(), "s3://ingest/inbox/acme/old.csv already exists (S3 answered 412 PreconditionFailed to If-None-Match: *)") {
		t.Errorf("got exit %d, %q; want 1 and old.csv named as existing", code, errOut.String())
	}
	if want := []string{"GET /ingest?encryption=", "PUT /ingest/inbox/acme/new.csv", "PUT /ingest/inbox/acme/old.csv"}; !slices.Equal(w["s3"].ops, want) {
		t.Fatalf("got S3 requests %v, want %v", w["s3"].ops, want)
	}
	for _, op := range w["s3"].ops[1:] {
		h := headers[op]
		for k, want := range map[string]string{"If-None-Match": "*", "X-Amz-Server-Side-Encryption": "aws:kms", "X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id": key} {
			if got := h.Get(k); got != want {
				t.Errorf("%s: got %s %q, want %q", op, k, got, want)
			}
		}
		if !strings.Contains(h.Get("Authorization"), "if-none-match;") {
			t.Errorf("%s: got Authorization %q, want If-None-Match signed", op, h.Get("Authorization"))
		}
	}

	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"upload-url", "acme", "new.csv", "--json"}, &out, &errOut, awsOps); code != 0 {
		t.Fatalf("upload-url: got exit %d, %s", code, errOut.String())
	}
	var up struct{ Headers map[string]string }
	if err := json.Unmarshal(out.Bytes(), &up); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"If-None-Match": "*", "x-amz-server-side-encryption": "aws:kms", "x-amz-server-side-encryption-aws-kms-key-id": key}; !maps.Equal(up.Headers, want) {
		t.Errorf("upload-url: got headers %v, want %v", up.Headers, want)
	}
	if n := len(w["s3"].ops); n != 4 || w["s3"].ops[3] != "GET /ingest?encryption=" {
		t.Errorf("got S3 requests %v, want one GetBucketEncryption more for upload-url", w["s3"].ops)
	}
}
