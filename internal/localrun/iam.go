package localrun

import (
	"cmp"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// The local IAM API: CreateRole, PutRolePolicy, GetRole and DeleteRole, for roles the templates do
// not create, so that a test (or a user) can do what anyone allowed iam:CreateRole can: make a
// role, say under the pipeline's role path, give it any policy, assume it and see what the
// resource policies refuse it. A created role is judged as IAM judges any role: its trust policy
// decides who may assume it, its inline policies what its sessions may do, and every resource
// policy applies to it. The templates' roles cannot be changed or deleted here (InvalidAction),
// and their names are taken (EntityAlreadyExists), as in an account where they were deployed.
// https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateRole.html
// https://docs.aws.amazon.com/IAM/latest/APIReference/API_PutRolePolicy.html
// https://docs.aws.amazon.com/IAM/latest/APIReference/API_GetRole.html
// https://docs.aws.amazon.com/IAM/latest/APIReference/API_DeleteRole.html

// iamActions are the IAM operations the local run answers.
var iamActions = map[string]bool{"CreateRole": true, "PutRolePolicy": true, "GetRole": true, "DeleteRole": true}

// IAM's rules for a role's name (1 to 64 of letters, digits and +=,.@_-), a policy's name (1 to
// 128 of the same) and a path ("/" or "/.../" of printable ASCII, at most 512).
var (
	iamRoleNameRe   = regexp.MustCompile(`^[\w+=,.@-]{1,64}$`)
	iamPolicyNameRe = regexp.MustCompile(`^[\w+=,.@-]{1,128}$`)
	iamPathRe       = regexp.MustCompile(`^/([\x21-\x7E]*/)?$`)
)

// createdRole is a role made through the local IAM API.
type createdRole struct {
	Name, Path, ARN, ID, TrustJSON string
	Created                        time.Time
	trust                          []statement
	policies                       map[string][]statement // inline policies, by name
}

// iamRoleARN is the ARN of a role of the run's account: arn:aws:iam::<account>:role<path><name>.
func (a *tenantAuth) iamRoleARN(path, name string) string {
	return fmt.Sprintf("arn:aws:iam::%s:role%s%s", a.res.Account, path, name)
}

// iamResource is the role ARN an IAM request acts on, for judging it (iam:<Action> on the role):
// for CreateRole the ARN it would have, for the others the created role's, or a template role's
// by its name.
func (a *tenantAuth) iamResource(form url.Values) string {
	name := form.Get("RoleName")
	if form.Get("Action") == "CreateRole" {
		return a.iamRoleARN(cmp.Or(form.Get("Path"), "/"), name)
	}
	if r := a.createdByName(name); r != nil {
		return r.ARN
	}
	if arn := a.templateRoleARN(name); arn != "" {
		return arn
	}
	return a.iamRoleARN("/", name)
}

// createdByName is the created role of that name (IAM's names are case-insensitive), or nil.
func (a *tenantAuth) createdByName(name string) *createdRole {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.created {
		if strings.EqualFold(r.Name, name) {
			return r
		}
	}
	return nil
}

// templateRoleARN is the ARN of the templates' role named name (case-insensitively), or "".
func (a *tenantAuth) templateRoleARN(name string) string {
	for _, r := range a.asm.OfType("AWS::IAM::Role") {
		arn, err := a.res.ResolveString(r.Stack, json.RawMessage(fmt.Sprintf(`{"Fn::GetAtt":[%q,"Arn"]}`, r.LogicalID)))
		if err == nil && strings.EqualFold(arn[strings.LastIndex(arn, "/")+1:], name) {
			return arn
		}
	}
	return ""
}

// serveIAM answers one IAM request (form: the query API's parameters).
func (a *tenantAuth) serveIAM(w http.ResponseWriter, form url.Values) {
	name := form.Get("RoleName")
	if !iamRoleNameRe.MatchString(name) {
		queryError(w, http.StatusBadRequest, "ValidationError", fmt.Sprintf("1 validation error detected: Value '%s' at 'roleName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]+ and have length 1 to 64", name))
		return
	}
	// existing is the created role of the name, or nil once it answered why there is none: a
	// template's role (which the local run does not change), or no role.
	existing := func() *createdRole {
		if r := a.createdByName(name); r != nil {
			return r
		}
		if a.templateRoleARN(name) != "" {
			queryError(w, http.StatusBadRequest, "InvalidAction", fmt.Sprintf("the local IAM API answers for the roles made through it, not the templates' role %s (change a template and deploy it instead)", name))
		} else {
			queryError(w, http.StatusNotFound, "NoSuchEntity", fmt.Sprintf("The role with name %s cannot be found.", name))
		}
		return nil
	}
	switch form.Get("Action") {
	case "CreateRole":
		path := cmp.Or(form.Get("Path"), "/")
		if len(path) > 512 || !iamPathRe.MatchString(path) {
			queryError(w, http.StatusBadRequest, "ValidationError", fmt.Sprintf("The specified value for path is invalid: %q", path))
			return
		}
		trust, err := policyStatements(form.Get("AssumeRolePolicyDocument"))
		if err != nil {
			queryError(w, http.StatusBadRequest, "MalformedPolicyDocument", "AssumeRolePolicyDocument: "+err.Error())
			return
		}
		exists := func() {
			queryError(w, http.StatusConflict, "EntityAlreadyExists", fmt.Sprintf("Role with name %s already exists.", name))
		}
		if a.templateRoleARN(name) != "" {
			exists()
			return
		}
		r := &createdRole{Name: name, Path: path, ARN: a.iamRoleARN(path, name), TrustJSON: form.Get("AssumeRolePolicyDocument"),
			ID: "AROA" + strings.ToUpper(emulate.NewID())[:17], Created: time.Now().UTC(), // NewID: 32 hex digits
			trust: trust, policies: map[string][]statement{}}
		for i := range r.trust {
			if len(r.trust[i].Resource) == 0 {
				r.trust[i].Resource = stringList{r.ARN} // a trust policy is the role's own
			}
		}
		a.mu.Lock()
		for _, c := range a.created { // checked and taken under one lock: two creates race for a name
			if strings.EqualFold(c.Name, name) {
				a.mu.Unlock()
				exists()
				return
			}
		}
		if a.created == nil {
			a.created = map[string]*createdRole{}
		}
		a.created[r.ARN] = r
		a.mu.Unlock()
		writeRole(w, "CreateRole", r)
	case "GetRole":
		r := existing()
		if r == nil {
			return
		}
		writeRole(w, "GetRole", r)
	case "PutRolePolicy":
		policy := form.Get("PolicyName")
		if !iamPolicyNameRe.MatchString(policy) {
			queryError(w, http.StatusBadRequest, "ValidationError", fmt.Sprintf("The specified value for policyName is invalid: %q", policy))
			return
		}
		doc, err := policyStatements(form.Get("PolicyDocument"))
		if err != nil {
			queryError(w, http.StatusBadRequest, "MalformedPolicyDocument", "PolicyDocument: "+err.Error())
			return
		}
		r := existing()
		if r == nil {
			return
		}
		a.mu.Lock()
		r.policies[policy] = doc
		delete(a.policies, r.ARN) // resolved again on the next request (roleStatements)
		a.mu.Unlock()
		writeXML(w, http.StatusOK, iamResponse{XMLName: xml.Name{Local: "PutRolePolicyResponse"}, NS: iamNS, Request: uuid()})
	case "DeleteRole":
		r := existing()
		if r == nil {
			return
		}
		a.mu.Lock()
		if len(r.policies) > 0 {
			a.mu.Unlock()
			queryError(w, http.StatusConflict, "DeleteConflict", "Cannot delete entity, must delete policies first.")
			return
		}
		delete(a.created, r.ARN)
		delete(a.policies, r.ARN)
		delete(a.trust, r.ARN)
		a.mu.Unlock()
		writeXML(w, http.StatusOK, iamResponse{XMLName: xml.Name{Local: "DeleteRoleResponse"}, NS: iamNS, Request: uuid()})
	}
}

const iamNS = "https://iam.amazonaws.com/doc/2010-05-08/"

type iamResponse struct {
	XMLName xml.Name
	NS      string `xml:"xmlns,attr"`
	Request string `xml:"ResponseMetadata>RequestId"`
}

// writeRole answers CreateRole or GetRole with the role, its trust policy URL-encoded as IAM
// returns it.
func writeRole(w http.ResponseWriter, action string, r *createdRole) {
	type role struct {
		Path                     string
		RoleName                 string
		RoleID                   string `xml:"RoleId"`
		Arn                      string
		CreateDate               string
		AssumeRolePolicyDocument string
	}
	type result struct {
		XMLName xml.Name // <action>Result
		Role    role
	}
	writeXML(w, http.StatusOK, struct {
		XMLName xml.Name
		NS      string `xml:"xmlns,attr"`
		Result  result
		Request string `xml:"ResponseMetadata>RequestId"`
	}{XMLName: xml.Name{Local: action + "Response"}, NS: iamNS,
		Result:  result{XMLName: xml.Name{Local: action + "Result"}, Role: role{r.Path, r.Name, r.ID, r.ARN, r.Created.Format(time.RFC3339), url.QueryEscape(r.TrustJSON)}},
		Request: uuid()})
}

// policyStatements parses a policy document: its Statement, one or a list.
func policyStatements(doc string) ([]statement, error) {
	var d struct {
		Statement json.RawMessage
	}
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return nil, fmt.Errorf("not a JSON policy document: %v", err)
	}
	var many []statement
	if err := json.Unmarshal(d.Statement, &many); err != nil {
		var one statement
		if err := json.Unmarshal(d.Statement, &one); err != nil {
			return nil, fmt.Errorf("its Statement is neither a statement nor a list of them: %v", err)
		}
		many = []statement{one}
	}
	if len(many) == 0 {
		return nil, fmt.Errorf("it has no statement")
	}
	return many, nil
}
