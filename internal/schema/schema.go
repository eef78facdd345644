// Package schema is the layout of the admission table: its key attributes, the partition and
// sort keys of every item kind, and the bounds that size its items. Package admission (the gates'
// leases and waiters) and package backlog (a pooled tenant's queued and parked files) write the
// table; the construct creates it and scopes the Lambdas' IAM policies to its partition keys; the
// operator tools read it. Each of them builds its keys here, so the layout is drawn once, and a
// synth that needs only the names links no AWS SDK client: the package imports nothing outside
// the standard library (the deps test in internal/deps holds it to that).
//
// One table holds a core system's gate, or a pool's gate and its tenants' backlogs. Every key is
// a string; the table's TTL attribute is AttrExpiresAt.
//
//	item kind              pk (AttrPK)               sk (AttrSK)                 written by
//	---------------------  ------------------------  --------------------------  ----------
//	lease                  <gate>                    slot#<index, 4 digits>      admission
//	overflow lease         <gate>                    slot#x#<execution>          admission
//	adaptive limit         core#<name>               limit                       admission
//	breaker                core#<name>               breaker                     breaker (Register)
//	request shares         core#<name>               shares                      shares (Register)
//	pause and override     core#<name>               control                     corecontrol
//	operator's action      core#<name>               audit#<time>#<action>       corecontrol
//	ticket counter         <gate>#queue              ctr#<weight, 2 digits>      admission
//	gate meta              <gate>#queue              ctr#~                       admission
//	waiter                 <gate>#queue              w#<weight>#<ticket, 12>     admission
//	tenant's place         <gate>#queue              t#<tenant>                  admission
//	tenant's backlog       queue#<tenant>            backlog                     backlog
//	parked-tenant index    backlog#<shard, 2 digits> parked#<tenant>             backlog
//	  (before sharding)    backlog                   parked#<tenant>             backlog
//
// where <gate> is CoreGate ("core#<name>") or PoolGate ("pool#<name>"). The prefixes keep the
// kinds apart: a gate's partition holds only slots and its limit, its queue partition only
// counters, waiters and places, and no gate key starts with "queue#" or "backlog". A core
// system's gate partition also holds its steering, its breaker and its request shares, none of
// whose sort keys starts with SlotPrefix, so a listing of the slots never meets them. IAM scopes a
// function to some kinds with dynamodb:LeadingKeys on these partition keys
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/specifying-conditions.html).
package schema

import (
	"fmt"
	"hash/fnv"
)

// Key and TTL attributes of the table.
const (
	// AttrPK and AttrSK are the table's partition and sort key attribute names (both strings).
	AttrPK = "pk"
	AttrSK = "sk"
	// AttrExpiresAt is the table's TTL attribute (epoch seconds): waiting entries of a tenant that
	// went away expire by themselves.
	AttrExpiresAt = "expiresAt"
)

// Gates: a gate's slots live under the gate's key, its waiting files under the gate's key plus
// QueueSuffix.
const QueueSuffix = "#queue"

// CoreGate is the partition key of a core system's gate.
func CoreGate(name string) string { return "core#" + name }

// PoolGate is the partition key of a pool's gate.
func PoolGate(name string) string { return "pool#" + name }

// GateQueue is the partition key of a gate's waiting files.
func GateQueue(gate string) string { return gate + QueueSuffix }

// Sort keys of a gate's items.
const (
	// SlotPrefix starts a lease's sort key (SlotSK) and an overflow lease's (OverflowSK).
	SlotPrefix = "slot#"
	// OverflowPrefix starts an overflow lease's sort key.
	OverflowPrefix = "slot#x#"
	// EntryPrefix starts a waiter's sort key (EntrySK).
	EntryPrefix = "w#"
	// PlacePrefix starts a tenant's place in a gate's queue (PlaceSK).
	PlacePrefix = "t#"
	// CounterPrefix starts a weight's ticket counter (CounterSK).
	CounterPrefix = "ctr#"
	// MetaSK is the gate's meta item in its queue partition. It sorts after every counter ("~"
	// follows the digits), so one Query reads both.
	MetaSK = "ctr#~"

	// LimitSK is the sort key of a core system's adaptive limit item, in the core system's gate.
	// Attributes: AttrLimit (number, the effective running-file limit, at most maxRunningFiles) and
	// AttrUpdatedAt (number, epoch milliseconds of the last change).
	LimitSK       = "limit"
	AttrLimit     = "limit"
	AttrUpdatedAt = "updatedAt"
)

// SlotSK is the sort key of lease index i: zero-padded, so a gate's slots list in order.
func SlotSK(i int) string { return fmt.Sprintf("%s%04d", SlotPrefix, i) }

// OverflowSK is the sort key of the overflow lease of an execution.
func OverflowSK(execution string) string { return OverflowPrefix + execution }

// CounterSK is the sort key of the ticket counter of a weight.
func CounterSK(weight int) string { return fmt.Sprintf("%s%02d", CounterPrefix, weight) }

// EntrySK is the sort key of a waiter: its weight and its ticket, zero-padded so that a weight's
// waiters list in ticket order.
func EntrySK(weight int, ticket int64) string {
	return fmt.Sprintf("%s%02d#%012d", EntryPrefix, weight, ticket)
}

// PlaceSK is the sort key of a tenant's place in a gate's queue.
func PlaceSK(tenant string) string { return PlacePrefix + tenant }

// A pooled tenant's backlog.
const (
	// BacklogSK is the sort key of a tenant's backlog item (BacklogKey).
	BacklogSK = "backlog"
	// ParkedSKPrefix starts the sort key of a tenant's entry in the index of tenants with parked
	// files (ParkedSK).
	ParkedSKPrefix = "parked#"
	// LegacyIndexKey is the partition key of the index before it was sharded; IndexKeyPattern
	// matches the partition keys of its shards (IAM's StringLike).
	LegacyIndexKey  = "backlog"
	IndexKeyPattern = LegacyIndexKey + "#*"
)

// IndexShards is how many partition keys the index of tenants with parked files is spread over.
// It is part of the table's layout: changing it moves tenants to other shards, and the entries
// left in the old ones would no longer be forgotten. 16 shards take 16 × 1,000 index writes a
// second, each a park or the last unpark of a tenant, and cost a sweep 17 queries when the index
// is empty (the shards and LegacyIndexKey).
const IndexShards = 16

// BacklogKey is the partition key of a tenant's backlog item.
func BacklogKey(tenant string) string { return "queue#" + tenant }

// ParkedSK is the sort key of a tenant's entry in the index of tenants with parked files.
func ParkedSK(tenant string) string { return ParkedSKPrefix + tenant }

// IndexKey is the partition key of the index shard that holds tenant: "backlog#<nn>", nn the
// tenant id's FNV-1a hash modulo IndexShards.
func IndexKey(tenant string) string { return ShardKey(indexShard(tenant)) }

func indexShard(tenant string) int {
	h := fnv.New32a()
	h.Write([]byte(tenant))
	return int(h.Sum32() % IndexShards)
}

// ShardKey is the partition key of index shard n; n == IndexShards is the legacy index.
func ShardKey(n int) string {
	if n == IndexShards {
		return LegacyIndexKey
	}
	return fmt.Sprintf("%s#%02d", LegacyIndexKey, n)
}

// Bounds of a pool's maxQueuedFilesPerTenant: how many messages of one tenant its backlog item
// lets into the pool's queue.
const (
	DefaultMaxQueued = 10
	MinMaxQueued     = 1
	MaxMaxQueued     = 1000
)

// A core system's steering by operators (package corecontrol), in the core system's gate.
const (
	// ControlSK is the sort key of a core system's control item: its pause and its limit override.
	ControlSK = "control"
	// AuditPrefix starts the sort key of an operator's action on the core system (AuditSK).
	AuditPrefix = "audit#"
)

// A core system's request shares (package shares), in the core system's gate: one item whose
// AttrShareEntries map holds, per running Register invocation (by execution name), a map of
// AttrShareDemand, AttrShareWeight, AttrShareGrant and the epoch milliseconds AttrShareJoined,
// AttrShareSeen and AttrShareUntil (numbers); and AttrShareVersion (number), which every write
// raises by one and is conditional on.
const (
	SharesSK         = "shares"
	AttrShareEntries = "entries"
	AttrShareVersion = "version"
	AttrShareDemand  = "demand"
	AttrShareWeight  = "weight"
	AttrShareGrant   = "grant"
	AttrShareJoined  = "joined"
	AttrShareSeen    = "seen"
	AttrShareUntil   = "until"
)

// AuditSK is the sort key of one audited action: its time (UTC, RFC 3339 with nanoseconds, so
// a gate's actions list in order) and the action.
func AuditSK(at, action string) string { return AuditPrefix + at + "#" + action }
