package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/s3event"
)

const testDLQURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/shared-1-unrouted"

// routerEnv is the router's environment for the pool of testdata/pool-tenants.json.
func routerEnv(t *testing.T) map[string]string {
	t.Helper()
	p := poolEnv(t)
	return map[string]string{
		pipeline.EnvFunctionRole:       pipeline.FunctionRoleRouter,
		pipeline.EnvPool:               p[pipeline.EnvPool],
		pipeline.EnvPoolPrefix:         p[pipeline.EnvPoolPrefix],
		pipeline.EnvPoolSettings:       p[pipeline.EnvPoolSettings],
		"LAMBDA_TASK_ROOT":             p["LAMBDA_TASK_ROOT"],
		pipeline.EnvBucket:             testBucket,
		pipeline.EnvQueueURL:           testQueueURL,
		pipeline.EnvDeadLetterQueueURL: testDLQURL,
	}
}

type routerRig struct {
	r   *Router
	sqs *fakeSender
	out *syncBuffer
}

func newRouterRig(t *testing.T) *routerRig {
	t.Helper()
	env := routerEnv(t)
	cfg, err := routerConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	rr := &routerRig{sqs: &fakeSender{errs: map[string]error{}}, out: &syncBuffer{}}
	ns := cfg.MetricsNamespace
	rr.r = NewRouter(cfg, rr.sqs, slog.New(slog.NewJSONHandler(rr.out, nil)),
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
			_, err := routerConfigFromEnv(func(k string) string { return env[k] })
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
			maps.Copy(rr.sqs.errs, tt.errs)
			body := tt.body(t)
			err := rr.r.Route(context.Background(), json.RawMessage(body))
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			var logs, emf []map[string]any
			for _, d := range rr.out.lines(t) {
				if _, ok := d["_aws"]; ok {
					emf = append(emf, d)
				} else {
					logs = append(logs, d)
				}
			}
			if tt.wantErr {
				if len(rr.sqs.sends) != 0 || len(emf) != 0 {
					t.Errorf("got sends %d and metrics %v, want none", len(rr.sqs.sends), emf)
				}
				if len(logs) != 1 || logs[0]["level"] != "ERROR" {
					t.Errorf("got logs %v, want one ERROR", logs)
				}
				return
			}
			if len(rr.sqs.sends) != 1 {
				t.Fatalf("got %d sends, want 1", len(rr.sqs.sends))
			}
			in := rr.sqs.sends[0]
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
			maps.Copy(rr.sqs.errs, tt.errs)
			ev := batch(t, tt.keys...)
			resp, err := rr.r.Handle(context.Background(), ev)
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			var queues []string
			for i, in := range rr.sqs.sends {
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
