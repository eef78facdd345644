package localrun

// The cloud as deploy.Apply's account: one method per resource type of the templates, each
// creating the resource in its emulated service. Apply orders them and resolves their properties;
// the functions are created in functions.go, the tables in dynamodb.go.

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/johannesboyne/gofakes3"
)

var _ deploy.Account = (*Cloud)(nil)

// CreateBucket creates a bucket in the S3 emulator, versioned if the template says so.
func (c *Cloud) CreateBucket(_ context.Context, _ *deploy.Resource, b deploy.Bucket) error {
	if err := c.S3.Backend.CreateBucket(b.Name); err != nil {
		return err
	}
	if b.Versioned {
		c.S3.Backend.SetVersioningConfiguration(b.Name, gofakes3.VersioningConfiguration{Status: gofakes3.VersioningEnabled})
	}
	c.buckets = append(c.buckets, b.Name)
	return nil
}

// CreateQueue creates a queue in fauxqs with the template's attributes.
func (c *Cloud) CreateQueue(ctx context.Context, _ *deploy.Resource, q deploy.Queue) (string, error) {
	out, err := c.sqsAdmin.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(q.Name), Attributes: q.Attributes})
	if err != nil {
		return "", err
	}
	vis, _ := strconv.Atoi(cmp.Or(q.Attributes["VisibilityTimeout"], "30"))
	queue := &Queue{Name: q.Name, URL: aws.ToString(out.QueueUrl), ARN: q.ARN, VisibilityTimeout: vis}
	c.queues[queue.ARN] = queue
	return queue.URL, nil
}

// CreateStateMachine creates a state machine on the Step Functions server, which judges its
// definition as Step Functions does, and keeps the definition for the report.
func (c *Cloud) CreateStateMachine(ctx context.Context, _ *deploy.Resource, m deploy.StateMachine) error {
	c.definitions[m.ARN] = m.Definition
	_, err := c.sfn.CreateStateMachine(ctx, &sfn.CreateStateMachineInput{Name: aws.String(m.Name), Definition: aws.String(m.Definition),
		RoleArn: aws.String(cmp.Or(m.RoleArn, "arn:aws:iam::"+emulate.Account+":role/local"))})
	return err
}

// PutRule routes by an EventBridge rule: a scheduled rule's targets are invoked on its schedule
// (schedules.go); a pattern's targets are a queue (with the target's message group) or a function
// (invoked asynchronously), which events.go routes to.
func (c *Cloud) PutRule(_ context.Context, rr *deploy.Resource, spec deploy.Rule) error {
	if spec.Schedule != "" {
		return c.scheduleRule(rr.LogicalID, spec)
	}
	p, err := emulate.ParsePattern(spec.Pattern)
	if err != nil {
		return err
	}
	for _, t := range spec.Targets {
		if f := c.Lambda.Lookup(t.Arn); f != nil {
			c.rules = append(c.rules, rule{name: rr.LogicalID, pattern: p, fn: f})
			continue
		}
		if strings.HasPrefix(t.Arn, "arn:aws:execute-api:") {
			api, err := c.apiTargetOf(t.Arn, t.RoleArn)
			if err != nil {
				return err
			}
			c.rules = append(c.rules, rule{name: rr.LogicalID, arn: spec.ARN, pattern: p, api: api})
			continue
		}
		if c.queues[t.Arn] == nil {
			return fmt.Errorf("target %s is neither a queue, a function nor an API method of the templates", t.Arn)
		}
		c.rules = append(c.rules, rule{name: rr.LogicalID, arn: spec.ARN, pattern: p, queueARN: t.Arn, groupID: t.MessageGroupID})
	}
	return nil
}

// CreateEventSourceMapping starts the pollers of a mapping of a queue to a function (esm.go); its
// Enabled is then the Lambda API's to change (pipectl pause/resume), and a disabled mapping does
// not poll. The harness is told first, for the tenants a controller's mapping serves.
func (c *Cloud) CreateEventSourceMapping(_ context.Context, m *deploy.Resource, props deploy.Mapping) (string, error) {
	q := c.queues[props.EventSourceArn]
	if q == nil {
		return "", fmt.Errorf("event source %s is not a queue of the templates", props.EventSourceArn)
	}
	f := c.Lambda.Lookup(props.FunctionName)
	if f == nil {
		return "", fmt.Errorf("function %s not found", props.FunctionName)
	}
	if n := props.MaximumConcurrency; n != 0 && (n < minMaximumConcurrency || n > maxMaximumConcurrency) {
		return "", fmt.Errorf("ScalingConfig.MaximumConcurrency %d: Lambda accepts %d to %d", n, minMaximumConcurrency, maxMaximumConcurrency)
	}
	if c.watch != nil {
		if err := c.watch.mappingCreated(m.Stack.Name, f, q); err != nil {
			return "", err
		}
	}
	mp := &mapping{cloud: c, queue: q, fn: f, batch: min(props.BatchSize, 10), reportFailures: props.ReportBatchItemFailures,
		scale: mappingScale(f.Concurrency, props.MaximumConcurrency)}
	state := newESM(uuidFor(m.Stack.Name+"/"+m.LogicalID), f.ARN, q.ARN, props.BatchSize, props.Enabled)
	c.addMapping(c.ctx, mp, state)
	return state.UUID, nil
}
