package tenantpipeline

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/spec"
)

// Tenant is one tenant's configuration, the fields of one entry of tenants.json, declared once in
// package spec: ID is required, every other field has a documented default. Tenant.CoreSystem
// names a core system of the app (CoreSystemProps.Name), created with NewCoreSystem before the
// tenant's pipeline or pool. Stack, Tier, Pool and Uploaders are the tenants file's app's: a
// construct refuses them (use Props.Uploaders, PoolProps.Uploaders).
type Tenant = spec.Tenant

// DynamoDB configures the DynamoDB sink (docs/data-path.md, "DynamoDB sink").
type DynamoDB = spec.DynamoDB

// tenantErrors are the problems of t, defaulted, as a Go app wrote it at expr ("Tenant",
// "PoolProps.Tenants[3]"): the spec's rules, and the fields only a tenants file may set.
func tenantErrors(t Tenant, expr string) []error {
	n := spec.GoNames(expr)
	var errs []error
	for _, p := range checkable(t).Check() {
		errs = append(errs, errors.New(p.Render(n, t.ID)))
	}
	for _, f := range []struct {
		path string
		set  bool
	}{{"stack", t.Stack != ""}, {"tier", t.Tier != ""}, {"pool", t.Pool != ""}, {"uploaders", len(t.Uploaders) > 0}} {
		if f.set {
			errs = append(errs, errors.New(spec.Problemf(f.path, "is set, but only the tenants file's app places tenants: leave it out "+
				"(a construct's tenant is in its own construct; give uploaders as Props.Uploaders or PoolProps.Uploaders)").Render(n, t.ID)))
		}
	}
	return errs
}

// tokenPattern matches one CDK token as it appears inside a string ("${Token[TOKEN.12]}").
var tokenPattern = regexp.MustCompile(`\$\{Token\[[^\]]*\]\}`)

// checkable is t as the spec's rules check it. A prefix that holds unresolved tokens (a
// CloudFormation parameter, say) is known only at deploy time: each token stands in as one safe
// character, so the prefix's own characters and form are still checked.
func checkable(t Tenant) Tenant {
	t.Prefix = checkablePrefix(t.Prefix)
	return t
}

// checkablePrefix is prefix with each unresolved token replaced by one safe character.
func checkablePrefix(prefix string) string {
	if strings.Contains(prefix, "${Token[") && unresolved(prefix) {
		return tokenPattern.ReplaceAllString(prefix, "t")
	}
	return prefix
}

// settings is the part of the configuration that travels with every execution: with a core
// system, its settings without its table (CoreSystem.settings).
func settings(t Tenant, cs *CoreSystem) pipeline.Tenant {
	s := pipeline.SettingsOf(t)
	if cs != nil {
		s.CoreSystem = cs.settings()
	}
	return s
}

// coreSystemsOfApp holds each synthesis root's core systems by name (as apps holds its checks):
// NewCoreSystem registers one, and a tenant finds its own by Tenant.CoreSystem.
var coreSystemsOfApp sync.Map

type coreSystemRegistry struct {
	mu     sync.Mutex
	byName map[string]*CoreSystem
}

func registryOf(scope constructs.Construct) *coreSystemRegistry {
	r := &coreSystemRegistry{byName: map[string]*CoreSystem{}}
	if prev, loaded := coreSystemsOfApp.LoadOrStore(awscdk.Stage_Of(scope), r); loaded {
		r = prev.(*coreSystemRegistry)
	}
	return r
}

// registerCoreSystem adds c to its app's core systems; another core system of the same name is
// an error for c's validation.
func registerCoreSystem(c *CoreSystem) error {
	r := registryOf(c.Construct)
	r.mu.Lock()
	defer r.mu.Unlock()
	if other, ok := r.byName[c.Props.Name]; ok && c.Props.Name != "" {
		return fmt.Errorf("CoreSystemProps.Name %q is also the name of the core system at %s: each would have its own admission table, so neither limit "+
			"would hold for all the tenants; create one CoreSystem per core system and name it on every tenant", c.Props.Name, *other.Node().Path())
	}
	r.byName[c.Props.Name] = c
	return nil
}

// coreSystemOf is the app's core system that t names, nil when it names none; an error names the
// field at expr when the app has no core system of that name.
func coreSystemOf(scope constructs.Construct, t Tenant, expr string) (*CoreSystem, error) {
	if t.CoreSystem == "" {
		return nil, nil
	}
	r := registryOf(scope)
	r.mu.Lock()
	c := r.byName[t.CoreSystem]
	r.mu.Unlock()
	if c == nil {
		return nil, errors.New(spec.Problemf("coreSystem", "%q is no core system of the app: create it first with NewCoreSystem(scope, id, &CoreSystemProps{Name: %q, …}), or correct the name",
			t.CoreSystem, t.CoreSystem).Render(spec.GoNames(expr), t.ID))
	}
	return c, nil
}
