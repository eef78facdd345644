package poolsettings_test

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/example/tenantpipeline/spec"
	"reflect"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
)

func poolOf(tenants ...pipeline.PoolTenant) *pipeline.PoolSettings {
	return &pipeline.PoolSettings{Version: pipeline.PoolSettingsVersion, Pool: "shared", Prefix: "inbox/", Tenants: tenants}
}

func pooled(id, prefix string) pipeline.PoolTenant {
	return pipeline.PoolTenant{Settings: pipeline.Tenant{Tenant: spec.Tenant{ID: id, Format: "csv", Encoding: "utf-8", ChunkSize: 100, MaxFieldBytes: 65536}}, Prefix: prefix}
}

func mustEncode(t *testing.T, s *pipeline.PoolSettings) []byte {
	t.Helper()
	b, err := poolsettings.Encode(s)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return b
}

func mustIndex(t *testing.T, b []byte) *poolsettings.Index {
	t.Helper()
	x, err := poolsettings.Parse(b)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return x
}

// Every field of every row comes back; equal rows are stored once.
func TestPoolIndexRoundTrip(t *testing.T) {
	globex := pooled("globex", "inbox/globex/")
	globex.OnFailure, globex.IdempotencyKey = pipeline.OnFailureHalt, pipeline.IdempotencyObjectVersion
	globex.Settings.CoreSystem = &pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 20, MaxRecordsPerSecond: 500, Adaptive: true}
	globex.Settings.Weight = 3
	dyn := pooled("dyn", "inbox/dyn/")
	dyn.Settings.DynamoDB = &pipeline.DynamoDBSink{Key: []string{"id"}, Table: "t-dyn", Concurrency: 4}
	in := poolOf(pooled("acme", "inbox/acme/"), globex, dyn, pooled("acme2", "inbox/acme2/"), pooled("z-9", "inbox/z-9/"))
	b := mustEncode(t, in)
	x := mustIndex(t, b)
	if x.Pool != "shared" || x.Prefix != "inbox/" || x.Len() != 5 {
		t.Fatalf("got pool %q prefix %q with %d tenants, want shared inbox/ with 5", x.Pool, x.Prefix, x.Len())
	}
	for _, want := range in.Tenants {
		got, err := x.Tenant(want.ID())
		if err != nil {
			t.Fatalf("tenant %s: %v", want.ID(), err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("tenant %s: got %+v, want %+v", want.ID(), got, want)
		}
	}
	if n := bytes.Count(b, []byte(`"format":"csv"`)); n != 3 {
		t.Errorf("got %d rows in the file, want 3 (acme, acme2 and z-9 share one)", n)
	}
	// Tenants sharing a row do not share what a caller changes.
	a, _ := x.Tenant("acme")
	a.Settings.ChunkSize = 1
	g, _ := x.Tenant("globex")
	g.Settings.CoreSystem.Table = "changed"
	if a2, _ := x.Tenant("acme2"); a2.Settings.ChunkSize != 100 {
		t.Errorf("acme2 chunk size: got %d, want 100", a2.Settings.ChunkSize)
	}
	if g2, _ := x.Tenant("globex"); g2.Settings.CoreSystem.Table != "" {
		t.Errorf("globex core system table: got %q, want empty", g2.Settings.CoreSystem.Table)
	}
	var ids []string
	for e := range x.All() {
		ids = append(ids, e.ID)
	}
	if got, want := strings.Join(ids, ","), "acme,acme2,dyn,globex,z-9"; got != want {
		t.Errorf("All: got %s, want %s", got, want)
	}
	whole, err := poolsettings.ParseSettings(b)
	if err != nil || len(whole.Tenants) != 5 || whole.Pool != "shared" {
		t.Errorf("ParseSettings: got %+v, %v, want the pool's 5 tenants", whole, err)
	}
	if _, err := x.Tenant("nobody"); !errors.Is(err, poolsettings.ErrUnknownTenant) {
		t.Errorf("tenant nobody: got %v, want ErrUnknownPoolTenant", err)
	}
}

// A key's tenant is the one whose prefix holds it, never a sibling whose prefix sorts near it.
func TestPoolIndexTenantOf(t *testing.T) {
	x := mustIndex(t, mustEncode(t, poolOf(
		pooled("aaa", "inbox/aaa/"), pooled("acme", "inbox/acme/"), pooled("acme2", "inbox/acme2/"),
		pooled("acme-x", "inbox/acme-x/"), pooled("b", "inbox/b/"))))
	tests := []struct {
		key, want string // want "" for no tenant
	}{
		{"inbox/acme2/a.csv", "acme2"},
		{"inbox/acme/x", "acme"},
		{"inbox/acme/", "acme"},
		{"inbox/acme/deep/er/file.csv", "acme"},
		{"inbox/acme-x/f", "acme-x"},
		{"inbox/acme", ""},
		{"inbox/acm/x", ""},
		{"inbox/acme2x/a", ""},
		{"inbox/acme3/a", ""},
		{"inbox/aaa/f", "aaa"},
		{"inbox/aa", ""},
		{"inbox/", ""},
		{"", ""},
		{"inbox/b/c", "b"},
		{"inbox/bb/c", ""},
		{"inbox/c/x", ""},
		{"other/acme/x", ""},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			e, ok := x.TenantOf(tt.key)
			if ok != (tt.want != "") || e.ID != tt.want {
				t.Errorf("TenantOf(%q): got %q (%v), want %q", tt.key, e.ID, ok, tt.want)
			}
			if ok && !strings.HasPrefix(tt.key, e.Prefix) {
				t.Errorf("TenantOf(%q): got prefix %q, which does not hold the key", tt.key, e.Prefix)
			}
		})
	}
}

// The writer refuses what a reader could not rely on, naming each problem.
func TestPoolSettingsEncodeRejects(t *testing.T) {
	tests := []struct {
		name string
		s    *pipeline.PoolSettings
		want []string
	}{
		{"no pool", &pipeline.PoolSettings{Prefix: "inbox/"}, []string{"no pool name"}},
		{"no id", poolOf(pooled("", "inbox/x/")), []string{"tenant 0 has no id"}},
		{"twice", poolOf(pooled("a", "inbox/a/"), pooled("a", "inbox/b/")), []string{`tenant "a" appears twice`}},
		{"outside", poolOf(pooled("a", "other/a/"), pooled("b", "inbox/b")), []string{`"a": prefix "other/a/" is not a folder`, `"b": prefix "inbox/b" is not a folder`}},
		{"overlap", poolOf(pooled("a", "inbox/a/"), pooled("b", "inbox/a/b/")), []string{`tenant "a": prefix "inbox/a/" holds tenant "b"'s prefix "inbox/a/b/"`}},
		{"tab", poolOf(pooled("a", "inbox/a\tb/")), []string{`"a": a tab or line end`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := poolsettings.Encode(tt.s)
			if err == nil {
				t.Fatalf("got no error, want %v", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// A file that is not whole, or not of this version, fails at open with a clear error.
func TestPoolIndexRejects(t *testing.T) {
	good := mustEncode(t, poolOf(pooled("acme", "inbox/acme/"), pooled("globex", "inbox/globex/")))
	nl := bytes.IndexByte(good, '\n')
	twins := mustEncode(t, poolOf(pooled("acme", "inbox/acme/"), pooled("acmf", "inbox/acmf/")))
	replace := func(old, new string) []byte {
		b := bytes.Replace(good, []byte(old), []byte(new), 1)
		if bytes.Equal(b, good) {
			t.Fatalf("%q is not in the file", old)
		}
		return b
	}
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"truncated", good[:len(good)-5], "truncated or damaged"},
		{"truncated in the index", good[:nl+10], "truncated or damaged"},
		{"extended", append(bytes.Clone(good), "x"...), "truncated or damaged"},
		{"empty", nil, "no header line"},
		{"version 1", []byte(`{"version":1,"pool":"shared","prefix":"inbox/","tenants":[]}`), "no header line"},
		{"version 1 on lines", []byte("{\n  \"version\": 1\n}\n"), "not a version 2 settings file"},
		{"sizes past the file", replace(`"rowBytes":`, `"rowBytes":9223372036854775807,"x":`), "truncated or damaged"},
		{"version 3", replace(`"version":2`, `"version":3`), "version 3, want 2"},
		{"another format", replace(`"format":"tenantpipeline-pool-settings"`, `"format":"tenantpipeline-pool-sittings"`), `format "tenantpipeline-pool-sittings"`},
		{"unsorted index", replace("acme\tinbox/acme/", "acme\tinbox/zcme/"), "not sorted"},
		{"prefix outside the pool", replace("acme\tinbox/acme/", "acme\tinbax/acme/"), `prefix "inbax/acme/" is not a folder under the pool prefix "inbox/"`},
		{"a row past the rows", replace("\t0\t", "\t9\t"), "is not within"},
		{"twice", bytes.Replace(twins, []byte("acmf\t"), []byte("acme\t"), 1), `tenant "acme" appears twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := poolsettings.Parse(tt.b)
			if err == nil {
				t.Fatalf("got no error, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

// A bad row is an error of its tenant only, when the tenant is first used.
func TestPoolIndexBadRow(t *testing.T) {
	bad := pooled("bad", "inbox/bad/")
	bad.Settings.Format = "BADBAD"
	b := mustEncode(t, poolOf(pooled("acme", "inbox/acme/"), bad, pooled("globex", "inbox/globex/")))
	b = bytes.Replace(b, []byte(`"format":"BADBAD"`), []byte(`"fxrmat":"BADBAD"`), 1)
	x := mustIndex(t, b)
	for _, id := range []string{"acme", "globex"} {
		if got, err := x.Tenant(id); err != nil || got.ID() != id {
			t.Errorf("tenant %s: got %q, %v, want its settings", id, got.ID(), err)
		}
	}
	_, err := x.Tenant("bad")
	var re *poolsettings.RowError
	if !errors.As(err, &re) || re.Tenant != "bad" || !strings.Contains(err.Error(), `unknown field "fxrmat"`) {
		t.Errorf("tenant bad: got %v, want a PoolRowError of bad naming the unknown field", err)
	}
	if e, ok := x.TenantOf("inbox/bad/f.csv"); !ok || e.ID != "bad" {
		t.Errorf("TenantOf: got %q, %v, want bad: its files still reach its message group", e.ID, ok)
	}
	if _, err := poolsettings.ParseSettings(b); err == nil || !strings.Contains(err.Error(), `tenant "bad"`) {
		t.Errorf("ParseSettings: got %v, want the bad row named", err)
	}
}

// More tenants than the cache holds: every one still reads back.
func TestPoolIndexCacheBound(t *testing.T) {
	s := poolOf()
	for i := range poolsettings.MaxCachedRows + 50 {
		tn := pooled(fmt.Sprintf("t%04d", i), fmt.Sprintf("inbox/t%04d/", i))
		tn.Settings.ChunkSize = i + 1 // a row each
		s.Tenants = append(s.Tenants, tn)
	}
	x := mustIndex(t, mustEncode(t, s))
	for round := range 2 {
		for i, want := range s.Tenants {
			got, err := x.Tenant(want.ID())
			if err != nil || got.Settings.ChunkSize != i+1 {
				t.Fatalf("round %d, tenant %s: got chunk size %d, %v, want %d", round, want.ID(), got.Settings.ChunkSize, err, i+1)
			}
		}
	}
}

func ExampleIndex() {
	s := pipeline.PoolSettings{Pool: "shared", Prefix: "inbox/", Tenants: []pipeline.PoolTenant{
		{Settings: pipeline.Tenant{Tenant: spec.Tenant{ID: "acme", Format: "csv", ChunkSize: 100}}, Prefix: "inbox/acme/"},
		{Settings: pipeline.Tenant{Tenant: spec.Tenant{ID: "acme2", Format: "jsonl", ChunkSize: 50}}, Prefix: "inbox/acme2/", OnFailure: pipeline.OnFailureHalt},
	}}
	file, err := poolsettings.Encode(&s) // at synth: the file goes into the code asset
	if err != nil {
		panic(err)
	}
	x, err := poolsettings.Parse(file) // in the function: poolsettings.Open(path)
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"inbox/acme2/a.csv", "inbox/acme/b.csv", "inbox/acm/c.csv"} {
		e, ok := x.TenantOf(key)
		if !ok {
			fmt.Println(key, "→ no tenant")
			continue
		}
		t, err := x.Tenant(e.ID)
		fmt.Println(key, "→", e.ID, t.Settings.Format, t.OnFailure, err)
	}
	// Output:
	// inbox/acme2/a.csv → acme2 jsonl halt <nil>
	// inbox/acme/b.csv → acme csv  <nil>
	// inbox/acm/c.csv → no tenant
}

// A pool of no tenants is a file too: every key is of no tenant.
func TestPoolIndexEmpty(t *testing.T) {
	x := mustIndex(t, mustEncode(t, poolOf()))
	if _, ok := x.TenantOf("inbox/acme/a.csv"); ok || x.Len() != 0 {
		t.Errorf("got %d tenants, TenantOf ok %v, want none", x.Len(), ok)
	}
}

// The construct writes the file at synth: 100,000 tenants of 30 plans.
func BenchmarkPoolSettingsEncode100k(b *testing.B) {
	s := poolOf()
	for i := range 100_000 {
		tn := pooled(fmt.Sprintf("tenant-%06d", i), fmt.Sprintf("inbox/tenant-%06d/", i))
		tn.Settings.ChunkSize = 100 + i%30
		s.Tenants = append(s.Tenants, tn)
	}
	for b.Loop() {
		if _, err := poolsettings.Encode(s); err != nil {
			b.Fatal(err)
		}
	}
}

// failingReader fails every read at or after from while fail is set.
type failingReader struct {
	r    *bytes.Reader
	from int64
	fail bool
}

func (f *failingReader) ReadAt(p []byte, off int64) (int, error) {
	if f.fail && off >= f.from {
		return 0, errors.New("input/output error")
	}
	return f.r.ReadAt(p, off)
}

// A row that could not be read is read again on the next use; one that does not decode is not.
func TestPoolIndexReadErrorNotKept(t *testing.T) {
	b := mustEncode(t, poolOf(pooled("acme", "inbox/acme/")))
	rowsAt := int64(bytes.LastIndex(b, []byte(`{"settings"`)))
	fr := &failingReader{r: bytes.NewReader(b), from: rowsAt}
	x, err := poolsettings.NewIndex(fr, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	fr.fail = true
	var re *poolsettings.RowError
	if _, err := x.Tenant("acme"); !errors.As(err, &re) || !strings.Contains(err.Error(), "input/output error") {
		t.Fatalf("got %v, want the read error as a PoolRowError", err)
	}
	fr.fail = false
	if got, err := x.Tenant("acme"); err != nil || got.Settings.ChunkSize != 100 {
		t.Errorf("after the read error passed: got %+v, %v, want acme's row", got, err)
	}
}
