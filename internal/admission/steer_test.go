package admission

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/corecontrol"
	"github.com/example/tenantpipeline/internal/schema"
	"github.com/example/tenantpipeline/spec"
)

// A core system's pause, maintenance window and limit override set the gate's limit: while paused
// or in a window nothing new is admitted and a running file keeps its lease; an override raises
// the limit (slot indices above maxRunningFiles), bounded by maxRequestsInFlight, and bounds the
// adaptive limit; when the pause or window ends, the gate's reconciler hands the free slots on.
func TestSteeredLimit(t *testing.T) {
	ctx := context.Background()
	type env struct {
		s     *Store
		clk   *clock
		table string
		ctl   *corecontrol.Store
		gate  Gate
	}
	for _, tc := range []struct {
		name     string
		adaptive bool
		windows  []spec.MaintenanceWindow
		// setup runs after the first file (f0) is admitted.
		setup func(t *testing.T, e env)
		// files more ask (f1..); wantAdmitted of them are admitted.
		files, wantAdmitted int
		// lift ends the steering; wantAfter waiting files are then admitted.
		lift      func(t *testing.T, e env)
		wantAfter int
	}{
		{name: "paused", setup: func(t *testing.T, e env) { mustPause(t, e.ctl, e.table) },
			files: 2, wantAdmitted: 0,
			lift: func(t *testing.T, e env) {
				if _, err := e.ctl.Resume(ctx, e.table, "erp", "arn:op", "done"); err != nil {
					t.Fatal(err)
				}
				// As pipectl core resume does: the gate's reconciler hands the free slots on now.
				if _, err := e.s.Reconcile(ctx, e.gate); err != nil {
					t.Fatal(err)
				}
			}, wantAfter: 1},
		{name: "maintenance window", windows: []spec.MaintenanceWindow{{Cron: "5 8 * * *", Duration: "5m"}},
			setup: func(t *testing.T, e env) { e.clk.Add(5 * time.Minute) }, // 08:05, the window opens
			files: 2, wantAdmitted: 0,
			lift: func(t *testing.T, e env) { e.clk.Add(5 * time.Minute) }, wantAfter: 1},
		{name: "override raises to its bound", setup: func(t *testing.T, e env) { mustOverride(t, e.ctl, e.table, 10, e.clk.Now()) },
			files: 5, wantAdmitted: 3, // maxRequestsInFlight 4, f0 holds one
			lift: func(t *testing.T, e env) {}, wantAfter: 0},
		{name: "override lowers", setup: func(t *testing.T, e env) { mustOverride(t, e.ctl, e.table, 1, e.clk.Now().Add(-55*time.Minute)) },
			files: 2, wantAdmitted: 0,
			lift: func(t *testing.T, e env) { e.clk.Add(5 * time.Minute) }, wantAfter: 1},
		{name: "override bounds the adaptive limit", adaptive: true,
			setup: func(t *testing.T, e env) {
				setAdaptive(t, e.s, e.table, 2) // at maxRunningFiles: not lowering
				mustOverride(t, e.ctl, e.table, 3, e.clk.Now())
			},
			files: 3, wantAdmitted: 2, lift: func(t *testing.T, e env) {}, wantAfter: 0},
		{name: "adaptive limit below the override", adaptive: true,
			setup: func(t *testing.T, e env) {
				setAdaptive(t, e.s, e.table, 1)
				mustOverride(t, e.ctl, e.table, 4, e.clk.Now())
			},
			files: 2, wantAdmitted: 0, lift: func(t *testing.T, e env) {}, wantAfter: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, clk, table := newStore(t)
			g := Gate{Table: table, Key: schema.CoreGate("erp"), Limit: 2, Adaptive: tc.adaptive,
				Core: &corecontrol.Settings{Name: "erp", MaxRunningFiles: 2, MaxRequestsInFlight: 4, Maintenance: tc.windows}}
			e := env{s: s, clk: clk, table: table, ctl: &corecontrol.Store{DB: s.DB, Now: clk.Now}, gate: g}
			if d := mustAdmit(t, s, req("t0", "f0", 1, g)); !d.Admitted {
				t.Fatalf("f0: got %+v, want admitted before any steering", d)
			}
			tc.setup(t, e)
			admitted := 0
			var waiting []Request
			for i := 1; i <= tc.files; i++ {
				r := req(fmt.Sprintf("t%d", i), fmt.Sprintf("f%d", i), 1, g)
				d := mustAdmit(t, s, r)
				if d.Admitted {
					admitted++
					continue
				}
				if ok, err := s.Arm(ctx, d.Entry, Wake{QueueURL: "q", ReceiptHandle: "rh-" + r.Tenant}, testHold); err != nil || !ok {
					t.Fatalf("Arm(%s): %v, %v", r.Tenant, ok, err)
				}
				waiting = append(waiting, r)
			}
			if admitted != tc.wantAdmitted {
				t.Errorf("got %d of %d files admitted, want %d", admitted, tc.files, tc.wantAdmitted)
			}
			// The file running before keeps its lease: it finishes.
			if res, err := s.Renew(ctx, []Gate{g}, "t0", "f0"); err != nil || !res.Held || res.Regained+res.Adopted != 0 {
				t.Errorf("Renew of the running file: got %+v, %v, want its lease held", res, err)
			}
			tc.lift(t, e)
			// The waiting files come back (a wake, or their hold, which corecontrol.Hold ends with
			// the window): the first back reconciles the gate and hands the free slots on.
			after := 0
			for round := 0; round < 2; round++ {
				for _, r := range waiting {
					if d := mustAdmit(t, s, again(r)); d.Admitted && !d.Held {
						after++
					}
				}
			}
			if after != tc.wantAfter {
				t.Errorf("after the steering ends: got %d files admitted, want %d", after, tc.wantAfter)
			}
		})
	}
}

// While paused, a running file's release hands its slot to nobody.
func TestPausedReleaseHandsNothingOver(t *testing.T) {
	ctx := context.Background()
	s, clk, table := newStore(t)
	ctl := &corecontrol.Store{DB: s.DB, Now: clk.Now}
	g := Gate{Table: table, Key: schema.CoreGate("erp"), Limit: 1, Core: &corecontrol.Settings{Name: "erp", MaxRunningFiles: 1, MaxRequestsInFlight: 1}}
	mustAdmit(t, s, req("a", "a-f1", 1, g))
	waitArmed(t, s, req("b", "b-f1", 1, g))
	mustPause(t, ctl, table)
	_, wakes, err := s.Release(ctx, []Gate{g}, "a", "a-f1")
	if err != nil {
		t.Fatal(err)
	}
	if len(wakes) != 0 {
		t.Errorf("got %v woken while paused, want none", wokenTenants(wakes))
	}
	if _, err := ctl.Resume(ctx, table, "erp", "arn:op", ""); err != nil {
		t.Fatal(err)
	}
	if wakes, err = s.Reconcile(ctx, g); err != nil || len(wakes) != 1 {
		t.Errorf("after resume: got %v, %v woken, want b", wokenTenants(wakes), err)
	}
}

func mustPause(t *testing.T, ctl *corecontrol.Store, table string) {
	t.Helper()
	if ch, err := ctl.Pause(context.Background(), table, "erp", "arn:op", "test"); err != nil || !ch.Changed {
		t.Fatalf("Pause: %+v, %v", ch, err)
	}
}

func mustOverride(t *testing.T, ctl *corecontrol.Store, table string, n int, now time.Time) {
	t.Helper()
	if _, err := ctl.SetLimit(context.Background(), table, "erp", n, now.Add(time.Hour), "arn:op", "test"); err != nil {
		t.Fatalf("SetLimit: %v", err)
	}
}

func setAdaptive(t *testing.T, s *Store, table string, n int) {
	t.Helper()
	_, err := s.DB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		schema.AttrPK: str(schema.CoreGate("erp")), schema.AttrSK: str(schema.LimitSK), schema.AttrLimit: num(int64(n))}})
	if err != nil {
		t.Fatal(err)
	}
}
