package localrun

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
)

// guardSQS refuses an SQS request of a session (an uploader's, a pool tenant's, the outsider's)
// that its role's policies and the queue's policy do not allow, as tenantAuth.decide judges it,
// with SQS's AccessDenied: HTTP 403, and in the JSON protocol the query-compatible code in
// x-amzn-query-error, which the SDKs report as the error's code.
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/CommonErrors.html
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-json-faqs.html
// The batch calls are authorized as their single action (sqs:SendMessage for SendMessageBatch).
// https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsqs.html
func (a *tenantAuth) guardSQS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s, ok := a.session(req)
		if !ok {
			next.ServeHTTP(w, req)
			return
		}
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		op, queueURL, queueName := sqsRequest(req, body)
		action := "sqs:" + strings.TrimSuffix(op, "Batch")
		resource := "*"
		if queueURL != "" {
			queueName = queueURL[strings.LastIndex(queueURL, "/")+1:]
		}
		if queueName != "" {
			resource = fmt.Sprintf("arn:aws:sqs:%s:%s:%s", a.res.Region, a.res.Account, queueName)
		}
		keys := map[string]string{"aws:SecureTransport": fmt.Sprint(secureTransport(req))}
		if queueName != "" {
			for k, v := range a.queueTags(queueName) {
				keys["aws:ResourceTag/"+k] = v
			}
			keys[resourceTagsRead] = "true"
		}
		allowed, why := a.decide(s, action, resource, keys)
		if kmsAction := map[string]string{"sqs:SendMessage": "kms:GenerateDataKey", "sqs:ReceiveMessage": "kms:Decrypt"}[action]; allowed && kmsAction != "" && queueName != "" {
			if key := a.queueKMS(queueName); key != "" {
				allowed, why = a.kmsAllowed(s, kmsAction, key, "sqs", map[string]string{"aws:sqs:arn": resource}, secureTransport(req))
			}
		}
		if !allowed {
			a.refuse()
			a.say("SQS %s %s: AccessDenied: %s", op, resource, why)
			message := fmt.Sprintf("User: %s is not authorized to perform: %s on resource: %s", s.role, strings.ToLower(action), resource)
			if strings.Contains(req.Header.Get("Content-Type"), "json") {
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				w.Header().Set("x-amzn-query-error", "AccessDenied;Sender")
				w.WriteHeader(http.StatusForbidden)
				json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazon.coral.service#AccessDeniedException", "message": message})
				return
			}
			queryError(w, http.StatusForbidden, "AccessDenied", message)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// sqsRequest is an SQS request's operation and the queue it names, in the JSON protocol
// (X-Amz-Target: AmazonSQS.<op>) or the query protocol (Action=<op>).
func sqsRequest(req *http.Request, body []byte) (op, queueURL, queueName string) {
	if target := req.Header.Get("X-Amz-Target"); target != "" {
		var in struct{ QueueUrl, QueueName string }
		json.Unmarshal(body, &in)
		return target[strings.LastIndex(target, ".")+1:], in.QueueUrl, in.QueueName
	}
	form, _ := url.ParseQuery(string(body))
	for k, v := range req.URL.Query() {
		form[k] = v
	}
	queueURL = form.Get("QueueUrl")
	if queueURL == "" && strings.Count(req.URL.Path, "/") >= 2 {
		queueURL = req.URL.Path // the query protocol may name the queue by its path
	}
	return form.Get("Action"), queueURL, form.Get("QueueName")
}

// resourceTagsRead marks a request whose resource's tags are its aws:ResourceTag/<key> condition
// keys: a tag the resource lacks is then an absent key. Without the mark (a resource whose tags
// the emulation does not read) a condition on them fails closed.
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-abac-condition-keys.html
const resourceTagsRead = "\x00resourceTags"

// queueTags are the tags of the queue named name, from its AWS::SQS::Queue.
func (a *tenantAuth) queueTags(name string) map[string]string {
	out := map[string]string{}
	if q := a.queue(name); q != nil {
		var tags []struct{ Key, Value string }
		a.asm.Prop(a.res, q, "Tags", &tags)
		for _, t := range tags {
			out[t.Key] = t.Value
		}
	}
	return out
}

// queue is the AWS::SQS::Queue of the queue named name, nil when the templates have none.
func (a *tenantAuth) queue(name string) *deploy.Resource {
	for _, q := range a.asm.OfType("AWS::SQS::Queue") {
		n, err := a.res.ResolveString(q.Stack, json.RawMessage(fmt.Sprintf(`{"Fn::GetAtt":[%q,"QueueName"]}`, q.LogicalID)))
		if err == nil && n == name {
			return q
		}
	}
	return nil
}
