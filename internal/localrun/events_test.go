package localrun

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// The X-Ray trace header's format: Root=1-<8 hex digits of time>-<24 hex digits>, then optional
// Parent and Sampled (https://docs.aws.amazon.com/xray/latest/devguide/xray-concepts.html#xray-concepts-tracingheader).
func TestInvocationOfTrace(t *testing.T) {
	for _, tc := range []struct{ header, want string }{
		{"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1", "5759e988bd862e3fe1be46a994272793"},
		{"Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=0", "5759e988bd862e3fe1be46a994272793"},
		{"Sampled=0;Root=1-5759e988-bd862e3fe1be46a994272793", "5759e988bd862e3fe1be46a994272793"},
		{"", ""},
		{"Root=1-5759e988", ""},
		{"Root=2-5759e988-bd862e3fe1be46a994272793", ""},
	} {
		t.Run(tc.header, func(t *testing.T) {
			if got := invocationOfTrace(tc.header); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// Lambda starts an SQS event source mapping with five concurrent batches and, on a FIFO queue,
// scales to the active message groups; a reserved concurrency or MaximumConcurrency caps it
// (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html).
func TestMappingScale(t *testing.T) {
	for _, tc := range []struct {
		reserved, maxConc int
		want              pollerScale
	}{
		{0, 0, pollerScale{5, 1000}}, // no reservation: the account's unreserved concurrency
		{1, 0, pollerScale{1, 1}},    // the opt-in reserved concurrency 1
		{3, 0, pollerScale{3, 3}},
		{10, 0, pollerScale{5, 10}},
		{0, 2, pollerScale{2, 2}},
		{4, 2, pollerScale{2, 2}},
		{0, 10, pollerScale{5, 10}},
		{4, 10, pollerScale{4, 4}},
	} {
		if got := mappingScale(tc.reserved, tc.maxConc); got != tc.want {
			t.Errorf("mappingScale(%d, %d): got %+v, want %+v", tc.reserved, tc.maxConc, got, tc.want)
		}
	}
}

// The pipeline's Step Functions endpoint answers a throttled call as Step Functions does: HTTP 400,
// ThrottlingException (https://docs.aws.amazon.com/step-functions/latest/apireference/CommonErrors.html),
// which the SDK reports as an API error of that code.
func TestSFNThrottle(t *testing.T) {
	stub := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Write([]byte(`{"executionArn":"arn:aws:states:us-east-1:000000000000:execution:m:x","startDate":1}`))
	})
	newClient := func(t *testing.T, th SFNThrottle) (*Cloud, *sfn.Client) {
		r := &Cloud{Counter: &emulate.APICounter{}, opts: cloudOptions{sfn: StepFunctionsOptions{Throttle: th}}}
		srv := httptest.NewServer(r.sfnGate(stub))
		t.Cleanup(srv.Close)
		c := sfn.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""), RetryMaxAttempts: 1},
			func(o *sfn.Options) { o.BaseEndpoint = aws.String(srv.URL) })
		return r, c
	}
	ctx := context.Background()
	arn := "arn:aws:states:us-east-1:000000000000:execution:m:x"

	t.Run("every DescribeExecution", func(t *testing.T) {
		r, c := newClient(t, SFNThrottle{DescribeExecution: 1})
		_, err := c.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: &arn})
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "ThrottlingException" {
			t.Fatalf("got %v, want a ThrottlingException", err)
		}
		var re *smithyhttp.ResponseError
		if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusBadRequest {
			t.Errorf("HTTP status: got %v, want 400", err)
		}
		if _, err := c.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: aws.String("arn:aws:states:us-east-1:000000000000:stateMachine:m")}); err != nil {
			t.Errorf("StartExecution with no throttle: got %v, want success", err)
		}
		if got := r.StatusEventCounts().Throttled["DescribeExecution"]; got != 1 {
			t.Errorf("throttled DescribeExecution: got %d, want 1", got)
		}
		if got := r.Counter.Snapshot()["stepfunctions"]["DescribeExecution"]; got != 1 {
			t.Errorf("counted DescribeExecution calls: got %d, want 1 (a refused call is a call)", got)
		}
	})
	t.Run("a fifth of 1000", func(t *testing.T) {
		r, c := newClient(t, SFNThrottle{StartExecution: 0.2, Seed: 9})
		for range 1000 {
			c.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: aws.String("arn:aws:states:us-east-1:000000000000:stateMachine:m")})
		}
		if got := r.StatusEventCounts().Throttled["StartExecution"]; got < 150 || got > 250 {
			t.Errorf("throttled StartExecution: got %d of 1000, want about 200", got)
		}
	})
	t.Run("StartExecution attributed by trace id", func(t *testing.T) {
		r := &Cloud{Counter: &emulate.APICounter{}}
		srv := httptest.NewServer(r.sfnGate(stub))
		defer srv.Close()
		for _, trace := range []string{"Root=1-00000001-aaaaaaaaaaaaaaaaaaaaaaaa;Sampled=0", "Root=1-00000001-aaaaaaaaaaaaaaaaaaaaaaaa;Sampled=0", "Root=1-00000002-bbbbbbbbbbbbbbbbbbbbbbbb;Sampled=0"} {
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
			req.Header.Set("X-Amz-Target", "AWSStepFunctions.StartExecution")
			req.Header.Set("X-Amzn-Trace-Id", trace)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		if got := r.startsOf("00000001aaaaaaaaaaaaaaaaaaaaaaaa"); got != 2 {
			t.Errorf("starts of the first invocation: got %d, want 2", got)
		}
		if got := r.startsOf("00000002bbbbbbbbbbbbbbbbbbbbbbbb"); got != 1 {
			t.Errorf("starts of the second invocation: got %d, want 1", got)
		}
	})
}

// An asynchronous invocation that ends in a function error is retried twice: three attempts in all
// (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html); one that
// succeeds is not retried.
func TestInvokeAsyncRetries(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		do   string
		want int64
	}{
		{"answer", 1},
		{"exit", 3}, // the process dies without a response: a function error (Unhandled)
	} {
		t.Run(tc.do, func(t *testing.T) {
			f := &emulate.Function{Name: "fn", ARN: "arn:aws:lambda:us-east-1:000000000000:function:fn", Binary: self,
				Env: []string{"LOCALRUN_TEST_RUNTIME=1"}, Timeout: 5 * time.Second, Logs: io.Discard}
			defer f.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := &Cloud{ctx: ctx, logs: io.Discard}
			r.invokeAsync(f, []byte(`{"do":"`+tc.do+`"}`))
			r.status().async.Wait()
			if got := f.Invocations(); got != tc.want {
				t.Errorf("invocations: got %d, want %d", got, tc.want)
			}
			if r.busy != 0 {
				t.Errorf("busy after the retries: got %d, want 0", r.busy)
			}
		})
	}
}

func TestFormEncodeKey(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		// The example of S3's event message structure page.
		{"red flower.jpg", "red+flower.jpg"},
		{"inbox/acme/a b.csv", "inbox/acme/a+b.csv"},
		{"inbox/acme/a+b.csv", "inbox/acme/a%2Bb.csv"},
		{"inbox/acme/100%.csv", "inbox/acme/100%25.csv"},
		{"inbox/acme/注文.csv", "inbox/acme/%E6%B3%A8%E6%96%87.csv"},
	} {
		if got := FormEncodeKey(tc.key); got != tc.want {
			t.Errorf("FormEncodeKey(%q): got %q, want %q", tc.key, got, tc.want)
		}
	}
}
