package localrun

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// guardLambda refuses an Invoke by a session (a function's, an operator's, the outsider's) that
// its role's policies do not allow: lambda:InvokeFunction on the function's ARN, qualified by the
// request's Qualifier when it has one (an Allow on the unqualified ARN does not cover a version or
// an alias), with the Lambda API's AccessDeniedException (HTTP 403). The Step Functions server's
// invokes are the service's own and pass.
// https://docs.aws.amazon.com/lambda/latest/dg/lambda-api-permissions-ref.html
// https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html
func (a *tenantAuth) guardLambda(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s, ok := a.session(req)
		const prefix = "/2015-03-31/functions/"
		if !ok || !strings.HasPrefix(req.URL.Path, prefix) || !strings.HasSuffix(req.URL.Path, "/invocations") {
			next.ServeHTTP(w, req)
			return
		}
		name, _ := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(req.URL.EscapedPath(), prefix), "/invocations"))
		arn := lambdaFunctionARN(name, a.res.Region, a.res.Account)
		if q := req.URL.Query().Get("Qualifier"); q != "" && strings.Count(arn, ":") == 6 {
			arn += ":" + q
		}
		keys := map[string]string{"aws:SecureTransport": fmt.Sprint(secureTransport(req))}
		if allowed, why := a.decide(s, "lambda:InvokeFunction", arn, keys); !allowed {
			a.refuse()
			a.say("Lambda Invoke %s: AccessDeniedException: %s", arn, why)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Amzn-ErrorType", "AccessDeniedException")
			w.WriteHeader(http.StatusForbidden)
			json.NewEncoder(w).Encode(map[string]string{"Type": "User",
				"message": fmt.Sprintf("User: %s is not authorized to perform: lambda:InvokeFunction on resource: %s", s.role, arn)})
			return
		}
		next.ServeHTTP(w, req)
	})
}

// lambdaFunctionARN is the ARN of the function an Invoke names: by its name, its ARN, or its
// partial ARN (<account>:function:<name>), with a qualifier if the ARN carries one.
func lambdaFunctionARN(name, region, account string) string {
	switch {
	case strings.HasPrefix(name, "arn:"):
		return name
	case strings.Contains(name, ":function:"):
		return fmt.Sprintf("arn:aws:lambda:%s:%s", region, name)
	case strings.Contains(name, ":"):
		fn, qualifier, _ := strings.Cut(name, ":")
		return fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s:%s", region, account, fn, qualifier)
	}
	return fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", region, account, name)
}
