package localrun

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// intakeFigureTenants is one pool of tenants whose ids begin with 32 different characters, with
// its intakeGroups (0: the default).
func intakeFigureTenants(pool string, tenants, groups int) string {
	const first = "abcdefghijklmnopqrstuvwxyz012345"
	var rows []string
	for i := range tenants {
		rows = append(rows, fmt.Sprintf(`{"id": "%c%03d", "tier": "pool", "pool": %q, "registerUrl": "https://core.example.com/records"}`, first[i%len(first)], i, pool))
	}
	return fmt.Sprintf(`{"pools": {%q: {"intakeGroups": %d}}, "tenants": [%s]}`, pool, groups, strings.Join(rows, ",\n"))
}

// TestFiguresPoolIntake measures the pool-intake figure (make figures): the same burst of "Object
// Created" events routed by the default intake (16 message groups, SendMessageBatch) and by the
// intake as it was (one message group, one SendMessage a message: intakeGroups 1 and
// ROUTER_SEND_BATCH_SIZE=1), one pool after the other in one test (the local run names the state
// machines by logical id, which two pool stacks share). The controller's mapping is off, so nothing
// but the router runs; the burst waits in the intake, then the router's mapping is turned on and the
// rate is the burst over the time until the intake is empty. It asserts what routing must keep
// (every event on the pool queue once, each tenant's in order), never a rate.
func TestFiguresPoolIntake(t *testing.T) {
	if os.Getenv("LOCALRUN_FIGURES") == "" {
		t.Skip("set LOCALRUN_FIGURES=1 to measure the figures (takes minutes)")
	}
	const tenants, files = 64, 16
	sharded := routeBurst(t, "sharded", 0, nil, tenants, files)
	single := routeBurst(t, "single", 1, []string{pipeline.EnvRouterSendBatchSize + "=1"}, tenants, files)
	fmt.Printf("pool-intake: sharded %.0f events/s, single group %.0f events/s, ratio %.1f\n", sharded, single, sharded/single)
}

// routeBurst starts a run of one pool, puts files events of each of its tenants into its intake,
// and returns the rate at which the router empties it.
func routeBurst(t *testing.T, pool string, groups int, routerEnv []string, tenants, files int) float64 {
	t.Helper()
	r := startScenario(t, intakeFigureTenants(pool, tenants, groups), Config{EnvForPool: map[string][]string{pool: routerEnv}})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var router, controller *esm
	var intake, queue *Queue
	prefix := ""
	for _, f := range r.functions {
		if f.Pool != pool {
			continue
		}
		prefix = f.PoolSettings.Prefix
		for _, e := range r.esms {
			switch {
			case e.FunctionArn != f.ARN:
			case f.Role == pipeline.FunctionRoleRouter:
				router, intake = e, r.queues[e.EventSourceArn]
			default:
				controller, queue = e, r.queues[e.EventSourceArn]
			}
		}
	}
	if router == nil || controller == nil || intake == nil || queue == nil {
		t.Fatalf("pool %s: want its router and controller mappings and queues", pool)
	}
	router.SetEnabled(false)
	controller.SetEnabled(false)
	// Each tenant's files in order, the tenants interleaved, as a night's drop arrives.
	for n := range files {
		for _, tn := range r.Tenants {
			r.objectCreated(r.Bucket, fmt.Sprintf("%s%02d.csv", tn.Prefix, n), "", fmt.Sprintf("%032x", n), 10)
		}
	}
	events := tenants * files
	if n := depth(t, ctx, r, intake); n != events {
		t.Fatalf("pool %s: intake holds %d events, want %d", pool, n, events)
	}
	start := time.Now()
	router.SetEnabled(true)
	for depth(t, ctx, r, intake) > 0 {
		sleep(ctx, 10*time.Millisecond)
	}
	rate := float64(events) / time.Since(start).Seconds()
	checkRouted(t, ctx, r, queue, prefix, tenants, files)
	return rate
}

func depth(t *testing.T, ctx context.Context, r *Run, q *Queue) int {
	t.Helper()
	n, err := r.queueDepth(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkRouted checks the pool queue as fauxqs holds it: each tenant's group has its files once
// each, in the order they were written.
func checkRouted(t *testing.T, ctx context.Context, r *Run, q *Queue, prefix string, tenants, files int) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.sqsURL+"/_fauxqs/queues/"+url.PathEscape(q.Name), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Messages struct {
			Ready []struct {
				MessageGroupID string `json:"messageGroupId"`
				Body           string `json:"body"`
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	keys := map[string][]string{}
	for _, m := range body.Messages.Ready {
		var ev struct {
			Detail struct{ Object struct{ Key string } }
		}
		if err := json.Unmarshal([]byte(m.Body), &ev); err != nil {
			t.Fatalf("pool queue %s: %v", q.Name, err)
		}
		keys[m.MessageGroupID] = append(keys[m.MessageGroupID], ev.Detail.Object.Key)
	}
	if len(keys) != tenants {
		t.Errorf("pool queue %s: got %d tenants' groups, want %d", q.Name, len(keys), tenants)
	}
	for group, ks := range keys {
		var want []string
		for n := range files {
			want = append(want, fmt.Sprintf("%s%s/%02d.csv", prefix, group, n))
		}
		if strings.Join(ks, " ") != strings.Join(want, " ") {
			t.Errorf("pool queue %s, tenant %s: got %v, want each file once, in order: %v", q.Name, group, ks, want)
		}
	}
}
