package localrun

import (
	"fmt"
	"strings"
)

// EventBridge delivers a rule's event to a queue in its own name, as the service principal
// events.amazonaws.com, and the local cloud judges that delivery as AWS does: the queue's policy
// must allow the service for the rule (aws:SourceArn, the rule's ARN, and aws:SourceAccount), and
// with a customer-managed key the key's policy must allow it kms:GenerateDataKey for the queue
// (SQS makes the data key under the encryption context aws:sqs:arn). A service principal has no
// identity policy: an explicit Deny that applies refuses, an Allow naming the service allows, and
// anything else refuses.
// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-sqs-permissions
// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-troubleshooting.html#eb-sqs-encrypted
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-sourcearn
//
// A refused delivery is retried as EventBridge retries it, then given up with a "local IAM:" line:
// the file never reaches its queue, as in AWS, where it would reach the rule's dead-letter queue
// only if that queue's policy and key allowed it.

// eventsService is EventBridge's service principal.
const eventsService = "events.amazonaws.com"

// eventBridgeMaySend judges the delivery of rule's event to the queue at queueARN.
func (a *tenantAuth) eventBridgeMaySend(rule, queueARN string) (bool, string) {
	keys := map[string]string{
		"aws:SourceArn":       rule,
		"aws:SourceAccount":   a.res.Account,
		"aws:SecureTransport": "true",
	}
	policy, err := a.resourceStatements(queueARN)
	if err != nil {
		return false, err.Error()
	}
	if ok, why := serviceAllowed(eventsService, "sqs:SendMessage", queueARN, policy, keys, "the queue policy of "+queueARN); !ok {
		return false, why
	}
	name := queueARN[strings.LastIndex(queueARN, ":")+1:]
	key := a.queueKMS(name)
	if key == "" {
		return true, ""
	}
	policy, err = a.resourceStatements(key)
	if err != nil {
		return false, err.Error()
	}
	keys["kms:EncryptionContext:aws:sqs:arn"] = queueARN
	keys["kms:ViaService"] = fmt.Sprintf("sqs.%s.amazonaws.com", a.res.Region)
	return serviceAllowed(eventsService, "kms:GenerateDataKey", key, policy, keys, "the key policy of "+key)
}

// serviceAllowed judges action on resource by a service principal under the resource's policy
// alone (what names the policy in messages).
func serviceAllowed(service, action, resource string, policy []statement, keys map[string]string, what string) (bool, string) {
	allowed := false
	for _, st := range policy {
		names, grants := st.namesService(service)
		if !names {
			continue
		}
		switch m := st.applies(nil, action, resource, keys); {
		case st.Effect == "Deny" && m != noMatch:
			return false, fmt.Sprintf("explicit deny of %s to %s in %s (Sid %q)", action, service, what, st.Sid)
		case st.Effect == "Allow" && m == match && grants:
			allowed = true
		}
	}
	if !allowed && keys["aws:SourceArn"] == "" {
		return false, fmt.Sprintf("%s allows %s no %s", what, service, action)
	}
	if !allowed {
		return false, fmt.Sprintf("%s allows %s no %s (for %s)", what, service, action, keys["aws:SourceArn"])
	}
	return true, ""
}

// namesService is whether a resource policy's statement names the service principal service
// (names), and whether it grants it as itself: "*", {"AWS": "*"}, which IAM takes for every
// principal, or {"Service": service}.
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_principal.html
func (st statement) namesService(service string) (names, grants bool) {
	p, decided, names, grants := st.principals()
	if decided {
		return names, grants
	}
	for _, v := range p["Service"] {
		if v == service {
			return true, true
		}
	}
	for _, v := range p["AWS"] {
		if v == "*" {
			return true, true
		}
	}
	return false, false
}
