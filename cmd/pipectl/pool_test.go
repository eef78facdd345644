package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/s3event"
)

// pooledWorld is world() with pool "shared": hooli (halt) is blocked at hooli-1, umbrella
// (continue) runs umbrella-1, and the pool queue holds 3 visible and 2 in-flight messages.
func pooledWorld() (*opsfake.World, map[string]pipeline.TenantOutput) {
	w := world()
	ts := w.AddPool("TenantPipeline-Pool-shared", opsfake.Pool("shared"), map[string]string{
		"hooli": pipeline.OnFailureHalt, "umbrella": pipeline.OnFailureContinue, "vandelay": pipeline.OnFailureContinue})
	w.AddExecution(ts["hooli"], "hooli-1", sfntypes.ExecutionStatusFailed, "pool/shared/hooli/a.csv", now.Add(-5*time.Minute))
	w.AddExecution(ts["umbrella"], "umbrella-1", sfntypes.ExecutionStatusRunning, "pool/shared/umbrella/b.csv", now.Add(-time.Minute))
	q := w.Queues[ts["hooli"].QueueURL]
	q.Visible, q.InFlight = 3, 2
	return w, ts
}

// A pooled tenant is found from the pool's output and its controller's code; status gives its tier
// and pool, counts SQS does not know as null, and the pool's own line.
func TestStatusPooledJSON(t *testing.T) {
	w, _ := pooledWorld()
	code, stdout, stderr := runIn(t, w, "status", "--json")
	if code != 0 {
		t.Fatalf("got exit %d, %s", code, stderr)
	}
	var rep struct {
		Tenants []map[string]any `json:"tenants"`
		Pools   []map[string]any `json:"pools"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	by := map[string]map[string]any{}
	for _, tn := range rep.Tenants {
		by[tn["id"].(string)] = tn
	}
	for id, want := range map[string]string{
		"acme":     `{"tier":"silo","pool":null,"paused":false,"blocked":true,"queue":{"visible":2,"inFlight":1}}`,
		"hooli":    `{"tier":"pool","pool":"shared","paused":false,"blocked":true,"queue":{"visible":null,"inFlight":1}}`,
		"umbrella": `{"tier":"pool","pool":"shared","paused":false,"blocked":false,"queue":{"visible":null,"inFlight":1}}`,
		"vandelay": `{"tier":"pool","pool":"shared","paused":false,"blocked":false,"queue":{"visible":null,"inFlight":null}}`,
	} {
		var exp map[string]any
		json.Unmarshal([]byte(want), &exp)
		for k, v := range exp {
			if got, _ := json.Marshal(by[id][k]); string(got) != mustJSON(v) {
				t.Errorf("%s.%s: got %s, want %s", id, k, got, mustJSON(v))
			}
		}
	}
	if h, _ := by["hooli"]["head"].(map[string]any); h == nil || h["executionName"] != "hooli-1" {
		t.Errorf("hooli: got head %v, want hooli-1 (its own execution, not umbrella's)", by["hooli"]["head"])
	}
	if len(rep.Pools) != 1 {
		t.Fatalf("got pools %v, want one", rep.Pools)
	}
	p := rep.Pools[0]
	if p["name"] != "shared" || p["tenants"] != 3.0 || mustJSON(p["tenantIds"]) != `["hooli","umbrella","vandelay"]` ||
		mustJSON(p["queue"]) != `{"inFlight":2,"visible":3}` || p["oldestMessageAgeSeconds"] == nil {
		t.Errorf("got pool %v, want shared: 3 tenants, 3 visible, 2 in flight, an oldest age", p)
	}
	_, table, _ := runIn(t, w, "status")
	if !strings.Contains(table, "pool shared (TenantPipeline-Pool-shared): 3 tenants, queue 3 visible, 2 in flight") {
		t.Errorf("got table\n%s\nwant the pool's line", table)
	}
}

// A pooled tenant of a pool with a bound shows its files queued and parked; one of a pool
// without a bound, and a silo tenant, show null.
func TestStatusPooledBacklog(t *testing.T) {
	w, _ := pooledWorld()
	w.Env[opsfake.Pool("shared").ControllerFunction] = map[string]string{pipeline.EnvPool: "shared",
		pipeline.EnvPoolAdmissionTable: "pool-admission", pipeline.EnvMaxQueuedFilesPerTenant: "2"}
	w.SetBacklog("pool-admission", "hooli", []string{"ev-1", "ev-2"}, 4, 7)
	code, stdout, stderr := runIn(t, w, "status", "--json")
	if code != 0 {
		t.Fatalf("got exit %d, %s", code, stderr)
	}
	var rep struct {
		Tenants []map[string]any `json:"tenants"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"acme": `null null`, "globex": `null null`, "hooli": `3 2`, "umbrella": `0 0`, "vandelay": `0 0`}
	for _, tn := range rep.Tenants {
		id := tn["id"].(string)
		if got := mustJSON(tn["parked"]) + " " + mustJSON(tn["queuedFiles"]); got != want[id] {
			t.Errorf("%s: got parked, queuedFiles %s, want %s", id, got, want[id])
		}
	}
	_, table, _ := runIn(t, w, "status")
	if !strings.Contains(table, "hooli backlog: 2 files queued in pool shared, 3 parked outside it") {
		t.Errorf("got table\n%s\nwant hooli's backlog line", table)
	}
	if strings.Contains(table, "umbrella backlog") {
		t.Errorf("got table\n%s\nwant no backlog line for a tenant with nothing queued or parked", table)
	}
}

// Pausing a pooled tenant writes its audited pause marker and leaves the pool's mapping alone;
// resume deletes it and makes the message the controller holds visible at once.
func TestPauseResumePooledTenant(t *testing.T) {
	w, ts := pooledWorld()
	code, stdout, stderr := runIn(t, w, "pause", "hooli", "--reason", "supplier resends", "--json")
	if code != 0 {
		t.Fatalf("pause: got exit %d, %s", code, stderr)
	}
	var res map[string]any
	json.Unmarshal([]byte(stdout), &res)
	if res["state"] != "Disabled" || res["changed"] != true || res["pool"] != "shared" || res["markerKey"] != "control/pool.shared/hooli/paused.json" {
		t.Errorf("pause: got %s", stdout)
	}
	body, ok := w.Body("ingest", "control/pool.shared/hooli/paused.json")
	rec, err := pipeline.DecodePauseRecord([]byte(body))
	if !ok || err != nil || rec.RequestedBy != w.CallerARN || rec.Reason != "supplier resends" || !rec.RequestedAt.Equal(now) {
		t.Errorf("got marker %q (%v), want the audit record", body, err)
	}
	if len(w.Updates) != 0 {
		t.Errorf("got event source mapping updates %v, want none", w.Updates)
	}
	if _, stdout, _ := runIn(t, w, "status", "hooli", "--json"); !strings.Contains(stdout, `"paused": true`) {
		t.Errorf("status: got %s, want hooli paused", stdout)
	}
	// The controller holds hooli's next message.
	ws, _ := pipeline.EncodeWakeState(pipeline.WakeState{Version: 1, MessageID: "m9", ReceiptHandle: "rh-m9", QueueURL: ts["hooli"].QueueURL,
		WrittenAt: now, Paused: true})
	w.PutObject(t.Context(), putInput("ingest", pipeline.WakeStateKey(w.OwnerOf("hooli")), string(ws)))

	code, stdout, stderr = runIn(t, w, "resume", "hooli")
	if code != 0 || !strings.Contains(stdout, "resumed hooli (pool shared)") || !strings.Contains(stdout, "made visible") {
		t.Errorf("resume: got exit %d, %q %q", code, stdout, stderr)
	}
	if _, ok := w.Body("ingest", "control/pool.shared/hooli/paused.json"); ok {
		t.Error("resume left the pause marker")
	}
	if len(w.Visibility) != 1 || aws.ToString(w.Visibility[0].ReceiptHandle) != "rh-m9" || w.Visibility[0].VisibilityTimeout != 0 {
		t.Errorf("got visibility changes %+v, want rh-m9 made visible", w.Visibility)
	}
}

// A pooled tenant cannot redrive another tenant's execution of the shared state machine.
func TestRedrivePooledOtherTenantsExecution(t *testing.T) {
	w, _ := pooledWorld()
	code, _, stderr := runIn(t, w, "redrive", "umbrella", "hooli-1")
	if code != 1 || !strings.Contains(stderr, "tenant umbrella has no execution hooli-1") {
		t.Errorf("got exit %d, %q", code, stderr)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func putInput(bucket, key, body string) *s3.PutObjectInput {
	return &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)}
}

// Objects under no tenant's prefix are in status: their events wait on the pool's dead-letter
// queue, which replay --from-dlq of any tenant leaves as they are.
func TestStatusUnroutedObjects(t *testing.T) {
	event := func(id, bucket, key string, at time.Time) sqstypes.Message {
		b, _ := json.Marshal(s3event.ObjectCreated(id, at, bucket, s3event.Object{Key: key, Size: 3}))
		return sqstypes.Message{Body: aws.String(string(b)), MessageId: aws.String("m-" + id), ReceiptHandle: aws.String("rh-" + id)}
	}
	for _, tc := range []struct {
		name     string
		dlq      bool
		messages []sqstypes.Message
		wantJSON string // the pool's unroutedObjects and unroutedKeys
		wantLine string // "" for none
	}{
		{name: "no dead-letter queue", wantJSON: `{"unroutedObjects":null,"unroutedKeys":null}`},
		{name: "an empty dead-letter queue", dlq: true, wantJSON: `{"unroutedObjects":0,"unroutedKeys":[]}`},
		{name: "unrouted objects, newest first", dlq: true, messages: []sqstypes.Message{
			event("e1", "ingest", "pool/shared/nobody/1.csv", now.Add(-3*time.Minute)),
			event("e2", "ingest", "pool/shared/hooli/a.csv", now.Add(-2*time.Minute)), // a tenant's: not unrouted
			{Body: aws.String("not an event"), MessageId: aws.String("m-junk")},
			event("e3", "ingest", "pool/shared/new one/請求書 2.csv", now.Add(-1*time.Minute)),
			event("e4", "other-bucket", "pool/shared/nobody/x.csv", now.Add(-1*time.Minute)),
			event("e5", "ingest", "pool/shared/nobody/1.csv", now.Add(-4*time.Minute)), // the same key again
		},
			wantJSON: `{"unroutedObjects":3,"unroutedKeys":["pool/shared/new one/請求書 2.csv","pool/shared/nobody/1.csv"]}`,
			wantLine: "pool shared: 3 objects under no tenant's prefix, their events on the pool's dead-letter queue; newest: 'pool/shared/new one/請求書 2.csv' pool/shared/nobody/1.csv\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			build := func() *opsfake.World {
				w := world()
				p := opsfake.Pool("shared")
				if tc.dlq {
					p.DLQURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/pool-shared-dlq"
				}
				w.AddPool("TenantPipeline-Pool-shared", p, map[string]string{"hooli": pipeline.OnFailureHalt})
				if tc.dlq {
					w.Queues[p.DLQURL].Messages = slices.Clone(tc.messages)
				}
				return w
			}
			code, stdout, stderr := runIn(t, build(), "status", "--json")
			if code != 0 {
				t.Fatalf("got exit %d, %s", code, stderr)
			}
			var rep struct {
				Pools []struct {
					UnroutedObjects *int     `json:"unroutedObjects"`
					UnroutedKeys    []string `json:"unroutedKeys"`
				} `json:"pools"`
			}
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Pools) != 1 {
				t.Fatalf("got %s (%v), want one pool", stdout, err)
			}
			if got := mustJSON(rep.Pools[0]); got != tc.wantJSON {
				t.Errorf("got %s, want %s", got, tc.wantJSON)
			}
			_, text, _ := runIn(t, build(), "status")
			gotLine := ""
			for _, l := range strings.SplitAfter(text, "\n") {
				if strings.Contains(l, "under no tenant") {
					gotLine = l
				}
			}
			if gotLine != tc.wantLine {
				t.Errorf("got line %q, want %q", gotLine, tc.wantLine)
			}
		})
	}
}

// health names a pool's tenants over each per-tenant alarm's threshold, from its Contributor
// Insights rules: JSON, and a table with one row per tenant; a bad window is bad usage.
func TestHealthPool(t *testing.T) {
	w, _ := pooledWorld()
	rule := func(m string) string { return "TenantPipeline-Pool-shared-shared-Tenant" + m }
	w.SetInsightReport(rule("Blocked"), map[string][]float64{"hooli": {1, 0}, "umbrella": {0}})
	w.SetInsightReport(rule("FailedFiles"), map[string][]float64{})
	w.SetInsightReport(rule("HeadRunningSeconds"), map[string][]float64{"umbrella": {3}})
	w.SetInsightReport(rule("HeadQueuedSeconds"), map[string][]float64{})
	w.SetInsightReport(rule("SequenceGapsOverdue"), map[string][]float64{"hooli": {0, 1}})
	code, stdout, stderr := runIn(t, w, "health", "shared", "--json")
	if code != 0 {
		t.Fatalf("got exit %d, %s", code, stderr)
	}
	var h struct {
		Pool   string `json:"pool"`
		Alarms []struct {
			Alarm, Rule string
			Tenants     []struct {
				Tenant string
				Value  float64
			}
		} `json:"alarms"`
	}
	if err := json.Unmarshal([]byte(stdout), &h); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range h.Alarms {
		for _, tv := range a.Tenants {
			got[a.Alarm] += fmt.Sprintf("%s=%g;", tv.Tenant, tv.Value)
		}
	}
	if h.Pool != "shared" || len(h.Alarms) != 5 || got["TenantBlocked"] != "hooli=1;" || got["TenantHeadRunning"] != "umbrella=3;" ||
		got["TenantSequenceGap"] != "hooli=1;" || len(got) != 3 {
		t.Errorf("got pool %s, alarms %v, want shared, 5 alarms, hooli blocked and in a sequence gap, umbrella's head running", h.Pool, got)
	}
	_, table, _ := runIn(t, w, "health", "shared")
	if !strings.Contains(table, "TenantBlocked") || !strings.Contains(table, "hooli") || strings.Contains(table, "vandelay") {
		t.Errorf("got table\n%s\nwant hooli's TenantBlocked row and no vandelay", table)
	}
	// A pool deployed before a rule existed: that alarm's tenants are unknown, said so, and the
	// others are read.
	delete(w.InsightReports, rule("SequenceGapsOverdue"))
	if _, table, _ := runIn(t, w, "health", "shared"); !strings.Contains(table, "TenantSequenceGap") || !strings.Contains(table, "rule not deployed") ||
		!strings.Contains(table, "hooli") {
		t.Errorf("a missing rule: got table\n%s\nwant the other alarms and TenantSequenceGap's rule said not deployed", table)
	}
	if code, _, _ := runIn(t, w, "health", "shared", "--minutes", "0"); code != 2 {
		t.Errorf("--minutes 0: got exit %d, want 2", code)
	}
}

// health's argument completes with the pools, not the tenants.
func TestHealthCompletesPools(t *testing.T) {
	w, _ := pooledWorld()
	_, stdout, _ := runIn(t, w, "__complete", "health", "")
	if !strings.Contains(stdout, "shared\tpool") || strings.Contains(stdout, "hooli") {
		t.Errorf("got %q, want the pool shared and no tenant", stdout)
	}
}
