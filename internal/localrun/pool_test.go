//go:build e2e || figures

package localrun

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
)

// A pool controller's settings file (beside bootstrap in its code asset) makes one tenant per row,
// all reading the pool's queue; the harness points them at the run's sink through a rewritten copy
// of the file, and counts each tenant's messages by its message group.
func TestPoolTenantsFromSettings(t *testing.T) {
	asm := t.TempDir()
	asset := filepath.Join(asm, "asset.0123abcd")
	os.MkdirAll(asset, 0o755)
	js := `{"pool":"a","prefix":"inbox/pool-a/","tenants":[
		{"settings":{"id":"p1","format":"csv","registerUrl":"https://core.example/p1"},"prefix":"inbox/pool-a/p1/","onFailure":"halt","idempotencyKey":"object-version"},
		{"settings":{"id":"p2","format":"csv","dynamodb":{"key":["id"],"table":"t2"}},"prefix":"inbox/pool-a/p2/","onFailure":"continue","idempotencyKey":"event-id"}]}`
	var ps pipeline.PoolSettings
	if err := json.Unmarshal([]byte(js), &ps); err != nil {
		t.Fatal(err)
	}
	settings, err := poolsettings.Encode(&ps)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(asset, pipeline.PoolSettingsFile), settings, 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Run{Cloud: &Cloud{opts: cloudOptions{code: codeOptions{assembly: asm, workDir: t.TempDir()}}}, cfg: Config{Logs: io.Discard}, sinkURL: "http://127.0.0.1:9/"}
	r.opts.code.sink = r.sinkFor
	fr := &deploy.Resource{LogicalID: "PoolController", Metadata: map[string]json.RawMessage{"aws:asset:path": json.RawMessage(`"asset.0123abcd"`)}}
	dir := r.assetDir(fr)
	if dir != asset {
		t.Fatalf("asset dir: got %q, want %q", dir, asset)
	}
	vars := map[string]string{pipeline.EnvPool: "a", pipeline.EnvPoolSettings: pipeline.PoolSettingsFile}
	s, err := r.poolSettings(fr, "pool-a-controller", dir, vars)
	if err != nil {
		t.Fatal(err)
	}
	// The function reads the rewritten copy: an absolute POOL_SETTINGS wins over LAMBDA_TASK_ROOT.
	path := pipeline.PoolSettingsPath(func(k string) string {
		if k == "LAMBDA_TASK_ROOT" {
			return dir
		}
		return vars[k]
	})
	read, err := poolsettings.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer read.Close()
	p1, _ := read.Tenant("p1")
	p2, _ := read.Tenant("p2")
	if p1.Settings.RegisterURL != "http://127.0.0.1:9/p1/records" || p2.Settings.RegisterURL != "" || p2.Settings.DynamoDB == nil {
		t.Errorf("rewritten settings: got p1 %q, p2 %q %+v; want p1 at the run's sink, p2's DynamoDB sink untouched", p1.Settings.RegisterURL, p2.Settings.RegisterURL, p2.Settings.DynamoDB)
	}
	if b, _ := os.ReadFile(filepath.Join(asset, pipeline.PoolSettingsFile)); string(b) != string(settings) {
		t.Error("the asset's own settings file changed")
	}

	q := &Queue{Name: "pool-a.fifo", ARN: "arn:aws:sqs:us-east-1:000000000000:pool-a.fifo"}
	ctrl := &emulate.Function{Name: "pool-a-controller", Source: "lambdas/controller", Env: []string{"STATE_MACHINE_ARN=arn:files", "POOL=a"}, PoolSettings: s, Pool: "a"}
	router := &emulate.Function{Name: "pool-a-router", Source: "lambdas/controller", PoolSettings: s, Pool: "a", Role: "router"}
	split := &emulate.Function{Name: "pool-a-split", Source: "lambdas/split", Pool: "a"}
	silo := &emulate.Function{Name: "acme-controller", Source: "lambdas/controller", Tenant: "acme", Env: []string{`TENANT={"id":"acme"}`, "TENANT_PREFIX=inbox/acme/"}}
	siloQueue := &Queue{Name: "acme.fifo", ARN: "arn:aws:sqs:us-east-1:000000000000:acme.fifo"}
	r.functions = []*emulate.Function{router, ctrl, split, silo}
	pooled := r.tenantsOf(ctrl, q)
	if len(pooled) != 2 {
		t.Fatalf("pooled tenants: got %d, want 2", len(pooled))
	}
	for i, want := range []struct{ id, prefix, policy string }{{"p1", "inbox/pool-a/p1/", "halt"}, {"p2", "inbox/pool-a/p2/", "continue"}} {
		tn := pooled[i]
		if tn.ID != want.id || tn.Prefix != want.prefix || tn.Queue != q || tn.Tier != TierPool || tn.Pool != "a" || tn.FileMachine != "arn:files" || tn.Policy() != want.policy {
			t.Errorf("tenant %d: got %+v (policy %s), want %s under %s in pool a's queue, policy %s", i, tn, tn.Policy(), want.id, want.prefix, want.policy)
		}
	}
	if got := pooled[1].DynamoDBTable(); got != "t2" {
		t.Errorf("p2's table: got %q, want t2", got)
	}
	siloTenants := r.tenantsOf(silo, siloQueue)
	if len(siloTenants) != 1 || siloTenants[0].Tier != TierSilo || siloTenants[0].Pool != "" {
		t.Fatalf("silo tenants: got %+v, want acme, tier silo", siloTenants)
	}
	r.Tenants = append(pooled, siloTenants...)

	for _, tc := range []struct{ pkg, tenant, want string }{
		{"lambdas/controller", "p1", "pool-a-controller"}, // not the router of the same package
		{"lambdas/split", "p2", "pool-a-split"},
		{"lambdas/controller", "acme", "acme-controller"},
	} {
		if f := r.Function(tc.pkg, tc.tenant); f == nil || f.Name != tc.want {
			t.Errorf("Function(%s, %s): got %v, want %s", tc.pkg, tc.tenant, f, tc.want)
		}
	}

	r.delivered = map[string]map[string]string{
		q.ARN:         {"m1": "p1", "m2": "p1", "m3": "p2"},
		siloQueue.ARN: {"m4": "acme", "m5": "acme"},
	}
	for id, want := range map[string]int{"p1": 2, "p2": 1, "acme": 2} {
		if got := r.Messages(id); got != want {
			t.Errorf("Messages(%s): got %d, want %d", id, got, want)
		}
	}
}

// A pooled tenant's depth is its message group's messages in the pool's queue (visible, in flight
// and delayed); a silo tenant's is its queue's.
func TestTenantDepthByMessageGroup(t *testing.T) {
	client := startFauxqs(t)
	q := createTestQueue(t, client, "pool-depth.fifo")
	send := func(group string, n int) {
		for i := range n {
			if _, err := client.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String("{}"),
				MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(group + strconv.Itoa(i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	send("p1", 3)
	send("p2", 1)
	// One message of p1 in flight: still p1's.
	if _, err := client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL), MaxNumberOfMessages: 1}); err != nil {
		t.Fatal(err)
	}
	r := &Cloud{sqsURL: aws.ToString(client.Options().BaseEndpoint), sqsAdmin: client}
	for _, tc := range []struct {
		tenant *Tenant
		want   int
	}{
		{&Tenant{ID: "p1", Queue: q, Tier: TierPool, Pool: "a"}, 3},
		{&Tenant{ID: "p2", Queue: q, Tier: TierPool, Pool: "a"}, 1},
		{&Tenant{ID: "p3", Queue: q, Tier: TierPool, Pool: "a"}, 0},
		{&Tenant{ID: "acme", Queue: q, Tier: TierSilo}, 4}, // the whole queue
	} {
		if got, err := r.tenantDepth(t.Context(), tc.tenant, map[string]map[string]int{}); err != nil || got != tc.want {
			t.Errorf("tenantDepth(%s): got %d, %v; want %d", tc.tenant.ID, got, err, tc.want)
		}
	}
}
