// Package tenantcreds gives a pool's functions the credentials of one tenant: a session of the
// pool's tenant-scoped role (pipeline.EnvTenantRoleARN) tagged tenant=<id> and pool=<the role's
// pool> (pipeline.EnvTenantRolePool), the two tags its trust policy requires. The role's policies
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

// idPattern is a tenant id's shape (internal/tenants), and a pool name's. The id becomes the
// session tag's value, which the role's policies put into ARNs, so nothing else is ever sent: no
// "/", "*", "?" or "$".
var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// Role is a pool's tenant-scoped role and the pool it belongs to, whose name each session carries
// as the tag pool=<Pool>: the role's trust policy refuses a session without it or with another
// pool's name.
type Role struct {
	ARN  string
	Pool string
}

// Check says what is wrong with the role's settings, for a function to refuse to start.
func (r Role) Check() error {
	if !idPattern.MatchString(r.Pool) {
		return fmt.Errorf("pool name %q of role %s is not a pool name (%s, %s): no session is made", r.Pool, r.ARN, idPattern, pipeline.EnvTenantRolePool)
	}
	return nil
}

// Cache hands out one T per tenant, built once from the credentials of the tenant's session, an
// aws.CredentialsCache over an stscreds.AssumeRoleProvider (renewed ExpiryWindow before it
// expires), and keeps the most recently used size of them (least recently used out first). T is
// the credentials themselves (New) or the clients made with them (NewCache). Safe for concurrent
// use.
type Cache[T any] struct {
	client stscreds.AssumeRoleAPIClient
	role   Role
	size   int
	build  func(tenant string, creds aws.CredentialsProvider) T

	mu     sync.Mutex
	recent *list.List // of *entry[T], most recently used first
	byID   map[string]*list.Element
}

type entry[T any] struct {
	tenant string
	value  T
}

// New returns the tenants' credentials of role's sessions, made with client (an STS client with
// the function's own credentials). size <= 0 means DefaultSize.
func New(client stscreds.AssumeRoleAPIClient, role Role, size int) *Cache[aws.CredentialsProvider] {
	return NewCache(client, role, size, func(_ string, c aws.CredentialsProvider) aws.CredentialsProvider { return c })
}

// NewCache is New with the value kept per tenant made by build.
func NewCache[T any](client stscreds.AssumeRoleAPIClient, role Role, size int, build func(tenant string, creds aws.CredentialsProvider) T) *Cache[T] {
	if size <= 0 {
		size = DefaultSize
	}
	return &Cache[T]{client: client, role: role, size: size, build: build, recent: list.New(), byID: map[string]*list.Element{}}
}

// For returns the value of tenant, whose credentials act for that tenant only. The caller takes
// the id from what names the tenant in the pipeline (the message group, the execution's input),
// never from an object key. STS is not called until the credentials are first retrieved.
func (c *Cache[T]) For(tenant string) (T, error) {
	var zero T
	if !idPattern.MatchString(tenant) {
		return zero, fmt.Errorf("tenant id %q is not a tenant id (%s): no session is made for it", tenant, idPattern)
	}
	if err := c.role.Check(); err != nil {
		return zero, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[tenant]; ok {
		c.recent.MoveToFront(e)
		return e.Value.(*entry[T]).value, nil
	}
	p := stscreds.NewAssumeRoleProvider(c.client, c.role.ARN, func(o *stscreds.AssumeRoleOptions) {
		// The session name shows the tenant in CloudTrail; the tags are what the policies read.
		o.RoleSessionName = "tenant-" + tenant
		o.Duration = Duration
		o.Tags = []ststypes.Tag{
			{Key: aws.String(pipeline.TenantTag), Value: aws.String(tenant)},
			{Key: aws.String(pipeline.PoolTag), Value: aws.String(c.role.Pool)},
		}
	})
	creds := aws.NewCredentialsCache(p, func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = ExpiryWindow })
	v := c.build(tenant, creds)
	c.byID[tenant] = c.recent.PushFront(&entry[T]{tenant: tenant, value: v})
	for c.recent.Len() > c.size {
		last := c.recent.Back()
		c.recent.Remove(last)
		delete(c.byID, last.Value.(*entry[T]).tenant)
	}
	return v, nil
}

// Len is how many tenants are kept.
func (c *Cache[T]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recent.Len()
}
