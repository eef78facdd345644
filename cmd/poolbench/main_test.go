package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/poolsettings"
)

// The bench compares like with like: on the generated pool, the index and the reference give
// every key the same tenant, and both files hold the same tenants.
func TestIndexAndReferenceAgree(t *testing.T) {
	for _, distinct := range []bool{false, true} {
		dir := t.TempDir()
		v1, v2 := filepath.Join(dir, "v1.json"), filepath.Join(dir, "v2")
		if err := generate(300, distinct, v1, v2); err != nil {
			t.Fatal(err)
		}
		ref, err := loadV1(v1)
		if err != nil {
			t.Fatal(err)
		}
		x, err := poolsettings.Open(v2)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		if x.Len() != len(ref.Tenants) || x.Len() != 300 {
			t.Fatalf("distinct %v: got %d and %d tenants, want 300", distinct, x.Len(), len(ref.Tenants))
		}
		keys := []string{benchPrefix + "tenant-00001", benchPrefix + "tenant-0000010/x", "other/tenant-000001/x"}
		for _, k := range lookupKeys(300) {
			keys = append(keys, k.key)
		}
		for _, k := range keys {
			e, ok := x.TenantOf(k)
			r, rok := ref.tenantOf(k)
			if ok != rok || e.ID != r.ID() {
				t.Errorf("distinct %v, key %q: got %q (%v), reference %q (%v)", distinct, k, e.ID, ok, r.ID(), rok)
			}
		}
		for _, want := range ref.Tenants {
			got, err := x.Tenant(want.ID())
			if err != nil || got.Settings.RegisterURL != want.Settings.RegisterURL || got.OnFailure != want.OnFailure {
				t.Errorf("distinct %v, tenant %s: got %+v, %v, want %+v", distinct, want.ID(), got, err, want)
			}
		}
		// 30 plans: the index (about 55 bytes a tenant) and at most 30 rows of about 400 bytes.
		if st, _ := os.Stat(v2); !distinct && st.Size() > 300*60+30*400 {
			t.Errorf("shared rows: got %d bytes, want the index and 30 rows (under %d)", st.Size(), 300*60+30*400)
		}
	}
}

func TestParseFigures(t *testing.T) {
	f, err := parseFigures("startup_ms=38.5 maxrss_MB=16.0 lookup_us=2.310\n")
	if err != nil || f != (figures{38.5, 16, 2.31}) {
		t.Errorf("got %+v, %v, want 38.5 ms, 16 MB, 2.31 µs", f, err)
	}
	if _, err := parseFigures("startup_ms=1"); err == nil || !strings.Contains(err.Error(), "want startup_ms") {
		t.Errorf("got %v, want an error for missing figures", err)
	}
}
