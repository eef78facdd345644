package tenantpipeline

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// The admission reconciler's schedule (docs/controller.md, "The reconciler"). A release and a
// waiting file's ask run a gate's reconciler; a scheduled rule runs it too, so that a lost wake-up
// costs at most one period when nobody releases or asks. The rules are one per pool and per core
// system, never per tenant:
//   - each pool's controller is invoked once a minute and reconciles its pool gate and the gates of
//     the core systems its tenants name;
//   - a core system that no pool of the app covers is reconciled by one silo tenant's controller:
//     the tenant with the smallest id among its silo tenants. The choice is made when the app is
//     complete (an aspect, as BucketWriteDeny's), so it does not depend on the order in which the
//     app creates its tenants and pools, and moves only when that tenant leaves the core system
//     or a pool of the app starts to cover it.
//
// EventBridge invokes a Lambda target asynchronously, with the rule's constant input; the target
// adds the function's resource policy for this rule alone (aws:SourceArn). A scheduled rule runs
// on the default bus; rate(1 minute) is its finest period.
// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-rule-schedule.html
// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-run-lambda-schedule.html

// newReconcileRule invokes controller with pipeline.ReconcileInput on the reconciler's schedule.
func newReconcileRule(scope constructs.Construct, description string, controller awslambda.IFunction) awsevents.Rule {
	rule := awsevents.NewRule(scope, jsii.String("ReconcileRule"), &awsevents.RuleProps{
		Description: jsii.String(description),
		Schedule:    awsevents.Schedule_Expression(jsii.String(pipeline.ReconcileSchedule)),
	})
	rule.AddTarget(awseventstargets.NewLambdaFunction(controller, &awseventstargets.LambdaFunctionProps{
		Event: awsevents.RuleTargetInput_FromObject(reconcileInput()),
	}))
	return rule
}

// reconcilers is what a core system's schedule is decided from: its silo tenants and whether a
// pool of the app covers it.
type reconcilers struct {
	mu     sync.Mutex
	silos  []*TenantPipeline
	pooled bool
	once   sync.Once
}

// coveredByPool records that a pool's controller reconciles c on its schedule.
func (c *CoreSystem) coveredByPool() {
	c.reconcilers.mu.Lock()
	defer c.reconcilers.mu.Unlock()
	c.reconcilers.pooled = true
}

// addSilo records a silo tenant of c; the first one adds the aspect that decides c's schedule.
func (c *CoreSystem) addSilo(t *TenantPipeline) {
	r := &c.reconcilers
	r.mu.Lock()
	r.silos = append(r.silos, t)
	first := len(r.silos) == 1
	r.mu.Unlock()
	if first {
		awscdk.Aspects_Of(c.Construct).Add(&reconcileAspect{c: c}, nil)
	}
}

// siloReconciler is the silo tenant whose controller runs c's schedule: nil when a pool covers c
// or no silo tenant names it, else the silo tenant with the smallest id. Only a pipeline that was
// built is added (addSilo, at the end of build).
func (c *CoreSystem) siloReconciler() *TenantPipeline {
	r := &c.reconcilers
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pooled || len(r.silos) == 0 {
		return nil
	}
	return slices.MinFunc(r.silos, func(a, b *TenantPipeline) int { return strings.Compare(a.Props.Tenant.ID, b.Props.Tenant.ID) })
}

// reconcileAspect creates the core system's silo schedule once the app is complete.
type reconcileAspect struct{ c *CoreSystem }

// Visit implements awscdk.IAspect: it acts on the core system alone, not on its children.
func (a *reconcileAspect) Visit(node constructs.IConstruct) {
	if *node.Node().Path() != *a.c.Node().Path() {
		return
	}
	a.c.reconcilers.once.Do(func() {
		t := a.c.siloReconciler()
		if t == nil {
			return
		}
		t.ReconcileRule = newReconcileRule(t.Construct,
			fmt.Sprintf("Admission reconciler of core system %s, run by tenant %s's controller (the smallest id of its silo tenants)", a.c.Props.Name, t.Props.Tenant.ID),
			t.Controller)
	})
}

// reconcileInput is pipeline.ReconcileInput as the object the target's input renders.
func reconcileInput() map[string]any {
	var in map[string]any
	if err := json.Unmarshal([]byte(pipeline.ReconcileInput), &in); err != nil {
		panic(fmt.Errorf("pipeline.ReconcileInput: %w", err)) // a constant: a programming error
	}
	return in
}
