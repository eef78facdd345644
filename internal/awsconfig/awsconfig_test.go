package awsconfig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
)

// A ranged GetObject answered without a checksum, as S3 answers one, writes no SDK log line
// (run.log and CloudWatch filled with "Response has no supported checksum" DEBUG lines).
func TestS3OptionsRangedGetLogsNothing(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Range", "bytes 0-3/10")
		w.WriteHeader(http.StatusPartialContent)
		io.WriteString(w, "id,n")
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name    string
		options func(*s3.Options)
		wantLog bool
	}{
		{"SDK default (the line this removes)", func(*s3.Options) {}, true},
		{"S3Options", S3Options, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""),
				Logger: logging.NewStandardLogger(&logs), ResponseChecksumValidation: aws.ResponseChecksumValidationWhenSupported} // LoadDefaultConfig's default
			c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint = aws.String(srv.URL); o.UsePathStyle = true }, tc.options)
			out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Range: aws.String("bytes=0-3")})
			if err != nil {
				t.Fatal(err)
			}
			io.ReadAll(out.Body)
			out.Body.Close()
			if got := strings.Contains(logs.String(), "no supported checksum"); got != tc.wantLog {
				t.Errorf("got log %q, want the checksum line logged: %v", logs.String(), tc.wantLog)
			}
		})
	}
}

// A read whose answer is cut short is asked again; a write is not (it may have taken effect).
func TestRetryTruncatedReads(t *testing.T) {
	for _, tc := range []struct {
		name      string
		options   []func(*middleware.Stack) error
		call      func(context.Context, *sfn.Client) error
		wantCalls int
		wantErr   bool
	}{
		{"a read, SDK default", nil, listExecutions, 1, true},
		{"a read", []func(*middleware.Stack) error{RetryTruncatedReads}, listExecutions, 2, false},
		{"a write", []func(*middleware.Stack) error{RetryTruncatedReads}, startExecution, 1, true},
		{"a write, SDK default", nil, startExecution, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body := `{"executions":[],"executionArn":"arn:aws:states:us-east-1:123456789012:execution:m:e","startDate":1}`
				if calls.Add(1) > 1 {
					w.Header().Set("Content-Type", "application/x-amz-json-1.0")
					io.WriteString(w, body)
					return
				}
				// The first answer: a 200 whose body stops at half its length. The request is read
				// first: a socket closed on unread bytes resets the connection, which the SDK retries.
				io.Copy(io.Discard, r.Body)
				conn, buf, err := w.(http.Hijacker).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close()
				fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:len(body)/2])
				buf.Flush()
			}))
			defer srv.Close()
			cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""),
				Retryer: func() aws.Retryer {
					return retry.NewStandard(func(o *retry.StandardOptions) { o.Backoff = retry.BackoffDelayerFunc(noDelay) })
				},
				APIOptions: tc.options}
			err := tc.call(context.Background(), sfn.NewFromConfig(cfg, func(o *sfn.Options) { o.BaseEndpoint = aws.String(srv.URL) }))
			if got := int(calls.Load()); got != tc.wantCalls || (err != nil) != tc.wantErr {
				t.Errorf("got %d calls, error %v; want %d calls, an error %v", got, err, tc.wantCalls, tc.wantErr)
			}
			if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("got %v, want the truncated body's io.ErrUnexpectedEOF", err)
			}
		})
	}
}

func noDelay(int, error) (time.Duration, error) { return 0, nil }

func listExecutions(ctx context.Context, c *sfn.Client) error {
	_, err := c.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: aws.String("arn:aws:states:us-east-1:123456789012:stateMachine:m")})
	return err
}

func startExecution(ctx context.Context, c *sfn.Client) error {
	_, err := c.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: aws.String("arn:aws:states:us-east-1:123456789012:stateMachine:m")})
	return err
}

// Which operations count as reads: by the names AWS gives them; ReceiveMessage changes what it
// returns (the messages go in flight), so it is not one.
func TestIsRead(t *testing.T) {
	for op, want := range map[string]bool{
		"ListExecutions": true, "DescribeStacks": true, "GetObject": true, "HeadObject": true, "GetInsightRuleReport": true,
		"BatchGetItem": true, "Query": true, "Scan": true,
		"StartExecution": false, "PutObject": false, "SendMessage": false, "ReceiveMessage": false, "UpdateEventSourceMapping": false,
		"BatchWriteItem": false, "QueryX": false, "": false,
	} {
		if got := isRead(op); got != want {
			t.Errorf("isRead(%q) = %v, want %v", op, got, want)
		}
	}
}
