package localrun

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The resource policies the local run judges requests by: each bucket's policy
// (AWS::S3::BucketPolicy in the templates), each queue's (AWS::SQS::QueuePolicy) and each KMS
// key's (AWS::KMS::Key's KeyPolicy, kmsauth.go), read with the run's identities of the resources
// they name. A session's request to a bucket is judged by its role's policies and the bucket's
// (tenantAuth.decide), so the bucket's Denies (who writes control/, work/ and results/, who reads
// objects, which encryption, storage class and conditional headers an upload carries) refuse
// locally what they refuse in AWS.
//
// Each function runs with a session of its execution role (Run.roleCredentials), as Lambda runs
// it, so its requests are judged too. The operators' and the harness's key ("local") is no session
// and passes: operators are exempt from the bucket's and the queues' Denies by their ARNs. An
// operator's role named by ARN (operatorArns) can be assumed too (externalRole), and its session
// is judged like any other, so the exemption of its ARN is what lets it through. The outsider role
// stands for everyone else in the account.

// OutsiderRoleName is the name of a role the local STS knows beside the templates' roles: an
// identity of the account that is allowed everything by its own policy and is none of the
// pipeline's roles and no operator, so that only resource policies can refuse it. Assume
// arn:aws:iam::<account>:role/local-outsider (Run.OutsiderRoleARN) to see what the bucket's
// policy refuses to anyone else in the account.
const OutsiderRoleName = "local-outsider"

// outsiderStatements are the outsider role's identity policy: AdministratorAccess's one statement.
// https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AdministratorAccess.html
var outsiderStatements = []statement{{Effect: "Allow", Action: stringList{"*"}, Resource: stringList{"*"}}}

// outsiderRole is the outsider role's ARN in the run's account.
func (a *tenantAuth) outsiderRole() string {
	return fmt.Sprintf("arn:aws:iam::%s:role/%s", a.res.Account, OutsiderRoleName)
}

// externalRole reports whether role, which the templates do not create, is one they name: a role
// of the run's account that a bucket's or queue's policy exempts by its exact ARN (aws:PrincipalArn), as
// the constructs exempt the configured operators (operatorArns). The local STS knows it as it knows
// the outsider: allowed everything by its own policy, so that only the resource policies decide,
// and an operator's session shows the exemption of its ARN at work.
func (a *tenantAuth) externalRole(role string) bool {
	if !strings.HasPrefix(role, fmt.Sprintf("arn:aws:iam::%s:role/", a.res.Account)) || strings.ContainsAny(role, "*?$") {
		return false
	}
	for _, typ := range []string{"AWS::S3::BucketPolicy", "AWS::SQS::QueuePolicy"} {
		for _, p := range a.asm.OfType(typ) {
			doc, err := a.res.Resolve(p.Stack, p.Properties["PolicyDocument"])
			if err != nil {
				continue
			}
			b, _ := json.Marshal(doc)
			var d struct{ Statement []statement }
			if json.Unmarshal(b, &d) != nil {
				continue
			}
			for _, st := range d.Statement {
				for _, conds := range st.Condition {
					if slices.Contains(conds["aws:PrincipalArn"], role) {
						return true
					}
				}
			}
		}
	}
	return false
}

// resourceStatements returns the statements of the resource policy that governs resource: for an
// S3 bucket or object ARN, the bucket's policy; for a queue's ARN, the queue's; for an execute-api
// ARN, its REST API's; for a KMS key's ARN, the key's (none when the templates give it none).
func (a *tenantAuth) resourceStatements(resource string) ([]statement, error) {
	var typ, owner, key string // the policy's type, its property naming what it governs, the cache key
	var governs func(resolved string) bool
	if rest, ok := strings.CutPrefix(resource, "arn:aws:s3:::"); ok {
		bucket, _, _ := strings.Cut(rest, "/")
		typ, owner, key = "AWS::S3::BucketPolicy", "Bucket", bucket
		governs = func(name string) bool { return name == bucket }
	} else if parts := strings.SplitN(resource, ":", 6); len(parts) == 6 && parts[2] == "sqs" {
		// A queue policy names its queues by URL (Ref), whose last part is the queue's name.
		typ, owner, key = "AWS::SQS::QueuePolicy", "Queues", "sqs:"+parts[5]
		governs = func(url string) bool { return url[strings.LastIndex(url, "/")+1:] == parts[5] }
	} else if parts := strings.SplitN(resource, ":", 6); len(parts) == 6 && parts[2] == "execute-api" {
		// A REST API's policy, its Resource "execute-api:/..." short for the API's own ARN
		// (https://docs.aws.amazon.com/apigateway/latest/developerguide/apigateway-resource-policies-create-attach.html).
		apiID, _, _ := strings.Cut(parts[5], "/")
		typ, owner, key = "AWS::ApiGateway::RestApi", "", "execute-api:"+apiID
		governs = func(id string) bool { return id == apiID }
	} else if strings.HasPrefix(resource, "arn:aws:kms:") {
		// A key's policy; its statements' Resource is "*", the key itself.
		typ, owner, key = "AWS::KMS::Key", "", resource
		governs = func(arn string) bool { return arn == resource }
	} else {
		return nil, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if st, ok := a.resourcePolicies[key]; ok {
		return st, nil
	}
	var out []statement
	for _, p := range a.asm.OfType(typ) {
		ownerValue, doc := p.Properties[owner], p.Properties["PolicyDocument"]
		switch typ {
		case "AWS::KMS::Key":
			ownerValue, doc = json.RawMessage(fmt.Sprintf(`{"Fn::GetAtt":[%q,"Arn"]}`, p.LogicalID)), p.Properties["KeyPolicy"]
		case "AWS::ApiGateway::RestApi":
			ownerValue, doc = json.RawMessage(fmt.Sprintf(`{"Ref":%q}`, p.LogicalID)), p.Properties["Policy"]
			if doc == nil {
				continue
			}
		}
		names, err := a.res.Resolve(p.Stack, ownerValue)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %s: %w", typ, p.LogicalID, owner, err) // fail closed
		}
		list, ok := names.([]any)
		if !ok {
			list = []any{names}
		}
		if !slices.ContainsFunc(list, func(n any) bool { return governs(fmt.Sprint(n)) }) {
			continue
		}
		resolved, err := a.res.Resolve(p.Stack, doc)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", typ, p.LogicalID, err)
		}
		b, _ := json.Marshal(resolved)
		if typ == "AWS::ApiGateway::RestApi" {
			arn := strings.Join(strings.SplitN(resource, "/", 2)[:1], "")
			b = []byte(strings.ReplaceAll(string(b), `"execute-api:/`, `"`+arn+`/`))
		}
		var d struct{ Statement []statement }
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("%s %s: %w", typ, p.LogicalID, err)
		}
		out = append(out, d.Statement...)
	}
	if typ == "AWS::KMS::Key" && len(out) == 0 && a.namesKey(resource) {
		out = a.importedKeyPolicy(resource) // an imported key (kmsauth.go)
	}
	if a.resourcePolicies == nil {
		a.resourcePolicies = map[string][]statement{}
	}
	a.resourcePolicies[key] = out
	return out, nil
}

// OutsiderRoleARN is the ARN of the outsider role (OutsiderRoleName) in the run's account: assume
// it from the run's STS, without tags.
func (c *Cloud) OutsiderRoleARN() string {
	return c.auth.outsiderRole()
}
