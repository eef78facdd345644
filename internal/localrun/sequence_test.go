package localrun

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/results"
)

// tenantWith is a tenant whose settings (its TENANT variable) are the JSON settings.
func tenantWith(t *testing.T, settings string) *Tenant {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal([]byte(settings), &cfg); err != nil {
		t.Fatal(err)
	}
	return &Tenant{ID: "acme", Prefix: "inbox/acme/", Config: cfg}
}

func TestTenantSequenceValue(t *testing.T) {
	seq := tenantWith(t, `{"id":"acme","sequence":{"pattern":"^orders-(?P<seq>[0-9]+)\\.csv$","onGap":"skip","gapTimeout":"2s"}}`)
	rule, ok := seq.SequenceRule()
	if !ok || rule.OnGap != "skip" || rule.Start != 1 || rule.GapTimeout.Seconds() != 2 {
		t.Fatalf("got %+v, %v; want onGap skip, start 1, gapTimeout 2s", rule, ok)
	}
	for _, tc := range []struct {
		key  string
		want string // "" when the name does not match
	}{
		{"inbox/acme/orders-007.csv", "7"},
		{"inbox/acme/orders-7.csv.bak", ""},
		{"inbox/acme/sub/orders-7.csv", ""}, // the pattern reads the name relative to the prefix
	} {
		v, ok := seq.SequenceValue(tc.key)
		if got := display(rule.Kind, v); ok != (tc.want != "") || ok && got != tc.want {
			t.Errorf("%s: got %q (%v), want %q", tc.key, got, ok, tc.want)
		}
	}
	if _, ok := tenantWith(t, `{"id":"acme"}`).SequenceRule(); ok {
		t.Error("a tenant without a sequence: got a rule, want none")
	}
}

// The order checks take a sequenced tenant's files in the order of their values, refused and
// unmatched files left out, whatever the upload order.
func TestSequenceOrder(t *testing.T) {
	tn := tenantWith(t, `{"id":"acme","sequence":{"pattern":"^orders-(?P<seq>[0-9]+)\\.csv$"}}`)
	rule, _ := tn.SequenceRule()
	files := []report.FileReport{
		{Key: "inbox/acme/orders-10.csv"}, {Key: "inbox/acme/orders-2.csv"}, {Key: "inbox/acme/notes.txt"},
		{Key: "inbox/acme/orders-02.csv", Status: report.StatusRefused}, {Key: "inbox/acme/orders-9.csv"},
	}
	var got []string
	for _, f := range sequenceOrder(rule, tn.Prefix, files) {
		got = append(got, f.Key)
	}
	if want := []string{"inbox/acme/orders-2.csv", "inbox/acme/orders-9.csv", "inbox/acme/orders-10.csv"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestRefusalNames(t *testing.T) {
	u := &Upload{Key: "inbox/acme/a b.csv", VersionID: "v2"}
	for _, tc := range []struct {
		name string
		src  results.Source
		want bool
	}{
		{"same key and version", results.Source{Key: "inbox/acme/a b.csv", Version: "v2"}, true},
		{"the key as a form-encoded event carried it", results.Source{Key: "inbox/acme/a+b.csv", Version: "v2"}, true},
		{"another version of the key", results.Source{Key: "inbox/acme/a b.csv", Version: "v1"}, false},
		{"another key", results.Source{Key: "inbox/acme/c.csv", Version: "v2"}, false},
	} {
		if got := refusalNames(results.Summary{Source: tc.src}, u, "inbox/acme/a+b.csv"); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestHaltedErrorNamesHoldingTenants(t *testing.T) {
	for _, tc := range []struct {
		err  HaltedError
		want string
	}{
		{HaltedError{Tenants: []string{"globex"}}, "halted: globex (every other tenant drained)"},
		{HaltedError{Holding: []string{"acme"}}, "holding files for a missing sequence number: acme (every other tenant drained)"},
		{HaltedError{Tenants: []string{"globex"}, Holding: []string{"acme", "hooli"}},
			"halted: globex; holding files for a missing sequence number: acme, hooli (every other tenant drained)"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
