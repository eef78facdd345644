package tenantpipeline

import (
	"reflect"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// keyed is a valid tenant in key order.
func keyed() Tenant {
	return Tenant{ID: "acme", RegisterURL: "https://core.example.com/r", RecordOrder: "key", KeyColumns: []string{"customer"}}
}

// TestKeyOrderProps: key order props default and travel in the settings of both tiers' tenants.
func TestKeyOrderProps(t *testing.T) {
	ledger := &CoreSystem{Props: CoreSystemProps{Name: "ledger", MaxRunningFiles: 2, MaxRequestsInFlight: 16}}
	k := keyed()
	k.CoreSystem = "ledger"
	s := settings(k.WithDefaults(), ledger)
	checks := []struct {
		what      string
		got, want any
	}{
		{"RecordOrder", s.RecordOrder, pipeline.RecordOrderKey},
		{"KeyColumns", s.KeyColumns, []string{"customer"}},
		{"MaxRecordsInFlight defaulted", s.MaxRecordsInFlight, pipeline.DefaultMaxRecordsInFlight},
		{"core system MaxRequestsInFlight", s.CoreSystem.MaxRequestsInFlight, 16},
		{"records in flight: not capped by the core system's share", s.RecordsInFlight(), pipeline.DefaultMaxRecordsInFlight},
		{"file order unchanged", settings(Tenant{ID: "a"}.WithDefaults(), nil).MaxRecordsInFlight, 0},
		{"file order RecordOrder left empty", settings(Tenant{ID: "a"}.WithDefaults(), nil).RecordOrder, ""},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %+v, want %+v", c.what, c.got, c.want)
		}
	}
}

// TestKeyOrderPropsRejects: the tenants file's key order rules, each message naming the props, in
// a silo pipeline's props and a pool's.
func TestKeyOrderPropsRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Tenant)
		want   string
	}{
		{"unknown RecordOrder", func(t *Tenant) { t.RecordOrder = "customer" },
			`Tenant.RecordOrder (tenant "acme"): "customer" is invalid: use "file" (one record at a time, in file order: the default) or "key" (a key's records in file order, several keys at once, with Tenant.KeyColumns)`},
		{"no KeyColumns", func(t *Tenant) { t.KeyColumns = nil },
			`Tenant.KeyColumns (tenant "acme"): is missing: Tenant.RecordOrder "key" needs the columns whose values make a record's key (CSV header names, or JSON Lines fields), e.g. ["customerId"]`},
		{"empty column", func(t *Tenant) { t.KeyColumns = []string{""} },
			`Tenant.KeyColumns (tenant "acme"): column 1 is empty: name a CSV header column or a JSON Lines field`},
		{"duplicate column", func(t *Tenant) { t.KeyColumns = []string{"a", "a"} },
			`Tenant.KeyColumns (tenant "acme"): "a" appears twice: list each column once`},
		{"KeyColumns in file order", func(t *Tenant) { t.RecordOrder = "" },
			`Tenant.KeyColumns (tenant "acme"): ["customer"] is set, but Tenant.RecordOrder is "file": only Tenant.RecordOrder "key" reads a record's key; set Tenant.RecordOrder to "key", or leave Tenant.KeyColumns out`},
		{"MaxRecordsInFlight in file order", func(t *Tenant) { t.RecordOrder, t.KeyColumns, t.MaxRecordsInFlight = "file", nil, 4 },
			`Tenant.MaxRecordsInFlight (tenant "acme"): 4 is set, but Tenant.RecordOrder is "file", which sends one record at a time; set Tenant.RecordOrder to "key", or leave Tenant.MaxRecordsInFlight out`},
		{"MaxRecordsInFlight too many", func(t *Tenant) { t.MaxRecordsInFlight = 65 },
			`Tenant.MaxRecordsInFlight (tenant "acme"): 65 is out of range: use 1 to 64 requests in flight per file, or leave it out for 8`},
		{"MaxRecordsInFlight negative", func(t *Tenant) { t.MaxRecordsInFlight = -1 },
			`Tenant.MaxRecordsInFlight (tenant "acme"): -1 is out of range: use 1 to 64 requests in flight per file, or leave it out for 8`},
		{"batch mode", func(t *Tenant) { t.RegisterMode = "batch" },
			`Tenant.RecordOrder (tenant "acme"): "key" is set with Tenant.RegisterMode "batch": batch mode sends a chunk's records in one request, in file order, so it has no key order; use Tenant.RegisterMode "record", or leave Tenant.RecordOrder out`},
		{"DynamoDB sink", func(t *Tenant) { t.RegisterURL, t.DynamoDB = "", &DynamoDB{Key: []string{"id"}, Table: "pool-p-acme"} },
			`Tenant.RecordOrder (tenant "acme"): "key" is set with Tenant.DynamoDB: the DynamoDB sink orders its writes by its own key; remove Tenant.RecordOrder or Tenant.DynamoDB`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := keyed()
			tc.change(&tn)
			silo := valid()
			silo.Tenant = tn
			pool := PoolProps{Name: "p", Bucket: fakeBucket{}, Tenants: []Tenant{tn}, TablePrefix: "pool-p-"}
			for _, got := range []struct {
				tier string
				msgs []string
			}{
				{"silo", messages(silo.withDefaults().validate())},
				{"pool", messages(pool.withDefaults().file().ValidateNamed(propsNaming))},
			} {
				want := tc.want
				if got.tier == "pool" {
					want = strings.ReplaceAll(want, "Tenant.", "PoolProps.Tenants[0].")
				}
				if len(got.msgs) != 1 || got.msgs[0] != want {
					t.Errorf("%s: got %q, want exactly %q", got.tier, got.msgs, want)
				}
			}
		})
	}
	if msgs := messages(Props{Tenant: keyed(), Bucket: fakeBucket{}}.withDefaults().validate()); len(msgs) != 0 {
		t.Errorf("a valid keyed tenant: got %q, want no problem", msgs)
	}
}

// TestRequestsInFlightProps: CoreSystemProps.MaxRequestsInFlight is checked by the tenants file's
// rule, named as a prop.
func TestRequestsInFlightProps(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		want string
	}{
		{"default", 0, ""},
		{"equal to MaxRunningFiles", 4, ""},
		{"the bound", 10000, ""},
		{"below MaxRunningFiles", 3,
			"CoreSystemProps.MaxRequestsInFlight 3 is below CoreSystemProps.MaxRunningFiles 4: each running file sends at least one request, so 4 running files could not keep within 3; raise it to at least 4, or leave it out for 4 (one request per running file)"},
		{"negative", -1, "CoreSystemProps.MaxRequestsInFlight -1 is below CoreSystemProps.MaxRunningFiles 4"},
		{"over the bound", 10001,
			"CoreSystemProps.MaxRequestsInFlight 10001 is over 10000, a bound against typos (10,000 requests in flight at 10 ms each is a million records a second): use 4 to 10000, or leave it out for CoreSystemProps.MaxRunningFiles"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := messages(CoreSystemProps{Name: "ledger", MaxRunningFiles: 4, MaxRequestsInFlight: tc.n}.validate())
			if tc.want == "" && len(got) != 0 || tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.want)) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
