package tenants

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/example/tenantpipeline/internal/backlog"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// Tiers.
const (
	// TierSilo gives a tenant its own queue, functions, state machines and alarms.
	TierSilo = "silo"
	// TierPool makes a tenant a row of configuration in a pool's shared resources.
	TierPool = "pool"
	// DefaultPool is the pool of a pooled tenant that names none.
	DefaultPool = "default"
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

// PoolConfig is one entry of the file's "pools" object: what the tenants of a pool share.
type PoolConfig struct {
	// Prefix is the key prefix every tenant of the pool lies under; the pool's functions may read
	// all of it. Default: "pools/<name>/". A pooled tenant's default prefix is "<prefix><id>/".
	Prefix string `json:"prefix,omitempty"`
	// MaximumConcurrency caps how many of the pool's tenants have a controller invocation at once.
	// Default: 10; 2 to 1,000.
	MaximumConcurrency int `json:"maximumConcurrency,omitempty"`
	// BacklogAlarmMessages alarms when this many messages are visible in the pool's queue; it must
	// stay below SQS's 120,000-message FIFO scan window. Default: 10,000.
	BacklogAlarmMessages int `json:"backlogAlarmMessages,omitempty"`
	// SecretPrefix is the name prefix of every registerAuthSecretArn of the pool's tenants: the
	// pool's Register role may read secrets whose name starts with it, and no others. Required
	// when a pooled tenant has a secret.
	SecretPrefix string `json:"secretPrefix,omitempty"`
	// TablePrefix is the name prefix of every DynamoDB table the pool's tenants name: the pool's
	// Register role may write tables whose name starts with it. Required when a pooled tenant has a
	// dynamodb sink.
	TablePrefix string `json:"tablePrefix,omitempty"`
	// MaxRunningFiles bounds the pool's files running at once (admission's pool gate), 1 to 1,000.
	// Default: DefaultPoolMaxRunningFiles (200), which keeps a default pool at about a fifth of a
	// default account's Lambda concurrency (coresystems.go).
	MaxRunningFiles int `json:"maxRunningFiles,omitempty"`
	// IntakeGroups is how many message groups the pool's intake queue has: a tenant's files always
	// go to the group of the first character after the pool's prefix in its prefix, so each
	// tenant keeps its order while the groups are routed at once. Default: 16; 1 to 64 (1 is one
	// group and one rule on the whole prefix).
	IntakeGroups int `json:"intakeGroups,omitempty"`
	// MaxQueuedFilesPerTenant bounds one tenant's messages in the pool's queue; the tenant's later
	// files wait in order outside it, parked in S3 (internal/backlog), so that the pool's backlog
	// stays inside the 120,000 messages SQS scans for deliverable groups (FIFOScanWindow): size a
	// pool so that tenants × maxQueuedFilesPerTenant stays at or below it. Default: 10; 1 to 1,000; an
	// explicit 0 is refused.
	MaxQueuedFilesPerTenant int `json:"maxQueuedFilesPerTenant,omitempty"`
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
	if c.IntakeGroups == 0 {
		c.IntakeGroups = DefaultPoolIntakeGroups
	}
	if c.MaxQueuedFilesPerTenant == 0 {
		c.MaxQueuedFilesPerTenant = backlog.DefaultMaxQueued
	}
	return c
}

// IntakeByte reports whether the sharded intake's rules list keys whose byte after the pool's
// prefix is b: printable ASCII (0x20-0x7E), the characters a CloudFormation template carries as
// they are in an event pattern.
func IntakeByte(b byte) bool { return b >= 0x20 && b <= 0x7E }

// Pooled reports whether the tenant is in the pooled tier.
func (t Tenant) Pooled() bool { return t.Tier == TierPool }

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
func (f *File) validateTiers(u func(int) unreadable) []error {
	var errs []error
	for name, c := range f.Pools {
		where := fmt.Sprintf("pools.%s", name)
		if !idPattern.MatchString(name) {
			errs = append(errs, fmt.Errorf("%s: pool name %q is invalid: use 1-32 lower-case letters, digits and hyphens", where, name))
		}
		if c == nil {
			continue
		}
		d := c.PoolDefaults(name)
		if c.Prefix != "" && (strings.HasPrefix(c.Prefix, "/") || !strings.HasSuffix(c.Prefix, "/")) {
			errs = append(errs, fmt.Errorf("%s: prefix %q is invalid: a key prefix ending in \"/\" without a leading \"/\", e.g. \"pools/%s/\"", where, c.Prefix, name))
		}
		for _, r := range pipeline.ReservedPrefixes {
			if c.Prefix != "" && PrefixesOverlap(c.Prefix, r) {
				errs = append(errs, fmt.Errorf("%s: prefix %q overlaps %q, which the pipeline writes to itself", where, c.Prefix, r))
			}
		}
		if d.MaximumConcurrency < MinPoolMaximumConcurrency || d.MaximumConcurrency > MaxPoolMaximumConcurrency {
			errs = append(errs, fmt.Errorf("%s: maximumConcurrency %d is out of range: Lambda accepts %d to %d", where, d.MaximumConcurrency, MinPoolMaximumConcurrency, MaxPoolMaximumConcurrency))
		}
		if d.BacklogAlarmMessages < 1 || d.BacklogAlarmMessages >= FIFOScanWindow {
			errs = append(errs, fmt.Errorf("%s: backlogAlarmMessages %d is out of range: use 1 to %d, below the %d messages SQS scans in a FIFO queue for available message groups",
				where, d.BacklogAlarmMessages, FIFOScanWindow-1, FIFOScanWindow))
		}
		if err := validRunningFiles(where, d.MaxRunningFiles); err != nil {
			errs = append(errs, err)
		}
		if n := d.MaxQueuedFilesPerTenant; n < backlog.MinMaxQueued || n > backlog.MaxMaxQueued {
			errs = append(errs, fmt.Errorf("%s: maxQueuedFilesPerTenant %d is out of range: use %d to %d (default %d): a tenant's messages in the pool's queue, its later files parked outside it",
				where, n, backlog.MinMaxQueued, backlog.MaxMaxQueued, backlog.DefaultMaxQueued))
		}
		if d.IntakeGroups < 1 || d.IntakeGroups > MaxPoolIntakeGroups {
			errs = append(errs, fmt.Errorf("%s: intakeGroups %d is out of range: use 1 to %d (each group is one EventBridge rule on the default event bus)", where, d.IntakeGroups, MaxPoolIntakeGroups))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.Pools)) {
		for _, other := range slices.Sorted(maps.Keys(f.Pools)) {
			a, b := f.Pool(name).Prefix, f.Pool(other).Prefix
			if name < other && PrefixesOverlap(a, b) {
				errs = append(errs, fmt.Errorf("pools.%s: prefix %q overlaps pool %s's prefix %q, so one file would reach two pools; make them disjoint", other, b, name, a))
			}
		}
	}
	pools := f.PoolNames()
	for i, t := range f.Tenants {
		bad := func(field, format string, args ...any) {
			if !u(i).skips(field) {
				errs = append(errs, fmt.Errorf("%s: %s: %s", u(i).name(t), field, fmt.Sprintf(format, args...)))
			}
		}
		switch t.Tier {
		case TierSilo:
			if t.Pool != "" {
				bad("pool", "%q is set, but the tenant's tier is %q: set \"tier\": %q to pool it, or remove pool", t.Pool, t.Tier, TierPool)
			}
			for _, name := range pools {
				if p := f.Pool(name).Prefix; t.Prefix != "" && PrefixesOverlap(t.Prefix, p) {
					bad("prefix", "%q overlaps the prefix %q of pool %s, so one file would reach both the silo tenant and the pool; move the tenant's prefix outside it", t.Prefix, p, name)
				}
			}
			continue
		case TierPool:
		default:
			bad("tier", "%q is invalid: use %q or %q", t.Tier, TierSilo, TierPool)
			continue
		}
		if !idPattern.MatchString(t.Pool) {
			bad("pool", "%q is invalid: use 1-32 lower-case letters, digits and hyphens (the pool's stack is <stackPrefix>-Pool-<pool>)", t.Pool)
			continue
		}
		c := f.Pool(t.Pool)
		if t.Stack != "" {
			bad("stack", "%q is set, but pooled tenants live in their pool's stack; remove stack, or set \"tier\": %q", t.Stack, TierSilo)
		}
		if t.Prefix != "" && !strings.HasPrefix(t.Prefix, c.Prefix) {
			bad("prefix", "%q is outside pool %s's prefix %q: the pool's functions may read only under the pool's prefix, so its files could not be read; "+
				"use a prefix under %q (the default is %q), or set pools.%s.prefix", t.Prefix, t.Pool, c.Prefix, c.Prefix, c.Prefix+t.ID+"/", t.Pool)
		} else if t.Prefix != "" && c.IntakeGroups > 1 && (len(t.Prefix) == len(c.Prefix) || !IntakeByte(t.Prefix[len(c.Prefix)])) {
			// The intake's rules shard the pool's keys by the character after the pool's prefix, and
			// list the printable ASCII ones only (IntakeByte), so that one of them names one group for
			// all the tenant's files (docs/controller.md, "Pooled tier").
			bad("prefix", "%q must go on past pool %s's prefix %q with a printable ASCII character: the pool's %d intake groups are chosen by that character, "+
				"so the tenant's files keep their order; use a prefix such as %q, or set pools.%s.intakeGroups to 1", t.Prefix, t.Pool, c.Prefix, c.IntakeGroups, c.Prefix+t.ID+"/", t.Pool)
		}
		if t.RegisterAuthSecretARN != "" {
			name := secretName(t.RegisterAuthSecretARN)
			switch {
			case c.SecretPrefix == "":
				bad("registerAuthSecretArn", "is set, but pool %s has no secretPrefix: the pool's Register role reads secrets by a shared name prefix, never one by one; "+
					"set pools.%s.secretPrefix to a prefix of the secret's name %q", t.Pool, t.Pool, name)
			case !strings.HasPrefix(name, c.SecretPrefix):
				bad("registerAuthSecretArn", "secret name %q is outside pool %s's secretPrefix %q, so the pool's Register role could not read it; "+
					"rename the secret under the prefix, or change pools.%s.secretPrefix", name, t.Pool, c.SecretPrefix, t.Pool)
			}
		}
		if t.DynamoDB != nil {
			switch {
			case t.DynamoDB.Table == "":
				bad("dynamodb.table", "is missing: a pool creates no table per tenant; name an existing table whose name starts with pool %s's tablePrefix", t.Pool)
			case c.TablePrefix == "":
				bad("dynamodb.table", "%q is set, but pool %s has no tablePrefix: the pool's Register role writes tables by a shared name prefix, never one by one; set pools.%s.tablePrefix",
					t.DynamoDB.Table, t.Pool, t.Pool)
			case !strings.HasPrefix(t.DynamoDB.Table, c.TablePrefix):
				bad("dynamodb.table", "%q is outside pool %s's tablePrefix %q, so the pool's Register role could not write it", t.DynamoDB.Table, t.Pool, c.TablePrefix)
			}
		}
	}
	// Two pooled tenants writing one table would write each other's items: the sink keys items by
	// record fields alone, and each tenant's order counter is its own.
	tableOwner := map[string]string{}
	for _, t := range f.Tenants {
		if !t.Pooled() || t.DynamoDB == nil || t.DynamoDB.Table == "" {
			continue
		}
		if other, ok := tableOwner[t.DynamoDB.Table]; ok {
			errs = append(errs, fmt.Errorf("tenant %q: dynamodb.table: %q is also tenant %q's table, and their items would collide: give each pooled tenant its own table",
				t.ID, t.DynamoDB.Table, other))
			continue
		}
		tableOwner[t.DynamoDB.Table] = t.ID
	}
	for _, name := range slices.Sorted(maps.Keys(f.Pools)) {
		if !slices.Contains(pools, name) {
			errs = append(errs, fmt.Errorf("pools.%s: no tenant is in this pool: remove it, or set \"tier\": %q, \"pool\": %q on its tenants", name, TierPool, name))
		}
	}
	return errs
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
				where, backlog.MinMaxQueued, backlog.MaxMaxQueued, backlog.DefaultMaxQueued))
		}
		f.Pools[name] = c
	}
	return errs
}
