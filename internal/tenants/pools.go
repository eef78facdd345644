package tenants

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/schema"
	"github.com/example/tenantpipeline/spec"
)

// Tiers.
const (
	TierSilo    = spec.TierSilo
	TierPool    = spec.TierPool
	DefaultPool = spec.DefaultPool
)

// Pool defaults and limits.
const (
	// DefaultPoolMaximumConcurrency caps the pool controller's event source mapping
	// (ScalingConfig.MaximumConcurrency): at most this many tenants of the pool have a controller
	// invocation at once. Lambda accepts 2 to 1,000.
	// https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html#sqs-max-concurrency
	DefaultPoolMaximumConcurrency = 10
	MinPoolMaximumConcurrency     = 2
	MaxPoolMaximumConcurrency     = 1000
	// FIFOScanWindow is how far SQS looks into a FIFO queue for a message group with a message to
	// deliver: "If you have a large backlog of messages for a single message group ID, ... Amazon
	// SQS only scans the first 120,000 messages" (SQS Developer Guide, "Avoid having a large backlog
	// of messages with the same message group ID"). One tenant's backlog past it hides the others.
	FIFOScanWindow = 120000
	// DefaultPoolBacklogAlarmMessages alarms on the pool queue's visible messages well below
	// FIFOScanWindow, while there is still time to act.
	DefaultPoolBacklogAlarmMessages = 10000
	// DefaultPoolIntakeGroups is how many message groups a pool's intake queue has, so how many
	// router invocations run at once (Lambda scales a FIFO mapping by active message groups:
	// https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html). Each group has its
	// own rule on the default event bus, which holds 300 rules by default
	// (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-quota.html).
	DefaultPoolIntakeGroups = 16
	MaxPoolIntakeGroups     = 64
)

// A pool's intake designs (PoolConfig.Intake).
const (
	// IntakeTenant, the default, gives every tenant its own message group of the intake queue: one
	// rule on the pool's prefix sends each event through an API Gateway integration that names the
	// group after the key's tenant segment, so no tenant's burst holds another's events.
	IntakeTenant = "tenant"
	// IntakeSharded sends the events through IntakeGroups rules, each with its own static message
	// group, by the character after the pool's prefix: tenants of one group share its order.
	IntakeSharded = "sharded"
)

// PoolConfig is one entry of the file's "pools" object: what the tenants of a pool share.
type PoolConfig struct {
	// Prefix is the key prefix every tenant of the pool lies under. Default: "pools/<name>/". A
	// pooled tenant's prefix is always "<prefix><id>/".
	Prefix string `json:"prefix,omitempty"`
	// MaximumConcurrency caps how many of the pool's tenants have a controller invocation at once.
	// Default: 10; 2 to 1,000.
	MaximumConcurrency int `json:"maximumConcurrency,omitempty"`
	// BacklogAlarmMessages alarms when this many messages are visible in the pool's queue; it must
	// stay below SQS's 120,000-message FIFO scan window. Default: 10,000.
	BacklogAlarmMessages int `json:"backlogAlarmMessages,omitempty"`
	// SecretPrefix is the name prefix of every registerAuthSecretArn of the pool's tenants: tenant
	// <id>'s secret is named <secretPrefix><id>, which only a session tagged tenant=<id> of the
	// pool's tenant-scoped role may read. At least 3 characters, ending in "/" or "-". Required
	// when a pooled tenant has a secret.
	SecretPrefix string `json:"secretPrefix,omitempty"`
	// TablePrefix is the name prefix of every DynamoDB table the pool's tenants name: tenant <id>'s
	// table is <tablePrefix><id>, which only a session tagged tenant=<id> of the pool's
	// tenant-scoped role may write. At least 3 characters, ending in "-". Required when a pooled
	// tenant has a dynamodb sink.
	TablePrefix string `json:"tablePrefix,omitempty"`
	// MaxRunningFiles bounds the pool's files running at once (admission's pool gate), 1 to 1,000.
	// Default: DefaultPoolMaxRunningFiles (200), which keeps a default pool at about a fifth of a
	// default account's Lambda concurrency (coresystems.go).
	MaxRunningFiles int `json:"maxRunningFiles,omitempty"`
	// IntakeGroups is how many message groups the pool's intake queue has: a tenant's files always
	// go to the group of the first character after the pool's prefix in its prefix, so each
	// tenant keeps its order while the groups are routed at once. Default: 16; 1 to 64 (1 is one
	// group and one rule on the whole prefix). A change is refused at synth until the pool's
	// intake is drained and -c regroupIntake=<pool> confirms it (internal/stacks, poolEdits).
	IntakeGroups int `json:"intakeGroups,omitempty"`
	// Intake is how the pool's events reach its intake queue: IntakeTenant ("tenant", the default:
	// each tenant its own message group) or IntakeSharded ("sharded": IntakeGroups groups by the
	// character after the prefix). A pool that sets intakeGroups and no intake is sharded, as it
	// was before the per-tenant intake existed.
	Intake string `json:"intake,omitempty"`
	// Keys is where the pool's tenants' objects lie under work/, results/, control/ and
	// quarantine/: pipeline.KeysPerPool ("pool": <area>/pool.<name>/<id>/, so that the pool's
	// tenant roles reach only its own tenants' keys) or pipeline.KeysPerTenant ("tenant":
	// <area>/<id>/, the layout of pools deployed before). Default: "pool" for a pool the app has
	// not deployed yet, the recorded layout for one it has (internal/stacks).
	Keys string `json:"keys,omitempty"`
	// MaxQueuedFilesPerTenant bounds one tenant's messages in the pool's queue; the tenant's later
	// files wait in order outside it, parked in S3 (internal/backlog), so that the pool's backlog
	// stays inside the 120,000 messages SQS scans for deliverable groups (FIFOScanWindow): size a
	// pool so that tenants × maxQueuedFilesPerTenant stays at or below it. Default: 10; 1 to 1,000; an
	// explicit 0 is refused.
	MaxQueuedFilesPerTenant int `json:"maxQueuedFilesPerTenant,omitempty"`
	// Uploaders are the IAM role (or user) ARNs that may assume the pool's uploader role with the
	// session tag tenant=<id>, to upload that tenant's files: the platform's service that
	// authenticates customers. Default: none, and no uploader role.
	Uploaders []string `json:"uploaders,omitempty"`
}

// PoolDefaults returns c with its defaults for the pool called name.
func (c PoolConfig) PoolDefaults(name string) PoolConfig {
	if c.Prefix == "" {
		c.Prefix = "pools/" + name + "/"
	}
	if c.MaximumConcurrency == 0 {
		c.MaximumConcurrency = DefaultPoolMaximumConcurrency
	}
	if c.BacklogAlarmMessages == 0 {
		c.BacklogAlarmMessages = DefaultPoolBacklogAlarmMessages
	}
	if c.MaxRunningFiles == 0 {
		c.MaxRunningFiles = DefaultPoolMaxRunningFiles
	}
	if c.Intake == "" {
		c.Intake = IntakeTenant
		if c.IntakeGroups != 0 {
			c.Intake = IntakeSharded
		}
	}
	if c.Intake == IntakeSharded && c.IntakeGroups == 0 {
		c.IntakeGroups = DefaultPoolIntakeGroups
	}
	if c.MaxQueuedFilesPerTenant == 0 {
		c.MaxQueuedFilesPerTenant = schema.DefaultMaxQueued
	}
	return c
}

// IntakeByte reports whether the sharded intake's rules list keys whose byte after the pool's
// prefix is b: printable ASCII (0x20-0x7E), the characters a CloudFormation template carries as
// they are in an event pattern.
func IntakeByte(b byte) bool { return b >= 0x20 && b <= 0x7E }

// PoolNames are the pools pooled tenants name, sorted.
func (f *File) PoolNames() []string {
	set := map[string]bool{}
	for _, t := range f.Tenants {
		if t.Pooled() {
			set[t.Pool] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// Pool returns the defaulted configuration of the pool called name.
func (f *File) Pool(name string) PoolConfig {
	var c PoolConfig
	if p := f.Pools[name]; p != nil {
		c = *p
	}
	return c.PoolDefaults(name)
}

// tierDefaults fills in tier, pool and a pooled tenant's prefix. raw holds whether the tenant
// set its own prefix.
func (f *File) tierDefaults(defaultTier string, ownPrefix []bool) {
	for i := range f.Tenants {
		t := &f.Tenants[i]
		if t.Tier == "" {
			t.Tier = cmpOr(defaultTier, TierSilo)
		}
		if t.Tier != TierPool {
			continue
		}
		if t.Pool == "" {
			t.Pool = DefaultPool
		}
		if i < len(ownPrefix) && !ownPrefix[i] && t.ID != "" {
			t.Prefix = f.Pool(t.Pool).Prefix + t.ID + "/"
		}
	}
}

// validateTiers checks tiers, pools and the scope every pooled tenant must fit in: its prefix
// under its pool's, its secret and table names under the pool's name prefixes. A grant that listed
// each tenant's prefix, secret or table would outgrow IAM's 10,240 characters of inline policy
// per role (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html), so a pool
// grants by what its tenants share.
func (f *File) validateTiers(report func(int, spec.Problem), n Naming) []error {
	var errs []error
	for name, c := range f.Pools {
		where := n.Pool(name)
		key := func(field string) string { return n.PoolKey(name, field) }
		if !idPattern.MatchString(name) {
			errs = append(errs, fmt.Errorf("%s: pool name %q is invalid: use 1-32 lower-case letters, digits and hyphens", where, name))
		}
		if c == nil {
			continue
		}
		d := c.PoolDefaults(name)
		if c.Prefix != "" && (strings.HasPrefix(c.Prefix, "/") || !strings.HasSuffix(c.Prefix, "/")) {
			errs = append(errs, fmt.Errorf("%s: %s %q is invalid: a key prefix ending in \"/\" without a leading \"/\", e.g. \"pools/%s/\"", where, key("prefix"), c.Prefix, name))
		} else if err := CheckPrefix(c.Prefix, "pools/"+name+"/"); c.Prefix != "" && err != nil {
			errs = append(errs, fmt.Errorf("%s: %s %v", where, key("prefix"), err))
		}
		for _, r := range pipeline.ReservedPrefixes {
			if c.Prefix != "" && PrefixesOverlap(c.Prefix, r) {
				errs = append(errs, fmt.Errorf("%s: %s %q overlaps %q, which the pipeline writes to itself", where, key("prefix"), c.Prefix, r))
			}
		}
		if c.SecretPrefix != "" && !secretPrefixPattern.MatchString(c.SecretPrefix) {
			errs = append(errs, fmt.Errorf("%s: %s %q is invalid: use at least 3 of Secrets Manager's name characters (letters, digits, /_+=.@-) ending in \"/\" or \"-\", "+
				"e.g. \"tenantpipeline/%s/\", so that no other secret's name can start with <%s><tenant id>", where, key("secretPrefix"), c.SecretPrefix, name, key("secretPrefix")))
		}
		if c.TablePrefix != "" && !tablePrefixPattern.MatchString(c.TablePrefix) {
			errs = append(errs, fmt.Errorf("%s: %s %q is invalid: use at least 3 of DynamoDB's table name characters (letters, digits, _.-) ending in \"-\", "+
				"e.g. \"pool-%s-\", so that the tenants' tables are apart from unrelated ones", where, key("tablePrefix"), c.TablePrefix, name))
		}
		if d.MaximumConcurrency < MinPoolMaximumConcurrency || d.MaximumConcurrency > MaxPoolMaximumConcurrency {
			errs = append(errs, fmt.Errorf("%s: %s %d is out of range: Lambda accepts %d to %d", where, key("maximumConcurrency"), d.MaximumConcurrency, MinPoolMaximumConcurrency, MaxPoolMaximumConcurrency))
		}
		if d.BacklogAlarmMessages < 1 || d.BacklogAlarmMessages >= FIFOScanWindow {
			errs = append(errs, fmt.Errorf("%s: %s %d is out of range: use 1 to %d, below the %d messages SQS scans in a FIFO queue for available message groups",
				where, key("backlogAlarmMessages"), d.BacklogAlarmMessages, FIFOScanWindow-1, FIFOScanWindow))
		}
		if err := validRunningFiles(where, key("maxRunningFiles"), d.MaxRunningFiles); err != nil {
			errs = append(errs, err)
		}
		if q := d.MaxQueuedFilesPerTenant; q < schema.MinMaxQueued || q > schema.MaxMaxQueued {
			errs = append(errs, fmt.Errorf("%s: %s %d is out of range: use %d to %d (default %d): a tenant's messages in the pool's queue, its later files parked outside it",
				where, key("maxQueuedFilesPerTenant"), q, schema.MinMaxQueued, schema.MaxMaxQueued, schema.DefaultMaxQueued))
		}
		for _, a := range c.Uploaders {
			if err := spec.CheckUploader(a); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w", where, key("uploaders"), err))
			}
		}
		if c.Keys != "" && c.Keys != pipeline.KeysPerPool && c.Keys != pipeline.KeysPerTenant {
			errs = append(errs, fmt.Errorf("%s: %s %q is not a layout: use %q (the tenants' keys carry the pool) or %q (the earlier layout, of a pool deployed before)",
				where, key("keys"), c.Keys, pipeline.KeysPerPool, pipeline.KeysPerTenant))
		}
		switch d.Intake {
		case IntakeTenant:
			if d.IntakeGroups != 0 {
				errs = append(errs, fmt.Errorf("%s: %s %d applies to %s %q only: the %q intake gives each tenant its own message group; remove it, or set %s %q",
					where, key("intakeGroups"), d.IntakeGroups, key("intake"), IntakeSharded, IntakeTenant, key("intake"), IntakeSharded))
			}
		case IntakeSharded:
			if d.IntakeGroups < 1 || d.IntakeGroups > MaxPoolIntakeGroups {
				errs = append(errs, fmt.Errorf("%s: %s %d is out of range: use 1 to %d (each group is one EventBridge rule on the default event bus)", where, key("intakeGroups"), d.IntakeGroups, MaxPoolIntakeGroups))
			}
		default:
			errs = append(errs, fmt.Errorf("%s: %s %q is not an intake: use %q (each tenant its own message group, the default) or %q (intakeGroups groups by the character after the prefix)",
				where, key("intake"), d.Intake, IntakeTenant, IntakeSharded))
		}
	}
	configured := slices.Sorted(maps.Keys(f.Pools))
	for _, p := range overlaps(f.poolPrefixes(configured)) {
		name, other := configured[p.i], configured[p.j]
		errs = append(errs, fmt.Errorf("%s: %s %q overlaps pool %s's prefix %q, so one file would reach two pools; make them disjoint",
			n.Pool(other), n.PoolKey(other, "prefix"), f.Pool(other).Prefix, name, f.Pool(name).Prefix))
	}
	// A pool's tenant role reads the secret "<secretPrefix>${aws:PrincipalTag/tenant}-??????" and
	// writes the table "<tablePrefix>${aws:PrincipalTag/tenant}" (constructs/tenantpipeline,
	// tenantrole.go). When one pool's prefix starts another's ("tp/" and "tp/a-"), a session of
	// the first tagged "a-b" names the second pool's tenant b's secret or table, so the prefixes
	// must be disjoint for a pool's tenant role to reach only its own pool's tenants.
	for _, field := range []struct {
		key  string
		of   func(PoolConfig) string
		what string
	}{
		{"secretPrefix", func(c PoolConfig) string { return c.SecretPrefix }, "secrets"},
		{"tablePrefix", func(c PoolConfig) string { return c.TablePrefix }, "tables"},
	} {
		prefixes := make([]string, len(configured))
		for i, name := range configured {
			prefixes[i] = field.of(f.Pool(name))
		}
		for _, p := range overlaps(prefixes) {
			name, other := configured[p.i], configured[p.j]
			errs = append(errs, fmt.Errorf("%s: %s %q overlaps pool %s's %s %q, so a session of one pool's tenant role could name the other pool's tenants' %s; make them disjoint",
				n.Pool(other), n.PoolKey(other, field.key), prefixes[p.j], name, field.key, prefixes[p.i], field.what))
		}
	}
	pools := f.PoolNames()
	siloOverlaps := f.siloPoolOverlaps(pools)
	for i, t := range f.Tenants {
		bad := func(field, format string, args ...any) { report(i, spec.Problemf(field, format, args...)) }
		switch t.Tier {
		case TierSilo:
			if t.Pool != "" {
				bad("pool", "%q is set, but the tenant's tier is %q: set \"tier\": %q to pool it, or remove pool", t.Pool, t.Tier, TierPool)
			}
			for _, a := range t.Uploaders {
				if err := spec.CheckUploader(a); err != nil {
					bad("uploaders", "%v", err)
				}
			}
			for _, name := range siloOverlaps[i] {
				bad("prefix", "%q overlaps the prefix %q of pool %s, so one file would reach both the silo tenant and the pool; move the tenant's prefix outside it", t.Prefix, f.Pool(name).Prefix, name)
			}
			continue
		case TierPool:
		default:
			bad("tier", "%q is invalid: use %q or %q", t.Tier, TierSilo, TierPool)
			continue
		}
		if len(t.Uploaders) > 0 {
			// The pool's one uploader role serves all its tenants, by the session's tenant tag.
			bad("uploaders", "is set, but the tenant is pooled: its uploaders assume the pool's uploader role with the session tag %s=%s; "+
				"list them in %s instead, or set \"tier\": %q", pipeline.TenantTag, t.ID, n.PoolPath(t.Pool, "uploaders"), TierSilo)
		}
		if !idPattern.MatchString(t.Pool) {
			bad("pool", "%q is invalid: use 1-32 lower-case letters, digits and hyphens (the pool's stack is <stackPrefix>-Pool-<pool>)", t.Pool)
			continue
		}
		c := f.Pool(t.Pool)
		if t.Stack != "" {
			bad("stack", "%q is set, but pooled tenants live in their pool's stack; remove stack, or set \"tier\": %q", t.Stack, TierSilo)
		}
		// The tenant-scoped role grants by the tenant's session tag (constructs/tenantpipeline,
		// tenantrole.go): the tenant's keys, secret and table are named from its id, so a name other
		// than the derived one would be out of the tenant's reach.
		if want := c.Prefix + t.ID + "/"; t.Prefix != "" && t.Prefix != want && CheckPrefix(t.Prefix, "") == nil {
			bad("prefix", "%q is not %q: a pooled tenant's prefix is its pool's prefix %q followed by its id and \"/\", because the pool's tenant-scoped role grants "+
				"\"<pool prefix>${aws:PrincipalTag/tenant}/*\"; leave prefix unset (the default is %q), or move the tenant to the silo tier", t.Prefix, want, c.Prefix, want)
		}
		if t.RegisterAuthSecretARN != "" {
			name := secretName(t.RegisterAuthSecretARN)
			switch {
			case c.SecretPrefix == "":
				bad("registerAuthSecretArn", "is set, but pool %s has no %s: the pool's tenant-scoped role reads the secret named <%[2]s><id>; "+
					"set %s and name the secret %q", t.Pool, n.PoolKey(t.Pool, "secretPrefix"), n.PoolPath(t.Pool, "secretPrefix"), "<"+n.PoolKey(t.Pool, "secretPrefix")+">"+t.ID)
			case !secretPrefixPattern.MatchString(c.SecretPrefix):
				// reported once, on the pool
			case !derivedSecret(name, c.SecretPrefix+t.ID):
				bad("registerAuthSecretArn", "secret name %q is not %q followed by Secrets Manager's 6-character suffix: a pooled tenant's secret is named <secretPrefix><id> "+
					"(pool %s's %s %q), because the pool's tenant-scoped role reads only \"secret:<secretPrefix>${aws:PrincipalTag/tenant}-??????\"; "+
					"store the secret as %q and give its complete ARN", name, c.SecretPrefix+t.ID, t.Pool, n.PoolKey(t.Pool, "secretPrefix"), c.SecretPrefix, c.SecretPrefix+t.ID)
			}
		}
		if t.DynamoDB != nil {
			want := c.TablePrefix + t.ID
			switch {
			case t.DynamoDB.Table == "":
				bad("dynamodb.table", "is missing: a pool creates no table per tenant; name the existing table %q (pool %s's %s and the tenant's id)", want, t.Pool, n.PoolKey(t.Pool, "tablePrefix"))
			case c.TablePrefix == "":
				bad("dynamodb.table", "%q is set, but pool %s has no %s: the pool's tenant-scoped role writes the table named <%[3]s><id>; set %s",
					t.DynamoDB.Table, t.Pool, n.PoolKey(t.Pool, "tablePrefix"), n.PoolPath(t.Pool, "tablePrefix"))
			case !tablePrefixPattern.MatchString(c.TablePrefix):
				// reported once, on the pool
			case t.DynamoDB.Table != want:
				bad("dynamodb.table", "%q is not %q: a pooled tenant's table is named <tablePrefix><id> (pool %s's %s %q), because the pool's tenant-scoped role "+
					"writes only \"table/<tablePrefix>${aws:PrincipalTag/tenant}\"; name the table %q", t.DynamoDB.Table, want, t.Pool, n.PoolKey(t.Pool, "tablePrefix"), c.TablePrefix, want)
			}
		}
	}
	// Two pooled tenants writing one table would write each other's items: the sink keys items by
	// record fields alone, and each tenant's order counter is its own.
	tableOwner := map[string]string{}
	for i, t := range f.Tenants {
		if !t.Pooled() || t.DynamoDB == nil || t.DynamoDB.Table == "" {
			continue
		}
		if other, ok := tableOwner[t.DynamoDB.Table]; ok {
			report(i, spec.Problemf("dynamodb.table", "%q is also tenant %q's table, and their items would collide: give each pooled tenant its own table",
				t.DynamoDB.Table, other))
			continue
		}
		tableOwner[t.DynamoDB.Table] = t.ID
	}
	for _, name := range slices.Sorted(maps.Keys(f.Pools)) {
		if !slices.Contains(pools, name) {
			errs = append(errs, fmt.Errorf("%s: no tenant is in this pool: remove it, or set \"tier\": %q, \"pool\": %q on its tenants", n.Pool(name), TierPool, name))
		}
	}
	return errs
}

// poolPrefixes are the defaulted prefixes of the pools called names, in their order.
func (f *File) poolPrefixes(names []string) []string {
	out := make([]string, len(names))
	for i, name := range names {
		out[i] = f.Pool(name).Prefix
	}
	return out
}

// siloPoolOverlaps maps the index of each silo tenant whose prefix overlaps a pool's prefix to
// those pools, in the order of pools: one sweep over the silo tenants' and the pools' prefixes
// together (overlaps), instead of comparing every silo tenant with every pool.
func (f *File) siloPoolOverlaps(pools []string) map[int][]string {
	prefixes := f.poolPrefixes(pools)
	for _, t := range f.Tenants {
		p := t.Prefix
		if t.Tier != TierSilo {
			p = "" // never compared
		}
		prefixes = append(prefixes, p)
	}
	out := map[int][]string{}
	for _, p := range overlaps(prefixes) {
		// Pools come first in the list, tenants after: a pair of interest is a pool and a tenant.
		if p.i < len(pools) && p.j >= len(pools) {
			out[p.j-len(pools)] = append(out[p.j-len(pools)], pools[p.i])
		}
	}
	return out
}

// secretPrefixPattern and tablePrefixPattern are the shapes of a pool's name prefixes: at least
// 3 characters, ending in a separator, so that "<prefix><tenant id>" cannot be the start of an
// unrelated name such as "prod" of "production-db", and without IAM's wildcards "*" and "?" or
// "$" (a policy variable). The characters are those the services allow in a name
// (https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_CreateSecret.html, Name;
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html).
// A table name has no "/", so a table prefix ends in "-".
var (
	secretPrefixPattern = regexp.MustCompile(`^[A-Za-z0-9/_+=.@-]{2,}[/-]$`)
	tablePrefixPattern  = regexp.MustCompile(`^[A-Za-z0-9_.-]{2,}-$`)
)

// derivedSecret reports whether a secret name from a complete ARN is want followed by the hyphen and
// six random characters Secrets Manager appends, which the tenant-scoped role's "-??????" matches
// (https://docs.aws.amazon.com/secretsmanager/latest/userguide/auth-and-access_examples.html,
// "wildcard"; https://docs.aws.amazon.com/secretsmanager/latest/userguide/reference_iam-permissions.html).
func derivedSecret(name, want string) bool {
	suffix, ok := strings.CutPrefix(name, want+"-")
	return ok && len(suffix) == 6
}

// secretName is the name part of a Secrets Manager secret ARN
// (arn:PARTITION:secretsmanager:REGION:ACCOUNT:secret:NAME-6RANDOM); the ARN itself when it is not one.
func secretName(arn string) string {
	p := strings.SplitN(arn, ":", 7)
	if len(p) == 7 && p[2] == "secretsmanager" && p[5] == "secret" {
		return p[6]
	}
	return arn
}

// parsePools decodes the "pools" object, each pool field by field, so that every problem is
// reported.
func (f *File) parsePools(raw json.RawMessage) []error {
	var pools map[string]json.RawMessage
	if err := json.Unmarshal(raw, &pools); err != nil {
		return []error{fmt.Errorf(`"pools": %s`, typeProblem(err))}
	}
	var errs []error
	f.Pools = map[string]*PoolConfig{}
	for _, name := range slices.Sorted(maps.Keys(pools)) {
		where := "pools." + name
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(pools[name], &fields); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s", where, typeProblem(err)))
			continue
		}
		c := &PoolConfig{}
		errs = append(errs, decodeFields(where, "", fields, reflect.ValueOf(c).Elem(), map[string]bool{})...)
		if raw, set := fields["maxQueuedFilesPerTenant"]; set && string(raw) == "0" {
			// Reading alone cannot tell an explicit 0 from an absent field (the default).
			errs = append(errs, fmt.Errorf("%s: maxQueuedFilesPerTenant 0 is out of range: use %d to %d, or leave it out for %d",
				where, schema.MinMaxQueued, schema.MaxMaxQueued, schema.DefaultMaxQueued))
		}
		f.Pools[name] = c
	}
	return errs
}
