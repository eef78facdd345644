package emulate

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"time"
)

// SQSLongPoll makes fauxqs's long polling answer as SQS's does: "Unless the connection times out,
// the response to the ReceiveMessage request contains at least one of the available messages"
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-short-and-long-polling.html).
// fauxqs wakes every waiting ReceiveMessage of a queue whenever one of its messages changes (a
// send into a FIFO group that is in flight, a visibility change, a message another poller takes)
// and answers each that then finds nothing at once, empty. With Lambda's five pollers on a queue
// that made about fifteen billed receives per file where SQS bills two or three (the receives
// that return the file's message, and an idle poller's one per 20 s), and the cost figures
// counted them. So a ReceiveMessage with WaitTimeSeconds above 0 that comes back empty before its
// wait is over is asked again for the rest of its wait (rounded up to a whole second, the
// parameter's unit), inside this handler: its caller, and the API counter and the meter in front
// of it, see one call. Every other call, and an answer with messages or an error, passes as it is.
func SQSLongPoll(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != "AmazonSQS.ReceiveMessage" {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var in map[string]any
		wait, _ := waitSeconds(body, &in)
		if wait <= 0 {
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
			return
		}
		until := time.Now().Add(time.Duration(wait) * time.Second)
		for {
			rec := &recorder{header: http.Header{}, code: http.StatusOK}
			call := r.Clone(r.Context())
			call.Body, call.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			next.ServeHTTP(rec, call)
			left := time.Until(until)
			if rec.code != http.StatusOK || left <= 0 || r.Context().Err() != nil || hasMessages(rec.body.Bytes()) {
				rec.replay(w)
				return
			}
			in["WaitTimeSeconds"] = math.Ceil(left.Seconds())
			body, _ = json.Marshal(in)
		}
	})
}

// waitSeconds is the request's WaitTimeSeconds (0 when it names none), and the request decoded.
func waitSeconds(body []byte, in *map[string]any) (float64, error) {
	if err := json.Unmarshal(body, in); err != nil {
		return 0, err
	}
	w, _ := (*in)["WaitTimeSeconds"].(float64)
	return w, nil
}

// hasMessages reports whether a ReceiveMessage answer holds a message.
func hasMessages(body []byte) bool {
	var out struct{ Messages []json.RawMessage }
	return json.Unmarshal(body, &out) == nil && len(out.Messages) > 0
}

// recorder keeps an answer until it is known to be the one to send.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(code int)        { r.code = code }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) Flush()                      {}

// replay sends the kept answer.
func (r *recorder) replay(w http.ResponseWriter) {
	for k, v := range r.header {
		w.Header()[k] = v
	}
	w.WriteHeader(r.code)
	w.Write(r.body.Bytes())
}
