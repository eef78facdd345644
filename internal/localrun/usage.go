package localrun

// What AWS would bill for one tenant's work so far, from the run's counters: the state transitions
// of its executions (child executions included), its functions' Lambda requests and GB-seconds, and
// the S3 and SQS requests on its keys and its queue.

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/example/tenantpipeline/internal/cost"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// Usage is the billed usage of one tenant so far. Nothing of the harness itself is in it (uploads,
// monitoring): those calls go to uncounted endpoints. Step Functions API calls and EventBridge's
// events from AWS services are not billed per request, and CloudWatch (logs, metrics, alarms) is
// not counted. For a pooled tenant, state transitions and S3 requests are the tenant's own (its
// executions, by the tenant in their input; its keys), while the Lambda and SQS figures are the
// whole pool's: its functions and queue are shared, and their counters do not say for whom.
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
	for _, f := range r.functions {
		if f.Tenant != t.ID && !mentionedIn(machines, f.ARN, f.Name) {
			continue
		}
		fu := f.Usage()
		u.LambdaRequests += float64(fu.Requests)
		u.LambdaGBSeconds += fu.GBSeconds()
	}
	ownKey := func(key string) bool { return tenantOfKey(key, t) }
	u.S3Tier1Requests = float64(r.Meter.Sum(ClassS3Tier1, ownKey))
	u.S3Tier2Requests = float64(r.Meter.Sum(ClassS3Tier2, ownKey))
	u.SQSRequests = float64(r.Meter.Sum(ClassSQS, func(q string) bool { return q == t.Queue.URL }))
	for _, ev := range r.FileEvents() {
		if ev.Detail.Tenant == t.ID {
			u.EventBridgeEvents++ // a File Processed detail is far below 64 KB: one event each
		}
	}
	return u, nil
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
// under a reserved prefix of the tenant (work/<tenant>/…, control/<tenant>/…, quarantine/<tenant>/…).
func tenantOfKey(key string, t *Tenant) bool {
	if t.Prefix != "" && strings.HasPrefix(key, t.Prefix) {
		return true
	}
	for _, p := range pipeline.ReservedPrefixes {
		if strings.HasPrefix(key, p+t.ID+"/") {
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
