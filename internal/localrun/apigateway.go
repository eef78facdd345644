package localrun

// EventBridge's API Gateway targets: a rule that posts its events to a REST API method whose
// integration sends them to an SQS queue (the per-tenant intake of a pool). The local cloud
// delivers as the services do: EventBridge signs the request with the target's role, which the
// method's AWS_IAM authorization and the API's resource policy judge (execute-api:Invoke); API
// Gateway renders the integration's request template for the body's content type (Velocity, by
// the local renderer, emulate.MappingRenderer) and calls SQS with its credentials role, which the
// role's policies, the queue's policy and the queue's key judge; the integration response whose
// selection pattern matches SQS's status is what EventBridge sees, and EventBridge retries a 429
// or 5xx and gives up on any other error.
// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-api-gateway-target.html
// https://docs.aws.amazon.com/apigateway/latest/developerguide/integration-passthrough-behaviors.html
// https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-integration-settings-integration-response.html

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// apiTarget is a rule's API Gateway target: the method its execute-api ARN names, the role
// EventBridge signs with, and the queue the method's integration sends to.
type apiTarget struct {
	arn, role string
	method    deploy.APIMethod
	queue     *Queue
}

// apiTargetOf reads the method of an API Gateway target and starts the template renderer.
func (c *Cloud) apiTargetOf(arn, role string) (*apiTarget, error) {
	m, err := c.asm.ReadAPIMethod(c.res, arn)
	if err != nil {
		return nil, err
	}
	if m.Authorization != "AWS_IAM" {
		return nil, fmt.Errorf("%s: the local run delivers to methods of AWS_IAM authorization, not %q", arn, m.Authorization)
	}
	q := c.queues[fmt.Sprintf("arn:aws:sqs:%s:%s:%s", c.res.Region, c.res.Account, m.QueueName)]
	if q == nil {
		return nil, fmt.Errorf("%s: its integration sends to %s, which is not a queue of the templates", arn, m.QueueName)
	}
	if c.mapping == nil {
		r, stop, err := emulate.StartMappingRenderer(c.ctx, c.node, c.moduleRoot, c.logs)
		if err != nil {
			return nil, err
		}
		c.mapping = r
		c.stops = append(c.stops, stop)
	}
	return &apiTarget{arn: arn, role: role, method: m, queue: q}, nil
}

// deliverToAPI posts body to the rule's API target as EventBridge does, retrying a 429 or 5xx a
// few times (EventBridge retries for up to 24 hours); any other answer ends the delivery.
func (c *Cloud) deliverToAPI(ctx context.Context, rl rule, body []byte, late bool) {
	for attempt := 0; ; attempt++ {
		status, why := c.invokeAPI(ctx, rl.api, body, late)
		switch {
		case status/100 == 2:
			return
		case (status == http.StatusTooManyRequests || status/100 == 5) && attempt < 4:
			time.Sleep(200 * time.Millisecond)
			continue
		}
		fmt.Fprintf(c.logs, "eventbridge: rule %s to %s: %d: %s; the event is not delivered\n", rl.name, rl.api.arn, status, why)
		return
	}
}

// invokeAPI is one request of EventBridge to the target: the status API Gateway answers, and why
// when it is not a success.
func (c *Cloud) invokeAPI(ctx context.Context, t *apiTarget, body []byte, late bool) (int, string) {
	m := t.method
	if ok, why := c.auth.apiMayInvoke(t.role, t.arn); !ok {
		c.auth.refuse()
		c.auth.say("API Gateway %s: AccessDeniedException: %s", t.arn, why)
		return http.StatusForbidden, why
	}
	// A request past its authorization is one billed API call
	// (https://aws.amazon.com/api-gateway/pricing/: no charge for failed authorizations), metered
	// on the key of the object the event is about, so that a figure finds its tenant.
	c.Counter.Add("apigateway", m.HTTPMethod+" "+m.Path)
	c.Meter.Add(emulate.ClassAPIGateway, eventObjectKey(body), 1)
	// EventBridge posts the event as JSON; API Gateway picks the template of the content type.
	const contentType = "application/json; charset=utf-8"
	mediaType, _, _ := mime.ParseMediaType(contentType)
	template, ok := m.RequestTemplates[mediaType]
	if !ok && (m.PassthroughBehavior == "NEVER" || (m.PassthroughBehavior == "WHEN_NO_TEMPLATES" && len(m.RequestTemplates) > 0)) {
		return http.StatusUnsupportedMediaType, "no request template for " + mediaType
	}
	form := string(body)
	if ok {
		var err error
		form, err = c.mapping.Render(ctx, template, emulate.MappingRequest{
			Body:   string(body),
			Header: map[string]string{"Content-Type": contentType},
			Context: map[string]any{"requestId": emulate.NewID(), "stage": m.Stage, "httpMethod": m.HTTPMethod, "resourcePath": m.Path, "apiId": m.APIID,
				"identity": map[string]any{"userArn": t.role, "accountId": c.res.Account}},
		})
		if err != nil {
			return http.StatusInternalServerError, err.Error()
		}
	}
	status, why := c.sendFromAPI(ctx, t, form, late)
	return c.integrationResponse(m, status, why)
}

// sendFromAPI performs the SQS call of the integration's form body with its credentials role and
// returns SQS's HTTP status, with why for an error.
func (c *Cloud) sendFromAPI(ctx context.Context, t *apiTarget, form string, late bool) (int, string) {
	v, err := url.ParseQuery(form)
	if err != nil || v.Get("Action") != "SendMessage" {
		return http.StatusBadRequest, fmt.Sprintf("the local run's SQS integrations take Action=SendMessage, not %q", form)
	}
	if ok, why := c.auth.integrationMaySend(t.method.Credentials, t.queue); !ok {
		c.auth.refuse()
		c.auth.say("API Gateway %s to SQS %s: AccessDenied: %s", t.arn, t.queue.Name, why)
		return http.StatusForbidden, why
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(t.queue.URL), MessageBody: aws.String(v.Get("MessageBody"))}
	if g := v.Get("MessageGroupId"); g != "" {
		in.MessageGroupId = aws.String(g)
	}
	if d := v.Get("MessageDeduplicationId"); d != "" {
		in.MessageDeduplicationId = aws.String(d)
	}
	if late {
		in.MessageDeduplicationId = aws.String(emulate.NewID()) // a copy after the deduplication interval
	}
	if _, err := c.sqs.SendMessage(ctx, in); err != nil {
		var re *awshttp.ResponseError
		if errors.As(err, &re) {
			return re.HTTPStatusCode(), err.Error()
		}
		return http.StatusInternalServerError, err.Error()
	}
	return http.StatusOK, ""
}

// integrationResponse maps the integration's status to the method's: the response whose selection
// pattern (a regular expression on the status) matches it, else the default one.
func (c *Cloud) integrationResponse(m deploy.APIMethod, status int, why string) (int, string) {
	answer := fmt.Sprint(status)
	for pattern, code := range m.Responses {
		if pattern == "" {
			continue
		}
		if re, err := regexp.Compile("^(?:" + pattern + ")$"); err == nil && re.MatchString(answer) {
			return atoiOr(code, http.StatusInternalServerError), why
		}
	}
	if code, ok := m.Responses[""]; ok {
		return atoiOr(code, http.StatusInternalServerError), why
	}
	return status, why
}

func atoiOr(s string, or int) int {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		return or
	}
	return n
}

// apiMayInvoke judges EventBridge's request, signed with the target's role, on the method's
// execute-api ARN: the role's policies and the API's resource policy.
func (a *tenantAuth) apiMayInvoke(role, arn string) (bool, string) {
	if role == "" {
		return false, "the target has no role to sign the request with"
	}
	return a.decide(tenantSession{role: role, name: "events"}, "execute-api:Invoke", arn, map[string]string{"aws:SecureTransport": "true"})
}

// integrationMaySend judges the integration's SendMessage with its credentials role: the role's
// policies, the queue's policy and, with a customer-managed key, kms:GenerateDataKey on it.
func (a *tenantAuth) integrationMaySend(role string, q *Queue) (bool, string) {
	if role == "" {
		return false, "the integration has no credentials role"
	}
	s := tenantSession{role: role, name: "apigateway"}
	if ok, why := a.decide(s, "sqs:SendMessage", q.ARN, map[string]string{"aws:SecureTransport": "true"}); !ok {
		return false, why
	}
	if key := a.queueKMS(q.Name); key != "" {
		return a.kmsAllowed(s, "kms:GenerateDataKey", key, "sqs", map[string]string{"aws:sqs:arn": q.ARN}, true)
	}
	return true, ""
}

// eventObjectKey is the object key an S3 event (detail.object.key) names; "" for another event.
func eventObjectKey(body []byte) string {
	var ev struct {
		Detail struct {
			Object struct {
				Key string `json:"key"`
			} `json:"object"`
		} `json:"detail"`
	}
	if json.Unmarshal(body, &ev) != nil {
		return ""
	}
	return ev.Detail.Object.Key
}
