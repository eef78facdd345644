package tenantpipeline

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/tenants"
)

// Props are checked the CDK way: each pipeline adds a validation to its node, and synth fails
// with CDK's "Validation failed with the following errors", listing every construct's problems
// at once. Validations run at synth, after the whole app is built, which also lets a pipeline see
// the other pipelines of its app (overlapping prefixes on one bucket).
//
// In a Go app, CDK's failure is a panic out of app.Synth (jsii turns the JavaScript error into
// one), so the user's app would end in a goroutine dump with status 2. The app check below, added
// once to the stage that synthesizes the pipelines, prints CDK's message itself and exits with
// status 1 instead. It does so only when a pipeline is invalid and the process is not a test:
// tests see CDK's own panic, which they can recover.

// checks is a pipeline's state for validation.
type checks struct {
	// invalid holds every problem of the props; the resources were then built from placeholders.
	invalid error
	app     *appCheck

	claimOnce sync.Once
	claimed   claim

	bucketOnce sync.Once
	bucket     []string
}

// validation is one pipeline's check, run by CDK at synth.
type validation struct{ t *TenantPipeline }

// Validate implements constructs.IValidation.
func (v *validation) Validate() *[]*string {
	return jsii.Strings(v.t.problems()...)
}

// problems lists every problem of the pipeline: its own props, its bucket, then the prefixes it
// shares with pipelines created before it on the same bucket.
func (t *TenantPipeline) problems() []string {
	out := append(messages(t.checks.invalid), t.bucketProblems()...)
	if t.checks.app != nil {
		out = append(out, overlapProblems(t.claim(), t.checks.app.claimsBefore(t))...)
	}
	return out
}

// messages flattens an errors.Join tree into one message per problem.
func messages(err error) []string {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, messages(e)...)
		}
		return out
	}
	return []string{err.Error()}
}

// claim is the part of a bucket one pipeline reads: its tenant's prefix. An empty bucket or prefix
// is unknown (an unresolved token, or invalid props) and never compared.
type claim struct {
	path, tenant, bucket, prefix string
}

// overlapProblems reports, on c, every earlier claim of the same bucket whose prefix overlaps
// c's: a file under both would reach two tenants. tenants.json has the same rule among its tenants.
func overlapProblems(c claim, earlier []claim) []string {
	if c.bucket == "" || c.prefix == "" {
		return nil
	}
	var out []string
	for _, e := range earlier {
		if e.bucket != c.bucket || e.prefix == "" || !tenants.PrefixesOverlap(c.prefix, e.prefix) {
			continue
		}
		out = append(out, fmt.Sprintf("tenant %q: prefix %q overlaps the prefix %q of tenant %q (%s) on the same bucket, "+
			"so one file would reach two tenants: make the prefixes disjoint", c.tenant, c.prefix, e.prefix, e.tenant, e.path))
	}
	return out
}

// claim reads the pipeline's bucket and prefix, once, at synth: the app is complete by then.
// Tokens and invalid tenants claim nothing.
func (t *TenantPipeline) claim() claim {
	t.checks.claimOnce.Do(func() { t.checks.claimed = t.readClaim() })
	return t.checks.claimed
}

func (t *TenantPipeline) readClaim() claim {
	p := t.Props
	c := claim{path: *t.Node().Path(), tenant: p.Tenant.ID}
	if p.Bucket == nil || p.Tenant.Validate() != nil || unresolved(p.Tenant.Prefix) {
		return c
	}
	c.prefix = p.Tenant.Prefix
	// A bucket is the same when it is the same construct, or when two imports name it alike.
	if name := p.Bucket.BucketName(); name != nil && !unresolved(*name) {
		c.bucket = "name " + *name
	} else {
		c.bucket = "construct " + *p.Bucket.Node().Path()
	}
	return c
}

func unresolved(s string) bool { return *awscdk.Token_IsUnresolved(jsii.String(s)) }

// appCheck is the check of one synthesis root (the app, or a nested stage) that holds pipelines.
type appCheck struct {
	root      constructs.IConstruct
	mu        sync.Mutex
	pipelines []*TenantPipeline
	running   bool
}

// apps maps a synthesis root (an awscdk.Stage) to its check. A node's address is a hash of its
// path, the same for every app's root, so the key is the root's Go value: jsii hands back the same
// value for the same object.
var apps sync.Map

// register adds t to the check of its synthesis root, creating the check with the first pipeline.
func register(t *TenantPipeline) *appCheck {
	root := awscdk.Stage_Of(t.Construct)
	c := &appCheck{root: root}
	if prev, loaded := apps.LoadOrStore(root, c); loaded {
		c = prev.(*appCheck)
	} else {
		root.Node().AddValidation(c)
	}
	c.mu.Lock()
	c.pipelines = append(c.pipelines, t)
	c.mu.Unlock()
	return c
}

// claimsBefore returns the claims of the pipelines created before t.
func (c *appCheck) claimsBefore(t *TenantPipeline) []claim {
	c.mu.Lock()
	before := append([]*TenantPipeline(nil), c.pipelines...)
	c.mu.Unlock()
	var out []claim
	for _, p := range before {
		if p == t {
			break
		}
		out = append(out, p.claim())
	}
	return out
}

// Validate implements constructs.IValidation. CDK validates the root first, so this runs before
// any pipeline's own validation; it reports nothing itself.
func (c *appCheck) Validate() *[]*string {
	none := &[]*string{}
	if c.running || testing.Testing() {
		return none
	}
	c.mu.Lock()
	pipelines := append([]*TenantPipeline(nil), c.pipelines...)
	c.mu.Unlock()
	invalid := false
	for _, p := range pipelines {
		invalid = invalid || len(p.problems()) > 0
	}
	if !invalid {
		return none
	}
	c.running = true // the walk validates the root again
	fmt.Fprintln(os.Stderr, validationFailed(c.root))
	os.Exit(1)
	return none
}

// validationFailed is CDK's message for a failed validation of root's tree (aws-cdk-lib,
// core/lib/private/synthesis.ts, validateTree): every construct's problems in tree order, nested
// stages left to their own synthesis.
func validationFailed(root constructs.IConstruct) string {
	var lines []string
	var visit func(n constructs.IConstruct)
	visit = func(n constructs.IConstruct) {
		for _, m := range *n.Node().Validate() {
			lines = append(lines, fmt.Sprintf("[%s] %s", *n.Node().Path(), *m))
		}
		for _, child := range *n.Node().Children() {
			if !*awscdk.Stage_IsStage(child) {
				visit(child)
			}
		}
	}
	visit(root)
	return "Validation failed with the following errors:\n  " + strings.Join(lines, "\n  ")
}
