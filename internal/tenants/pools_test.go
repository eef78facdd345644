package tenants

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestPoolDefaults(t *testing.T) {
	f, err := Parse([]byte(`{"tenants": [
		{"id": "a", "tier": "pool"},
		{"id": "b", "tier": "pool", "pool": "big"},
		{"id": "c", "tier": "pool", "pool": "big", "prefix": "shared/big/c/"},
		{"id": "d"}
	], "pools": {"big": {"prefix": "shared/big/", "maximumConcurrency": 50}}}`), Options{RegisterURL: "https://core.example.com/records"})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []struct{ tier, pool, prefix string }{
		{"pool", "default", "pools/default/a/"},
		{"pool", "big", "shared/big/b/"},
		{"pool", "big", "shared/big/c/"},
		{"silo", "", "inbox/d/"},
	}
	for i, w := range want {
		if g := f.Tenants[i]; g.Tier != w.tier || g.Pool != w.pool || g.Prefix != w.prefix {
			t.Errorf("tenant %s: got tier %q pool %q prefix %q, want %+v", g.ID, g.Tier, g.Pool, g.Prefix, w)
		}
	}
	if got := f.PoolNames(); strings.Join(got, ",") != "big,default" {
		t.Errorf("PoolNames = %v", got)
	}
	if c := f.Pool("big"); c.MaximumConcurrency != 50 || c.BacklogAlarmMessages != DefaultPoolBacklogAlarmMessages {
		t.Errorf("pool big = %+v", c)
	}
	if c := f.Pool("default"); c.Prefix != "pools/default/" || c.MaximumConcurrency != DefaultPoolMaximumConcurrency || c.Intake != IntakeTenant || c.IntakeGroups != 0 {
		t.Errorf("pool default = %+v", c)
	}

	// The app's defaultTier context.
	f, err = Parse([]byte(`{"tenants": [{"id": "a"}, {"id": "b", "tier": "silo"}]}`), Options{RegisterURL: "https://x.example.com/", DefaultTier: TierPool})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if f.Tenants[0].Tier != TierPool || f.Tenants[0].Pool != DefaultPool || f.Tenants[1].Tier != TierSilo {
		t.Errorf("default tier pool: got %+v / %+v", f.Tenants[0], f.Tenants[1])
	}
}

func TestPoolValidation(t *testing.T) {
	cases := []struct {
		name, json string
		want       []string
	}{
		{"bad tier", `{"tenants": [{"id": "a", "tier": "shared"}]}`, []string{`tier (tenant "a"): "shared" is invalid: use "silo" or "pool"`}},
		{"pool on silo", `{"tenants": [{"id": "a", "pool": "x"}]}`, []string{`pool (tenant "a"): "x" is set, but the tenant's tier is "silo"`}},
		{"bad pool name", `{"tenants": [{"id": "a", "tier": "pool", "pool": "Big Pool"}]}`, []string{`pool (tenant "a"): "Big Pool" is invalid`}},
		// The tenant-scoped role grants "<pool prefix>${aws:PrincipalTag/tenant}/*": any other
		// prefix, inside or outside the pool's, is refused with one message.
		{"prefix outside pool", `{"tenants": [{"id": "a", "tier": "pool", "prefix": "inbox/a/"}]}`,
			[]string{`prefix (tenant "a"): "inbox/a/" is not "pools/default/a/": a pooled tenant's prefix is its pool's prefix "pools/default/" followed by its id and "/"`}},
		{"prefix inside the pool, not the derived one", `{"tenants": [{"id": "a", "tier": "pool", "prefix": "pools/default/custom-a/"}]}`,
			[]string{`prefix (tenant "a"): "pools/default/custom-a/" is not "pools/default/a/"`}},
		{"another tenant's prefix", `{"tenants": [{"id": "a", "tier": "pool", "prefix": "pools/default/b/"}, {"id": "b", "tier": "pool"}]}`,
			[]string{`prefix (tenant "a"): "pools/default/b/" is not "pools/default/a/"`}},
		{"silo overlaps pool", `{"tenants": [{"id": "a", "tier": "pool"}, {"id": "b", "prefix": "pools/"}]}`,
			[]string{`prefix (tenant "b"): "pools/" overlaps the prefix "pools/default/" of pool default`}},
		{"stack on pooled", `{"tenants": [{"id": "a", "tier": "pool", "stack": "1"}]}`, []string{`stack (tenant "a"): "1" is set, but pooled tenants live in their pool's stack`}},
		{"secret without prefix", `{"tenants": [{"id": "a", "tier": "pool", "registerAuthSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:core/a-AbCdEf"}]}`,
			[]string{`registerAuthSecretArn (tenant "a"): is set, but pool default has no secretPrefix`}},
		{"secret outside prefix", `{"pools": {"default": {"secretPrefix": "pipeline/"}}, "tenants": [{"id": "a", "tier": "pool", "registerAuthSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:core/a-AbCdEf"}]}`,
			[]string{`registerAuthSecretArn (tenant "a"): secret name "core/a-AbCdEf" is not "pipeline/a" followed by Secrets Manager's 6-character suffix`}},
		{"secret under the prefix, not the derived name", `{"pools": {"default": {"secretPrefix": "pipeline/"}}, "tenants": [{"id": "a", "tier": "pool", "registerAuthSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:pipeline/shared-AbCdEf"}]}`,
			[]string{`secret name "pipeline/shared-AbCdEf" is not "pipeline/a"`}},
		// "pipeline/a-b-AbCdEf" is tenant a-b's secret: "-??????" after "pipeline/a" does not match it.
		{"another tenant's secret", `{"pools": {"default": {"secretPrefix": "pipeline/"}}, "tenants": [{"id": "a", "tier": "pool", "registerAuthSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:pipeline/a-b-AbCdEf"}]}`,
			[]string{`secret name "pipeline/a-b-AbCdEf" is not "pipeline/a"`}},
		{"partial secret ARN", `{"pools": {"default": {"secretPrefix": "pipeline/"}}, "tenants": [{"id": "a", "tier": "pool", "registerAuthSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:pipeline/a"}]}`,
			[]string{`secret name "pipeline/a" is not "pipeline/a" followed by Secrets Manager's 6-character suffix`}},
		{"short secret prefix", `{"pools": {"default": {"secretPrefix": "p/"}}, "tenants": [{"id": "a", "tier": "pool", "registerAuthSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:p/a-AbCdEf"}]}`,
			[]string{`pools.default: secretPrefix "p/" is invalid: use at least 3`}},
		{"secret prefix without a separator", `{"pools": {"default": {"secretPrefix": "prod"}}, "tenants": [{"id": "a", "tier": "pool", "registerAuthSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:proda-AbCdEf"}]}`,
			[]string{`pools.default: secretPrefix "prod" is invalid`}},
		{"secret prefix with a wildcard", `{"pools": {"default": {"secretPrefix": "pipe*/"}}, "tenants": [{"id": "a", "tier": "pool"}]}`,
			[]string{`pools.default: secretPrefix "pipe*/" is invalid`}},
		{"table missing", `{"tenants": [{"id": "a", "tier": "pool", "registerUrl": "", "dynamodb": {"key": ["id"]}}]}`,
			[]string{`dynamodb.table (tenant "a"): is missing: a pool creates no table per tenant`}},
		{"table outside prefix", `{"pools": {"default": {"tablePrefix": "pool-"}}, "tenants": [{"id": "a", "tier": "pool", "dynamodb": {"key": ["id"], "table": "records"}}]}`,
			[]string{`dynamodb.table (tenant "a"): "records" is not "pool-a": a pooled tenant's table is named <tablePrefix><id>`}},
		{"another tenant's table", `{"pools": {"default": {"tablePrefix": "pool-"}}, "tenants": [{"id": "a", "tier": "pool", "dynamodb": {"key": ["id"], "table": "pool-b"}}, {"id": "b", "tier": "pool", "dynamodb": {"key": ["id"], "table": "pool-b"}}]}`,
			[]string{`dynamodb.table (tenant "a"): "pool-b" is not "pool-a"`}},
		{"short table prefix", `{"pools": {"default": {"tablePrefix": "p-"}}, "tenants": [{"id": "a", "tier": "pool", "dynamodb": {"key": ["id"], "table": "p-a"}}]}`,
			[]string{`pools.default: tablePrefix "p-" is invalid: use at least 3`}},
		{"table prefix ending in a slash", `{"pools": {"default": {"tablePrefix": "pool/"}}, "tenants": [{"id": "a", "tier": "pool", "dynamodb": {"key": ["id"], "table": "pool/a"}}]}`,
			[]string{`pools.default: tablePrefix "pool/" is invalid`}},
		{"pool limits", `{"pools": {"default": {"maximumConcurrency": 1, "backlogAlarmMessages": 120000}}, "tenants": [{"id": "a", "tier": "pool"}]}`,
			[]string{`pools.default: maximumConcurrency 1 is out of range: Lambda accepts 2 to 1000`, `pools.default: backlogAlarmMessages 120000 is out of range`}},
		{"intake groups out of range", `{"pools": {"default": {"intakeGroups": 65}}, "tenants": [{"id": "a", "tier": "pool"}]}`,
			[]string{`pools.default: intakeGroups 65 is out of range: use 1 to 64`}},
		{"max queued files per tenant above the range", `{"pools": {"default": {"maxQueuedFilesPerTenant": 1001}}, "tenants": [{"id": "a", "tier": "pool"}]}`,
			[]string{`pools.default: maxQueuedFilesPerTenant 1001 is out of range: use 1 to 1000 (default 10)`}},
		{"negative max queued files per tenant", `{"pools": {"default": {"maxQueuedFilesPerTenant": -1}}, "tenants": [{"id": "a", "tier": "pool"}]}`,
			[]string{`pools.default: maxQueuedFilesPerTenant -1 is out of range`}},
		{"explicit zero max queued files per tenant", `{"pools": {"default": {"maxQueuedFilesPerTenant": 0}}, "tenants": [{"id": "a", "tier": "pool"}]}`,
			[]string{`pools.default: maxQueuedFilesPerTenant 0 is out of range: use 1 to 1000, or leave it out for 10`}},
		{"unknown intake", `{"pools": {"default": {"intake": "hash"}}, "tenants": [{"id": "a", "tier": "pool"}]}`,
			[]string{`pools.default: intake "hash" is not an intake: use "tenant"`}},
		{"intake groups on the per-tenant intake", `{"pools": {"default": {"intake": "tenant", "intakeGroups": 4}}, "tenants": [{"id": "a", "tier": "pool"}]}`,
			[]string{`pools.default: intakeGroups 4 applies to intake "sharded" only`}},
		{"negative intake groups", `{"pools": {"default": {"intakeGroups": -1}}, "tenants": [{"id": "a", "tier": "pool"}]}`,
			[]string{`pools.default: intakeGroups -1 is out of range`}},
		// The uploader role's trust policy names principals exactly.
		{"uploader with a wildcard", `{"pools": {"default": {"uploaders": ["arn:aws:iam::123456789012:role/platform/*"]}}, "tenants": [{"id": "a", "tier": "pool"}]}`,
			[]string{`pools.default: uploaders: "arn:aws:iam::123456789012:role/platform/*" is not an IAM role or user ARN`}},
		{"uploader session", `{"pools": {"default": {"uploaders": ["arn:aws:sts::123456789012:assumed-role/platform/s1"]}}, "tenants": [{"id": "a", "tier": "pool"}]}`,
			[]string{`uploaders: "arn:aws:sts::123456789012:assumed-role/platform/s1" is not an IAM role or user ARN`}},
		{"uploader account", `{"pools": {"default": {"uploaders": ["arn:aws:iam::123456789012:root"]}}, "tenants": [{"id": "a", "tier": "pool"}]}`,
			[]string{`uploaders: "arn:aws:iam::123456789012:root" is not an IAM role or user ARN`}},
		{"uploader not a string list", `{"pools": {"default": {"uploaders": "arn:aws:iam::123456789012:role/platform"}}, "tenants": [{"id": "a", "tier": "pool"}]}`,
			[]string{`pools.default: uploaders:`}},
		{"unused pool", `{"pools": {"spare": {}}, "tenants": [{"id": "a"}]}`, []string{`pools.spare: no tenant is in this pool`}},
		{"unknown pool field", `{"pools": {"default": {"maximumConcurency": 5}}, "tenants": [{"id": "a", "tier": "pool"}]}`,
			[]string{`pools.default: unknown field "maximumConcurency" (did you mean "maximumConcurrency"?)`}},
		{"pools overlap", `{"pools": {"a": {"prefix": "p/"}, "b": {"prefix": "p/b/"}}, "tenants": [{"id": "x", "tier": "pool", "pool": "a"}, {"id": "y", "tier": "pool", "pool": "b"}]}`,
			[]string{`pools.b: prefix "p/b/" overlaps pool a's prefix "p/"`}},
		{"unknown key layout", `{"pools": {"default": {"keys": "pool-scoped"}}, "tenants": [{"id": "a", "tier": "pool"}]}`,
			[]string{`pools.default: keys "pool-scoped" is not a layout: use "pool"`}},
		// Pool a's tenant role, tagged "b-y", would name pool b's tenant y's secret and table.
		{"secret prefixes overlap", `{"pools": {"a": {"secretPrefix": "tp/"}, "b": {"secretPrefix": "tp/b-"}}, "tenants": [{"id": "x", "tier": "pool", "pool": "a"}, {"id": "y", "tier": "pool", "pool": "b"}]}`,
			[]string{`pools.b: secretPrefix "tp/b-" overlaps pool a's secretPrefix "tp/", so a session of one pool's tenant role could name the other pool's tenants' secrets; make them disjoint`}},
		{"secret prefixes equal", `{"pools": {"a": {"secretPrefix": "tp/"}, "b": {"secretPrefix": "tp/"}}, "tenants": [{"id": "x", "tier": "pool", "pool": "a"}, {"id": "y", "tier": "pool", "pool": "b"}]}`,
			[]string{`pools.b: secretPrefix "tp/" overlaps pool a's secretPrefix "tp/"`}},
		{"table prefixes overlap", `{"pools": {"a": {"tablePrefix": "pool-b-"}, "b": {"tablePrefix": "pool-"}}, "tenants": [{"id": "x", "tier": "pool", "pool": "a"}, {"id": "y", "tier": "pool", "pool": "b"}]}`,
			[]string{`pools.b: tablePrefix "pool-" overlaps pool a's tablePrefix "pool-b-", so a session of one pool's tenant role could name the other pool's tenants' tables; make them disjoint`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.json), Options{RegisterURL: "https://core.example.com/records"})
			if err == nil {
				t.Fatal("Parse accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\nlacks %q", err, w)
				}
			}
		})
	}
}

// Pools whose secret and table prefixes are disjoint pass, one pool's prefix being the other's
// but for its last characters included.
func TestPoolNamePrefixesDisjoint(t *testing.T) {
	_, err := Parse([]byte(`{"pools": {"a": {"secretPrefix": "tp/a/", "tablePrefix": "pool-a-"}, "b": {"secretPrefix": "tp/ab/", "tablePrefix": "pool-ab-"}},
		"tenants": [{"id": "x", "tier": "pool", "pool": "a"}, {"id": "y", "tier": "pool", "pool": "b"}]}`), Options{RegisterURL: "https://core.example.com/records"})
	if err != nil {
		t.Fatal(err)
	}
}

// maxQueuedFilesPerTenant defaults to 10 and takes 1 to 1000.
func TestPoolMaxQueuedFilesPerTenant(t *testing.T) {
	for _, tc := range []struct {
		name string
		pool string
		want int
	}{
		{"default", `{}`, 10},
		{"set", `{"maxQueuedFilesPerTenant": 1}`, 1},
		{"largest", `{"maxQueuedFilesPerTenant": 1000}`, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(`{"pools": {"default": `+tc.pool+`}, "tenants": [{"id": "a", "tier": "pool"}]}`), Options{RegisterURL: "https://core.example.com/records"})
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Pool("default").MaxQueuedFilesPerTenant; got != tc.want {
				t.Errorf("got maxQueuedFilesPerTenant %d, want %d", got, tc.want)
			}
		})
	}
}

// One intake group, as before the intake was sharded, takes the derived prefix too.
func TestPoolOneIntakeGroup(t *testing.T) {
	f, err := Parse([]byte(`{"pools": {"default": {"intakeGroups": 1}}, "tenants": [{"id": "a", "tier": "pool", "prefix": "pools/default/a/"}]}`), Options{RegisterURL: "https://core.example.com/records"})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Pool("default"); got.IntakeGroups != 1 || got.Intake != IntakeSharded {
		t.Errorf("got intakeGroups %d, intake %q; want 1, %q", got.IntakeGroups, got.Intake, IntakeSharded)
	}
}

// Which intake a pool gets: the per-tenant one by default; the sharded one when it says so or
// sets intakeGroups, with 16 groups unless it names another number.
func TestPoolIntakeDefaults(t *testing.T) {
	for _, c := range []struct {
		config       PoolConfig
		intake       string
		intakeGroups int
	}{
		{PoolConfig{}, IntakeTenant, 0},
		{PoolConfig{Intake: IntakeTenant}, IntakeTenant, 0},
		{PoolConfig{Intake: IntakeSharded}, IntakeSharded, DefaultPoolIntakeGroups},
		{PoolConfig{IntakeGroups: 4}, IntakeSharded, 4},
		{PoolConfig{Intake: IntakeSharded, IntakeGroups: 1}, IntakeSharded, 1},
	} {
		if d := c.config.PoolDefaults("p"); d.Intake != c.intake || d.IntakeGroups != c.intakeGroups {
			t.Errorf("%+v: intake %q with %d groups, want %q with %d", c.config, d.Intake, d.IntakeGroups, c.intake, c.intakeGroups)
		}
	}
}

// The derived names pass: the prefix, the secret with its suffix, the table, and prefixes of
// both separators.
func TestPoolDerivedNames(t *testing.T) {
	for _, tc := range []struct{ name, json string }{
		{"secret prefix ending in /", `{"pools": {"default": {"secretPrefix": "pipeline/"}}, "tenants": [{"id": "a-b", "tier": "pool", "prefix": "pools/default/a-b/", "registerAuthSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:pipeline/a-b-AbCdEf"}]}`},
		{"secret prefix ending in -", `{"pools": {"default": {"secretPrefix": "pipeline-"}}, "tenants": [{"id": "a", "tier": "pool", "registerAuthSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:pipeline-a-AbCdEf"}]}`},
		{"table", `{"pools": {"default": {"tablePrefix": "pool-"}}, "tenants": [{"id": "a", "tier": "pool", "dynamodb": {"key": ["id"], "table": "pool-a"}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse([]byte(tc.json), Options{RegisterURL: "https://core.example.com/records"}); err != nil {
				t.Errorf("got %v, want no error", err)
			}
		})
	}
}

// TestPoolUploaders: role and user ARNs, with or without a path, are read as they are.
func TestPoolUploaders(t *testing.T) {
	want := []string{"arn:aws:iam::123456789012:role/platform", "arn:aws:iam::123456789012:role/svc/upload-vendor", "arn:aws-cn:iam::123456789012:user/ci"}
	b, _ := json.Marshal(want)
	f, err := Parse([]byte(`{"pools": {"default": {"uploaders": `+string(b)+`}}, "tenants": [{"id": "a", "tier": "pool"}]}`), Options{RegisterURL: "https://core.example.com/records"})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Pool("default").Uploaders; !slices.Equal(got, want) {
		t.Errorf("got uploaders %v, want %v", got, want)
	}
}
