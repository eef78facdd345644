package pipeline

import (
	"encoding/json"
	"strings"
)

// FailureOf reads an execution's error and cause as an operator needs them: the error type and
// its message. When a Lambda task fails the execution, Step Functions records the function's
// error name as the error and the function's JSON error response as the cause:
// {"errorMessage":"…","errorType":"ValidationError"} (aws-lambda-go adds "stackTrace" after a
// panic). https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html
// https://docs.aws.amazon.com/lambda/latest/dg/golang-exceptions.html
//
// When a startExecution.sync task's child execution fails, the task fails with States.TaskFailed
// and its cause is the child's description as JSON, whose "Error" and "Cause" are the child's own
// error and cause (a file execution fails so when its segment execution's Register fails). That
// description is read down to the Lambda error inside it.
// https://docs.aws.amazon.com/step-functions/latest/dg/connect-stepfunctions.html
//
// Any other cause (a Fail state's text, a timeout, JSON of another shape) is the message as it
// stands.
func FailureOf(errName, cause string) (errType, message string) {
	if !strings.HasPrefix(strings.TrimSpace(cause), "{") {
		return errName, cause
	}
	var resp struct {
		ErrorType    *string `json:"errorType"`
		ErrorMessage *string `json:"errorMessage"`
		// A child execution's description (startExecution.sync).
		Error *string `json:"Error"`
		Cause *string `json:"Cause"`
	}
	if json.Unmarshal([]byte(cause), &resp) != nil {
		return errName, cause
	}
	switch {
	case resp.ErrorType != nil || resp.ErrorMessage != nil:
		errType, message = errName, cause
		if resp.ErrorType != nil && *resp.ErrorType != "" {
			errType = *resp.ErrorType
		}
		if resp.ErrorMessage != nil {
			message = *resp.ErrorMessage
		}
		return errType, message
	case resp.Error != nil && *resp.Error != "":
		childCause := ""
		if resp.Cause != nil {
			childCause = *resp.Cause
		}
		return FailureOf(*resp.Error, childCause)
	}
	return errName, cause
}
