package tenantpipeline

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// What only the whole app shows is checked the CDK way: each pipeline and pool adds a validation
// to its node, and synth fails with CDK's "Validation failed with the following errors", listing
// every construct's problems at once. Validations run at synth, after the whole app is built, which
// lets a pipeline or a pool see the others of its app (overlapping prefixes on one bucket, a tenant
// id used twice) and its bucket as the app left it. A construct's own props are checked before
// that, in New and NewPool (errors.go).

// checks is a pipeline's state for validation.
type checks struct {
	app *appCheck

	bucketOnce sync.Once
	bucket     []string
}

// validation is one pipeline's check, run by CDK at synth.
type validation struct{ t *TenantPipeline }

// Validate implements constructs.IValidation.
func (v *validation) Validate() *[]*string {
	return answer(v.t, v.t.problems())
}

// problems lists every problem the app shows of the pipeline: its bucket, then what it shares with
// the app's other pipelines and pools (a prefix, an id).
func (t *TenantPipeline) problems() []string {
	out := append(t.bucketProblems(), keyedRuleNameProblems(t.Construct, t.Props.EncryptionKey != nil)...)
	if t.checks.app != nil {
		out = append(out, t.checks.app.conflictsOf(*t.Node().Path())...)
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

// owner is a construct of the app as a message names it.
type owner struct {
	path  string // the construct's path, under which CDK prints its messages
	what  string // `tenant "acme"` or `pool "default"`
	prop  string // the prop that sets its prefix: Tenant.Prefix or PoolProps.Prefix
	order int    // creation order in the app: the later of two is the one told
	pool  string // for a pooled tenant's id, its pool's path: a pool checks its own tenants
}

// claim is the part of a bucket one construct reads: a pipeline's tenant prefix, or a pool's
// prefix (its tenants' prefixes lie under it). An empty bucket or prefix is unknown (an
// unresolved token, or invalid props) and never compared. A claim with names set is instead a
// pool's name prefix of the secrets or tables its tenant role reaches (PoolProps.SecretPrefix,
// PoolProps.TablePrefix); bucket then keeps the two kinds apart.
type claim struct {
	owner
	bucket, prefix string
	names          string // "secrets" or "tables"; "" for a bucket's keys
}

// name is a name that must be unique in the app: a tenant's id, or a pool's name. kind says which.
type name struct {
	owner
	kind, value string
}

// Kinds of name.
const (
	kindTenantID = "tenant id"
	kindPoolName = "pool name"
)

// conflicts returns, by construct path, every prefix of claims that overlaps another on the same
// bucket (a file under both would reach two tenants; tenants.json has the same rule) and every
// name used twice, each told to the later construct with the earlier one named. Sorting keeps it
// O(n log n) in the number of claims and names, pools holding thousands of tenants: among prefixes
// sorted on one bucket, the ones that are prefixes of the current one are a chain that ends at
// the nearest such, kept on a stack.
func conflicts(claims []claim, names []name) map[string][]string {
	out := map[string][]string{}
	tell := func(a, b owner, msg func(later, earlier owner) string) {
		if a.order > b.order {
			a, b = b, a
		}
		out[b.path] = append(out[b.path], msg(b, a))
	}
	cs := slices.Clone(claims)
	cs = slices.DeleteFunc(cs, func(c claim) bool { return c.bucket == "" || c.prefix == "" })
	slices.SortStableFunc(cs, func(a, b claim) int {
		return cmp.Or(strings.Compare(a.bucket, b.bucket), strings.Compare(a.prefix, b.prefix), cmp.Compare(a.order, b.order))
	})
	var open []claim
	for _, c := range cs {
		if len(open) > 0 && open[0].bucket != c.bucket {
			open = open[:0]
		}
		for len(open) > 0 && !strings.HasPrefix(c.prefix, open[len(open)-1].prefix) {
			open = open[:len(open)-1]
		}
		for _, o := range open {
			prefixOf := map[string]string{c.path: c.prefix, o.path: o.prefix}
			if c.names != "" {
				tell(c.owner, o.owner, func(later, earlier owner) string {
					return fmt.Sprintf("%s: %s %q overlaps the %s %q of %s (%s), so a session of one pool's tenant role could name the other pool's tenants' %s: make the prefixes disjoint",
						later.what, later.prop, prefixOf[later.path], earlier.prop, prefixOf[earlier.path], earlier.what, earlier.path, c.names)
				})
				continue
			}
			tell(c.owner, o.owner, func(later, earlier owner) string {
				fix := later.prop
				if earlier.prop != later.prop {
					fix += " or " + earlier.prop
				}
				return fmt.Sprintf("%s: prefix %q overlaps the prefix %q of %s (%s) on the same bucket, "+
					"so one file would reach two tenants: make the prefixes disjoint (%s)", later.what, prefixOf[later.path], prefixOf[earlier.path], earlier.what, earlier.path, fix)
			})
		}
		open = append(open, c)
	}
	ns := slices.Clone(names)
	ns = slices.DeleteFunc(ns, func(n name) bool { return n.value == "" })
	slices.SortStableFunc(ns, func(a, b name) int {
		return cmp.Or(strings.Compare(a.kind, b.kind), strings.Compare(a.value, b.value), cmp.Compare(a.order, b.order))
	})
	for i := 1; i < len(ns); i++ {
		a, b := ns[i-1], ns[i]
		if a.kind != b.kind || a.value != b.value || (a.pool != "" && a.pool == b.pool) {
			continue
		}
		tell(a.owner, b.owner, func(later, earlier owner) string {
			return fmt.Sprintf("%s: %s %q is also used by %s (%s): a %s must be unique in the app, since the stack outputs and pipectl name it alone",
				later.what, a.kind, a.value, earlier.what, earlier.path, a.kind)
		})
	}
	return out
}

// claims reads the pipeline's bucket, prefix and id at synth: the app is complete by then. Tokens
// claim nothing.
func (t *TenantPipeline) claims(order int) ([]claim, []name) {
	p := t.Props
	o := owner{path: *t.Node().Path(), what: fmt.Sprintf("tenant %q", p.Tenant.ID), prop: "Tenant.Prefix", order: order}
	names := []name{{owner: o, kind: kindTenantID, value: p.Tenant.ID}}
	if p.Bucket == nil || unresolved(p.Tenant.Prefix) {
		return nil, names
	}
	return []claim{{owner: o, bucket: bucketKey(p.Bucket), prefix: p.Tenant.Prefix}}, names
}

// claims reads the pool's bucket, prefix, name and tenant ids.
func (t *TenantPool) claims(order int) ([]claim, []name) {
	p := t.Props
	path := *t.Node().Path()
	o := owner{path: path, what: fmt.Sprintf("pool %q", p.Name), prop: "PoolProps.Prefix", order: order}
	names := []name{{owner: o, kind: kindPoolName, value: p.Name}}
	for _, tn := range p.Tenants {
		names = append(names, name{owner: owner{path: path, what: o.what, order: order, pool: path}, kind: kindTenantID, value: tn.ID})
	}
	// The tenant role reads "<SecretPrefix>${aws:PrincipalTag/tenant}-??????" and writes
	// "<TablePrefix>${aws:PrincipalTag/tenant}" (tenantrole.go): when one pool's prefix starts
	// another's, a session of the first names the second pool's tenants' secrets or tables.
	var cs []claim
	for _, n := range []struct{ prop, prefix, names string }{
		{"PoolProps.SecretPrefix", p.SecretPrefix, "secrets"},
		{"PoolProps.TablePrefix", p.TablePrefix, "tables"},
	} {
		if n.prefix != "" && !unresolved(n.prefix) {
			no := o
			no.prop = n.prop
			cs = append(cs, claim{owner: no, bucket: "the " + n.names + "' names", prefix: n.prefix, names: n.names})
		}
	}
	if p.Bucket == nil || p.Prefix == "" || unresolved(p.Prefix) {
		return cs, names
	}
	return append(cs, claim{owner: o, bucket: bucketKey(p.Bucket), prefix: p.Prefix}), names
}

// bucketKey tells buckets apart: a bucket is the same when it is the same construct, or when two
// imports name it alike.
func bucketKey(b awss3.IBucket) string {
	if name := b.BucketName(); name != nil && !unresolved(*name) {
		return "name " + *name
	}
	return "construct " + *b.Node().Path()
}

func unresolved(s string) bool { return *awscdk.Token_IsUnresolved(jsii.String(s)) }

// appCheck is the check of one synthesis root (the app, or a nested stage) that holds pipelines
// and pools.
type appCheck struct {
	mu      sync.Mutex
	members []member // in creation order

	conflictsOnce sync.Once
	conflicts     map[string][]string
}

// member is a TenantPipeline or a TenantPool.
type member interface {
	claims(order int) ([]claim, []name)
}

// apps maps a synthesis root (an awscdk.Stage) to its check. A node's address is a hash of its
// path, the same for every app's root, so the key is the root's Go value: jsii hands back the same
// value for the same object.
var apps sync.Map

// register adds m, created under scope, to the check of its synthesis root, creating the check
// with the first member.
func register(scope constructs.Construct, m member) *appCheck {
	c := &appCheck{}
	if prev, loaded := apps.LoadOrStore(awscdk.Stage_Of(scope), c); loaded {
		c = prev.(*appCheck)
	}
	c.mu.Lock()
	c.members = append(c.members, m)
	c.mu.Unlock()
	return c
}

// conflictsOf returns the conflicts told to the construct at path, computed once for the whole
// app at its first validation.
func (c *appCheck) conflictsOf(path string) []string {
	c.conflictsOnce.Do(func() {
		c.mu.Lock()
		members := slices.Clone(c.members)
		c.mu.Unlock()
		var claims []claim
		var names []name
		for i, m := range members {
			cs, ns := m.claims(i)
			claims, names = append(claims, cs...), append(names, ns...)
		}
		c.conflicts = conflicts(claims, names)
	})
	return c.conflicts[path]
}
