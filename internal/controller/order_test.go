package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/s3event"
)

const (
	ddbTenantJSON = `{"id":"acme","format":"csv","encoding":"utf-8","chunkSize":100,"maxFieldBytes":65536,"dynamodb":{"key":["id"],"table":"acme-items"}}`
	orderObject   = testBucket + "/control/acme/order.json"
)

// testStartMicros is the order a tenant without a counter gets at testStart: the clock in µs.
var testStartMicros = testStart.UnixMicro()

func ddbEnv() map[string]string { return map[string]string{pipeline.EnvTenant: ddbTenantJSON} }

func (r *rig) setClock(t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now = t
}

// deliver hands the handler one message and returns whether it was released.
func (r *rig) deliver(t *testing.T, id, body string, receives int) bool {
	t.Helper()
	resp, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message(id, body, receives)}})
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.BatchItemFailures) == 0
}

// storedOrder is the counter's order, 0 when there is none.
func (r *rig) storedOrder(t *testing.T) int64 {
	t.Helper()
	r.s3.mu.Lock()
	defer r.s3.mu.Unlock()
	b, ok := r.s3.objects[orderObject]
	if !ok {
		return 0
	}
	var st orderState
	if err := json.Unmarshal([]byte(b), &st); err != nil {
		t.Fatalf("order counter %q: %v", b, err)
	}
	return st.Order
}

func counterBody(order int64) string {
	return fmt.Sprintf(`{"version":1,"order":%d,"executionName":"x","writtenAt":"2024-05-01T08:00:00Z"}`, order)
}

// Each new file of a DynamoDB tenant takes the next order, which grows even when the clock does not;
// a delivery that finds its execution takes none.
func TestOrderIncreasesPerTenant(t *testing.T) {
	r := newRig(t, ddbEnv())
	files := []struct{ msg, event, key string }{{"m1", evID1, "inbox/acme/a.csv"}, {"m2", evID2, "inbox/acme/b.csv"}, {"m3", evID3, "inbox/acme/c.csv"}}
	var got []int64
	for i, f := range files {
		if i == 2 {
			r.setClock(testStart.Add(time.Hour)) // the clock jumps: the order follows it
		}
		r.deliver(t, f.msg, eventBody(t, f.event, f.key), 1)
		got = append(got, r.sfn.input(t, testExecPrefix+f.event).Source.Order)
	}
	want := []int64{testStartMicros, testStartMicros + 1, testStart.Add(time.Hour).UnixMicro()}
	if !slices.Equal(got, want) {
		t.Errorf("got orders %v, want %v", got, want)
	}
	if got := r.storedOrder(t); got != want[2] {
		t.Errorf("got stored order %d, want %d", got, want[2])
	}

	// The first file comes back while its execution runs: no new order, the counter unchanged.
	puts := r.s3.puts[orderObject]
	r.deliver(t, "m1", eventBody(t, evID1, "inbox/acme/a.csv"), 2)
	if r.s3.puts[orderObject] != puts || r.storedOrder(t) != want[2] {
		t.Errorf("got %d counter writes and order %d after a redelivery, want %d and %d", r.s3.puts[orderObject], r.storedOrder(t), puts, want[2])
	}
	if got := r.sfn.input(t, arn1).Source.Order; got != want[0] {
		t.Errorf("got the first file's order %d after its redelivery, want %d", got, want[0])
	}
}

// A tenant that moves to another queue (another stack, tier or pool) keeps counting up: the counter
// is per tenant, in the ingest bucket, and the new controller's clock may even be behind.
func TestOrderSurvivesATenantMove(t *testing.T) {
	old := newRig(t, ddbEnv())
	moved := newRig(t, map[string]string{pipeline.EnvTenant: ddbTenantJSON, pipeline.EnvQueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/pool-7.fifo"})
	moved.sqs.url = "https://sqs.eu-west-1.amazonaws.com/123456789012/pool-7.fifo"
	moved.s3 = old.s3 // one ingest bucket
	moved.h.s3 = old.s3
	moved.setClock(testStart.Add(-time.Minute)) // the new controller's clock is a minute behind

	steps := []struct {
		r     *rig
		event string
	}{{old, evID1}, {moved, evID2}, {old, evID3}, {moved, "9c4f5d6e-3a7b-4c8d-be9f-a0b1c2d3e4f5"}}
	var got []int64
	for i, s := range steps {
		s.r.deliver(t, fmt.Sprintf("m%d", i+1), eventBody(t, s.event, fmt.Sprintf("inbox/acme/f%d.csv", i)), 1)
		got = append(got, s.r.sfn.input(t, testExecPrefix+s.event).Source.Order)
	}
	if want := []int64{testStartMicros, testStartMicros + 1, testStartMicros + 2, testStartMicros + 3}; !slices.Equal(got, want) {
		t.Errorf("got orders %v through the old and the new queue, want %v", got, want)
	}
}

// The counter object: missing, hidden by a 403, changed by another writer, unreadable; and a
// message body that cannot raise the order.
func TestOrderCounter(t *testing.T) {
	farFuture, err := json.Marshal(s3event.ObjectCreated(evID1, time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), testBucket, s3event.Object{
		Key: key1, Size: 1234, ETag: "9b2cf535f27731c974343645a3985328", VersionID: "v-6f1c2a3b", Sequencer: "FFFFFFFFFFFFFFFFFF",
	}))
	if err != nil {
		t.Fatal(err)
	}
	denied := &smithy.GenericAPIError{Code: "AccessDenied", Message: "Access Denied"}
	tests := []struct {
		name        string
		setup       func(r *rig)
		body        string
		wantOrder   int64 // the execution's order; 0: no execution started
		wantStored  int64 // the counter afterwards
		wantErrors  int
		wantLogText string
	}{
		{name: "missing (404) starts from the clock", wantOrder: testStartMicros, wantStored: testStartMicros},
		{
			name:      "403 on the counter's key is missing",
			setup:     func(r *rig) { r.s3.keyGetErrs[orderObject] = []error{denied} },
			wantOrder: testStartMicros, wantStored: testStartMicros,
		},
		{
			name:      "a stored order above the clock is counted up",
			setup:     func(r *rig) { r.s3.objects[orderObject] = counterBody(testStartMicros + 500) },
			wantOrder: testStartMicros + 501, wantStored: testStartMicros + 501,
		},
		{
			name: "a 403 that hides an existing counter never overwrites it",
			setup: func(r *rig) {
				r.s3.objects[orderObject] = counterBody(testStartMicros + 500)
				r.s3.keyGetErrs[orderObject] = []error{denied, denied, denied}
			},
			wantStored: testStartMicros + 500, wantErrors: 1, wantLogText: "changed during every attempt",
		},
		{
			name: "another writer came first: read again",
			setup: func(r *rig) {
				r.s3.objects[orderObject] = counterBody(testStartMicros + 10)
				once := false
				r.s3.beforePut = func(k string) {
					if k == orderObject && !once {
						once = true
						r.s3.mu.Lock()
						r.s3.objects[orderObject] = counterBody(testStartMicros + 20)
						r.s3.mu.Unlock()
					}
				}
			},
			wantOrder: testStartMicros + 21, wantStored: testStartMicros + 21,
		},
		{
			name:       "an unreadable counter holds the file",
			setup:      func(r *rig) { r.s3.objects[orderObject] = `{"version":1,"order":"12"}` },
			wantErrors: 1, wantLogText: "delete it to start again from the clock",
		},
		{
			name:       "the counter cannot be written: held, nothing started",
			setup:      func(r *rig) { r.s3.keyPutErrs[orderObject] = []error{denied} },
			wantErrors: 1, wantLogText: "put s3://ingest/control/acme/order.json",
		},
		{
			name:      "a far-future event time and sequencer do not raise the order",
			body:      string(farFuture),
			wantOrder: testStartMicros, wantStored: testStartMicros,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, ddbEnv())
			if tt.setup != nil {
				tt.setup(r)
			}
			before := r.s3.objects[orderObject]
			body := tt.body
			if body == "" {
				body = eventBody(t, evID1, key1)
			}
			r.deliver(t, "m1", body, 1)
			if tt.wantOrder == 0 {
				if len(r.sfn.created) != 0 {
					t.Errorf("got executions %v, want none", r.sfn.created)
				}
				if tt.wantStored == 0 && r.s3.objects[orderObject] != before {
					t.Errorf("got counter %q, want it unchanged (%q)", r.s3.objects[orderObject], before)
				}
			} else if got := r.sfn.input(t, arn1).Source.Order; got != tt.wantOrder {
				t.Errorf("got order %d, want %d", got, tt.wantOrder)
			}
			if tt.wantStored != 0 {
				if got := r.storedOrder(t); got != tt.wantStored {
					t.Errorf("got stored order %d, want %d", got, tt.wantStored)
				}
			}
			if got := r.countLevel(t, "ERROR"); got != tt.wantErrors {
				t.Errorf("got %d ERROR lines, want %d; logs:\n%v", got, tt.wantErrors, r.logs(t))
			}
			if tt.wantLogText != "" {
				l := r.findLog(t, "ERROR", "message kept")
				if e, _ := l["error"].(string); !strings.Contains(e, tt.wantLogText) {
					t.Errorf("got error %q, want one containing %q", e, tt.wantLogText)
				}
			}
		})
	}
}

// A crash between taking an order and StartExecution leaves a gap, never a repeat; a lost start
// response is found by the next delivery, which takes no new order.
func TestOrderAcrossACrash(t *testing.T) {
	t.Run("start fails after the order was taken", func(t *testing.T) {
		r := newRig(t, ddbEnv())
		r.sfn.startErrs = []error{errors.New("read tcp: connection reset by peer")}
		if r.deliver(t, "m1", eventBody(t, evID1, key1), 1) {
			t.Fatal("got the message released, want it kept")
		}
		if got := r.storedOrder(t); got != testStartMicros {
			t.Fatalf("got stored order %d, want %d", got, testStartMicros)
		}
		r.deliver(t, "m1", eventBody(t, evID1, key1), 2)
		if got := r.sfn.input(t, arn1).Source.Order; got != testStartMicros+1 {
			t.Errorf("got order %d after the retry, want %d (a gap, not a repeat)", got, testStartMicros+1)
		}
	})
	t.Run("start response lost", func(t *testing.T) {
		r := newRig(t, ddbEnv())
		r.sfn.loseStartResponse = true
		r.deliver(t, "m1", eventBody(t, evID1, key1), 1)
		r.sfn.loseStartResponse = false
		r.deliver(t, "m1", eventBody(t, evID1, key1), 2)
		if got, stored := r.sfn.input(t, arn1).Source.Order, r.storedOrder(t); got != testStartMicros || stored != testStartMicros {
			t.Errorf("got order %d, stored %d, want both %d", got, stored, testStartMicros)
		}
		if len(r.sfn.created) != 1 {
			t.Errorf("got executions %v, want one", r.sfn.created)
		}
	})
}

// Tenants without the DynamoDB sink take no order and never touch the counter.
func TestOrderOnlyForDynamoDBTenants(t *testing.T) {
	r := newRig(t, nil)
	r.deliver(t, "m1", eventBody(t, evID1, key1), 1)
	if got := r.sfn.input(t, arn1).Source.Order; got != 0 {
		t.Errorf("got order %d, want 0", got)
	}
	if _, ok := r.s3.objects[orderObject]; ok {
		t.Errorf("got an order counter, want none")
	}
}
