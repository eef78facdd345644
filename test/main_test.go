// Package test holds the whole-app tests: fine-grained template assertions per tenant, the
// workflow rendered as ASL (validated and golden-tested), cdk-nag, logical-id pinning, snapshots
// and resource counts. All jsii-using tests of the app live here, behind one TestMain.
package test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/stacks"
)

var update = flag.Bool("update", false, "rewrite golden files and snapshots")

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	removeSynthCache()
	jsii.Close()
	os.Exit(code)
}

// synthApp builds the app from a tenants file in testdata with extra options, as `cdk synth` would,
// once per test binary (builtApp): read it, never add to it.
func synthApp(t *testing.T, tenantsFile string, o stacks.Options) (awscdk.App, *stacks.App) {
	t.Helper()
	o.TenantsFile = filepath.Join("testdata", tenantsFile)
	return builtApp(t, o)
}

// shared is the app most tests read: the three tenants of testdata/tenants.json in one stack.
var shared struct {
	app      *stacks.App
	tenants  assertions.Template
	ingest   assertions.Template
	template map[string]any
}

func sharedApp(t *testing.T) {
	t.Helper()
	if shared.app != nil {
		return
	}
	_, built := synthApp(t, "tenants.json", stacks.Options{})
	shared.app = built
	shared.tenants = stackAssertions(t, built.TenantStacks[0])
	shared.ingest = stackAssertions(t, built.Ingest)
	shared.template = templateJSON(shared.tenants)
}

func templateJSON(tpl assertions.Template) map[string]any {
	return (*tpl.ToJSON())
}

// tenantResources returns the resources of one type that belong to one tenant, by logical id.
func tenantResources(t *testing.T, tpl map[string]any, typ, tenant string) map[string]map[string]any {
	t.Helper()
	prefix := "Tenant" + strings.ReplaceAll(tenant, "-", "")
	out := map[string]map[string]any{}
	for id, r := range tpl["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] == typ && strings.HasPrefix(id, prefix) {
			out[id] = res
		}
	}
	return out
}

// only returns the single resource of a type for a tenant.
func only(t *testing.T, tpl map[string]any, typ, tenant string) (string, map[string]any) {
	t.Helper()
	rs := tenantResources(t, tpl, typ, tenant)
	if len(rs) != 1 {
		t.Fatalf("tenant %s: got %d %s resources, want 1", tenant, len(rs), typ)
	}
	for id, r := range rs {
		return id, r
	}
	return "", nil
}

// fileRule returns the tenant's rule for its files' "Object Created" events (not its StatusRule).
func fileRule(t *testing.T, tpl map[string]any, tenant string) (string, map[string]any) {
	t.Helper()
	var id string
	var rule map[string]any
	for rid, r := range tenantResources(t, tpl, "AWS::Events::Rule", tenant) {
		if strings.Contains(rid, "StatusRule") || strings.Contains(rid, "ReconcileRule") {
			continue
		}
		if rule != nil {
			t.Fatalf("tenant %s: got two file rules, %s and %s, want 1", tenant, id, rid)
		}
		id, rule = rid, r
	}
	if rule == nil {
		t.Fatalf("tenant %s: got no file rule, want 1", tenant)
	}
	return id, rule
}

func props(r map[string]any) map[string]any { return r["Properties"].(map[string]any) }

// get walks a JSON value by keys and indexes, failing the test when a step is missing.
func get(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %q: got %T, want an object", k, v)
			}
			v, ok = m[k]
			if !ok {
				t.Fatalf("missing key %q in %v", k, keys(m))
			}
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at [%d]: got %v, want an array longer than %d", k, v, k)
			}
			v = a[k]
		}
	}
	return v
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func regexpMust(s string) *regexp.Regexp { return regexp.MustCompile(s) }

var assetHash = regexp.MustCompile(`[0-9a-f]{64}`)

// scrub replaces asset hashes, which change with every code change, by a fixed marker.
func scrub(s string) string { return assetHash.ReplaceAllString(s, "<asset-hash>") }

func prettyJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b) + "\n"
}
