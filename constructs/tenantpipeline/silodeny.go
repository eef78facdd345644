package tenantpipeline

import (
	"fmt"
	"slices"
	"sync"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// SidNoSiloTenantSessions is the Sid of the Deny a pool's tenant roles carry against sessions
// tagged with the id of a silo tenant of the same app.
const SidNoSiloTenantSessions = "NoSiloTenantSessions"

// maxSiloDenyChars bounds the ids' share of a tenant role's inline policies, which hold 10,240
// characters in all (IAM and AWS STS quotas,
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html); the roles' own
// statements take under 4,000. At most 35 characters an id (32, quotes and a comma), it holds 171
// silo tenants, beyond the 150 the default bus's 300 rules allow at two a tenant. A variable, so
// that a test reaches the bound without 172 silo tenants.
var maxSiloDenyChars = 6000

// A pool of the earlier key layout (KeysPerTenant) grants keys that carry the tenant's id and not
// the pool (work/${aws:PrincipalTag/tenant}/, control/…, results/…, quarantine/…), so a session of
// its tenant roles tagged with a silo tenant's id would reach that tenant's keys of the same kind:
// a forged wake-done record, a manifest, its results; and any pool's Register role names the
// secret <secretPrefix><tag>, which may be a silo tenant's. The pool's functions never ask for
// such a session (they refuse a tenant not in their settings, isolation.md); this Deny makes IAM
// refuse it too, for every silo tenant of the app, whatever a compromised function asks. A pool
// whose keys carry it (KeysPerPool) reaches no silo tenant's keys without it.
//
// It is added when the app is complete (an aspect), since silo tenants may be created after the
// pool: an explicit Deny on every action whose condition names the session's tag
// (aws:PrincipalTag/tenant; a session tag is a principal tag,
// https://docs.aws.amazon.com/IAM/latest/UserGuide/id_session-tags.html).
func (t *TenantPool) denySiloTenantSessions() {
	awscdk.Aspects_Of(t.Construct).Add(&siloDenyAspect{pool: t}, nil)
}

// siloDenyAspect adds NoSiloTenantSessions to the pool's tenant roles once.
type siloDenyAspect struct {
	pool *TenantPool
	once sync.Once
}

// Visit implements awscdk.IAspect: it acts on the pool alone, not on its children.
func (a *siloDenyAspect) Visit(node constructs.IConstruct) {
	t := a.pool
	if *node.Node().Path() != *t.Node().Path() {
		return
	}
	a.once.Do(func() {
		ids := t.app.siloTenants()
		if len(ids) == 0 {
			return
		}
		if chars := siloDenyChars(ids); chars > maxSiloDenyChars {
			awscdk.Annotations_Of(t.Construct).AddError(jsii.String(fmt.Sprintf(
				"pool %s: the ids of the app's %d silo tenants take %d characters in the tenant roles' %s Deny, more than the %d a role's inline policies leave them (10,240 in all): move silo tenants to pools or to another app",
				t.Props.Name, len(ids), chars, SidNoSiloTenantSessions, maxSiloDenyChars)))
			return
		}
		for _, role := range []awsiam.Role{t.TenantRole, t.SplitTenantRole, t.RegisterTenantRole} {
			role.AddToPolicy(siloDenyStatement(ids))
		}
	})
}

// siloDenyChars is what ids take in the Deny's condition: each quoted, with a comma.
func siloDenyChars(ids []string) int {
	chars := 0
	for _, id := range ids {
		chars += len(id) + 3
	}
	return chars
}

// siloDenyStatement denies everything to a session tagged with one of ids.
func siloDenyStatement(ids []string) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String(SidNoSiloTenantSessions),
		Effect:     awsiam.Effect_DENY,
		Actions:    jsii.Strings("*"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"StringEquals": map[string]any{"aws:PrincipalTag/" + pipeline.TenantTag: ids}},
	})
}

// siloTenants are the ids of the app's silo tenants (its TenantPipelines), sorted; read when the
// app is complete.
func (c *appCheck) siloTenants() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for _, m := range c.members {
		if p, ok := m.(*TenantPipeline); ok && p.Props.Tenant.ID != "" && !unresolved(p.Props.Tenant.ID) {
			ids = append(ids, p.Props.Tenant.ID)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}
