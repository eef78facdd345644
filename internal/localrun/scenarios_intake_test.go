//go:build e2e || figures

package localrun

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/tenants"
)

// intakeFlooder floods a pool beside intakeNeighbours: three whose ids begin with its character,
// three whose first character shares its group of the sharded intake's 16 ("f" is 0x66, as "6"
// 0x36 and "v" 0x76, modulo 16), and four others.
const intakeFlooder = "f00"

var intakeNeighbours = []string{"f01", "f02", "f03", "v01", "v02", "601", "a01", "b01", "c01", "d01"}

// intakeTenantsJSON is a pool of the flooder and its neighbours with the intake given.
func intakeTenantsJSON(intake string) string {
	rows := []string{fmt.Sprintf(`{"id": %q, "tier": "pool", "registerUrl": "https://core.example.com/records"}`, intakeFlooder)}
	for _, id := range intakeNeighbours {
		rows = append(rows, fmt.Sprintf(`{"id": %q, "tier": "pool", "registerUrl": "https://core.example.com/records"}`, id))
	}
	return fmt.Sprintf(`{"pools": {"default": {"intake": %q}}, "tenants": [%s]}`, intake, strings.Join(rows, ",\n"))
}

// One pooled tenant uploads a burst of files, then ten others one file each, through each of the
// pool's intakes. With the per-tenant intake (the default) the router receives every event in its
// own tenant's message group of the intake queue, so no tenant's events wait behind another's:
// the groups it sees are exactly the tenants, each with that tenant's files. With the sharded
// intake they are the rules' static groups, the flooder's shared with six of its neighbours. In
// both, every file is registered once and in order.
func TestScenarioIntakeGroups(t *testing.T) {
	t.Parallel()
	const flood = 120
	for _, intake := range []string{tenants.IntakeTenant, tenants.IntakeSharded} {
		t.Run(intake, func(t *testing.T) {
			t.Parallel()
			r := startScenario(t, intakeTenantsJSON(intake), Config{})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			var files []upload
			for n := range flood {
				files = append(files, upload{intakeFlooder, fmt.Sprintf("%04d.csv", n), []byte(fmt.Sprintf("id,name\n%d,file %d\n", n, n))})
			}
			for _, id := range intakeNeighbours {
				files = append(files, upload{id, "after.csv", csvOf(3)})
			}
			uploadAll(t, ctx, r, files)
			rep := drain(t, ctx, r)
			assertInvariants(t, r, rep, nil, true)

			groups := r.intakeGroups(t)
			want := map[string]int{}
			switch intake {
			case tenants.IntakeTenant:
				want[intakeFlooder] = flood
				for _, id := range intakeNeighbours {
					want[id] = 1
				}
			case tenants.IntakeSharded:
				for _, f := range files {
					g, _ := tenantpipeline.IntakeGroupOf(f.tenant[0], tenants.DefaultPoolIntakeGroups)
					want[tenantpipeline.IntakeMessageGroupOf(g)]++
				}
			}
			if !maps.Equal(groups, want) {
				t.Errorf("intake %s: the router received the message groups %v, want %v", intake, groups, want)
			}
		})
	}
}

// intakeGroups is how many messages of each message group of the pool's intake queue the router
// received (each message once, however often it was delivered).
func (r *Run) intakeGroups(t *testing.T) map[string]int {
	t.Helper()
	var intake []string
	for arn, q := range r.queues {
		if strings.Contains(strings.ToLower(q.Name), "intake") {
			intake = append(intake, arn)
		}
	}
	if len(intake) != 1 {
		t.Fatalf("found intake queues %v, want one", slices.Sorted(slices.Values(intake)))
	}
	r.Cloud.mu.Lock()
	defer r.Cloud.mu.Unlock()
	out := map[string]int{}
	for _, g := range r.delivered[intake[0]] {
		out[g]++
	}
	return out
}
