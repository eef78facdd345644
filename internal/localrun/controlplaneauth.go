package localrun

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/smithy-go/encoding/cbor"
)

// guardControlPlane refuses an operator's control-plane request by a session (an operator's role,
// a pool's uploader, the outsider) that its role's policies do not allow, as the data plane's
// guards refuse theirs: each operation is judged by the action and resource type the Service
// Authorization Reference lists for it.
//   - CloudFormation DescribeStacks: cloudformation:DescribeStacks on the named stack's ARN, or
//     "*" when the request names none.
//     https://docs.aws.amazon.com/service-authorization/latest/reference/list_awscloudformation.html
//   - Lambda ListEventSourceMappings on "*" (it has no resource type), GetEventSourceMapping and
//     UpdateEventSourceMapping on the mapping's ARN, GetFunction on the function's ARN; refused
//     with AccessDeniedException (403), as Invoke is (guardLambda).
//     https://docs.aws.amazon.com/service-authorization/latest/reference/list_awslambda.html
//   - CloudWatch GetInsightRuleReport on the rule's ARN (insight-rule/<name>).
//     https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatch.html
//
// CloudFormation and CloudWatch are refused with AccessDenied (403), the code those services
// answer an IAM refusal with; their API references list only the generic AccessDeniedException
// among the common errors, so a client should take either (pipectl takes any error as a failure).
//
// STS GetCallerIdentity needs no permission
// (https://docs.aws.amazon.com/STS/latest/APIReference/API_GetCallerIdentity.html), AssumeRole is
// judged by the role's trust policy (tenantauth.go), Invoke by guardLambda, and the code location
// GetFunction returns is a presigned URL that takes no credentials: they pass. A request signed
// with the run's own key passes, as everywhere. Any other Lambda event source mapping or
// CloudWatch request of a session fails closed, naming what the local run does not judge.
func (a *tenantAuth) guardControlPlane(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s, ok := a.session(req)
		if !ok {
			next.ServeHTTP(w, req)
			return
		}
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		cp := a.controlPlaneRequest(req, body)
		if cp.action == "" {
			next.ServeHTTP(w, req)
			return
		}
		if cp.op == "" {
			a.refuse()
			cp.refuse(w, http.StatusBadRequest, "InvalidAction", fmt.Sprintf("the local run does not judge %s %s for a session of %s", req.Method, req.URL.Path, s.role))
			return
		}
		keys := map[string]string{"aws:SecureTransport": fmt.Sprint(secureTransport(req))}
		if allowed, why := a.decide(s, cp.action, cp.resource, keys); !allowed {
			a.refuse()
			a.say("%s %s: %s", cp.op, cp.resource, why)
			cp.refuse(w, http.StatusForbidden, "", fmt.Sprintf("User: %s is not authorized to perform: %s on resource: %s", s.assumedRoleARN(), cp.action, cp.resource))
			return
		}
		next.ServeHTTP(w, req)
	})
}

// controlPlaneCall is a session's control-plane request as guardControlPlane judges it: its
// operation, the action and resource that authorize it, and how its service answers a refusal
// (code "" is the service's access-denied error). An action "" passes unjudged; an op "" with
// an action is a request the local run does not judge.
type controlPlaneCall struct {
	op, action, resource string
	refuse               func(w http.ResponseWriter, status int, code, msg string)
}

func (a *tenantAuth) controlPlaneRequest(req *http.Request, body []byte) controlPlaneCall {
	region, account := a.res.Region, a.res.Account
	lambdaRefusal := func(w http.ResponseWriter, status int, code, msg string) {
		code = cmp.Or(code, "AccessDeniedException")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-ErrorType", code)
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"Type": "User", "message": msg})
	}
	path := req.URL.Path
	switch {
	case strings.HasPrefix(path, "/2015-03-31/event-source-mappings"):
		c := controlPlaneCall{action: "lambda:UnsupportedEventSourceMappingRequest", refuse: lambdaRefusal}
		id := strings.Trim(strings.TrimPrefix(path, "/2015-03-31/event-source-mappings"), "/")
		arn := fmt.Sprintf("arn:aws:lambda:%s:%s:event-source-mapping:%s", region, account, id)
		switch {
		case req.Method == http.MethodGet && id == "":
			c.op, c.action, c.resource = "ListEventSourceMappings", "lambda:ListEventSourceMappings", "*"
		case req.Method == http.MethodGet:
			c.op, c.action, c.resource = "GetEventSourceMapping", "lambda:GetEventSourceMapping", arn
		case req.Method == http.MethodPut && id != "":
			c.op, c.action, c.resource = "UpdateEventSourceMapping", "lambda:UpdateEventSourceMapping", arn
		}
		return c
	case strings.HasPrefix(path, codePath):
		return controlPlaneCall{} // the presigned code location
	case strings.HasPrefix(path, cloudWatchPath):
		c := controlPlaneCall{action: "cloudwatch:Unsupported", refuse: func(w http.ResponseWriter, status int, code, msg string) {
			cborError(w, status, cmp.Or(code, "AccessDenied"), msg)
		}}
		if strings.TrimPrefix(path, cloudWatchPath) == "GetInsightRuleReport" {
			v, _ := cbor.Decode(body)
			in, _ := v.(cbor.Map)
			name, _ := in["RuleName"].(cbor.String)
			c.op, c.action, c.resource = "GetInsightRuleReport", "cloudwatch:GetInsightRuleReport", fmt.Sprintf("arn:aws:cloudwatch:%s:%s:insight-rule/%s", region, account, name)
		}
		return c
	case req.Method == http.MethodGet && strings.HasPrefix(path, "/2015-03-31/functions/"):
		name := strings.TrimSuffix(strings.TrimPrefix(path, "/2015-03-31/functions/"), "/")
		if name == "" || strings.Contains(name, "/") {
			return controlPlaneCall{} // not GetFunction: the Lambda API behind answers it
		}
		if u, err := url.PathUnescape(name); err == nil {
			name = u
		}
		arn := lambdaFunctionARN(name, region, account)
		if q := req.URL.Query().Get("Qualifier"); q != "" && strings.Count(arn, ":") == 6 {
			arn += ":" + q
		}
		return controlPlaneCall{op: "GetFunction", action: "lambda:GetFunction", resource: arn, refuse: lambdaRefusal}
	case strings.HasPrefix(path, "/2015-03-31/") || strings.HasPrefix(path, "/2019-09-25/"):
		return controlPlaneCall{} // Invoke, judged by guardLambda
	}
	form, _ := url.ParseQuery(string(body))
	if action := form.Get("Action"); iamActions[action] {
		return controlPlaneCall{op: action, action: "iam:" + action, resource: a.iamResource(form),
			refuse: func(w http.ResponseWriter, status int, code, msg string) {
				queryError(w, status, cmp.Or(code, "AccessDenied"), msg)
			}}
	}
	if form.Get("Action") != "DescribeStacks" {
		return controlPlaneCall{} // GetCallerIdentity needs no permission; AssumeRole is judged by the trust policy
	}
	resource := "*"
	if name := form.Get("StackName"); strings.HasPrefix(name, "arn:") {
		resource = name
	} else if name != "" {
		resource = fmt.Sprintf("arn:aws:cloudformation:%s:%s:stack/%s/%s", region, account, name, uuidFor(name))
	}
	return controlPlaneCall{op: "DescribeStacks", action: "cloudformation:DescribeStacks", resource: resource,
		refuse: func(w http.ResponseWriter, status int, code, msg string) {
			queryError(w, status, cmp.Or(code, "AccessDenied"), msg)
		}}
}
