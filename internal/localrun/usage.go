package localrun

// What AWS would bill for one tenant's work so far, from the run's counters: the state transitions
// of its executions (child executions included), its functions' Lambda requests, GB-seconds and log
// bytes, the S3 and SQS requests on its keys and its queues, the API Gateway requests of its
// events, its File Processed events, the DynamoDB request units on its tables, Contributor Insights
// matches and AssumeRole calls.

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/example/tenantpipeline/internal/cost"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// Usage is the billed usage of one tenant so far. Nothing of the harness itself is in it (uploads,
// monitoring): those calls go to uncounted endpoints. Step Functions API calls and EventBridge's
// events from AWS services are not billed per request, and CloudWatch metrics and alarms are not
// counted. DynamoDB's request units are those of every table the tenant's functions (and its
// pool's) name in their variables (its sink's table, its core system's and its pool's admission
// tables), log bytes those these functions write, Contributor Insights matches those of the rules
// over its functions' log groups, and STS calls the AssumeRole calls for its sessions. For a pooled
// tenant, state transitions, S3 and API Gateway requests and STS calls are the tenant's own (its
// executions, by the tenant in their input; its keys and its events; its sessions), while the
// Lambda, log, Contributor Insights, SQS (the pool's queue and its intake) and DynamoDB figures are
// the whole pool's or core system's: its functions, queues and tables are shared, and their
// counters do not say for whom.
func (r *Run) Usage(ctx context.Context, tenantID string) (cost.Usage, error) {
	t := r.Tenant(tenantID)
	if t == nil {
		return cost.Usage{}, nil
	}
	st, err := r.sfnStats(ctx)
	if err != nil {
		return cost.Usage{}, err
	}
	var u cost.Usage
	byArn := map[string]sfnExecution{}
	for _, e := range st.Executions {
		byArn[e.ExecutionArn] = e
	}
	for _, e := range st.Executions {
		root := e
		for root.ParentArn != "" {
			p, ok := byArn[root.ParentArn]
			if !ok {
				break
			}
			root = p
		}
		if root.StateMachineArn == t.FileMachine && (t.Tier != TierPool || r.inputTenant(ctx, root.ExecutionArn) == t.ID) {
			u.StateTransitions += float64(e.StateTransitions)
		}
	}
	machines := r.machinesOf(t)
	// fns are the tenant's functions and, for a pooled tenant, every function of its pool (the
	// pool's controller and router are in none of the state machines): whose requests, duration,
	// logs, tables and rules count.
	var fns []*emulate.Function
	for _, f := range r.functions {
		if f.Tenant != t.ID && !mentionedIn(machines, f.ARN, f.Name) && (t.Pool == "" || f.Pool != t.Pool) {
			continue
		}
		fns = append(fns, f)
		fu := f.Usage()
		u.LogBytes += float64(fu.LogBytes)
		u.LambdaRequests += float64(fu.Requests)
		u.LambdaGBSeconds += fu.GBSeconds()
	}
	if r.dynamo != nil {
		u.DynamoDBReadUnits, u.DynamoDBWriteUnits = r.dynamo.meter.Units(func(table string) bool { return namedInEnv(fns, table) })
	}
	u.InsightMatches = float64(r.InsightMatches(func(group string) bool {
		for _, f := range fns {
			if f.LogGroup == group {
				return true
			}
		}
		return false
	}))
	if r.auth != nil {
		u.STSCalls = float64(r.auth.AssumeRoleCalls(t.ID))
	}
	ownKey := func(key string) bool { return tenantOfKey(key, t) }
	u.S3Tier1Requests = float64(r.Meter.Sum(emulate.ClassS3Tier1, ownKey))
	u.S3Tier2Requests = float64(r.Meter.Sum(emulate.ClassS3Tier2, ownKey))
	u.APIGatewayRequests = float64(r.Meter.Sum(emulate.ClassAPIGateway, ownKey))
	queues := r.queuesOf(t)
	u.SQSRequests = float64(r.Meter.Sum(emulate.ClassSQS, func(q string) bool { return queues[q] }))
	for _, ev := range r.FileEvents() {
		if ev.Detail.Tenant == t.ID {
			u.EventBridgeEvents++ // a File Processed detail is far below 64 KB: one event each
		}
	}
	return u, nil
}

// queuesOf are the URLs of the queues whose requests count for the tenant: its queue and, for a
// pooled tenant, every queue a function of its pool reads (the pool's intake).
func (r *Run) queuesOf(t *Tenant) map[string]bool {
	urls := map[string]bool{t.Queue.URL: true}
	if t.Pool == "" {
		return urls
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for m := range r.esmOf {
		if m.fn.Pool == t.Pool {
			urls[m.queue.URL] = true
		}
	}
	return urls
}

// namedInEnv reports whether one of the functions' variables names the table: as a whole value
// (POOL_ADMISSION_TABLE=<name>) or as a JSON string in one (TENANT's dynamodb.table,
// CORE_SYSTEM_TABLES).
func namedInEnv(fns []*emulate.Function, table string) bool {
	for _, f := range fns {
		for _, kv := range f.Env {
			if strings.HasSuffix(kv, "="+table) || strings.Contains(kv, `"`+table+`"`) {
				return true
			}
		}
	}
	return false
}

// machinesOf returns the definitions of the tenant's file state machine and of every state
// machine it starts, directly or not.
func (r *Run) machinesOf(t *Tenant) []string {
	seen := map[string]bool{t.FileMachine: true}
	queue := []string{t.FileMachine}
	var defs []string
	for len(queue) > 0 {
		def := r.definitions[queue[0]]
		queue = queue[1:]
		defs = append(defs, def)
		for arn := range r.definitions {
			if !seen[arn] && mentionedIn([]string{def}, arn) {
				seen[arn] = true
				queue = append(queue, arn)
			}
		}
	}
	return defs
}

// mentionedIn reports whether one of the definitions names one of ids as a whole JSON string.
func mentionedIn(defs []string, ids ...string) bool {
	for _, d := range defs {
		for _, id := range ids {
			if id != "" && strings.Contains(d, `"`+id+`"`) {
				return true
			}
		}
	}
	return false
}

// tenantOfKey reports whether an object key belongs to the tenant: under its ingest prefix, or
// under a reserved prefix of the tenant (work/<root>/…, control/<root>/…, quarantine/<root>/…, the
// root its pipeline.Owner's).
func tenantOfKey(key string, t *Tenant) bool {
	if t.Prefix != "" && strings.HasPrefix(key, t.Prefix) {
		return true
	}
	for _, p := range pipeline.ReservedPrefixes {
		if strings.HasPrefix(key, p+t.Owner().Root()+"/") {
			return true
		}
	}
	return false
}

// inputTenant is the tenant id in a file execution's input.
func (r *Run) inputTenant(ctx context.Context, arn string) string {
	var in pipeline.WorkflowInput
	json.Unmarshal([]byte(r.executionInput(ctx, arn)), &in)
	return in.Tenant.ID
}
