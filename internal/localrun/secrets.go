package localrun

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// The local Secrets Manager: GetSecretValue only, the one call the pipeline makes (Register reads a
// tenant's registerAuthSecretArn), served to the functions. A request of a session (a function's,
// or a test's) is judged by its role's policies as secretsmanager:GetSecretValue on the secret's
// ARN, so a pool's Split, whose tenant role holds no secret, is refused as AWS refuses it
// (AccessDeniedException, HTTP 400). Every secret ARN of the Secrets Manager form exists locally,
// its value "local-secret:<name>" (the ARN's name, without the 6-character suffix Secrets Manager
// adds), so that a core system can tell the tenants' secrets apart; a secret named by anything but
// a full ARN is ResourceNotFoundException, as the pipeline names its secrets by ARN (tenants
// validation).
// https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html
// https://docs.aws.amazon.com/secretsmanager/latest/userguide/auth-and-access.html

// secretARN is a Secrets Manager secret ARN; its name is group 1.
var secretARN = regexp.MustCompile(`^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:(.+)-[A-Za-z0-9]{6}$`)

// localSecretValue is the value of a secret in the local run.
func localSecretValue(arn string) string {
	if m := secretARN.FindStringSubmatch(arn); m != nil {
		return "local-secret:" + m[1]
	}
	return ""
}

// serveSecrets is the Secrets Manager endpoint of the functions (AWS_ENDPOINT_URL_SECRETS_MANAGER).
func (c *Cloud) serveSecrets(w http.ResponseWriter, req *http.Request) {
	fail := func(code, message string) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.Header().Set("X-Amzn-ErrorType", code)
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"__type": code, "Message": message})
	}
	if req.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" {
		fail("UnknownOperationException", "only GetSecretValue is served locally")
		return
	}
	var in struct{ SecretId string }
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		fail("InvalidRequestException", "body is not a GetSecretValue request")
		return
	}
	if s, ok := c.auth.session(req); ok {
		if allowed, why := c.auth.decide(s, "secretsmanager:GetSecretValue", in.SecretId,
			map[string]string{"aws:SecureTransport": fmt.Sprint(secureTransport(req))}); !allowed {
			c.auth.refuse()
			c.auth.say("Secrets Manager GetSecretValue %s: AccessDeniedException: %s", in.SecretId, why)
			fail("AccessDeniedException", fmt.Sprintf("User: %s is not authorized to perform: secretsmanager:GetSecretValue on resource: %s", s.role, in.SecretId))
			return
		}
	}
	value := localSecretValue(in.SecretId)
	if value == "" {
		fail("ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
		return
	}
	name := in.SecretId[strings.LastIndex(in.SecretId, ":secret:")+len(":secret:"):]
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	json.NewEncoder(w).Encode(map[string]any{
		"ARN": in.SecretId, "Name": name[:len(name)-7], "SecretString": value, "VersionId": "local",
		"VersionStages": []string{"AWSCURRENT"}, "CreatedDate": float64(c.created.Unix()),
	})
}
