//go:build e2e || figures

package localrun

import (
	"context"
	"fmt"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"strings"
	"testing"
	"time"
)

// noisyTenants: one pool of four tenants. "noisy" has a slow core system and many files; the others
// must not wait for it.
const noisyTenants = `{"pools": {"shared": {"maximumConcurrency": 4}}, "tenants": [
  {"id": "noisy", "tier": "pool", "pool": "shared", "registerUrl": "https://core.example.com/records"},
  {"id": "q1", "tier": "pool", "pool": "shared", "registerUrl": "https://core.example.com/records"},
  {"id": "q2", "tier": "pool", "pool": "shared", "registerUrl": "https://core.example.com/records"},
  {"id": "q3", "tier": "pool", "pool": "shared", "registerUrl": "https://core.example.com/records"}
]}`

// A noisy neighbour in a pool: its core system answers each record in 300 ms and it has 8 files of
// 10 records (about 24 s of registering). Every other tenant of the pool must finish all its files
// while the noisy tenant is still running (its mean inter-file gap is logged, not bounded: it
// depends on how busy the machine is), and every tenant keeps its order and exactly-once.
func TestScenarioPoolNoisyNeighbour(t *testing.T) {
	t.Parallel()
	r := startScenario(t, noisyTenants, Config{})
	for _, id := range []string{"noisy", "q1", "q2", "q3"} {
		if tn := r.Tenant(id); tn == nil || tn.Tier != "pool" || tn.Pool != "shared" {
			t.Fatalf("tenant %s: want pooled in pool shared, got %+v", id, tn)
		}
	}
	r.Sink.SetDelay(func(tenant, _ string, _ int64) time.Duration {
		if tenant == "noisy" {
			return 300 * time.Millisecond
		}
		return 40 * time.Millisecond // a quiet file takes about 0.4 s, so the next one waits behind it
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	csv := func(tenant string, file, n int) []byte {
		var b strings.Builder
		b.WriteString("id,name\n")
		for i := range n {
			fmt.Fprintf(&b, "%s-%d-%d,row %d\n", tenant, file, i, i)
		}
		return []byte(b.String())
	}
	var files []upload
	for i := range 8 {
		files = append(files, upload{"noisy", fmt.Sprintf("n-%02d.csv", i), csv("noisy", i, 10)})
	}
	for _, q := range []string{"q1", "q2", "q3"} {
		for i := range 5 {
			files = append(files, upload{q, fmt.Sprintf("f-%02d.csv", i), csv(q, i, 10)})
		}
	}
	// One burst, as a sender would drop them: the pool's intake keeps their order.
	uploadAll(t, ctx, r, files)

	quietDone := waitFor(t, ctx, r, "the quiet tenants finish", func(rep *report.Report) bool {
		for _, q := range []string{"q1", "q2", "q3"} {
			tr := rep.Tenants[q]
			if tr == nil || len(tr.Files) != 5 {
				return false
			}
			for _, f := range tr.Files {
				if f.Status != "SUCCEEDED" {
					return false
				}
			}
		}
		return true
	})
	noisyDone := 0
	for _, f := range quietDone.Tenants["noisy"].Files {
		if f.Status == "SUCCEEDED" {
			noisyDone++
		}
	}
	if noisyDone == 8 {
		t.Errorf("the noisy tenant finished all 8 files before the quiet ones: the scenario proves nothing")
	}
	t.Logf("when the quiet tenants were done, the noisy one had finished %d of 8 files", noisyDone)
	for _, q := range []string{"q1", "q2", "q3"} {
		gaps := quietDone.Tenants[q].Gaps()
		mean := 0.0
		for _, g := range gaps {
			mean += g
		}
		if len(gaps) > 0 {
			mean /= float64(len(gaps))
		}
		t.Logf("%s: mean inter-file gap %.2f s over %d gaps", q, mean, len(gaps))
		if len(gaps) == 0 {
			t.Errorf("%s: no file waited behind another, so the gap proves nothing", q)
		}
	}
	rep := drain(t, ctx, r)
	assertInvariants(t, r, rep, nil, false)
	for _, f := range rep.Tenants["noisy"].Files {
		if f.Status != "SUCCEEDED" {
			t.Errorf("noisy %s: %s", f.Key, f.Status)
		}
	}
	// State transitions are counted per tenant although the state machines are shared: the noisy
	// tenant's 8 files cost more than a quiet tenant's 5.
	noisy, err := r.Usage(ctx, "noisy")
	if err != nil {
		t.Fatal(err)
	}
	quiet, err := r.Usage(ctx, "q1")
	if err != nil {
		t.Fatal(err)
	}
	if quiet.StateTransitions == 0 || quiet.StateTransitions >= noisy.StateTransitions {
		t.Errorf("state transitions: q1 %v, noisy %v; want q1's own, fewer than noisy's", quiet.StateTransitions, noisy.StateTransitions)
	}
}
