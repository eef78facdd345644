package tenantcreds

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	ststypes "github.com/aws/aws-sdk-go-v2/service/sts/types"
)

// fakeSTS answers AssumeRole with credentials that name the session, and records the calls.
type fakeSTS struct {
	mu    sync.Mutex
	calls []*sts.AssumeRoleInput
}

func (f *fakeSTS) AssumeRole(_ context.Context, in *sts.AssumeRoleInput, _ ...func(*sts.Options)) (*sts.AssumeRoleOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, in)
	return &sts.AssumeRoleOutput{Credentials: &ststypes.Credentials{
		AccessKeyId: aws.String("ASIA" + aws.ToString(in.RoleSessionName)), SecretAccessKey: aws.String("s"), SessionToken: aws.String("t"),
		Expiration: aws.Time(time.Now().Add(time.Hour)),
	}}, nil
}

func (f *fakeSTS) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

var testRole = Role{ARN: "arn:aws:iam::123456789012:role/tenant", Pool: "shared"}

// A session is tagged tenant=<id> and pool=<the role's pool> on the pool's role for an hour, and
// is assumed once however often its credentials are used.
func TestForTagsTheSession(t *testing.T) {
	f := &fakeSTS{}
	s := New(f, testRole, 0)
	for range 3 {
		p, err := s.For("acme")
		if err != nil {
			t.Fatal(err)
		}
		c, err := p.Retrieve(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if c.AccessKeyID != "ASIAtenant-acme" {
			t.Errorf("got access key %q, want the session of tenant-acme", c.AccessKeyID)
		}
	}
	if got := f.count(); got != 1 {
		t.Fatalf("got %d AssumeRole calls, want 1", got)
	}
	in := f.calls[0]
	if got := aws.ToString(in.RoleArn); got != "arn:aws:iam::123456789012:role/tenant" {
		t.Errorf("got role %q", got)
	}
	var tags []string
	for _, tg := range in.Tags {
		tags = append(tags, aws.ToString(tg.Key)+"="+aws.ToString(tg.Value))
	}
	if got := strings.Join(tags, ","); got != "tenant=acme,pool=shared" {
		t.Errorf("got tags %s, want exactly tenant=acme,pool=shared", got)
	}
	if got := aws.ToInt32(in.DurationSeconds); got != 3600 {
		t.Errorf("got DurationSeconds %d, want 3600 (role chaining's maximum)", got)
	}
	if len(in.TransitiveTagKeys) != 0 || in.Policy != nil {
		t.Errorf("got transitive keys %v, policy %v, want none", in.TransitiveTagKeys, in.Policy)
	}
}

// Each tenant has its own session, and the least recently used one goes when Size is passed.
func TestForKeepsTheMostRecentTenants(t *testing.T) {
	f := &fakeSTS{}
	s := New(f, testRole, 2)
	use := func(id string) {
		t.Helper()
		p, err := s.For(id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Retrieve(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		tenant    string
		wantCalls int
	}{
		{"a", 1}, {"b", 2}, {"a", 2}, // a is the most recent
		{"c", 3},           // b goes
		{"a", 3}, {"b", 4}, // b again: a new session; c goes
		{"c", 5},
	} {
		use(tc.tenant)
		if got := f.count(); got != tc.wantCalls {
			t.Fatalf("after %s: got %d AssumeRole calls, want %d", tc.tenant, got, tc.wantCalls)
		}
		if got := s.Len(); got > 2 {
			t.Fatalf("got %d sessions kept, want at most 2", got)
		}
	}
}

// An id that is no tenant id gets no session: it would become part of the policies' ARNs.
func TestForRefusesWhatIsNoTenantID(t *testing.T) {
	f := &fakeSTS{}
	s := New(f, testRole, 0)
	for _, id := range []string{"", "*", "a/b", "a*", "A", "${aws:username}", "-a", "a?"} {
		if _, err := s.For(id); err == nil {
			t.Errorf("For(%q): got no error, want one", id)
		}
	}
	if got := f.count(); got != 0 {
		t.Errorf("got %d AssumeRole calls, want 0", got)
	}
}

// A role without a pool name, or with one no pool can have, makes no session: the trust policy
// would refuse it anyway, and the message says which setting is missing.
func TestForRefusesARoleWithoutItsPool(t *testing.T) {
	for _, pool := range []string{"", "Shared", "a/b", "*"} {
		f := &fakeSTS{}
		_, err := New(f, Role{ARN: testRole.ARN, Pool: pool}, 0).For("acme")
		if err == nil || !strings.Contains(err.Error(), "TENANT_ROLE_POOL") {
			t.Errorf("pool %q: got %v, want an error naming TENANT_ROLE_POOL", pool, err)
		}
		if f.count() != 0 {
			t.Errorf("pool %q: got %d AssumeRole calls, want none", pool, f.count())
		}
	}
}
