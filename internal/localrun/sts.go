package localrun

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// trusts judges an AssumeRole of role by caller (nil: the run's own key) with the session tags
// tags, by the role's trust policy and, for a caller that is a session, the caller's own policies,
// as STS does:
//   - sts:AssumeRole, and sts:TagSession when the request passes tags, must each be allowed;
//   - an explicit Deny in the trust policy or the caller's policies refuses;
//   - a trust policy's Allow that names the caller's role allows by itself; one that names only
//     the caller's account leaves it to the caller's policies, which must allow the action on the
//     role;
//   - the request's tags are the condition keys aws:RequestTag/<key> and the multi-valued
//     aws:TagKeys, the caller's role aws:PrincipalArn and its tags ${aws:PrincipalTag/<key>}.
//
// The run's own key (the harness, pipectl) stands for whichever principal the trust policy names:
// an operator, a platform's uploader. Its request is held to the trust policy's conditions and
// Denies, not to its principals.
// https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_manage-assume.html
// https://docs.aws.amazon.com/IAM/latest/UserGuide/id_session-tags.html
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-requesttag
func (a *tenantAuth) trusts(caller *tenantSession, role string, tags map[string]string) (bool, string) {
	if _, err := a.roleStatements(role); err != nil {
		return false, err.Error()
	}
	a.mu.Lock()
	trust := a.trust[role]
	a.mu.Unlock()
	keys := map[string]string{}
	var callerTags map[string]string
	if caller != nil {
		keys["aws:PrincipalArn"] = caller.role
		callerTags = caller.tags
	}
	names := make([]string, 0, len(tags))
	for k, v := range tags {
		keys["aws:RequestTag/"+k] = v
		names = append(names, k)
	}
	slices.Sort(names)
	keys["aws:TagKeys"] = strings.Join(names, valueSeparator) // present, if empty: no tags is an empty set
	actions := []string{"sts:AssumeRole"}
	if len(tags) > 0 {
		actions = append(actions, "sts:TagSession")
	}
	for _, action := range actions {
		allowed, delegated := false, false
		for _, st := range trust {
			named, grants := true, true
			if caller != nil {
				named, grants = st.namesPrincipal(caller.role)
			} else {
				named, grants = st.namesAWSPrincipal(), true
			}
			if !named {
				continue
			}
			m := st.applies(callerTags, action, role, keys)
			switch {
			case st.Effect == "Deny" && m != noMatch:
				return false, fmt.Sprintf("explicit deny in the trust policy of %s", role)
			case st.Effect == "Allow" && m == match && grants:
				allowed = true
			case st.Effect == "Allow" && m == match:
				delegated = true
			}
		}
		if caller != nil {
			// The caller's own policies: a Deny refuses; an Allow completes a trust that names the
			// account.
			ok, why := a.decide(*caller, action, role, keys)
			if !ok && strings.HasPrefix(why, "explicit deny") {
				return false, why
			}
			allowed = allowed || delegated && ok
		}
		if !allowed {
			return false, fmt.Sprintf("the trust policy of %s does not allow %s by this caller with these tags", role, action)
		}
	}
	return true, ""
}

// namesAWSPrincipal is whether a trust policy's statement names an AWS principal (a role, a user,
// an account), which the run's own key stands for; a service principal is not one.
func (st statement) namesAWSPrincipal() bool {
	if st.NotPrincipal != nil {
		return true // not evaluated: a Deny applies
	}
	var star string
	if json.Unmarshal(st.Principal, &star) == nil {
		return star == "*"
	}
	var p map[string]stringList
	return json.Unmarshal(st.Principal, &p) == nil && len(p["AWS"]) > 0
}
