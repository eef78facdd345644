package controller

import (
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/testfake"
)

const (
	globexKey = "inbox/globex/2024-05-01 orders.jsonl"
	acmeKey   = key1
)

// poolRig is a Pool wired to fakes, a fixed clock and captured logs and metrics.
type poolRig struct {
	p   *Pool
	sfn *fakeSFN
	sqs *fakeSQS
	s3  *fakeS3
	out *testfake.Logs
}

func newPoolRig(t *testing.T, env map[string]string) *poolRig {
	t.Helper()
	r := &poolRig{sfn: newFakeSFN(), sqs: &fakeSQS{}, s3: newFakeS3(), out: &testfake.Logs{}}
	r.s3.keysPool = testPool
	cfg := mustPoolConfig(t, env)
	clock := func() time.Time { return testStart }
	ns := cfg.Shared.MetricsNamespace
	r.p = newPool(cfg, r.sfn, r.sqs, r.s3, slog.New(slog.NewJSONHandler(r.out, nil)),
		metrics.NewDimension(r.out, ns, metrics.DimensionPool, cfg.Shared.Pool).WithClock(clock),
		func(tenant string) *metrics.Emitter { return metrics.New(r.out, ns, tenant).WithClock(clock) })
	r.p.setup = func(h *Handler) {
		h.now = clock
		h.throttleBackoff = noJitter(h.cfg)
		h.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	}
	return r
}

// poolMessage is a pool queue record of the message group group.
func poolMessage(id, body, group string) events.SQSMessage {
	m := message(id, body, 1)
	m.Attributes["MessageGroupId"] = group
	return m
}

func (r *poolRig) logs(t *testing.T) []map[string]any {
	var out []map[string]any
	for _, d := range r.out.Lines(t) {
		if _, ok := d["level"]; ok {
			out = append(out, d)
		}
	}
	return out
}

// emf returns the EMF lines.
func (r *poolRig) emf(t *testing.T) []map[string]any {
	var out []map[string]any
	for _, d := range r.out.Lines(t) {
		if _, ok := d["_aws"]; ok {
			out = append(out, d)
		}
	}
	return out
}

// metricSum adds up metric name over the EMF lines whose dimension is dim=value.
func (r *poolRig) metricSum(t *testing.T, dim, value, name string) float64 {
	sum := 0.0
	for _, d := range r.emf(t) {
		if d[dim] == value {
			if v, ok := d[name].(float64); ok {
				sum += v
			}
		}
	}
	return sum
}

func (r *poolRig) findLog(t *testing.T, level, msg string) map[string]any {
	t.Helper()
	for _, l := range r.logs(t) {
		if l["level"] == level && strings.Contains(l["msg"].(string), msg) {
			return l
		}
	}
	t.Fatalf("got no %s log containing %q; logs:\n%v", level, msg, r.logs(t))
	return nil
}

// checkTenantLogs checks that every log line names the pool, and every line of a delivery its tenant.
func (r *poolRig) checkTenantLogs(t *testing.T) {
	t.Helper()
	for _, l := range r.logs(t) {
		if l["pool"] != testPool {
			t.Errorf("got log line without pool %s: %v", testPool, l)
		}
		if _, ok := l["messageId"]; ok && l["tenant"] == nil {
			t.Errorf("got a delivery's log line without its tenant: %v", l)
		}
	}
}

// Each record goes to the Handler of its message group's tenant, whose settings its execution
// carries: acme's defaults (event id name, chunk size 100), globex's object-version name and
// chunk size 50.
func TestPoolHandleDispatchesByGroup(t *testing.T) {
	tests := []struct {
		name          string
		records       func(t *testing.T) []events.SQSMessage
		wantTenants   map[string]string // tenant of each created execution → its file's key
		wantFailures  []string
		wantVisible   []visibilityChange
		wantQuarantAt string // S3 object the body was quarantined to, if any
	}{
		{
			name: "acme's file",
			records: func(t *testing.T) []events.SQSMessage {
				return []events.SQSMessage{poolMessage("m1", eventBody(t, evID1, acmeKey), "acme")}
			},
			wantTenants:  map[string]string{"acme": acmeKey},
			wantFailures: []string{"m1"},
			wantVisible:  []visibilityChange{{"rh-m1", 1}},
		},
		{
			name: "globex's file",
			records: func(t *testing.T) []events.SQSMessage {
				return []events.SQSMessage{poolMessage("m2", eventBody(t, evID2, globexKey), "globex")}
			},
			wantTenants:  map[string]string{"globex": globexKey},
			wantFailures: []string{"m2"},
			wantVisible:  []visibilityChange{{"rh-m2", 1}},
		},
		{
			name: "two tenants in one batch",
			records: func(t *testing.T) []events.SQSMessage {
				return []events.SQSMessage{poolMessage("m1", eventBody(t, evID1, acmeKey), "acme"), poolMessage("m2", eventBody(t, evID2, globexKey), "globex")}
			},
			wantTenants:  map[string]string{"acme": acmeKey, "globex": globexKey},
			wantFailures: []string{"m1", "m2"},
			wantVisible:  []visibilityChange{{"rh-m1", 1}, {"rh-m2", 1}},
		},
		{
			// acme's head waits, so acme's second record is held behind it; globex is not.
			name: "two of acme's files around globex's",
			records: func(t *testing.T) []events.SQSMessage {
				return []events.SQSMessage{poolMessage("m1", eventBody(t, evID1, acmeKey), "acme"),
					poolMessage("m2", eventBody(t, evID2, globexKey), "globex"),
					poolMessage("m3", eventBody(t, evID3, "inbox/acme/b.csv"), "acme")}
			},
			wantTenants:  map[string]string{"acme": acmeKey, "globex": globexKey},
			wantFailures: []string{"m1", "m3", "m2"},
			wantVisible:  []visibilityChange{{"rh-m1", 1}, {"rh-m3", 1}, {"rh-m2", 1}},
		},
		{
			// The group decides the tenant: a globex key in acme's group is not acme's file.
			name: "the group decides, not the key",
			records: func(t *testing.T) []events.SQSMessage {
				return []events.SQSMessage{poolMessage("m1", eventBody(t, evID1, globexKey), "acme")}
			},
			wantTenants:   map[string]string{},
			wantFailures:  []string{},
			wantQuarantAt: testBucket + "/" + pipeline.QuarantineDir(pipeline.PoolOwner(testPool, "acme")) + "m1.json",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newPoolRig(t, nil)
			resp, err := r.p.Handle(context.Background(), events.SQSEvent{Records: tt.records(t)})
			if err != nil {
				t.Fatal(err)
			}
			var failures []string
			for _, f := range resp.BatchItemFailures {
				failures = append(failures, f.ItemIdentifier)
			}
			if !slices.Equal(failures, tt.wantFailures) && !(len(failures) == 0 && len(tt.wantFailures) == 0) {
				t.Errorf("got failures %v, want %v", failures, tt.wantFailures)
			}
			if !slices.Equal(r.sqs.changes, tt.wantVisible) && !(len(r.sqs.changes) == 0 && len(tt.wantVisible) == 0) {
				t.Errorf("got visibility changes %v, want %v", r.sqs.changes, tt.wantVisible)
			}
			got := map[string]string{}
			for _, arn := range r.sfn.created {
				in := r.sfn.input(t, arn)
				got[in.Tenant.ID] = in.Source.Key
				settings, _ := r.p.cfg.Settings.Tenant(in.Tenant.ID)
				// The tenant's row, with its prefix, which Split checks the object's key against.
				want := settings.Settings
				want.Prefix = settings.Prefix
				if !reflect.DeepEqual(in.Tenant, want) || want.Prefix == "" {
					t.Errorf("execution %s: got tenant settings %+v, want %+v", arn, in.Tenant, want)
				}
				name := strings.TrimPrefix(arn, testExecPrefix)
				if wantOV := in.Tenant.ID == "globex"; strings.HasPrefix(name, objectVersionNamePrefix) != wantOV {
					t.Errorf("execution %s of %s: object-version name %v, want %v", name, in.Tenant.ID, !wantOV, wantOV)
				}
			}
			if len(got) != len(tt.wantTenants) {
				t.Errorf("got executions of %v, want %v", got, tt.wantTenants)
			}
			for tenant, key := range tt.wantTenants {
				if got[tenant] != key {
					t.Errorf("tenant %s: got an execution for key %q, want %q", tenant, got[tenant], key)
				}
				if n := r.metricSum(t, metrics.DimensionTenant, tenant, metrics.Starts); n != 1 {
					t.Errorf("tenant %s: got Starts %v, want 1", tenant, n)
				}
			}
			if tt.wantQuarantAt != "" {
				if _, ok := r.s3.objects[tt.wantQuarantAt]; !ok {
					t.Errorf("got objects %v, want %s", slices.Collect(func(yield func(string) bool) {
						for k := range r.s3.objects {
							if !yield(k) {
								return
							}
						}
					}), tt.wantQuarantAt)
				}
			}
			r.checkTenantLogs(t)
		})
	}
}

// A message whose group is no tenant of the pool is kept (a batch item failure, visible again
// after MAX_WAIT_SECONDS), logged at ERROR and counted, and never reaches a tenant's Handler.
func TestPoolHandleUnknownTenant(t *testing.T) {
	tests := []struct {
		name         string
		records      func(t *testing.T) []events.SQSMessage
		wantFailures []string
		wantVisible  []visibilityChange
		wantTenant   string // logged tenant of the unknown message
		wantCreated  int
	}{
		{
			name: "removed tenant",
			records: func(t *testing.T) []events.SQSMessage {
				return []events.SQSMessage{poolMessage("m9", eventBody(t, evID1, "inbox/initech/a.csv"), "initech")}
			},
			wantFailures: []string{"m9"},
			wantVisible:  []visibilityChange{{"rh-m9", 60}},
			wantTenant:   "initech",
		},
		{
			name: "beside a tenant's file",
			records: func(t *testing.T) []events.SQSMessage {
				return []events.SQSMessage{poolMessage("m9", eventBody(t, evID2, "inbox/initech/a.csv"), "initech"), poolMessage("m1", eventBody(t, evID1, acmeKey), "acme")}
			},
			wantFailures: []string{"m9", "m1"},
			wantVisible:  []visibilityChange{{"rh-m9", 60}, {"rh-m1", 1}},
			wantTenant:   "initech",
			wantCreated:  1,
		},
		{
			name: "no message group",
			records: func(t *testing.T) []events.SQSMessage {
				return []events.SQSMessage{poolMessage("m9", eventBody(t, evID1, acmeKey), "")}
			},
			wantFailures: []string{"m9"},
			wantVisible:  []visibilityChange{{"rh-m9", 60}},
			wantTenant:   "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newPoolRig(t, nil)
			resp, err := r.p.Handle(context.Background(), events.SQSEvent{Records: tt.records(t)})
			if err != nil {
				t.Fatal(err)
			}
			var failures []string
			for _, f := range resp.BatchItemFailures {
				failures = append(failures, f.ItemIdentifier)
			}
			if !slices.Equal(failures, tt.wantFailures) {
				t.Errorf("got failures %v, want %v", failures, tt.wantFailures)
			}
			if !slices.Equal(r.sqs.changes, tt.wantVisible) {
				t.Errorf("got visibility changes %v, want %v", r.sqs.changes, tt.wantVisible)
			}
			if len(r.sfn.created) != tt.wantCreated {
				t.Errorf("got executions %v, want %d", r.sfn.created, tt.wantCreated)
			}
			l := r.findLog(t, "ERROR", "message of no tenant of the pool; message kept")
			if l["tenant"] != tt.wantTenant || l["pool"] != testPool || l["messageId"] != "m9" {
				t.Errorf("got log %v, want tenant %q, pool %s, messageId m9", l, tt.wantTenant, testPool)
			}
			if n := r.metricSum(t, metrics.DimensionPool, testPool, metrics.UnknownTenantMessages); n != 1 {
				t.Errorf("got UnknownTenantMessages %v, want 1", n)
			}
			for k := range r.s3.objects {
				if strings.Contains(k, "initech") {
					t.Errorf("got object %s, want nothing written for the unknown tenant", k)
				}
			}
		})
	}
}

// A status change event goes to the Handler of the tenant in the execution's input: from the
// event, or from DescribeExecution when the event leaves the input out. Only that tenant's head
// message is woken.
func TestPoolWake(t *testing.T) {
	tests := []struct {
		name          string
		input         func(t *testing.T, r *poolRig) string // the detail's "input" JSON value; "" leaves it null
		stateMachine  string                                // replaces the file state machine's name, if set
		wantErr       bool
		wantWoken     bool
		wantDescribes int // DescribeExecution calls the wake-up made
		wantUnknown   float64
	}{
		{
			name: "input in the event",
			input: func(t *testing.T, r *poolRig) string {
				b, _ := json.Marshal(string(mustJSON(t, r.sfn.input(t, arn1))))
				return string(b)
			},
			wantWoken: true,
		},
		{name: "input left out", input: func(*testing.T, *poolRig) string { return "null" }, wantWoken: true, wantDescribes: 1},
		{
			name: "input of no tenant of the pool",
			input: func(t *testing.T, r *poolRig) string {
				in := r.sfn.input(t, arn1)
				in.Tenant.ID = "initech"
				b, _ := json.Marshal(string(mustJSON(t, in)))
				return string(b)
			},
			wantUnknown: 1,
		},
		{name: "input names no tenant", input: func(*testing.T, *poolRig) string { return `"{}"` }, wantUnknown: 1},
		{name: "another state machine", input: func(*testing.T, *poolRig) string { return "null" }, stateMachine: "other-files", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newPoolRig(t, wakeEnv)
			ctx := context.Background()
			if _, err := r.p.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{
				poolMessage("m1", eventBody(t, evID1, acmeKey), "acme"),
				poolMessage("m2", eventBody(t, evID2, globexKey), "globex"),
			}}); err != nil {
				t.Fatal(err)
			}
			r.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
			for _, k := range []string{wakeStateObjectOf(testPool), testBucket + "/" + pipeline.WakeStateKey(pipeline.PoolOwner(testPool, "globex"))} {
				if _, ok := r.s3.objects[k]; !ok {
					t.Fatalf("got no wake-up state %s, want one", k)
				}
			}
			changesBefore, describesBefore := len(r.sqs.changes), r.sfn.describes

			payload := string(statusPayload(t, evID1, "SUCCEEDED"))
			payload = strings.Replace(payload, `"input": "{}"`, `"input": `+tt.input(t, r), 1)
			if tt.stateMachine != "" {
				payload = strings.ReplaceAll(payload, "acme-files", tt.stateMachine)
			}
			_, err := r.p.Invoke(ctx, json.RawMessage(payload))
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			woken := slices.Contains(r.sqs.changes[changesBefore:], visibilityChange{"rh-m1", 0})
			if woken != tt.wantWoken {
				t.Errorf("got acme's head woken %v, want %v (changes %v)", woken, tt.wantWoken, r.sqs.changes[changesBefore:])
			}
			if slices.Contains(r.sqs.changes[changesBefore:], visibilityChange{"rh-m2", 0}) {
				t.Error("got globex's head woken by acme's execution, want it untouched")
			}
			if _, ok := r.s3.objects[wakeDoneObjectOf(testPool)]; ok != tt.wantWoken {
				t.Errorf("got acme's wake-done record %v, want %v", ok, tt.wantWoken)
			}
			if n := r.sfn.describes - describesBefore; n != tt.wantDescribes {
				t.Errorf("got %d DescribeExecution calls, want %d", n, tt.wantDescribes)
			}
			if n := r.metricSum(t, metrics.DimensionPool, testPool, metrics.UnknownTenantEvents); n != tt.wantUnknown {
				t.Errorf("got UnknownTenantEvents %v, want %v", n, tt.wantUnknown)
			}
			if tt.wantWoken && r.metricSum(t, metrics.DimensionTenant, "acme", metrics.WakeUps) != 1 {
				t.Error("got no WakeUps of acme, want 1")
			}
			r.checkTenantLogs(t)
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// In pool mode no metric has a Tenant dimension: a tenant's metrics have the dimension set [Pool]
// alone and carry the tenant as the property Tenant, as do the pool-wide metrics minus the
// property, so that a pool's custom metrics do not grow with its tenants.
func TestPoolMetricsCarryTenant(t *testing.T) {
	r := newPoolRig(t, nil)
	ctx := context.Background()
	r.sfn.set(testExecPrefix+evID3, sfntypes.ExecutionStatusSucceeded)
	if _, err := r.p.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{
		poolMessage("m1", eventBody(t, evID1, acmeKey), "acme"),
		poolMessage("m2", eventBody(t, evID2, globexKey), "globex"),
		poolMessage("m9", eventBody(t, evID2, "inbox/initech/a.csv"), "initech"),
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.p.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{poolMessage("m3", eventBody(t, evID3, "inbox/acme/b.csv"), "acme")}}); err != nil {
		t.Fatal(err)
	}
	poolWide := []string{metrics.UnknownTenantMessages, metrics.UnknownTenantEvents, metrics.UnroutedObjects}
	seen := map[string]bool{}
	for _, d := range r.emf(t) {
		dirs := testfake.EMFDirectives(d)
		for _, dir := range dirs {
			if slices.Contains(dir.Dimensions, metrics.DimensionTenant) {
				t.Errorf("got metrics %v with dimensions %v, want no Tenant dimension in a pool", dir.Metrics, dir.Dimensions)
			}
		}
		names := dirs[0].Metrics
		pool := slices.ContainsFunc(names, func(n string) bool { return slices.Contains(poolWide, n) })
		tenant, _ := d[metrics.DimensionTenant].(string)
		switch {
		case !slices.Equal(dirs[0].Dimensions, []string{metrics.DimensionPool}) || d[metrics.DimensionPool] != testPool:
			t.Errorf("got metrics %v with directives %+v and Pool %v, want [Pool] with Pool %s", names, dirs, d["Pool"], testPool)
		case pool && d[metrics.DimensionTenant] != nil:
			t.Errorf("got pool-wide metrics %v with Tenant %v, want none", names, d["Tenant"])
		case !pool && tenant != "acme" && tenant != "globex":
			t.Errorf("got tenant metrics %v with Tenant %v, want the property Tenant acme or globex", names, d["Tenant"])
		}
		seen[tenant] = !pool
	}
	if !seen["acme"] || !seen["globex"] {
		t.Errorf("got tenant metrics of %v, want acme and globex", seen)
	}
	if r.metricSum(t, metrics.DimensionTenant, "acme", metrics.Completions) != 1 {
		t.Error("got no Completions of acme, want 1")
	}
}

// Every field the pool's per-tenant rules read (metrics.PoolTenantMetrics, from which the
// construct's Contributor Insights rules take their names) is in a pooled tenant's controller
// lines, as a metric under [Pool], with the property Tenant naming the tenant: a halted tenant's
// Blocked, a failed file under continue, the head file's queued and running time.
func TestPoolTenantAlarmMetricsEmitted(t *testing.T) {
	r := newPoolRig(t, nil)
	ctx := context.Background()
	handle := func(recs ...events.SQSMessage) {
		t.Helper()
		if _, err := r.p.Handle(ctx, events.SQSEvent{Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	// acme (continue): its first file's execution failed, its second is running.
	r.sfn.set(testExecPrefix+evID1, sfntypes.ExecutionStatusFailed)
	handle(poolMessage("m1", eventBody(t, evID1, acmeKey), "acme"))
	r.sfn.set(testExecPrefix+evID3, sfntypes.ExecutionStatusRunning)
	handle(poolMessage("m3", eventBody(t, evID3, "inbox/acme/b.csv"), "acme"))
	// globex (halt): its file's execution starts, then fails: globex is halted.
	handle(poolMessage("m2", eventBody(t, evID2, globexKey), "globex"))
	if len(r.sfn.created) != 1 {
		t.Fatalf("got executions %v, want globex's one", r.sfn.created)
	}
	r.sfn.set(r.sfn.created[0], sfntypes.ExecutionStatusFailed)
	handle(poolMessage("m2", eventBody(t, evID2, globexKey), "globex"))

	want := map[string]string{metrics.Blocked: "globex", metrics.FailedFiles: "acme", metrics.HeadRunningSeconds: "acme", metrics.HeadQueuedSeconds: "acme"}
	if len(metrics.PoolTenantMetrics) == 0 {
		t.Fatal("metrics.PoolTenantMetrics is empty")
	}
	for _, name := range metrics.PoolTenantMetrics {
		tenant, ok := want[name]
		if !ok {
			t.Errorf("%s is read by the pool's rules but this test does not drive it: add a case", name)
			continue
		}
		var found bool
		for _, d := range r.emf(t) {
			v, isNum := d[name].(float64)
			if d[metrics.DimensionTenant] != tenant || !isNum || (name != metrics.HeadRunningSeconds && name != metrics.HeadQueuedSeconds && v < 1) {
				continue
			}
			for _, dir := range testfake.EMFDirectives(d) {
				if slices.Contains(dir.Metrics, name) && slices.Equal(dir.Dimensions, []string{metrics.DimensionPool}) && d[metrics.DimensionPool] == testPool {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("%s of %s: got no line with it under [Pool] with Pool %s and Tenant %s, want one", name, tenant, testPool, tenant)
		}
	}
}
