package localrun

import (
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// AssumeRole is judged by the role's trust policy (its principals, its conditions on the session
// tags) and the caller's own policies, as STS judges it: Split's role may not take Register's
// tenant role, which alone reads secrets; a pool's tenant role is taken only with its own pool's
// tag; an outsider of the account may take no role that does not name it; a trust that names only
// the account needs the caller's own Allow; the run's own key stands for the principal a trust
// names and is held to its conditions.
func TestTrustPolicy(t *testing.T) {
	r := newTenantAuthRig(t)
	const account = "123456789012"
	role := func(name string) string { return "arn:aws:iam::" + account + ":role/" + name }
	trustOf := func(principal string) []statement {
		st := mustStatement(`{"Effect":"Allow","Principal":{"AWS":"` + principal + `"},"Action":["sts:AssumeRole","sts:TagSession"],
			"Condition":{"ForAllValues:StringEquals":{"aws:TagKeys":["tenant","pool"]},"Null":{"aws:RequestTag/tenant":"false"},"StringLike":{"aws:RequestTag/tenant":"?*"},
			"StringEquals":{"aws:RequestTag/pool":"p"}}}`)
		return []statement{st}
	}
	r.auth.mu.Lock()
	for name, principal := range map[string]string{
		"tenant":   role("split"), // Split's and the controller's tenant role
		"register": role("register"),
		"by-acct":  "arn:aws:iam::" + account + ":root",
	} {
		stmts := trustOf(principal)
		stmts[0].Resource = stringList{role(name)}
		r.auth.trust[role(name)] = stmts
		r.auth.policies[role(name)] = nil
	}
	r.auth.mu.Unlock()
	split, _ := r.synthetic(t, "split", nil)
	register, _ := r.synthetic(t, "register", nil)
	outsider, _ := r.synthetic(t, "outsider", outsiderStatements)
	allowsAssume, _ := r.synthetic(t, "allowsassume", []statement{allow([]string{"sts:AssumeRole", "sts:TagSession"}, []string{role("by-acct")}, nil)})
	deniesAssume, _ := r.synthetic(t, "deniesassume", []statement{deny([]string{"sts:AssumeRole"}, []string{"*"}, nil)})
	r.auth.mu.Lock()
	r.auth.trust[role("register")] = append(r.auth.trust[role("register")], trustOf(role("deniesassume"))...)
	r.auth.trust[role("register")][1].Resource = stringList{role("register")}
	r.auth.mu.Unlock()
	tenant := map[string]string{"tenant": "a", "pool": "p"}
	for _, tc := range []struct {
		name   string
		caller *tenantSession
		role   string
		tags   map[string]string
		want   bool
	}{
		{"Split takes the tenant role", &split, role("tenant"), tenant, true},
		{"Split takes Register's tenant role", &split, role("register"), tenant, false},
		{"Register takes its tenant role", &register, role("register"), tenant, true},
		{"without the tenant tag", &register, role("register"), nil, false},
		{"with another tag too", &register, role("register"), map[string]string{"tenant": "a", "pool": "p", "team": "x"}, false},
		{"with an empty tenant", &register, role("register"), map[string]string{"tenant": "", "pool": "p"}, false},
		{"without the pool tag", &register, role("register"), map[string]string{"tenant": "a"}, false},
		{"with another pool's tag", &register, role("register"), map[string]string{"tenant": "a", "pool": "q"}, false},
		{"with a pool tag of a wildcard", &register, role("register"), map[string]string{"tenant": "a", "pool": "*"}, false},
		{"the outsider takes the tenant role", &outsider, role("tenant"), tenant, false},
		{"the outsider takes the outsider role", &outsider, r.auth.outsiderRole(), nil, true},
		{"the outsider role with a tag", &outsider, r.auth.outsiderRole(), tenant, false},
		{"a trust of the account, the caller's Allow", &allowsAssume, role("by-acct"), tenant, true},
		{"a trust of the account, no Allow of the caller", &register, role("by-acct"), tenant, false},
		{"the caller's own Deny", &deniesAssume, role("register"), tenant, false},
		{"the run's own key, with the tag", nil, role("register"), tenant, true},
		{"the run's own key, without it", nil, role("register"), nil, false},
		{"a role the templates lack", nil, role("nobody"), tenant, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, why := r.auth.trusts(tc.caller, tc.role, tc.tags); got != tc.want {
				t.Errorf("got %v (%s), want %v", got, why, tc.want)
			}
		})
	}
}

// GetCallerIdentity names a session by its assumed-role ARN (the role's name without its path, and
// the session's name), as STS does; the run's own key stays the user it names.
func TestCallerIdentityOfASession(t *testing.T) {
	r := newTenantAuthRig(t)
	key := r.auth.newSession("arn:aws:iam::123456789012:role/tenantpipeline/App/split", "poolsplit", nil)
	for _, tc := range []struct{ key, want string }{
		{key, "arn:aws:sts::123456789012:assumed-role/split/poolsplit"},
		{"operator", "arn:aws:iam::000000000000:user/operator"},
	} {
		req := httptest.NewRequest(http.MethodPost, "/", nil)
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+tc.key+"/20261206/us-east-1/sts/aws4_request, SignedHeaders=host, Signature=x")
		b, err := xml.Marshal(callerIdentity(req, r.auth))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "<Arn>"+tc.want+"</Arn>") {
			t.Errorf("key %s: got %s, want the ARN %s", tc.key, b, tc.want)
		}
	}
}
