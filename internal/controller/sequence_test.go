package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/sequence"
	"github.com/example/tenantpipeline/internal/testfake"
)

// seqRig drives a sequenced tenant's Handler as its FIFO queue would: the files' group delivers
// its head, one message at a time, and a kept message stays the head; the tick's group is
// delivered only when the test says. Every execution the controller starts succeeds before the
// next delivery.
type seqRig struct {
	*rig
	t       *testing.T
	files   []events.SQSMessage // the files' group, head first
	ticks   []events.SQSMessage // the tick's group
	taken   int                 // messages of fakeSQS.sent moved into the groups
	n       int
	started []string // the keys of the executions started, in order
}

func newSeqRig(t *testing.T, sequenceJSON string) *seqRig {
	t.Helper()
	r := newRig(t, map[string]string{
		pipeline.EnvTenant: `{"id":"acme","format":"csv","encoding":"utf-8","chunkSize":100,"maxFieldBytes":65536,"sequence":` + sequenceJSON + `}`,
	})
	return &seqRig{rig: r, t: t}
}

func (r *seqRig) message(body, group string) events.SQSMessage {
	r.n++
	m := message(fmt.Sprintf("m%03d", r.n), body, 1)
	m.Attributes["MessageGroupId"] = group
	m.Attributes["SentTimestamp"] = strconv.FormatInt(r.clock().UnixMilli(), 10)
	return m
}

// upload queues a new file's event at the end of the files' group.
func (r *seqRig) upload(keys ...string) {
	for _, k := range keys {
		id := fmt.Sprintf("%08d-0000-4000-8000-000000000000", r.n+1)
		r.files = append(r.files, r.message(eventBody(r.t, id, "inbox/acme/"+k), "acme"))
	}
}

// collect moves what the controller sent into the groups.
func (r *seqRig) collect() {
	r.sqs.mu.Lock()
	sent := slices.Clone(r.sqs.sent[r.taken:])
	r.taken = len(r.sqs.sent)
	r.sqs.mu.Unlock()
	for _, in := range sent {
		m := r.message(aws.ToString(in.MessageBody), aws.ToString(in.MessageGroupId))
		if strings.HasSuffix(aws.ToString(in.MessageGroupId), pipeline.TickGroupSuffix) {
			r.ticks = append(r.ticks, m)
		} else {
			r.files = append(r.files, m)
		}
	}
}

func (r *seqRig) deliver(group *[]events.SQSMessage) {
	r.t.Helper()
	head := (*group)[0]
	head.Attributes["ApproximateReceiveCount"] = strconv.Itoa(receiveCount(head))
	resp, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{head}})
	if err != nil {
		r.t.Fatalf("Handle: %v", err)
	}
	if len(resp.BatchItemFailures) == 0 {
		*group = (*group)[1:]
	} else {
		(*group)[0].Attributes["ApproximateReceiveCount"] = strconv.Itoa(receiveCount(head) + 1)
	}
	r.collect()
}

// drain delivers the files' group until it is empty, every started execution succeeding.
func (r *seqRig) drain() {
	r.t.Helper()
	for range 5000 {
		if len(r.files) == 0 {
			return
		}
		r.deliver(&r.files)
		r.sfn.mu.Lock()
		created := slices.Clone(r.sfn.created)
		r.sfn.mu.Unlock()
		for _, arn := range created[len(r.started):] {
			r.started = append(r.started, r.sfn.input(r.t, arn).Source.Key)
		}
		for _, arn := range created {
			if r.sfn.execs[arn].status == sfntypes.ExecutionStatusRunning {
				r.sfn.set(arn, sfntypes.ExecutionStatusSucceeded)
			}
		}
	}
	r.t.Fatalf("the files' group did not drain: %d left", len(r.files))
}

func (r *seqRig) tick() {
	r.t.Helper()
	if len(r.ticks) == 0 {
		r.t.Fatal("no tick is out")
	}
	r.deliver(&r.ticks)
}

func (r *seqRig) state() sequence.State {
	r.t.Helper()
	var st sequence.State
	if err := json.Unmarshal([]byte(r.s3.objects[testBucket+"/"+sequence.StateKey(pipeline.SiloOwner("acme"))]), &st); err != nil {
		r.t.Fatalf("state: %v", err)
	}
	return st
}

func (r *seqRig) held() []string {
	var hs []string
	for k := range r.s3.objects {
		if rest, ok := strings.CutPrefix(k, testBucket+"/"+sequence.HeldPrefix(pipeline.SiloOwner("acme"))); ok {
			hs = append(hs, sequence.ValueOfKey(rest))
		}
	}
	slices.Sort(hs)
	return hs
}

// refusals are the REFUSED summaries written, by key: their refusal.
func (r *seqRig) refusals() map[string]string {
	out := map[string]string{}
	for k, body := range r.s3.objects {
		if !strings.HasSuffix(k, "/"+results.SummaryFile) {
			continue
		}
		var s results.Summary
		if json.Unmarshal([]byte(body), &s) == nil && s.Status == results.StatusRefused {
			out[strings.TrimPrefix(s.Source.Key, "inbox/acme/")] = s.Refusal
		}
	}
	return out
}

func (r *seqRig) startedNames() []string {
	var out []string
	for _, k := range r.started {
		out = append(out, strings.TrimPrefix(k, "inbox/acme/"))
	}
	return out
}

const numberSequence = `{"pattern":"^orders-(?P<seq>[0-9]+)\\.csv$","kind":"number","start":1,"gapTimeout":"1h","onGap":"hold"}`

// Shuffled arrivals run in the sequence's order; a file ahead of its turn is held out of the
// queue and sent back the moment its turn comes; the tick is armed once for the gap.
func TestSequenceRunsInOrder(t *testing.T) {
	r := newSeqRig(t, numberSequence)
	r.upload("orders-3.csv", "orders-5.csv", "orders-1.csv", "orders-4.csv")
	r.drain()
	if got, want := r.startedNames(), []string{"orders-1.csv"}; !slices.Equal(got, want) {
		t.Fatalf("started %v, want %v (2 is missing)", got, want)
	}
	if got := r.held(); !slices.Equal(got, []string{"3", "4", "5"}) {
		t.Errorf("held %v, want [3 4 5]", got)
	}
	st := r.state()
	if st.Next != 2 || st.GapSince == nil || st.Tick == nil {
		t.Errorf("state %+v: want next 2, a gap and a tick", st)
	}
	if len(r.ticks) != 1 {
		t.Errorf("%d ticks out, want 1", len(r.ticks))
	}
	r.upload("orders-2.csv")
	r.drain()
	if got, want := r.startedNames(), []string{"orders-1.csv", "orders-2.csv", "orders-3.csv", "orders-4.csv", "orders-5.csv"}; !slices.Equal(got, want) {
		t.Fatalf("started %v, want %v", got, want)
	}
	for i, arn := range r.sfn.created {
		if in := r.sfn.input(t, arn); in.Source.Sequence != strconv.Itoa(i+1) {
			t.Errorf("execution %d carries sequence %q, want %d", i, in.Source.Sequence, i+1)
		}
	}
	if st := r.state(); st.Next != 6 || st.GapSince != nil || st.Running != nil || st.Woken != nil || len(r.held()) != 0 {
		t.Errorf("state %+v, held %v: want next 6, no gap, nothing held", st, r.held())
	}
	// The tick finds the gap closed: it writes a last 0 and stops.
	r.tick()
	if len(r.ticks) != 0 || r.state().Tick != nil {
		t.Errorf("the tick goes on after the gap closed: %d out, state tick %v", len(r.ticks), r.state().Tick)
	}
	if sums := r.metricSums(t); sums[metrics.FilesHeld] != 3 || sums[metrics.FilesRefused] != 0 {
		t.Errorf("metrics %v: want 3 held, none refused", sums)
	}
}

// A file that can never run in the sequence is refused, with results, and halts nothing.
func TestSequenceRefusals(t *testing.T) {
	r := newSeqRig(t, numberSequence)
	r.upload("orders-1.csv", "orders-2.csv")
	r.drain()
	r.upload("orders-4.csv", "orders-4.csv", "readme.txt", "orders-0002.csv")
	r.drain()
	// A skip no operator recorded (a direct invoke, say) is quarantined and moves nothing.
	r.files = append(r.files, r.message(sequenceControlBody(t, pipeline.ControlSequenceSkip, 3), "acme"))
	r.drain()
	if names := r.startedNames(); !slices.Equal(names, []string{"orders-1.csv", "orders-2.csv"}) || r.state().Next != 3 {
		t.Fatalf("after a skip without its control record: started %v, next %d; want 1, 2 and next 3", names, r.state().Next)
	}
	// An operator skips 3: 4 runs; then 3 arrives, late.
	r.files = append(r.files, r.message(r.s3.recordControl(t, sequenceControlBody(t, pipeline.ControlSequenceSkip, 3)), "acme"))
	r.drain()
	r.upload("orders-3.csv")
	r.drain()
	want := map[string]string{"readme.txt": sequence.RefusedUnmatched, "orders-0002.csv": sequence.RefusedDuplicate, "orders-3.csv": sequence.RefusedLate}
	got := r.refusals()
	// Both uploads of orders-4.csv are distinct events: the second is a duplicate of the held one.
	if got["orders-4.csv"] != sequence.RefusedDuplicate {
		t.Errorf("second orders-4.csv: refusal %q, want duplicate", got["orders-4.csv"])
	}
	delete(got, "orders-4.csv")
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: refusal %q, want %q", k, got[k], w)
		}
	}
	if names := r.startedNames(); !slices.Equal(names, []string{"orders-1.csv", "orders-2.csv", "orders-4.csv"}) {
		t.Errorf("started %v, want 1, 2, 4", names)
	}
	st := r.state()
	if st.Next != 5 || len(st.Skipped) != 1 || st.Skipped[0].From != 3 || st.Skipped[0].By != "arn:aws:iam::123456789012:user/bob" {
		t.Errorf("state %+v: want next 5 and 3 skipped by bob", st)
	}
}

func sequenceControlBody(t *testing.T, action string, n int64) string {
	t.Helper()
	b, err := pipeline.EncodeControl(pipeline.ControlMessage{Type: pipeline.ControlType, Version: pipeline.ControlVersion, Action: action, Tenant: "acme",
		Number: &n, RequestedBy: "arn:aws:iam::123456789012:user/bob", Reason: "upload lost", RequestedAt: testStart, RequestID: fmt.Sprintf("%s-%d", action, n)})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// onGap "skip": after gapTimeout the tick asks the head to skip the missing numbers, the held
// files run, and the missing file is refused as late when it comes.
func TestSequenceGapTimeoutSkips(t *testing.T) {
	r := newSeqRig(t, `{"pattern":"^orders-(?P<seq>[0-9]+)\\.csv$","kind":"number","start":1,"gapTimeout":"30s","onGap":"skip"}`)
	r.upload("orders-3.csv", "orders-4.csv")
	r.drain()
	if len(r.started) != 0 || len(r.ticks) != 1 {
		t.Fatalf("started %v, %d ticks: want nothing started and one tick", r.started, len(r.ticks))
	}
	r.tick() // 0 s into the gap: waits for the timeout
	if len(r.files) != 0 {
		t.Fatal("the tick asked for a skip before the gap timeout")
	}
	r.now = r.now.Add(31 * time.Second)
	r.tick()
	r.drain()
	if names := r.startedNames(); !slices.Equal(names, []string{"orders-3.csv", "orders-4.csv"}) {
		t.Fatalf("started %v, want 3 and 4 after the gap's skip", names)
	}
	st := r.state()
	if st.Next != 5 || len(st.Skipped) != 1 || st.Skipped[0].From != 1 || st.Skipped[0].To != 2 || st.Skipped[0].By != sequenceRequester {
		t.Errorf("state %+v: want 1-2 skipped by the pipeline, next 5", st)
	}
	// The pipeline's own skip went through its control record, as an operator's does.
	var records []string
	for k := range r.s3.objects {
		if strings.HasPrefix(k, testBucket+"/control/acme/requests/") {
			records = append(records, k)
		}
	}
	if len(records) != 1 || !strings.Contains(records[0], "/requests/gap-1-") {
		t.Errorf("control records %v, want the one of the gap skip", records)
	}
	r.upload("orders-2.csv")
	r.drain()
	if got := r.refusals()["orders-2.csv"]; got != sequence.RefusedLate {
		t.Errorf("the skipped file: refusal %q, want late", got)
	}
	sums := r.metricSums(t)
	if sums[metrics.SequenceGapsOverdue] != 1 {
		t.Errorf("SequenceGapsOverdue %v, want 1", sums[metrics.SequenceGapsOverdue])
	}
}

// kind "name": a file waits settle after its arrival; an earlier name that comes meanwhile runs
// first, and a name lower than the last processed one is late.
func TestSequenceNamesSettle(t *testing.T) {
	r := newSeqRig(t, `{"pattern":"^batch-(?P<seq>[0-9T]+)\\.csv$","kind":"name","settle":"60s"}`)
	r.upload("batch-20261205T0700.csv")
	r.drain()
	r.now = r.now.Add(20 * time.Second)
	r.upload("batch-20261205T0600.csv")
	r.drain()
	if len(r.started) != 0 || len(r.ticks) != 1 {
		t.Fatalf("started %v, %d ticks: want both held and one tick", r.started, len(r.ticks))
	}
	r.now = r.now.Add(61 * time.Second) // both settled
	r.tick()
	r.drain()
	if names := r.startedNames(); !slices.Equal(names, []string{"batch-20261205T0600.csv", "batch-20261205T0700.csv"}) {
		t.Fatalf("started %v, want 0600 then 0700", names)
	}
	r.upload("batch-20261205T0500.csv")
	r.drain()
	if got := r.refusals()["batch-20261205T0500.csv"]; got != sequence.RefusedLate {
		t.Errorf("0500 after 0700: refusal %q, want late", got)
	}
	if st := r.state(); st.Last != "20261205T0700" {
		t.Errorf("last %q, want 20261205T0700", st.Last)
	}
}

// A tenant without a sequence reads and writes no sequence object.
func TestNoSequenceNoState(t *testing.T) {
	r := &seqRig{rig: newRig(t, nil), t: t}
	r.upload("orders-2.csv", "orders-1.csv")
	r.drain()
	if names := r.startedNames(); !slices.Equal(names, []string{"orders-2.csv", "orders-1.csv"}) {
		t.Errorf("started %v, want arrival order", names)
	}
	for k := range r.s3.objects {
		if strings.Contains(k, "/sequence/") {
			t.Errorf("object %s written for a tenant without a sequence", k)
		}
	}
}

// In a pool, a sequenced tenant's tick travels in its own group and reaches the tenant's Handler,
// never the unknown-tenant path, and a held file goes back to the tenant's group.
func TestPoolSequence(t *testing.T) {
	js := strings.Replace(poolSettingsJSON(t), `"maxFieldBytes": 65536}`,
		`"maxFieldBytes": 65536, "sequence": {"pattern": "^orders-(?P<seq>[0-9]+)\\.csv$", "kind": "number", "start": 1, "gapTimeout": "1h", "onGap": "hold"}}`, 1)
	root := t.TempDir()
	testfake.WritePoolSettings(t, root, pipeline.PoolSettingsFile, js)
	r := newPoolRig(t, map[string]string{"LAMBDA_TASK_ROOT": root})
	handle := func(m events.SQSMessage) []string {
		t.Helper()
		resp, err := r.p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{m}})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, f := range resp.BatchItemFailures {
			ids = append(ids, f.ItemIdentifier)
		}
		return ids
	}
	if kept := handle(poolMessage("m1", eventBody(t, evID1, "inbox/acme/orders-2.csv"), "acme")); len(kept) != 0 {
		t.Fatalf("file 2 kept %v: want it held out of the queue", kept)
	}
	if len(r.sqs.sent) != 1 || aws.ToString(r.sqs.sent[0].MessageGroupId) != "acme/sequence" {
		t.Fatalf("sent %v: want one tick in group acme/sequence", r.sqs.sent)
	}
	tick := poolMessage("t1", aws.ToString(r.sqs.sent[0].MessageBody), "acme/sequence")
	if kept := handle(tick); !slices.Equal(kept, []string{"t1"}) {
		t.Errorf("tick: kept %v, want it back for the next look", kept)
	}
	if n := r.metricSum(t, metrics.DimensionPool, testPool, metrics.UnknownTenantMessages); n != 0 {
		t.Errorf("the tick counted as %v message(s) of no tenant", n)
	}
	handle(poolMessage("m2", eventBody(t, evID2, "inbox/acme/orders-1.csv"), "acme"))
	r.sfn.set(testExecPrefix+evID2, sfntypes.ExecutionStatusSucceeded)
	if kept := handle(poolMessage("m2", eventBody(t, evID2, "inbox/acme/orders-1.csv"), "acme")); len(kept) != 0 {
		t.Fatalf("file 1 kept %v after its execution succeeded", kept)
	}
	last := r.sqs.sent[len(r.sqs.sent)-1]
	if aws.ToString(last.MessageGroupId) != "acme" || !strings.Contains(aws.ToString(last.MessageBody), "orders-2.csv") {
		t.Errorf("last sent %s to %s: want file 2 back in group acme", aws.ToString(last.MessageBody), aws.ToString(last.MessageGroupId))
	}
}

func poolSettingsJSON(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "pool-settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// countingS3 counts the calls of a fakeS3.
type countingS3 struct {
	*fakeS3
	calls int
}

func (c *countingS3) GetObject(ctx context.Context, in *s3.GetObjectInput, o ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	c.calls++
	return c.fakeS3.GetObject(ctx, in, o...)
}

func (c *countingS3) PutObject(ctx context.Context, in *s3.PutObjectInput, o ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	c.calls++
	return c.fakeS3.PutObject(ctx, in, o...)
}

func (c *countingS3) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, o ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	c.calls++
	return c.fakeS3.DeleteObject(ctx, in, o...)
}

func (c *countingS3) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, o ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	c.calls++
	return c.fakeS3.ListObjectsV2(ctx, in, o...)
}

// Held files cost a flat number of calls each, however many wait and however long: the calls per
// file of a tenant whose files all arrive ahead of their turn, at 10 and at 100 held files, and of
// one whose files arrive in order, beside each other. Printed with -v; the test fails if the cost
// per held file grows with their number.
func TestHeldFileCallsFlat(t *testing.T) {
	perFile := func(held int, shuffled bool) float64 {
		r := newSeqRig(t, numberSequence)
		if held < 0 { // the reference: a tenant without a sequence
			held, r = -held, &seqRig{rig: newRig(t, nil), t: t}
		}
		c := &countingS3{fakeS3: r.s3}
		r.h.s3 = c
		var keys []string
		for i := 1; i <= held+1; i++ {
			keys = append(keys, fmt.Sprintf("orders-%d.csv", i))
		}
		if shuffled {
			keys = append(keys[1:], keys[0]) // every file but the first arrives ahead of its turn
		}
		r.upload(keys...)
		r.drain()
		for range 30 { // half an hour of gap-minutes costs the same for 10 or 100 held files
			if len(r.ticks) == 0 {
				break
			}
			r.now = r.now.Add(time.Minute)
			r.tick()
		}
		if got := len(r.started); got != held+1 {
			t.Fatalf("%d held: %d started, want %d", held, got, held+1)
		}
		r.sqs.mu.Lock()
		sends := len(r.sqs.sent)
		r.sqs.mu.Unlock()
		return float64(c.calls+sends) / float64(held+1)
	}
	plain, inOrder := perFile(-100, false), perFile(100, false)
	ten, hundred := perFile(10, true), perFile(100, true)
	t.Logf("S3 and SendMessage calls per file: no sequence %.1f; in order %.1f; all held: %.1f at 10 held, %.1f at 100 held (ratio %.2f)",
		plain, inOrder, ten, hundred, hundred/ten)
	if hundred > 1.5*ten {
		t.Errorf("calls per held file grow with the number held: %.1f at 10, %.1f at 100", ten, hundred)
	}
}

// A write of the state that loses to another writer (here: the tick, clearing its own field just
// then) reads again, so that a gap is never left without its tick.
func TestSequenceHoldRetriesAConflict(t *testing.T) {
	r := newSeqRig(t, numberSequence)
	r.upload("orders-3.csv")
	r.drain()
	stateKey := testBucket + "/" + sequence.StateKey(pipeline.SiloOwner("acme"))
	raced := false
	r.s3.beforePut = func(key string) {
		if key != stateKey || raced {
			return
		}
		raced = true
		r.s3.mu.Lock()
		defer r.s3.mu.Unlock()
		var st sequence.State
		if err := json.Unmarshal([]byte(r.s3.objects[key]), &st); err != nil {
			t.Error(err)
		}
		st.Tick = nil
		b, _ := json.Marshal(st)
		r.s3.objects[key] = string(b)
	}
	r.now = r.now.Add(time.Hour) // the first tick was armed an hour ago; the head's look keeps it
	r.upload("orders-4.csv")
	r.drain()
	if !raced {
		t.Fatal("the state was not written after the hold")
	}
	st := r.state()
	if st.Tick == nil || st.GapSince == nil {
		t.Fatalf("state %+v: want the gap and a tick after the conflict", st)
	}
	// The tick the state names is out: it is the one that looks.
	named := slices.ContainsFunc(r.ticks, func(m events.SQSMessage) bool {
		c, err := pipeline.DecodeControl([]byte(m.Body))
		return err == nil && c.RequestedAt.Equal(*st.Tick)
	})
	if !named {
		t.Errorf("no tick out is the state's (%v); %d out", st.Tick, len(r.ticks))
	}
	if got := r.held(); !slices.Equal(got, []string{"3", "4"}) {
		t.Errorf("held %v, want [3 4]", got)
	}
}

// The File Processed event carries the file's sequence value, and a refused file's event says
// REFUSED and why.
func TestSequenceFileProcessedEvents(t *testing.T) {
	r := &seqRig{rig: newRig(t, map[string]string{
		pipeline.EnvTenant:       `{"id":"acme","format":"csv","encoding":"utf-8","chunkSize":100,"maxFieldBytes":65536,"sequence":` + numberSequence + `}`,
		pipeline.EnvEventBusName: "default",
	}), t: t}
	bus := &fakeBus{}
	r.h.events = bus
	r.upload("orders-1.csv", "readme.txt", "orders-01.csv")
	r.drain()
	got := map[string]string{}
	for _, ev := range bus.details(t) {
		got[strings.TrimPrefix(ev.Source.Key, "inbox/acme/")] = ev.Status + " " + ev.Sequence + " " + ev.Refusal
	}
	want := map[string]string{
		"orders-1.csv":  "SUCCEEDED 1 ",
		"readme.txt":    "REFUSED  unmatched",
		"orders-01.csv": "REFUSED 01 duplicate",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: event %q, want %q", k, got[k], w)
		}
	}
}

// The head sends a tick before it saves the state that records it: a tick delivered in between
// waits for its record instead of taking itself for a replaced one, which would leave the gap
// with a recorded tick that no longer exists. One never recorded goes after tickOrphanAfter.
func TestSequenceTickBeforeItsRecord(t *testing.T) {
	r := newSeqRig(t, `{"pattern":"^orders-(?P<seq>[0-9]+)\\.csv$","kind":"number","start":1,"gapTimeout":"30s","onGap":"skip"}`)
	stateKey := testBucket + "/" + sequence.StateKey(pipeline.SiloOwner("acme"))
	early := true
	r.s3.beforePut = func(key string) {
		if key != stateKey || !early || len(r.sqs.sent) == 0 {
			return
		}
		early = false
		// The tick just sent is delivered before the state that records it is written.
		r.collect()
		r.tick()
		if len(r.ticks) != 1 {
			t.Errorf("the tick delivered before its record released itself: %d out", len(r.ticks))
		}
	}
	r.upload("orders-2.csv")
	r.drain()
	if early {
		t.Fatal("no state write after the tick was sent")
	}
	r.now = r.now.Add(31 * time.Second)
	r.tick() // now recorded, and the gap is over its timeout: it asks for the skip
	r.drain()
	if names := r.startedNames(); !slices.Equal(names, []string{"orders-2.csv"}) {
		t.Fatalf("started %v: want 2 after the gap's skip", names)
	}
	// A tick whose record never comes goes after tickOrphanAfter.
	orphan := r.message(sequenceTickBody(t, r.now), "acme/sequence")
	r.ticks = []events.SQSMessage{orphan}
	r.tick()
	if len(r.ticks) != 1 {
		t.Fatal("an unrecorded tick went at once; want it to wait for its record")
	}
	r.now = r.now.Add(tickOrphanAfter)
	r.tick()
	if len(r.ticks) != 0 {
		t.Errorf("an unrecorded tick is still out after %s", tickOrphanAfter)
	}
}

func sequenceTickBody(t *testing.T, at time.Time) string {
	t.Helper()
	b, err := pipeline.EncodeControl(pipeline.ControlMessage{Type: pipeline.ControlType, Version: pipeline.ControlVersion, Action: pipeline.ControlSequenceTick,
		Tenant: "acme", RequestedBy: sequenceRequester, Reason: "test", RequestedAt: at.UTC(), RequestID: "tick-orphan"})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
