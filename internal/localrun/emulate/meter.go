package emulate

// Billed requests of S3, SQS and API Gateway, by the class AWS prices them in and by what they touched (an
// object key, a queue URL), so that a figure can attribute them to a tenant. The APICounter counts
// calls by operation; this meter counts what the bill counts.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// Billed request classes.
const (
	// S3 PUT, COPY, POST and LIST requests (https://aws.amazon.com/s3/pricing/).
	ClassS3Tier1 = "s3.tier1"
	// S3 GET and every other request but DELETE, which is free.
	ClassS3Tier2 = "s3.tier2"
	// SQS requests, each 64 KB chunk of a payload one request (https://aws.amazon.com/sqs/pricing/).
	ClassSQS = "sqs"
	// API Gateway REST API requests, scoped by the object key of the event they carry
	// (https://aws.amazon.com/api-gateway/pricing/).
	ClassAPIGateway = "apigateway"
)

// RequestMeter counts billed requests by class and scope.
type RequestMeter struct {
	mu sync.Mutex
	m  map[string]map[string]int64
}

// Add counts n billed requests of a class on a scope.
func (m *RequestMeter) Add(class, scope string, n int64) {
	if n == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string]map[string]int64{}
	}
	if m.m[class] == nil {
		m.m[class] = map[string]int64{}
	}
	m.m[class][scope] += n
}

// Sum adds up a class over the scopes for which in is true.
func (m *RequestMeter) Sum(class string, in func(scope string) bool) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for scope, v := range m.m[class] {
		if in(scope) {
			n += v
		}
	}
	return n
}

// s3Class is the billed class of an S3 operation (s3Operation); "" for a free one.
func s3Class(op string) string {
	switch op {
	case "PutObject", "CopyObject", "ListObjects", "MultipartPOST", "MultipartPUT", "BucketPUT", "BucketPOST":
		return ClassS3Tier1
	case "DeleteObject", "MultipartDELETE", "BucketDELETE":
		return ""
	}
	return ClassS3Tier2
}

// sqsChunk is the payload size SQS bills as one request.
const sqsChunk = 64 * 1024

// sqsBilledRequests is how many requests SQS bills for one API call: one per started 64 KB chunk of
// its payload, at least one. The payload is the larger of the request and the response body (a
// SendMessage carries its message in the request, a ReceiveMessage in the response).
func sqsBilledRequests(requestBytes, responseBytes int64) int64 {
	n := max(requestBytes, responseBytes)
	return max(1, (n+sqsChunk-1)/sqsChunk)
}

// MeterSQS counts the billed requests of every SQS call that passes, by its QueueUrl, then hands
// the call to next.
func MeterSQS(next http.Handler, m *RequestMeter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var in struct{ QueueUrl string }
		json.Unmarshal(body, &in)
		cw := &countingWriter{ResponseWriter: w}
		next.ServeHTTP(cw, r)
		m.Add(ClassSQS, in.QueueUrl, sqsBilledRequests(int64(len(body)), cw.n))
	})
}

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (w *countingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

// Flush keeps the proxy's streaming working through the wrapper.
func (w *countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
