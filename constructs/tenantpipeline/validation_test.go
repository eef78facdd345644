package tenantpipeline

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestConflicts: two constructs of one app whose prefixes overlap on one bucket (one a prefix of
// the other), or that use one tenant id or pool name, fail, in any mix of silo pipelines and
// pools; the later construct is told, and the message names both. Unknown buckets and prefixes
// (tokens, invalid props) are skipped, and a pool's own tenants are the pool's to check.
func TestConflicts(t *testing.T) {
	const bucket = "construct S/Bucket"
	silo := func(order int, id, prefix string) ([]claim, []name) {
		o := owner{path: "S/Tenant-" + id, what: `tenant "` + id + `"`, prop: "Tenant.Prefix", order: order}
		return []claim{{owner: o, bucket: bucket, prefix: prefix}}, []name{{owner: o, kind: kindTenantID, value: id}}
	}
	pool := func(order int, poolName, prefix string, ids ...string) ([]claim, []name) {
		path := "S/Pool-" + poolName
		o := owner{path: path, what: `pool "` + poolName + `"`, prop: "PoolProps.Prefix", order: order}
		names := []name{{owner: o, kind: kindPoolName, value: poolName}}
		for _, id := range ids {
			names = append(names, name{owner: owner{path: path, what: o.what, order: order, pool: path}, kind: kindTenantID, value: id})
		}
		return []claim{{owner: o, bucket: bucket, prefix: prefix}}, names
	}
	type members []func() ([]claim, []name)
	on := func(b string, f func() ([]claim, []name)) func() ([]claim, []name) {
		return func() ([]claim, []name) {
			cs, ns := f()
			for i := range cs {
				cs[i].bucket = b
			}
			return cs, ns
		}
	}
	s := func(order int, id, prefix string) func() ([]claim, []name) {
		return func() ([]claim, []name) { return silo(order, id, prefix) }
	}
	p := func(order int, poolName, prefix string, ids ...string) func() ([]claim, []name) {
		return func() ([]claim, []name) { return pool(order, poolName, prefix, ids...) }
	}
	// names adds to a pool's claims its secret or table name prefix, as TenantPool.claims does.
	names := func(f func() ([]claim, []name), kind, prefix string) func() ([]claim, []name) {
		return func() ([]claim, []name) {
			cs, ns := f()
			o := cs[0].owner
			o.prop = map[string]string{"secrets": "PoolProps.SecretPrefix", "tables": "PoolProps.TablePrefix"}[kind]
			return append(cs, claim{owner: o, bucket: "the " + kind + "' names", prefix: prefix, names: kind}), ns
		}
	}
	for _, tc := range []struct {
		name    string
		members members
		want    map[string][]string // path → the messages told, in part
	}{
		{"silo nested in silo", members{s(0, "a", "inbox/ok/"), s(1, "b", "inbox/ok/sub/")}, map[string][]string{"S/Tenant-b": {
			`tenant "b": prefix "inbox/ok/sub/" overlaps the prefix "inbox/ok/" of tenant "a" (S/Tenant-a) on the same bucket, ` +
				`so one file would reach two tenants: make the prefixes disjoint (Tenant.Prefix)`}}},
		{"silo enclosing silo", members{s(0, "a", "inbox/ok/"), s(1, "b", "inbox/")}, map[string][]string{"S/Tenant-b": {`tenant "b": prefix "inbox/" overlaps the prefix "inbox/ok/" of tenant "a" (S/Tenant-a)`}}},
		{"same prefix", members{s(0, "a", "inbox/ok/"), s(1, "b", "inbox/ok/")}, map[string][]string{"S/Tenant-b": {`prefix "inbox/ok/" overlaps the prefix "inbox/ok/"`}}},
		{"sibling prefixes", members{s(0, "a", "inbox/ok/"), s(1, "b", "inbox/okay/"), s(2, "c", "inbox/o/")}, nil},
		{"another bucket", members{s(0, "a", "inbox/ok/"), on("name other", s(1, "b", "inbox/ok/sub/"))}, nil},
		{"unknown bucket", members{s(0, "a", "inbox/ok/"), on("", s(1, "b", "inbox/ok/sub/"))}, nil},
		{"unknown prefix", members{s(0, "a", "inbox/ok/"), s(1, "b", "")}, nil},
		{"silo enclosing a pool", members{p(0, "default", "pools/default/", "acme"), s(1, "hooli", "pools/")}, map[string][]string{"S/Tenant-hooli": {
			`tenant "hooli": prefix "pools/" overlaps the prefix "pools/default/" of pool "default" (S/Pool-default) on the same bucket, ` +
				`so one file would reach two tenants: make the prefixes disjoint (Tenant.Prefix or PoolProps.Prefix)`}}},
		{"pool enclosing an earlier silo", members{s(0, "hooli", "pools/default/hooli/"), p(1, "default", "pools/default/", "acme")}, map[string][]string{"S/Pool-default": {
			`pool "default": prefix "pools/default/" overlaps the prefix "pools/default/hooli/" of tenant "hooli" (S/Tenant-hooli) on the same bucket, ` +
				`so one file would reach two tenants: make the prefixes disjoint (PoolProps.Prefix or Tenant.Prefix)`}}},
		{"two pools", members{p(0, "a", "pools/", "x"), p(1, "b", "pools/b/", "y")}, map[string][]string{"S/Pool-b": {`pool "b": prefix "pools/b/" overlaps the prefix "pools/" of pool "a" (S/Pool-a)`}}},
		{"a chain: each is told of every earlier prefix of its own", members{s(0, "a", "in/"), s(1, "b", "in/x/"), s(2, "c", "in/y/"), s(3, "d", "in/x/z/")}, map[string][]string{
			"S/Tenant-b": {`prefix "in/x/" overlaps the prefix "in/" of tenant "a"`},
			"S/Tenant-c": {`prefix "in/y/" overlaps the prefix "in/" of tenant "a"`},
			"S/Tenant-d": {`prefix "in/x/z/" overlaps the prefix "in/" of tenant "a"`, `prefix "in/x/z/" overlaps the prefix "in/x/" of tenant "b"`},
		}},
		{"one id, two silos", members{s(0, "acme", "a/"), on("name other", s(1, "acme", "b/"))}, map[string][]string{"S/Tenant-acme": {
			`tenant "acme": tenant id "acme" is also used by tenant "acme" (S/Tenant-acme)`}}},
		{"one id, a silo and a pooled tenant", members{p(0, "default", "pools/default/", "hooli", "acme"), s(1, "hooli", "inbox/hooli/")}, map[string][]string{"S/Tenant-hooli": {
			`tenant "hooli": tenant id "hooli" is also used by pool "default" (S/Pool-default): a tenant id must be unique in the app`}}},
		{"one id, two pools", members{p(0, "a", "pools/a/", "hooli"), p(1, "b", "pools/b/", "hooli")}, map[string][]string{"S/Pool-b": {
			`pool "b": tenant id "hooli" is also used by pool "a" (S/Pool-a)`}}},
		{"one pool name twice", members{p(0, "a", "pools/a/", "x"), on("name other", p(1, "a", "pools/a/", "y"))}, map[string][]string{"S/Pool-a": {
			`pool "a": pool name "a" is also used by pool "a" (S/Pool-a)`}}},
		{"a pool's own tenants are its own to check", members{p(0, "a", "pools/a/", "x", "x")}, nil},
		{"two pools' secret prefixes", members{names(p(0, "a", "pools/a/", "x"), "secrets", "tp/"), names(p(1, "b", "pools/b/", "y"), "secrets", "tp/b-")}, map[string][]string{"S/Pool-b": {
			`pool "b": PoolProps.SecretPrefix "tp/b-" overlaps the PoolProps.SecretPrefix "tp/" of pool "a" (S/Pool-a), so a session of one pool's tenant role could name the other pool's tenants' secrets: make the prefixes disjoint`}}},
		{"two pools' table prefixes", members{names(p(0, "a", "pools/a/", "x"), "tables", "pool-"), names(p(1, "b", "pools/b/", "y"), "tables", "pool-")}, map[string][]string{"S/Pool-b": {
			`PoolProps.TablePrefix "pool-" overlaps the PoolProps.TablePrefix "pool-" of pool "a"`}}},
		{"disjoint name prefixes", members{names(p(0, "a", "pools/a/", "x"), "tables", "pool-a-"), names(p(1, "b", "pools/b/", "y"), "tables", "pool-ab-")}, nil},
		{"a secret prefix and a table prefix alike", members{names(p(0, "a", "pools/a/", "x"), "secrets", "pool-"), names(p(1, "b", "pools/b/", "y"), "tables", "pool-")}, nil},
		{"an id and a pool name alike", members{p(0, "acme", "pools/acme/", "x"), s(1, "acme", "inbox/acme/")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var claims []claim
			var names []name
			for _, m := range tc.members {
				cs, ns := m()
				claims, names = append(claims, cs...), append(names, ns...)
			}
			got := conflicts(claims, names)
			if len(got) != len(tc.want) {
				t.Fatalf("got conflicts %q, want %d constructs told", got, len(tc.want))
			}
			for path, want := range tc.want {
				if len(got[path]) != len(want) {
					t.Fatalf("%s: got %q, want %d messages", path, got[path], len(want))
				}
				for i, w := range want {
					if !strings.Contains(got[path][i], w) {
						t.Errorf("%s: got %q, want it to contain %q", path, got[path][i], w)
					}
				}
			}
		})
	}
}

// TestConflictsScale: a pool of many tenants and many silo pipelines are checked in O(n log n);
// a quadratic check of 100,000 names would take minutes.
func TestConflictsScale(t *testing.T) {
	var claims []claim
	var names []name
	pool := owner{path: "S/Pool-p", what: `pool "p"`, prop: "PoolProps.Prefix", pool: "S/Pool-p"}
	claims = append(claims, claim{owner: pool, bucket: "b", prefix: "pools/p/"})
	for i := range 100_000 {
		names = append(names, name{owner: pool, kind: kindTenantID, value: fmt.Sprintf("t%d", i)})
	}
	for i := range 5_000 {
		o := owner{path: fmt.Sprintf("S/Tenant-s%d", i), what: fmt.Sprintf("tenant \"s%d\"", i), prop: "Tenant.Prefix", order: i + 1}
		claims = append(claims, claim{owner: o, bucket: "b", prefix: fmt.Sprintf("inbox/s%d/", i)})
		names = append(names, name{owner: o, kind: kindTenantID, value: fmt.Sprintf("s%d", i)})
	}
	// One conflict among them all: the last silo reuses a pooled tenant's id.
	names[len(names)-1].value = "t7"
	got := conflicts(claims, names)
	if len(got) != 1 || len(got["S/Tenant-s4999"]) != 1 {
		t.Errorf("got %d constructs told (%q), want S/Tenant-s4999 alone, once", len(got), got["S/Tenant-s4999"])
	}
}

// TestValidationListsEachProblemApart: CDK prints one line per message under the construct's
// path, so every problem is its own message, the tenant's own problems included.
func TestValidationListsEachProblemApart(t *testing.T) {
	p := valid()
	p.Bucket = nil
	p.Tenant.Format = "xml"
	p.Tenant.ChunkSize = 5000
	p.DisableWakeEvents = true
	p.ControllerTimeout = time.Minute
	got := messages(p.withDefaults().validate())
	want := []string{`Tenant.Format (tenant "acme"):`, `Tenant.ChunkSize (tenant "acme"):`, `tenant "acme": Bucket is required`, `tenant "acme": controller timeout 1m0s`}
	if len(got) != len(want) {
		t.Fatalf("got %d messages %q, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) || strings.Contains(got[i], "\n") {
			t.Errorf("message %d: got %q, want one line starting with %q", i, got[i], w)
		}
	}
	if got := messages(valid().withDefaults().validate()); got != nil {
		t.Errorf("valid props: got %q, want no messages", got)
	}
}

// TestPoolPropsMessagesNameTheProps: the tenants file's pool rules, applied to a construct
// user's PoolProps, name the props (the tenants file's own messages name its fields:
// internal/tenants).
func TestPoolPropsMessagesNameTheProps(t *testing.T) {
	secret := "arn:aws:secretsmanager:eu-west-1:123456789012:secret:x/a-AbCdEf"
	for _, tc := range []struct {
		name  string
		props func(*PoolProps)
		want  string
	}{
		{"prefix", func(p *PoolProps) { p.Prefix = "x" }, `pool "p": PoolProps.Prefix "x" is invalid: a key prefix ending in "/"`},
		{"maximum concurrency", func(p *PoolProps) { p.MaximumConcurrency = 1 }, `pool "p": PoolProps.MaximumConcurrency 1 is out of range: Lambda accepts 2 to 1000`},
		{"max running files", func(p *PoolProps) { p.MaxRunningFiles = 2000 }, `pool "p": PoolProps.MaxRunningFiles 2000 is out of range`},
		{"intake groups", func(p *PoolProps) { p.IntakeGroups = 65 }, `pool "p": PoolProps.IntakeGroups 65 is out of range: use 1 to 64`},
		{"unknown intake", func(p *PoolProps) { p.Intake = "hash" }, `pool "p": PoolProps.Intake "hash" is not an intake: use "tenant"`},
		{"intake groups on the per-tenant intake", func(p *PoolProps) { p.Intake, p.IntakeGroups = "tenant", 4 },
			`pool "p": PoolProps.IntakeGroups 4 applies to PoolProps.Intake "sharded" only`},
		{"tenant prefix", func(p *PoolProps) { p.Tenants[0].Prefix = "in/a/" }, `PoolProps.Tenants[0].Prefix (tenant "a"): "in/a/" is not "pools/p/a/"`},
		{"secret without a secret prefix", func(p *PoolProps) { p.Tenants[0].RegisterAuthSecretARN = secret },
			`PoolProps.Tenants[0].RegisterAuthSecretARN (tenant "a"): is set, but pool p has no PoolProps.SecretPrefix: ` +
				`the pool's tenant-scoped role reads the secret named <PoolProps.SecretPrefix><id>; set PoolProps.SecretPrefix and name the secret "<PoolProps.SecretPrefix>a"`},
		{"table without a table prefix", func(p *PoolProps) { p.Tenants[0].DynamoDB = &DynamoDB{Key: []string{"id"}, Table: "t"} },
			`PoolProps.Tenants[0].DynamoDB.Table (tenant "a"): "t" is set, but pool p has no PoolProps.TablePrefix: ` +
				`the pool's tenant-scoped role writes the table named <PoolProps.TablePrefix><id>; set PoolProps.TablePrefix`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := PoolProps{Name: "p", Tenants: []Tenant{{ID: "a", RegisterURL: "https://core.example.com/a"}}}
			tc.props(&p)
			got := messages(p.withDefaults().validate())
			if !slices.ContainsFunc(got, func(m string) bool { return strings.Contains(m, tc.want) }) {
				t.Errorf("got %q, want a message containing %q", got, tc.want)
			}
			for _, m := range got {
				if strings.Contains(m, "pools.p") || strings.Contains(m, "secretPrefix") || strings.Contains(m, "tablePrefix") {
					t.Errorf("got %q, which names the tenants file's fields, want the props'", m)
				}
			}
		})
	}
}

// A construct user's prefixes keep to the same safe set as tenants.json's, in both tiers, each
// mistake told once under the props' own names.
func TestPropsPrefixSafeSet(t *testing.T) {
	pool := func(prefix string, ts ...Tenant) PoolProps {
		return PoolProps{Name: "p", Prefix: prefix, Tenants: ts}
	}
	tenant := func(id, prefix string) Tenant {
		return Tenant{ID: id, Prefix: prefix, RegisterURL: "https://core.example.com/" + id}
	}
	silo := func(prefix string) error {
		p := valid()
		p.Tenant.Prefix = prefix
		return p.withDefaults().validate()
	}
	for _, tc := range []struct {
		name string
		err  error
		want string // "": no prefix message
	}{
		{"silo space", silo("inbox/a b/"), `Tenant.Prefix (tenant "acme"): "inbox/a b/" contains " ", which is not in the safe set (letters, digits, ! - _ . * ' ( ) /)`},
		{"silo plus", silo("inbox/a+b/"), `Tenant.Prefix (tenant "acme"): "inbox/a+b/" contains "+"`},
		{"silo percent", silo("inbox/a%20b/"), `contains "%"`},
		{"silo non-ASCII", silo("受信/acme/"), `contains "受", "信"`},
		{"silo empty segment", silo("inbox//acme/"), `Tenant.Prefix (tenant "acme"): "inbox//acme/" has an empty segment`},
		{"silo safe", silo("inbox/acme(1)/"), ""},
		{"pool prefix", pool("pools/a b/", tenant("a", "")).withDefaults().validate(), `pool "p": PoolProps.Prefix "pools/a b/" contains " "`},
		{"pooled tenant", pool("", tenant("a", "pools/p/a+b/")).withDefaults().validate(), `PoolProps.Tenants[0].Prefix (tenant "a"): "pools/p/a+b/" contains "+"`},
		{"pool safe", pool("", tenant("a", "")).withDefaults().validate(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prefixMessages []string
			for _, m := range messages(tc.err) {
				if strings.Contains(m, "safe set") || strings.Contains(m, "segment") {
					prefixMessages = append(prefixMessages, m)
				}
			}
			if tc.want == "" {
				if len(prefixMessages) != 0 {
					t.Errorf("got %q, want no prefix message", prefixMessages)
				}
				return
			}
			if len(prefixMessages) != 1 || !strings.Contains(prefixMessages[0], tc.want) {
				t.Errorf("got %q, want one message containing %q", prefixMessages, tc.want)
			}
		})
	}
}

// A pool's props are checked by the tenants file's rules, its tenants named by their place in
// PoolProps.Tenants, as every construct user's props are: there is no path that skips them.
func TestPoolPropsGetFileRules(t *testing.T) {
	p := PoolProps{Name: "p", Tenants: []Tenant{
		{ID: "a", Prefix: "pools/p/a/", RegisterURL: "https://core.example.com/a"},
		{ID: "b", Prefix: "pools/p/a/b/", RegisterURL: "https://core.example.com/b"},
	}}.withDefaults()
	err := fmt.Sprint(p.validate())
	for _, want := range []string{`PoolProps.Tenants[1].Prefix (tenant "b"): "pools/p/a/b/" overlaps tenant "a"'s prefix "pools/p/a/"`, `pool "p": Bucket is required`} {
		if !strings.Contains(err, want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}
