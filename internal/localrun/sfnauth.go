package localrun

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// guardSFN refuses a Step Functions request of a session (a function's, an operator's, the
// outsider's) that its role's policies do not allow, as tenantAuth.decide judges it, with Step
// Functions' AccessDeniedException (HTTP 400). Each action is judged on the resource the service
// authorization reference gives it: the state machine for StartExecution, StartSyncExecution,
// ListExecutions and DescribeStateMachine, the execution for the calls that name one, "*" for the
// rest. https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsstepfunctions.html
// https://docs.aws.amazon.com/step-functions/latest/apireference/CommonErrors.html
//
// With a customer-managed key on the state machine, Step Functions uses the key in the caller's
// name, with the encryption context aws:states:stateMachineArn: kms:GenerateDataKey to start or
// redrive an execution, kms:Decrypt to read one (DescribeExecution, GetExecutionHistory).
// https://docs.aws.amazon.com/step-functions/latest/dg/encryption-at-rest.html
func (a *tenantAuth) guardSFN(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s, ok := a.session(req)
		if !ok {
			next.ServeHTTP(w, req)
			return
		}
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		op := req.Header.Get("X-Amz-Target")
		op = op[strings.LastIndex(op, ".")+1:]
		resource, stateMachine := sfnResource(op, body)
		keys := map[string]string{"aws:SecureTransport": fmt.Sprint(secureTransport(req))}
		allowed, why := a.decide(s, "states:"+op, resource, keys)
		if kmsAction := sfnKMSActions[op]; allowed && kmsAction != "" && stateMachine != "" {
			if key := a.stateMachineKMS(stateMachine); key != "" {
				allowed, why = a.kmsAllowed(s, kmsAction, key, "states", map[string]string{"aws:states:stateMachineArn": stateMachine}, secureTransport(req))
			}
		}
		if !allowed {
			a.refuse()
			a.say("Step Functions %s %s: AccessDeniedException: %s", op, resource, why)
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.Header().Set("X-Amzn-ErrorType", "AccessDeniedException")
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"__type": "AccessDeniedException",
				"message": fmt.Sprintf("User: %s is not authorized to perform: states:%s on resource: %s", s.role, op, resource)})
			return
		}
		next.ServeHTTP(w, req)
	})
}

// sfnKMSActions are the KMS calls Step Functions makes in the caller's name on an encrypted state
// machine's executions.
var sfnKMSActions = map[string]string{
	"StartExecution": "kms:GenerateDataKey", "StartSyncExecution": "kms:GenerateDataKey", "RedriveExecution": "kms:GenerateDataKey",
	"DescribeExecution": "kms:Decrypt", "GetExecutionHistory": "kms:Decrypt",
}

// sfnResource is the resource a Step Functions request is judged on, and the ARN of the state
// machine it concerns ("" for none): an execution's state machine is named in its ARN,
// arn:aws:states:<region>:<account>:execution:<state machine>:<execution>.
func sfnResource(op string, body []byte) (resource, stateMachine string) {
	var in struct{ StateMachineArn, ExecutionArn string }
	json.Unmarshal(body, &in)
	switch {
	case in.StateMachineArn != "":
		return in.StateMachineArn, in.StateMachineArn
	case in.ExecutionArn != "":
		parts := strings.Split(in.ExecutionArn, ":")
		if len(parts) >= 8 && parts[5] == "execution" {
			return in.ExecutionArn, strings.Join(append(parts[:5:5], "stateMachine", parts[6]), ":")
		}
		return in.ExecutionArn, ""
	}
	return "*", ""
}

// stateMachineKMS is the customer-managed key of the state machine whose ARN is arn (its
// EncryptionConfiguration), "" for none.
func (a *tenantAuth) stateMachineKMS(arn string) string {
	return a.storeKey(arn, func() string { return a.findStateMachineKMS(arn) })
}

// findStateMachineKMS reads stateMachineKMS's answer from the templates.
func (a *tenantAuth) findStateMachineKMS(arn string) string {
	for _, m := range a.asm.OfType("AWS::StepFunctions::StateMachine") {
		if ref, err := a.res.ResolveString(m.Stack, json.RawMessage(fmt.Sprintf(`{"Ref":%q}`, m.LogicalID))); err != nil || ref != arn {
			continue
		}
		var enc struct{ Type, KmsKeyId string }
		a.asm.Prop(a.res, m, "EncryptionConfiguration", &enc)
		if enc.Type == "CUSTOMER_MANAGED_KMS_KEY" && strings.HasPrefix(enc.KmsKeyId, "arn:aws:kms:") {
			return enc.KmsKeyId
		}
	}
	return ""
}
