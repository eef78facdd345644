package ops

import (
	"encoding/json"
	"strings"
)

// failureOf reads an execution's error and cause as an operator needs them: the error type and
// its message. When a Lambda task fails the execution, Step Functions records the function's
// error name as the error and the function's JSON error response as the cause:
// {"errorMessage":"…","errorType":"ValidationError"} (aws-lambda-go adds "stackTrace" after a
// panic). https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html
// https://docs.aws.amazon.com/lambda/latest/dg/golang-exceptions.html
// Any other cause (a Fail state's text, a timeout) is the message as it stands.
func failureOf(errName, cause string) (errType, message string) {
	var resp struct {
		ErrorType    *string `json:"errorType"`
		ErrorMessage *string `json:"errorMessage"`
	}
	if strings.HasPrefix(strings.TrimSpace(cause), "{") && json.Unmarshal([]byte(cause), &resp) == nil &&
		(resp.ErrorType != nil || resp.ErrorMessage != nil) {
		errType, message = errName, cause
		if resp.ErrorType != nil && *resp.ErrorType != "" {
			errType = *resp.ErrorType
		}
		if resp.ErrorMessage != nil {
			message = *resp.ErrorMessage
		}
		return errType, message
	}
	return errName, cause
}
