package router

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/example/tenantpipeline/spec"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
	"github.com/example/tenantpipeline/internal/s3event"
	"github.com/example/tenantpipeline/internal/testfake"
)

const testDLQURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/shared-1-unrouted"

// routerEnv is the router's environment for the pool of testdata/pool-settings.json (tenants acme
// and globex), its settings file found through LAMBDA_TASK_ROOT as on Lambda.
func routerEnv(t *testing.T) map[string]string {
	t.Helper()
	root := t.TempDir()
	testfake.WritePoolSettings(t, root, pipeline.PoolSettingsFile, fixture(t, "pool-settings.json"))
	return map[string]string{
		pipeline.EnvFunctionRole:       pipeline.FunctionRoleRouter,
		pipeline.EnvPool:               testPool,
		pipeline.EnvPoolPrefix:         testPoolPrefix,
		pipeline.EnvPoolSettings:       pipeline.PoolSettingsFile,
		"LAMBDA_TASK_ROOT":             root,
		pipeline.EnvBucket:             testBucket,
		pipeline.EnvQueueURL:           testQueueURL,
		pipeline.EnvDeadLetterQueueURL: testDLQURL,
	}
}

type routerRig struct {
	r   *Router
	sqs *testfake.SQS
	out *testfake.Logs
}

func newRouterRig(t *testing.T) *routerRig {
	t.Helper()
	return newRouterRigWith(t, nil)
}

// newRouterRigWith is newRouterRig with some variables of routerEnv replaced.
func newRouterRigWith(t *testing.T, overrides map[string]string) *routerRig {
	t.Helper()
	env := routerEnv(t)
	maps.Copy(env, overrides)
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	rr := &routerRig{sqs: &testfake.SQS{Errs: map[string]error{}}, out: &testfake.Logs{}}
	ns := cfg.MetricsNamespace
	rr.r = newRouter(cfg, rr.sqs, slog.New(slog.NewJSONHandler(rr.out, nil)),
		metrics.NewDimension(rr.out, ns, metrics.DimensionPool, cfg.Pool),
		func(tenant string) *metrics.Emitter { return metrics.New(rr.out, ns, tenant) })
	return rr
}

func TestRouterConfigFromEnvRejects(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"missing dead-letter queue", map[string]string{pipeline.EnvDeadLetterQueueURL: ""}, []string{"DEAD_LETTER_QUEUE_URL: is required"}},
		{"FIFO dead-letter queue", map[string]string{pipeline.EnvDeadLetterQueueURL: testDLQURL + ".fifo"}, []string{"DEAD_LETTER_QUEUE_URL:", "standard queue"}},
		{"standard pool queue", map[string]string{pipeline.EnvQueueURL: testDLQURL}, []string{"QUEUE_URL:", "not a FIFO queue"}},
		{"missing bucket", map[string]string{pipeline.EnvBucket: ""}, []string{"INGEST_BUCKET: is required"}},
		{"missing POOL_PREFIX", map[string]string{pipeline.EnvPoolPrefix: ""}, []string{"POOL_PREFIX: is required"}},
		{"POOL_PREFIX not the file's", map[string]string{pipeline.EnvPoolPrefix: "pool/"}, []string{"POOL_PREFIX:", `prefix "inbox/"`}},
		{"settings file missing", map[string]string{pipeline.EnvPoolSettings: "/nowhere/pool-tenants.json"}, []string{"POOL_SETTINGS:", "/nowhere/pool-tenants.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := routerEnv(t)
			maps.Copy(env, tt.env)
			_, err := ConfigFromEnv(func(k string) string { return env[k] })
			if err == nil {
				t.Fatalf("got no error, want one naming %v", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// objectEvent is an Object Created event of bucket and key with the event id, as EventBridge
// delivers it.
func objectEvent(t *testing.T, id, bucket, key string) string {
	t.Helper()
	ev := s3event.ObjectCreated(id, testStart, bucket, s3event.Object{Key: key, Size: 10, ETag: "abc", Sequencer: "0062E99A88DC407460"})
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRouterInvoke(t *testing.T) {
	longID := strings.Repeat("a", 129)
	pretty := func(t *testing.T, body string) string {
		var b bytes.Buffer
		if err := json.Indent(&b, []byte(body), "", "\t"); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	tests := []struct {
		name       string
		body       func(t *testing.T) string
		errs       map[string]error
		wantErr    bool
		wantQueue  string // queue of the one message sent; "" none
		wantGroup  string // routed: tenant; its dedup id is the event id unless wantDedup
		wantDedup  string
		wantReason string // unrouted: the UnroutedReason attribute
		wantKey    string // logged key
	}{
		{name: "acme's file", body: func(t *testing.T) string { return objectEvent(t, evID1, testBucket, acmeKey) },
			wantQueue: testQueueURL, wantGroup: "acme", wantDedup: evID1, wantKey: acmeKey},
		{name: "globex's file", body: func(t *testing.T) string { return objectEvent(t, evID2, testBucket, globexKey) },
			wantQueue: testQueueURL, wantGroup: "globex", wantDedup: evID2, wantKey: globexKey},
		{name: "body kept byte for byte", body: func(t *testing.T) string { return pretty(t, objectEvent(t, evID1, testBucket, acmeKey)) + "\n" },
			wantQueue: testQueueURL, wantGroup: "acme", wantDedup: evID1, wantKey: acmeKey},
		// Keys are raw: '+' and "%2B" are kept as they are, never decoded.
		{name: "plus and %2B not decoded", body: func(t *testing.T) string { return objectEvent(t, evID1, testBucket, "inbox/globex/a+b%2Bc.jsonl") },
			wantQueue: testQueueURL, wantGroup: "globex", wantDedup: evID1, wantKey: "inbox/globex/a+b%2Bc.jsonl"},
		{name: "encoded slash not decoded into a tenant's prefix", body: func(t *testing.T) string { return objectEvent(t, evID1, testBucket, "inbox/acme%2Fa.csv") },
			wantQueue: testDLQURL, wantReason: unroutedNoTenant, wantKey: "inbox/acme%2Fa.csv"},
		{name: "event id too long for a deduplication id", body: func(t *testing.T) string { return objectEvent(t, longID, testBucket, acmeKey) },
			wantQueue: testQueueURL, wantGroup: "acme", wantKey: acmeKey},
		{name: "key of no tenant", body: func(t *testing.T) string { return objectEvent(t, evID1, testBucket, "inbox/initech/a.csv") },
			wantQueue: testDLQURL, wantReason: unroutedNoTenant, wantKey: "inbox/initech/a.csv"},
		{name: "key outside the pool prefix", body: func(t *testing.T) string { return objectEvent(t, evID1, testBucket, "elsewhere/a.csv") },
			wantQueue: testDLQURL, wantReason: unroutedNoTenant, wantKey: "elsewhere/a.csv"},
		{name: "other bucket", body: func(t *testing.T) string { return objectEvent(t, evID1, "other", acmeKey) },
			wantQueue: testDLQURL, wantReason: unroutedOtherBucket, wantKey: acmeKey},
		{name: "not an Object Created event", body: func(t *testing.T) string { return fixture(t, "status-change.json") },
			wantQueue: testDLQURL, wantReason: unroutedNotCreated},
		{name: "pool queue send fails", body: func(t *testing.T) string { return objectEvent(t, evID1, testBucket, acmeKey) },
			errs: map[string]error{testQueueURL: errors.New("operation error SQS: SendMessage, exceeded maximum number of attempts")}, wantErr: true},
		{name: "dead-letter queue send fails", body: func(t *testing.T) string { return objectEvent(t, evID1, testBucket, "inbox/initech/a.csv") },
			errs: map[string]error{testDLQURL: errors.New("AccessDenied")}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rr := newRouterRig(t)
			maps.Copy(rr.sqs.Errs, tt.errs)
			body := tt.body(t)
			err := rr.r.Route(context.Background(), json.RawMessage(body))
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			var logs, emf []map[string]any
			for _, d := range rr.out.Lines(t) {
				if _, ok := d["_aws"]; ok {
					emf = append(emf, d)
				} else {
					logs = append(logs, d)
				}
			}
			if tt.wantErr {
				if len(rr.sqs.Sends) != 0 || len(emf) != 0 {
					t.Errorf("got sends %d and metrics %v, want none", len(rr.sqs.Sends), emf)
				}
				if len(logs) != 1 || logs[0]["level"] != "ERROR" {
					t.Errorf("got logs %v, want one ERROR", logs)
				}
				return
			}
			if len(rr.sqs.Sends) != 1 {
				t.Fatalf("got %d sends, want 1", len(rr.sqs.Sends))
			}
			in := rr.sqs.Sends[0]
			if q := aws.ToString(in.QueueUrl); q != tt.wantQueue {
				t.Errorf("got queue %s, want %s", q, tt.wantQueue)
			}
			if aws.ToString(in.MessageBody) != body {
				t.Errorf("got body %q, want the event byte for byte %q", aws.ToString(in.MessageBody), body)
			}
			if len(logs) != 1 {
				t.Fatalf("got logs %v, want one line", logs)
			}
			l := logs[0]
			if l["pool"] != testPool || (tt.wantKey != "" && l["key"] != tt.wantKey) {
				t.Errorf("got log %v, want pool %s, key %q", l, testPool, tt.wantKey)
			}
			if len(emf) != 1 {
				t.Fatalf("got metrics %v, want one line", emf)
			}
			if tt.wantGroup != "" {
				dedup := tt.wantDedup
				if dedup == "" {
					sum := sha256.Sum256([]byte(body))
					dedup = hex.EncodeToString(sum[:])
				}
				if g, d := aws.ToString(in.MessageGroupId), aws.ToString(in.MessageDeduplicationId); g != tt.wantGroup || d != dedup {
					t.Errorf("got group %q, dedup id %q, want %q, %q", g, d, tt.wantGroup, dedup)
				}
				if l["level"] != "INFO" || l["tenant"] != tt.wantGroup || l["messageId"] != "sent-1" {
					t.Errorf("got log %v, want INFO with tenant %s, messageId sent-1", l, tt.wantGroup)
				}
				if emf[0][metrics.DimensionTenant] != tt.wantGroup || emf[0][metrics.FilesRouted] != 1.0 {
					t.Errorf("got metrics %v, want FilesRouted 1 of tenant %s", emf[0], tt.wantGroup)
				}
				// A pool's metric: dimension Pool, the tenant a property.
				if dirs := testfake.EMFDirectives(emf[0]); len(dirs) != 1 || !slices.Equal(dirs[0].Dimensions, []string{metrics.DimensionPool}) || emf[0][metrics.DimensionPool] != testPool {
					t.Errorf("got directives %+v and Pool %v, want [Pool] with Pool %s", dirs, emf[0][metrics.DimensionPool], testPool)
				}
				return
			}
			if in.MessageGroupId != nil || in.MessageDeduplicationId != nil {
				t.Errorf("got group %v, dedup id %v on the standard dead-letter queue, want none", in.MessageGroupId, in.MessageDeduplicationId)
			}
			reason, pool := in.MessageAttributes[attrUnroutedReason], in.MessageAttributes[attrPool]
			if aws.ToString(reason.StringValue) != tt.wantReason || aws.ToString(pool.StringValue) != testPool || aws.ToString(in.MessageAttributes[attrUnroutedDetail].StringValue) == "" {
				t.Errorf("got attributes %v, want reason %s, pool %s and a detail", in.MessageAttributes, tt.wantReason, testPool)
			}
			if l["level"] != "ERROR" || !strings.Contains(l["msg"].(string), "object belongs to no tenant of the pool") || l["reason"] != tt.wantReason {
				t.Errorf("got log %v, want ERROR \"object belongs to no tenant of the pool\" with reason %s", l, tt.wantReason)
			}
			if emf[0][metrics.DimensionPool] != testPool || emf[0][metrics.UnroutedObjects] != 1.0 || emf[0][metrics.DimensionTenant] != nil {
				t.Errorf("got metrics %v, want UnroutedObjects 1 of pool %s", emf[0], testPool)
			}
		})
	}
}

// The router handles an intake batch in order: every message up to the first that cannot be stored
// is sent, in order, and that one and every later one stay on the intake queue, so a tenant's files
// never reach the pool queue out of arrival order.
func TestRouterHandleKeepsOrder(t *testing.T) {
	batch := func(t *testing.T, keys ...string) events.SQSEvent {
		var ev events.SQSEvent
		for i, k := range keys {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m%d", i+1),
				Body: objectEvent(t, fmt.Sprintf("11111111-2222-3333-4444-%012d", i+1), testBucket, k)})
		}
		return ev
	}
	const noTenant = "inbox/initech/a.csv"
	tests := []struct {
		name         string
		keys         []string
		errs         map[string]error
		wantQueues   []string // queue of each send, in order
		wantFailures []string
	}{
		{"all stored, in order", []string{acmeKey, noTenant, globexKey, acmeKey + "2"}, nil,
			[]string{testQueueURL, testDLQURL, testQueueURL, testQueueURL}, nil},
		{"the third cannot be stored: it and the fourth stay", []string{acmeKey, globexKey, noTenant, acmeKey + "2"},
			map[string]error{testDLQURL: errors.New("AccessDenied")}, []string{testQueueURL, testQueueURL}, []string{"m3", "m4"}},
		{"the pool queue is down: the whole batch stays", []string{acmeKey, globexKey},
			map[string]error{testQueueURL: errors.New("ServiceUnavailable")}, nil, []string{"m1", "m2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rr := newRouterRig(t)
			maps.Copy(rr.sqs.Errs, tt.errs)
			ev := batch(t, tt.keys...)
			resp, err := rr.r.Handle(context.Background(), ev)
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			var queues []string
			for i, in := range rr.sqs.Sends {
				queues = append(queues, aws.ToString(in.QueueUrl))
				if aws.ToString(in.MessageBody) != ev.Records[i].Body {
					t.Errorf("send %d: body of another message: sends are out of order", i)
				}
			}
			if !slices.Equal(queues, tt.wantQueues) {
				t.Errorf("sends to %v, want %v", queues, tt.wantQueues)
			}
			var failures []string
			for _, f := range resp.BatchItemFailures {
				failures = append(failures, f.ItemIdentifier)
			}
			if !slices.Equal(failures, tt.wantFailures) {
				t.Errorf("batch item failures %v, want %v", failures, tt.wantFailures)
			}
		})
	}
}

// intakeBatch is an intake batch of one event per key, message ids m1, m2, ... and event ids that
// end in the message's number.
func intakeBatch(t *testing.T, keys ...string) events.SQSEvent {
	t.Helper()
	var ev events.SQSEvent
	for i, k := range keys {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m%d", i+1),
			Body: objectEvent(t, fmt.Sprintf("11111111-2222-3333-4444-%012d", i+1), testBucket, k)})
	}
	return ev
}

// messageOf is the intake message id ("m3") of a message sent with the event of intakeBatch.
func messageOf(in *sqs.SendMessageInput) string {
	id := aws.ToString(in.MessageDeduplicationId)
	return "m" + strings.TrimLeft(id[strings.LastIndex(id, "-")+1:], "0")
}

// withTenants gives the rig's router a pool of n tenants t00, t01, ... under inbox/tNN/.
func withTenants(t *testing.T, rr *routerRig, n int) []string {
	t.Helper()
	s := pipeline.PoolSettings{Pool: rr.r.cfg.Settings.Pool, Prefix: rr.r.cfg.Settings.Prefix}
	var keys []string
	for i := range n {
		id := fmt.Sprintf("t%02d", i)
		s.Tenants = append(s.Tenants, pipeline.PoolTenant{Settings: pipeline.Tenant{Tenant: spec.Tenant{ID: id}}, Prefix: "inbox/" + id + "/"})
		keys = append(keys, "inbox/"+id+"/a.csv")
	}
	b, err := poolsettings.Encode(&s)
	if err != nil {
		t.Fatal(err)
	}
	if rr.r.cfg.Settings, err = poolsettings.Parse(b); err != nil {
		t.Fatal(err)
	}
	return keys
}

// The router sends the pool queue's events in SendMessageBatch calls of at most 10 (or the
// configured size), never two events of one tenant in one call, in intake order; an event of no
// tenant goes to the dead-letter queue between the calls.
func TestRouterHandleSendsBatches(t *testing.T) {
	const noTenant = "inbox/initech/a.csv"
	a, g := acmeKey, globexKey
	tests := []struct {
		name        string
		tenants     int // a pool of this many tenants t00, t01, ... instead of acme and globex
		batchSize   int
		keys        []string
		wantBatches []string // each call's messages
		wantDLQ     []string
	}{
		{"ten tenants in one call", 12, 0, nil, []string{"m1 m2 m3 m4 m5 m6 m7 m8 m9 m10", "m11 m12"}, nil},
		{"never two of one tenant in a call", 0, 0, []string{a, g, a + "2", g + "2", a + "3"}, []string{"m1 m2", "m3 m4", "m5"}, nil},
		{"one tenant's burst: one event a call", 0, 0, []string{a, a + "2", a + "3"}, []string{"m1", "m2", "m3"}, nil},
		{"batch size 1", 0, 1, []string{a, g, a + "2"}, []string{"m1", "m2", "m3"}, nil},
		{"an event of no tenant ends a call", 0, 0, []string{a, noTenant, g, a + "2"}, []string{"m1", "m3 m4"}, []string{"m2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rr := newRouterRig(t)
			keys := tt.keys
			if tt.tenants > 0 {
				keys = withTenants(t, rr, tt.tenants)
			}
			if tt.batchSize > 0 {
				rr.r.cfg.SendBatchSize = tt.batchSize
			}
			ev := intakeBatch(t, keys...)
			resp, err := rr.r.Handle(context.Background(), ev)
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("Handle: got %v, failures %v, want none", err, resp.BatchItemFailures)
			}
			var batches []string
			for _, b := range rr.sqs.Batches {
				var ids []string
				tenants := map[string]bool{}
				for _, in := range b {
					ids = append(ids, messageOf(in))
					if g := aws.ToString(in.MessageGroupId); tenants[g] {
						t.Errorf("a call sends two events of tenant %s", g)
					} else {
						tenants[g] = true
					}
					if aws.ToString(in.QueueUrl) != testQueueURL {
						t.Errorf("batch sent to %s, want the pool queue", aws.ToString(in.QueueUrl))
					}
				}
				batches = append(batches, strings.Join(ids, " "))
			}
			if !slices.Equal(batches, tt.wantBatches) {
				t.Errorf("got calls %q, want %q", batches, tt.wantBatches)
			}
			var dlq []string
			for _, in := range rr.sqs.Sends {
				if aws.ToString(in.QueueUrl) == testDLQURL {
					for _, rec := range ev.Records {
						if rec.Body == aws.ToString(in.MessageBody) {
							dlq = append(dlq, rec.MessageId)
						}
					}
				}
			}
			if !slices.Equal(dlq, tt.wantDLQ) {
				t.Errorf("got dead-letter messages %v, want %v", dlq, tt.wantDLQ)
			}
			// Bodies byte for byte, each tenant's group, the event id as deduplication id.
			for _, in := range rr.sqs.Sends {
				if aws.ToString(in.QueueUrl) != testQueueURL {
					continue
				}
				rec := ev.Records[slices.IndexFunc(ev.Records, func(m events.SQSMessage) bool { return m.MessageId == messageOf(in) })]
				if aws.ToString(in.MessageBody) != rec.Body {
					t.Errorf("%s: body is not the event byte for byte", rec.MessageId)
				}
				if tn, _ := rr.r.cfg.Settings.TenantOf(keyOf(t, rec.Body)); aws.ToString(in.MessageGroupId) != tn.ID {
					t.Errorf("%s: group %s, want %s", rec.MessageId, aws.ToString(in.MessageGroupId), tn.ID)
				}
			}
		})
	}
}

func keyOf(t *testing.T, body string) string {
	t.Helper()
	ev, err := s3event.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return ev.Detail.Object.Key
}

// A failed entry in the middle of a batch: the events before it are stored; it and every later
// intake message are reported, in order, though a later entry of the same call was stored; the
// redelivery stores each event once (the pool queue's deduplication id), each tenant's in order.
func TestRouterHandleFailureInTheMiddle(t *testing.T) {
	a, g := acmeKey, globexKey
	keys := []string{a, g, a + "2", g + "2", a + "3"} // calls: m1 m2 | m3 m4 | m5
	tests := []struct {
		name         string
		fail         string // the message whose entry fails
		queueDown    bool
		wantStored   []string // stored by the first delivery, in order
		wantFailures []string
		wantRouted   int // FilesRouted counted by the first delivery
	}{
		{"first entry of the second call", "m3", false, []string{"m1", "m2", "m4"}, []string{"m3", "m4", "m5"}, 2},
		{"last entry of the second call", "m4", false, []string{"m1", "m2", "m3"}, []string{"m4", "m5"}, 3},
		{"first entry of the first call", "m1", false, []string{"m2"}, []string{"m1", "m2", "m3", "m4", "m5"}, 0},
		{"the pool queue is down", "", true, nil, []string{"m1", "m2", "m3", "m4", "m5"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rr := newRouterRig(t)
			rr.sqs.Deduplicate = true
			rr.sqs.FailEntry = func(in *sqs.SendMessageInput) bool { return messageOf(in) == tt.fail }
			if tt.queueDown {
				rr.sqs.Errs[testQueueURL] = errors.New("ServiceUnavailable")
			}
			ev := intakeBatch(t, keys...)
			resp, err := rr.r.Handle(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			var stored, failures []string
			for _, in := range rr.sqs.Sends {
				stored = append(stored, messageOf(in))
			}
			for _, f := range resp.BatchItemFailures {
				failures = append(failures, f.ItemIdentifier)
			}
			if !slices.Equal(stored, tt.wantStored) || !slices.Equal(failures, tt.wantFailures) {
				t.Errorf("got stored %v, failures %v, want %v, %v", stored, failures, tt.wantStored, tt.wantFailures)
			}
			routed, errorsLogged := 0, 0
			for _, d := range rr.out.Lines(t) {
				if d[metrics.FilesRouted] == 1.0 {
					routed++
				}
				if d["level"] == "ERROR" {
					errorsLogged++
				}
			}
			if routed != tt.wantRouted || errorsLogged != 1 {
				t.Errorf("got %d FilesRouted and %d ERROR lines, want %d and 1", routed, errorsLogged, tt.wantRouted)
			}

			// The intake delivers the kept messages again, in order, and the pool queue is back.
			rr.sqs.FailEntry, rr.sqs.Errs = nil, map[string]error{}
			var again events.SQSEvent
			for _, rec := range ev.Records {
				if slices.Contains(failures, rec.MessageId) {
					again.Records = append(again.Records, rec)
				}
			}
			if resp, err := rr.r.Handle(context.Background(), again); err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("redelivery: got %v, failures %v, want none", err, resp.BatchItemFailures)
			}
			perTenant := map[string][]string{}
			for _, in := range rr.sqs.Sends {
				perTenant[aws.ToString(in.MessageGroupId)] = append(perTenant[aws.ToString(in.MessageGroupId)], messageOf(in))
			}
			if want := map[string][]string{"acme": {"m1", "m3", "m5"}, "globex": {"m2", "m4"}}; !maps.EqualFunc(perTenant, want, slices.Equal) {
				t.Errorf("pool queue holds %v, want each event once, in order: %v", perTenant, want)
			}
		})
	}
}

func TestRouterSendBatchSizeFromEnv(t *testing.T) {
	for _, tt := range []struct {
		value   string
		want    int
		wantErr bool
	}{{"", 10, false}, {"1", 1, false}, {"10", 10, false}, {"0", 0, true}, {"11", 0, true}, {"ten", 0, true}} {
		env := routerEnv(t)
		env[pipeline.EnvRouterSendBatchSize] = tt.value
		c, err := ConfigFromEnv(func(k string) string { return env[k] })
		if (err != nil) != tt.wantErr || (err == nil && c.SendBatchSize != tt.want) {
			t.Errorf("%s=%q: got %d, error %v, want %d, error %v", pipeline.EnvRouterSendBatchSize, tt.value, c.SendBatchSize, err, tt.want, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), pipeline.EnvRouterSendBatchSize) {
			t.Errorf("error %q does not name %s", err, pipeline.EnvRouterSendBatchSize)
		}
	}
}

func TestRouterParkEachFromEnv(t *testing.T) {
	for _, tt := range []struct {
		value   string
		want    bool
		wantErr bool
	}{{"", false, false}, {"false", false, false}, {"true", true, false}, {"yes", false, true}} {
		env := routerEnv(t)
		env[pipeline.EnvRouterParkEach] = tt.value
		c, err := ConfigFromEnv(func(k string) string { return env[k] })
		if (err != nil) != tt.wantErr || (err == nil && c.ParkEach != tt.want) {
			t.Errorf("%s=%q: got %v, error %v, want %v, error %v", pipeline.EnvRouterParkEach, tt.value, c.ParkEach, err, tt.want, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), pipeline.EnvRouterParkEach) {
			t.Errorf("error %q does not name %s", err, pipeline.EnvRouterParkEach)
		}
	}
}
