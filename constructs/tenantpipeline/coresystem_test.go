package tenantpipeline

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/spec"
)

// CoreSystemProps are checked by the tenants file's rules, each message naming the prop.
func TestCoreSystemPropsValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props CoreSystemProps
		want  []string
	}{
		{"valid", CoreSystemProps{Name: "ledger", MaxRunningFiles: 10, MaxRecordsPerSecond: 50, Adaptive: true}, nil},
		{"valid without a rate", CoreSystemProps{Name: "ledger", MaxRunningFiles: 1}, nil},
		{"no running files", CoreSystemProps{Name: "ledger"}, []string{"CoreSystemProps.MaxRunningFiles 0 must be 1 to 1000"}},
		{"too many running files", CoreSystemProps{Name: "ledger", MaxRunningFiles: 1001}, []string{"CoreSystemProps.MaxRunningFiles 1001 must be 1 to 1000"}},
		{"negative rate", CoreSystemProps{Name: "ledger", MaxRunningFiles: 3, MaxRecordsPerSecond: -1}, []string{"CoreSystemProps.MaxRecordsPerSecond -1 must be above 0"}},
		{"admission wait alarm", CoreSystemProps{Name: "ledger", MaxRunningFiles: 3, AdmissionWaitAlarm: 5 * time.Minute}, nil},
		{"admission wait alarm below one period", CoreSystemProps{Name: "ledger", MaxRunningFiles: 3, AdmissionWaitAlarm: time.Minute},
			[]string{"CoreSystemProps.AdmissionWaitAlarm 1m0s must be at least 5m0s (one alarm period), or 0 for the default 30m0s"}},
		{"negative admission wait alarm", CoreSystemProps{Name: "ledger", MaxRunningFiles: 3, AdmissionWaitAlarm: -time.Minute},
			[]string{"CoreSystemProps.AdmissionWaitAlarm -1m0s must be at least 5m0s"}},
		{"bad day fields", CoreSystemProps{Name: "ledger", MaxRunningFiles: 3, Breaker: &spec.Breaker{Window: "2h"},
			Maintenance: []spec.MaintenanceWindow{{Cron: "0 2 * *", Duration: "1h"}}, IdempotencyRetention: time.Second,
			LookupURL: "https://erp.example/r", CompleteURL: "erp/done"},
			[]string{`CoreSystemProps.Breaker.Window "2h" must be a Go duration from 1s to 1h0m0s`,
				`CoreSystemProps.Maintenance[0].Cron "0 2 * *" must have five fields`,
				`CoreSystemProps.IdempotencyRetention "1s" must be a Go duration of at least 1m0s`,
				`CoreSystemProps.LookupURL "https://erp.example/r" must contain {key}`,
				`CoreSystemProps.CompleteURL "erp/done" must be an absolute http(s) URL`}},
		{"bad day fields valid", CoreSystemProps{Name: "ledger", MaxRunningFiles: 3, Breaker: &spec.Breaker{ConsecutiveFailures: 3},
			Maintenance: []spec.MaintenanceWindow{{Cron: "0 2 * * SUN", Duration: "1h"}}, IdempotencyRetention: 24 * time.Hour,
			LookupURL: "https://erp.example/r/{key}", CompleteURL: "https://erp.example/done"}, nil},
		{"no name", CoreSystemProps{MaxRunningFiles: 3}, []string{`CoreSystemProps.Name: core system name "" is invalid`}},
		{"every problem", CoreSystemProps{Name: "Ledger", MaxRecordsPerSecond: -2},
			[]string{`CoreSystemProps.Name: core system name "Ledger" is invalid`, "CoreSystemProps.MaxRunningFiles 0", "CoreSystemProps.MaxRecordsPerSecond -2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := messages(tc.props.validate())
			if len(got) != len(tc.want) {
				t.Fatalf("got %d messages %q, want %d", len(got), got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("message %d: got %q, want it to start with %q", i, got[i], w)
				}
			}
		})
	}
}

// A tenant names its core system; the app's core system of that name is the one it registers
// into, a name the app has none of is a problem naming the field, and two core systems of one
// name are refused (their limits would not be shared).
func TestCoreSystemByName(t *testing.T) {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("S"), nil)
	a := NewCoreSystem(stack, "A", &CoreSystemProps{Name: "ledger", MaxRunningFiles: 1})
	b := NewCoreSystem(stack, "B", &CoreSystemProps{Name: "ledger", MaxRunningFiles: 2})
	if a.nameTaken != nil || b.nameTaken == nil || !strings.Contains(b.nameTaken.Error(), `CoreSystemProps.Name "ledger" is also the name of the core system at S/A`) {
		t.Errorf("got %v and %v, want the second core system told", a.nameTaken, b.nameTaken)
	}
	for _, tc := range []struct {
		name, expr string
		tenant     Tenant
		want       *CoreSystem
		err        string
	}{
		{"none", "Tenant", Tenant{ID: "x"}, nil, ""},
		{"by name", "Tenant", Tenant{ID: "x", CoreSystem: "ledger"}, a, ""},
		{"unknown", "Tenant", Tenant{ID: "x", CoreSystem: "ledgr"}, nil, `Tenant.CoreSystem (tenant "x"): "ledgr" is no core system of the app`},
		{"unknown in a pool", "PoolProps.Tenants[2]", Tenant{ID: "y", CoreSystem: "erp"}, nil, `PoolProps.Tenants[2].CoreSystem (tenant "y"): "erp" is no core system`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := coreSystemOf(stack, tc.tenant, tc.expr)
			if got != tc.want || fmt.Sprint(err) != "<nil>" && (tc.err == "" || !strings.HasPrefix(err.Error(), tc.err)) || err == nil && tc.err != "" {
				t.Errorf("got %v, %v; want %v, %q", got, err, tc.want, tc.err)
			}
		})
	}
}

// Pool props default maxRunningFiles and carry it, with the tenants' core systems, into the one
// set of pool rules.
func TestPoolMaxRunningFiles(t *testing.T) {
	p := PoolProps{Name: "p", Tenants: []Tenant{{ID: "x", RegisterURL: "https://x.example.com/", CoreSystem: "ledger"}}}
	if got := p.withDefaults().MaxRunningFiles; got != 200 {
		t.Errorf("default: got %d, want 200", got)
	}
	if err := p.withDefaults().file().Validate(); err != nil {
		t.Errorf("a tenant naming its core system: got %v, want no error", err)
	}
	p.MaxRunningFiles = 1001
	if err := p.withDefaults().file().Validate(); err == nil || !strings.Contains(err.Error(), "pools.p: maxRunningFiles 1001 is out of range") {
		t.Errorf("1001: got %v, want maxRunningFiles out of range", err)
	}
}

// A pool whose tenants name more core systems than its queue can carry wake-up tags for is refused
// at synth, naming SQS's limit; one at the bound is built.
func TestPoolWakeTagsFit(t *testing.T) {
	for _, tc := range []struct {
		systems int
		want    string
	}{
		{MaxWakeTags, ""},
		{MaxWakeTags + 1, fmt.Sprintf("PoolProps.Tenants: the tenants name %d core systems, over %d", MaxWakeTags+1, MaxWakeTags)},
	} {
		t.Run(fmt.Sprint(tc.systems), func(t *testing.T) {
			app := awscdk.NewApp(nil)
			stack := awscdk.NewStack(app, jsii.String("S"), nil)
			var tenants []Tenant
			for i := range tc.systems {
				name := fmt.Sprintf("erp%02d", i)
				NewCoreSystem(stack, "C"+name, &CoreSystemProps{Name: name, MaxRunningFiles: 1})
				tenants = append(tenants, Tenant{ID: fmt.Sprintf("t%02d", i), RegisterURL: "https://x.example.com/", CoreSystem: name})
			}
			var cs []*CoreSystem
			for i, tn := range tenants {
				c, err := coreSystemOf(stack, tn, poolTenant(i))
				if err != nil {
					t.Fatal(err)
				}
				cs = append(cs, c, c) // two tenants of one core system count once
			}
			err := wakeTagsFit("PoolProps.Tenants", cs)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "SQS allows 50 tags a queue")) {
				t.Fatalf("got %v, want %q (naming SQS's 50 tags a queue)", err, tc.want)
			}
			if tc.want == "" {
				return
			}
			// NewPool refuses it before it creates anything.
			pool := NewPool(stack, "P", &PoolProps{Name: "p", Tenants: tenants})
			var msgs []string
			for _, m := range *pool.Node().Validate() {
				msgs = append(msgs, *m)
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.want) {
				t.Errorf("NewPool: got validation %q, want %q", msgs, tc.want)
			}
		})
	}
}

// TestRegisterKeepsItems: Register keeps items of the core system's table, and with a
// customer-managed key gets the table's KMS calls, whenever its requests are shared; with static
// shares only for an adaptive limit or a breaker.
func TestRegisterKeepsItems(t *testing.T) {
	off := &spec.Breaker{Disabled: true}
	for _, tc := range []struct {
		name   string
		props  CoreSystemProps
		shares string
		want   bool
	}{
		{"shared, no breaker, not adaptive", CoreSystemProps{Name: "crm", MaxRunningFiles: 4, Breaker: off}, pipeline.RequestSharesShared, true},
		{"static, no breaker, not adaptive", CoreSystemProps{Name: "crm", MaxRunningFiles: 4, Breaker: off}, pipeline.RequestSharesStatic, false},
		{"static, breaker", CoreSystemProps{Name: "crm", MaxRunningFiles: 4}, pipeline.RequestSharesStatic, true},
		{"static, adaptive", CoreSystemProps{Name: "crm", MaxRunningFiles: 4, Breaker: off, Adaptive: true}, pipeline.RequestSharesStatic, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &CoreSystem{Props: tc.props}
			if got := c.registerKeepsItems(tc.shares); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
