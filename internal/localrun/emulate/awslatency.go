package emulate

import (
	"net/http"
	"sync/atomic"
	"time"
)

// AWSLatency is a fixed time added to every S3, SQS and DynamoDB call of the Lambda processes, the
// round trip a call to the AWS service takes over the network, where the emulators answer on
// loopback in about a millisecond. With it a figure shows what a design's concurrency buys: calls
// that wait on the network overlap across invocations, where locally they would compete for the
// machine's cores. It delays only the functions' own calls: the harness's and the event source
// mappings' (Lambda's pollers, on AWS) go through the same counted endpoints undelayed. Zero, the
// default, adds nothing.
type AWSLatency struct{ d atomic.Int64 }

// Set makes every call from now on take d longer.
func (l *AWSLatency) Set(d time.Duration) { l.d.Store(int64(d)) }

// Wrap delays each request by the latency in force when it arrives; a request whose caller gives up
// meanwhile is dropped.
func (l *AWSLatency) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if d := time.Duration(l.d.Load()); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-req.Context().Done():
				t.Stop()
				return
			}
		}
		next.ServeHTTP(w, req)
	})
}
