//go:build e2e || figures

package localrun

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/backlog"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
	"github.com/example/tenantpipeline/internal/schema"
)

// parkingTenants: one pool (maxQueuedFilesPerTenant at its default, 10) of three tenants.
const parkingTenants = `{"pools": {"shared": {}}, "tenants": [
  {"id": "held", "tier": "pool", "pool": "shared", "registerUrl": "https://core.example.com/records"},
  {"id": "n1", "tier": "pool", "pool": "shared", "registerUrl": "https://core.example.com/records"},
  {"id": "n2", "tier": "pool", "pool": "shared", "registerUrl": "https://core.example.com/records"}
]}`

// depthSampler samples one tenant's messages in the pool queue (the emulator's own count, by
// message group) until stopped, and keeps the largest.
type depthSampler struct {
	mu      sync.Mutex
	max     int
	samples int
	stop    chan struct{}
	done    chan struct{}
}

func sampleDepth(ctx context.Context, r *Run, tenant string) *depthSampler {
	s := &depthSampler{stop: make(chan struct{}), done: make(chan struct{})}
	t := r.Tenant(tenant)
	go func() {
		defer close(s.done)
		for {
			if n, err := r.tenantDepth(ctx, t, map[string]map[string]int{}); err == nil {
				s.mu.Lock()
				s.max, s.samples = max(s.max, n), s.samples+1
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *depthSampler) finish() (maxDepth, samples int) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max, s.samples
}

// parkedObjects counts a tenant's parked files in the ingest bucket.
func parkedObjects(t *testing.T, ctx context.Context, r *Run, tenant string) int {
	t.Helper()
	out, err := r.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(r.Bucket), Prefix: aws.String(backlog.ParkedPrefix(r.Tenant(tenant).Owner()))})
	if err != nil {
		t.Fatal(err)
	}
	return int(aws.ToInt32(out.KeyCount))
}

// A paused pooled tenant that keeps receiving files never has more than maxQueuedFilesPerTenant
// (10) messages in the pool queue: its 40 files go 10 to the queue and 30 to parked files, while
// its neighbours finish theirs. After resume, all 40 register in order, exactly once.
func TestScenarioParkingBoundsAPausedTenant(t *testing.T) {
	t.Parallel()
	r := startScenario(t, parkingTenants, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if out := pipectl(t, r, "pause", "held", "--reason", "supplier resends", "--stack-prefix", opsPrefix); !strings.Contains(out, "paused held (pool shared)") {
		t.Fatalf("pause: got %q", out)
	}
	depth := sampleDepth(ctx, r, "held")
	var files []upload
	var heldKeys []string
	heldRows := map[string]int64{}
	for i := range 40 {
		rel := fmt.Sprintf("f-%02d.csv", i)
		files = append(files, upload{"held", rel, csvOf(3)})
		key := "pools/shared/held/" + rel
		heldKeys, heldRows[key] = append(heldKeys, key), 3
		if i%8 == 0 {
			for _, n := range []string{"n1", "n2"} {
				files = append(files, upload{n, fmt.Sprintf("f-%02d.csv", i/8), csvOf(4)})
			}
		}
	}
	uploadAll(t, ctx, r, files)
	waitFor(t, ctx, r, "the neighbours finish and the held tenant's 30 files are parked", func(*report.Report) bool {
		return len(r.Sink.Registered("n1")) == 20 && len(r.Sink.Registered("n2")) == 20 && parkedObjects(t, ctx, r, "held") == 30
	})
	if n := len(r.Sink.Registered("held")); n != 0 {
		t.Fatalf("held: got %d records registered while paused, want 0", n)
	}
	st := pipectlStatusParked(t, r, "held")
	if st.Parked == nil || *st.Parked != 30 || st.QueuedFiles == nil || *st.QueuedFiles != 10 {
		t.Errorf("status: got parked %v, queuedFiles %v, want 30, 10", st.Parked, st.QueuedFiles)
	}
	pipectl(t, r, "resume", "held", "--stack-prefix", opsPrefix)
	rep := drain(t, ctx, r)
	maxDepth, samples := depth.finish()
	t.Logf("held: at most %d messages in the pool queue over %d samples", maxDepth, samples)
	if maxDepth > schema.DefaultMaxQueued {
		t.Errorf("held: got %d messages in the pool queue at once, want at most %d", maxDepth, schema.DefaultMaxQueued)
	}
	if maxDepth < schema.DefaultMaxQueued {
		t.Errorf("held: got at most %d messages in the pool queue, want the bound %d reached: the scenario proves nothing", maxDepth, schema.DefaultMaxQueued)
	}
	noViolations(t, rep)
	assertOrderedOnce(t, r, "held", heldKeys, heldRows)
	if n := parkedObjects(t, ctx, r, "held"); n != 0 {
		t.Errorf("held: got %d parked files left, want 0", n)
	}
}

// parkedStatus is a tenant's backlog fields of pipectl status --json.
type parkedStatus struct {
	Parked      *int64 `json:"parked"`
	QueuedFiles *int   `json:"queuedFiles"`
}

func pipectlStatusParked(t *testing.T, r *Run, tenant string) parkedStatus {
	t.Helper()
	var st struct {
		Tenants []parkedStatus `json:"tenants"`
	}
	out := pipectl(t, r, "status", "--json", "--stack-prefix", opsPrefix, tenant)
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Tenants) != 1 {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return st.Tenants[0]
}

// restartWithSettings makes the function's next execution environments read the pool settings
// file path, as a deployment of new settings does: the idle environments end, the next
// invocation starts a new one.
func restartWithSettings(f *emulate.Function, path string) {
	f.Redeploy(func(env []string) []string {
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, pipeline.EnvPoolSettings+"=") })
		return append(env, pipeline.EnvPoolSettings+"="+path)
	})
}

func routerOf(t *testing.T, r *Run) *emulate.Function {
	t.Helper()
	for _, f := range r.functions {
		if f.Role == pipeline.FunctionRoleRouter {
			return f
		}
	}
	t.Fatal("no router")
	return nil
}

func (r *Run) queueByURL(url string) *Queue {
	for _, q := range r.queues {
		if q.URL == url {
			return q
		}
	}
	return nil
}

// intakeQueue is the pool's intake: the FIFO queue that is not the pool queue.
func (r *Run) intakeQueue(t *testing.T) *Queue {
	t.Helper()
	pool := r.Tenant("n1").Queue
	for _, q := range r.queues {
		if q.URL != pool.URL && strings.HasSuffix(q.Name, ".fifo") {
			return q
		}
	}
	t.Fatal("no intake queue")
	return nil
}

func envOf(f *emulate.Function, name string) string {
	for _, kv := range f.Env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// Onboarding: the router starts with settings that do not name "newco" yet, and newco's first
// files arrive. They are parked for newco, never dead-lettered; once the router reads settings
// that name it, newco's parked files register first, in order, then its newer ones, exactly once.
func TestScenarioParkingOnboardsATenant(t *testing.T) {
	t.Parallel()
	r := startScenario(t, strings.Replace(parkingTenants, `"id": "held"`, `"id": "newco"`, 1), Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	router := routerOf(t, r)
	full := envOf(router, pipeline.EnvPoolSettings)
	settings, err := poolsettings.Load(full)
	if err != nil {
		t.Fatal(err)
	}
	old := *settings
	old.Tenants = slices.DeleteFunc(slices.Clone(old.Tenants), func(pt pipeline.PoolTenant) bool { return pt.ID() == "newco" })
	js, err := poolsettings.Encode(&old)
	if err != nil {
		t.Fatal(err)
	}
	oldPath := filepath.Join(t.TempDir(), pipeline.PoolSettingsFile)
	if err := os.WriteFile(oldPath, js, 0o644); err != nil {
		t.Fatal(err)
	}
	restartWithSettings(router, oldPath)

	var want []string
	rows := map[string]int64{}
	var first []upload
	for i := range 5 {
		rel := fmt.Sprintf("f-%02d.csv", i)
		first = append(first, upload{"newco", rel, csvOf(2)}, upload{"n1", rel, csvOf(2)})
		want, rows["pools/shared/newco/"+rel] = append(want, "pools/shared/newco/"+rel), 2
	}
	uploadAll(t, ctx, r, first)
	intake := r.intakeQueue(t)
	waitFor(t, ctx, r, "n1's files register and the intake is empty", func(*report.Report) bool {
		n, err := r.queueDepth(ctx, intake)
		return err == nil && n == 0 && len(r.Sink.Registered("n1")) == 10
	})
	dlq := r.queueByURL(envOf(router, pipeline.EnvDeadLetterQueueURL))
	if dlq == nil {
		t.Fatal("no router dead-letter queue")
	}
	if n, err := r.queueDepth(ctx, dlq); err != nil || n != 0 {
		t.Errorf("got %d events on the dead-letter queue (%v), want 0: newco's files are parked", n, err)
	}

	// The new settings are deployed: a neighbour's file wakes the router, newco's parked files go
	// first, then newco's newer files.
	restartWithSettings(router, full)
	uploadAll(t, ctx, r, []upload{{"n2", "wake.csv", csvOf(1)}})
	var later []upload
	for i := 5; i < 8; i++ {
		rel := fmt.Sprintf("f-%02d.csv", i)
		later = append(later, upload{"newco", rel, csvOf(2)})
		want, rows["pools/shared/newco/"+rel] = append(want, "pools/shared/newco/"+rel), 2
	}
	uploadAll(t, ctx, r, later)
	rep := drain(t, ctx, r)
	noViolations(t, rep)
	assertOrderedOnce(t, r, "newco", want, rows)
	if n, err := r.queueDepth(ctx, dlq); err != nil || n != 0 {
		t.Errorf("got %d events on the dead-letter queue (%v), want 0", n, err)
	}
	if n := parkedObjects(t, ctx, r, "newco"); n != 0 {
		t.Errorf("newco: got %d parked files left, want 0", n)
	}
}
