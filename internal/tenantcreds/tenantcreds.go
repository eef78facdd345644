// Package tenantcreds gives a pool's functions the credentials of one tenant: a session of the
// pool's tenant-scoped role (pipeline.EnvTenantRoleARN) tagged tenant=<id>. The role's policies
// grant only what is named from ${aws:PrincipalTag/tenant}, so a request made for tenant A cannot
// read or write tenant B's objects, secret or table, whatever key or name a bug or a wrong input
// puts in it (docs/isolation.md).
//
// Session tags and the aws:PrincipalTag condition key:
// https://docs.aws.amazon.com/IAM/latest/UserGuide/id_session-tags.html,
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principaltag.
// The SaaS pattern this follows (tenant-scoped credentials at run time in a pooled model):
// https://docs.aws.amazon.com/whitepapers/latest/saas-tenant-isolation-strategies/saas-tenant-isolation-strategies.html.
package tenantcreds

import (
	"container/list"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	ststypes "github.com/aws/aws-sdk-go-v2/service/sts/types"

	"github.com/example/tenantpipeline/internal/pipeline"
)

const (
	// DefaultSize is how many tenants' sessions one warm execution environment keeps. A pool
	// function serves one file of one tenant per invocation, so a warm environment sees the few
	// tenants that are running; 256 sessions of about 1 KB each are nothing next to the
	// function's memory, and a tenant that was evicted costs one more AssumeRole.
	DefaultSize = 256
	// Duration is a session's lifetime: the most that role chaining allows, since a Lambda
	// function's own credentials are a role session
	// (https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_terms-and-concepts.html#iam-term-role-chaining,
	// "limits your AWS CLI or AWS API role session to a maximum of one hour").
	Duration = time.Hour
	// ExpiryWindow is how long before its expiry a session is renewed, as aws.CredentialsCache
	// does: no request starts with credentials that expire while it runs (a Register invocation
	// lasts at most 15 minutes, but it retrieves the credentials again for every request).
	ExpiryWindow = 5 * time.Minute
)

// idPattern is a tenant id's shape (internal/tenants). The id becomes the session tag's value,
// which the role's policies put into ARNs, so nothing else is ever sent: no "/", "*", "?" or "$".
var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// Sessions hands out one credentials provider per tenant, each an aws.CredentialsCache over an
// stscreds.AssumeRoleProvider, and keeps the most recently used Size of them (least recently used
// out first). Safe for concurrent use.
type Sessions struct {
	client  stscreds.AssumeRoleAPIClient
	roleARN string
	size    int

	mu     sync.Mutex
	recent *list.List // of *session, most recently used first
	byID   map[string]*list.Element
}

type session struct {
	tenant string
	creds  *aws.CredentialsCache
}

// New returns the sessions of roleARN, made with client (an STS client with the function's own
// credentials). size <= 0 means DefaultSize.
func New(client stscreds.AssumeRoleAPIClient, roleARN string, size int) *Sessions {
	if size <= 0 {
		size = DefaultSize
	}
	return &Sessions{client: client, roleARN: roleARN, size: size, recent: list.New(), byID: map[string]*list.Element{}}
}

// For returns the credentials of a session that acts for tenant. The caller takes the id from
// what names the tenant in the pipeline (the message group, the execution's input), never from an
// object key. Nothing is called until the credentials are first retrieved.
func (s *Sessions) For(tenant string) (aws.CredentialsProvider, error) {
	if !idPattern.MatchString(tenant) {
		return nil, fmt.Errorf("tenant id %q is not a tenant id (%s): no session is made for it", tenant, idPattern)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byID[tenant]; ok {
		s.recent.MoveToFront(e)
		return e.Value.(*session).creds, nil
	}
	p := stscreds.NewAssumeRoleProvider(s.client, s.roleARN, func(o *stscreds.AssumeRoleOptions) {
		// The session name shows the tenant in CloudTrail; the tag is what the policies read.
		o.RoleSessionName = "tenant-" + tenant
		o.Duration = Duration
		o.Tags = []ststypes.Tag{{Key: aws.String(pipeline.TenantTag), Value: aws.String(tenant)}}
	})
	c := aws.NewCredentialsCache(p, func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = ExpiryWindow })
	s.byID[tenant] = s.recent.PushFront(&session{tenant: tenant, creds: c})
	for s.recent.Len() > s.size {
		last := s.recent.Back()
		s.recent.Remove(last)
		delete(s.byID, last.Value.(*session).tenant)
	}
	return c, nil
}

// Len is how many tenants' sessions are kept.
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recent.Len()
}
