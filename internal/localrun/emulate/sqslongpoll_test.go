package emulate

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSQSLongPoll: an early empty answer to a long poll is asked again for the rest of the wait,
// and the caller, the counter and the meter see one call; every other answer passes at once.
func TestSQSLongPoll(t *testing.T) {
	const message = `{"Messages":[{"MessageId":"m"}]}`
	for _, tc := range []struct {
		name    string
		target  string
		body    string
		empties int  // empty answers before the one with a message
		timeout bool // an empty answer comes when its wait is over, as SQS's does
		wantOut string
		wantIn  int // calls that reach the emulator
	}{
		{"two early empty answers, then a message", "AmazonSQS.ReceiveMessage", `{"QueueUrl":"q","WaitTimeSeconds":20}`, 2, false, message, 3},
		{"a message at once", "AmazonSQS.ReceiveMessage", `{"QueueUrl":"q","WaitTimeSeconds":20}`, 0, false, message, 1},
		{"an empty answer when the wait is over", "AmazonSQS.ReceiveMessage", `{"QueueUrl":"q","WaitTimeSeconds":1}`, 1, true, `{}`, 1},
		{"a short poll is answered as it is", "AmazonSQS.ReceiveMessage", `{"QueueUrl":"q"}`, 1, false, `{}`, 1},
		{"WaitTimeSeconds 0 is a short poll", "AmazonSQS.ReceiveMessage", `{"QueueUrl":"q","WaitTimeSeconds":0}`, 1, false, `{}`, 1},
		{"another operation passes", "AmazonSQS.DeleteMessage", `{"QueueUrl":"q","ReceiptHandle":"h"}`, 1, false, `{}`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var waits []float64
			emulator := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				var in struct{ WaitTimeSeconds float64 }
				json.Unmarshal(b, &in)
				mu.Lock()
				waits = append(waits, in.WaitTimeSeconds)
				n := len(waits)
				mu.Unlock()
				if n <= tc.empties {
					if tc.timeout {
						time.Sleep(time.Duration(in.WaitTimeSeconds * float64(time.Second)))
					}
					io.WriteString(w, `{}`)
					return
				}
				io.WriteString(w, message)
			})
			counter, meter := &APICounter{}, &RequestMeter{}
			srv := httptest.NewServer(MeterSQS(Counting(SQSLongPoll(emulator), "sqs", counter), meter))
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(tc.body))
			req.Header.Set("X-Amz-Target", tc.target)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got := string(out); got != tc.wantOut {
				t.Errorf("got answer %s, want %s", got, tc.wantOut)
			}
			if got := counter.Total("sqs"); got != 1 {
				t.Errorf("got %d calls counted, want 1", got)
			}
			if got := meter.Sum(ClassSQS, func(string) bool { return true }); got != 1 {
				t.Errorf("got %d billed requests, want 1", got)
			}
			if len(waits) != tc.wantIn {
				t.Errorf("got %d calls at the emulator, want %d", len(waits), tc.wantIn)
			}
			for i := 1; i < len(waits); i++ {
				if waits[i] > waits[0] || waits[i] < 1 {
					t.Errorf("call %d waited %v s after a first wait of %v s, want the rest of the wait, at least 1 s", i+1, waits[i], waits[0])
				}
			}
		})
	}
}
