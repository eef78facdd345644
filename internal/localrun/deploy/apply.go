package deploy

// Apply plays CloudFormation's part for a local account: it orders the templates' resources so
// that each is created after what it refers to, gives each its physical name and ARN, resolves its
// properties, and asks the account to create it. The account (localrun's Cloud) only emulates the
// services' APIs.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Account is an AWS account as Apply deploys into it: one call per resource type of the templates,
// named after the API that creates it, each given the template's resource and what Apply read of
// it.
type Account interface {
	CreateBucket(ctx context.Context, r *Resource, b Bucket) error
	// CreateQueue returns the queue's URL, which a Ref to the queue resolves to.
	CreateQueue(ctx context.Context, r *Resource, q Queue) (url string, err error)
	CreateStateMachine(ctx context.Context, r *Resource, m StateMachine) error
	CreateTable(ctx context.Context, r *Resource, t Table) error
	CreateLogGroup(ctx context.Context, r *Resource, g LogGroup) error
	CreateFunction(ctx context.Context, r *Resource, f Function) error
	PutFunctionEventInvokeConfig(ctx context.Context, r *Resource, c InvokeConfig) error
	PutInsightRule(ctx context.Context, r *Resource, ir InsightRule) error
	PutRule(ctx context.Context, r *Resource, rule Rule) error
	// CreateEventSourceMapping returns the mapping's UUID, which a Ref to it resolves to.
	CreateEventSourceMapping(ctx context.Context, r *Resource, m Mapping) (uuid string, err error)
}

// Apply creates every resource of the assembly that the account emulates, in an order in which
// each resource's references resolve: buckets and queues first, then the names of the functions
// and state machines (which definitions and environments name), the state machines, the tables,
// the log groups, the functions and their asynchronous configuration, the Contributor Insights rules, the
// EventBridge rules that target them, and last the event source mappings, which start polling.
// It stops at the first error, naming the resource.
func Apply(ctx context.Context, a *Assembly, res *Resolver, acct Account) error {
	for _, b := range a.OfType("AWS::S3::Bucket") {
		bucket := a.ReadBucket(res, b)
		if err := acct.CreateBucket(ctx, b, bucket); err != nil {
			return fmt.Errorf("bucket %s (%s): %w", bucket.Name, b.LogicalID, err)
		}
		res.Set(b, Identity{Ref: bucket.Name, Attrs: map[string]string{"Arn": "arn:aws:s3:::" + bucket.Name,
			"DomainName": bucket.Name + ".s3.amazonaws.com", "RegionalDomainName": bucket.Name + ".s3." + res.Region + ".amazonaws.com"}})
	}
	for _, q := range a.OfType("AWS::SQS::Queue") {
		queue, err := ReadQueue(res, q)
		if err != nil {
			return err
		}
		queue.ARN = fmt.Sprintf("arn:aws:sqs:%s:%s:%s", res.Region, res.Account, queue.Name)
		url, err := acct.CreateQueue(ctx, q, queue)
		if err != nil {
			return fmt.Errorf("queue %s (%s): %w", queue.Name, q.LogicalID, err)
		}
		res.Set(q, Identity{Ref: url, Attrs: map[string]string{"Arn": queue.ARN, "QueueName": queue.Name, "QueueUrl": url}})
	}
	Name(a, res)
	for _, m := range a.OfType("AWS::StepFunctions::StateMachine") {
		sm, err := a.ReadStateMachine(res, m)
		if err != nil {
			return err
		}
		if err := acct.CreateStateMachine(ctx, m, sm); err != nil {
			return fmt.Errorf("state machine %s: %w", m.LogicalID, err)
		}
	}
	for _, tr := range a.OfType("AWS::DynamoDB::Table") {
		t, err := a.ReadTable(res, tr)
		if err != nil {
			return err
		}
		if err := acct.CreateTable(ctx, tr, t); err != nil {
			return fmt.Errorf("table %s (%s): %w", t.Name, tr.LogicalID, err)
		}
		arn := fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s", res.Region, res.Account, t.Name)
		res.Set(tr, Identity{Ref: t.Name, Attrs: map[string]string{"Arn": arn, "StreamArn": arn + "/stream/local"}})
	}
	for _, lr := range a.OfType("AWS::Logs::LogGroup") {
		g, err := a.ReadLogGroup(res, lr)
		if err != nil {
			return err
		}
		if err := acct.CreateLogGroup(ctx, lr, g); err != nil {
			return fmt.Errorf("log group %s (%s): %w", g.Name, lr.LogicalID, err)
		}
	}
	for _, fr := range a.OfType("AWS::Lambda::Function") {
		f, err := a.ReadFunction(res, fr)
		if err != nil {
			return err
		}
		if err := acct.CreateFunction(ctx, fr, f); err != nil {
			return err
		}
	}
	for _, c := range a.OfType("AWS::Lambda::EventInvokeConfig") {
		ic, err := ReadInvokeConfig(res, c)
		if err != nil {
			return err
		}
		if err := acct.PutFunctionEventInvokeConfig(ctx, c, ic); err != nil {
			return fmt.Errorf("event invoke config %s: %w", c.LogicalID, err)
		}
	}
	for _, ir := range a.OfType("AWS::CloudWatch::InsightRule") {
		var rule InsightRule
		if err := a.Prop(res, ir, "RuleName", &rule.Name); err != nil {
			return err
		}
		if err := a.Prop(res, ir, "RuleBody", &rule.Body); err != nil {
			return err
		}
		if err := acct.PutInsightRule(ctx, ir, rule); err != nil {
			return fmt.Errorf("insight rule %s: %w", ir.LogicalID, err)
		}
	}
	for _, rr := range a.OfType("AWS::Events::Rule") {
		rule, err := a.ReadRule(res, rr)
		if err != nil {
			return err
		}
		if rule.ARN, err = res.ResolveString(rr.Stack, json.RawMessage(fmt.Sprintf(`{"Fn::GetAtt":[%q,"Arn"]}`, rr.LogicalID))); err != nil {
			return fmt.Errorf("rule %s: %w", rr.LogicalID, err)
		}
		if err := acct.PutRule(ctx, rr, rule); err != nil {
			return fmt.Errorf("rule %s: %w", rr.LogicalID, err)
		}
	}
	for _, m := range a.OfType("AWS::Lambda::EventSourceMapping") {
		mp, err := ReadMapping(res, m)
		if err != nil {
			return err
		}
		uuid, err := acct.CreateEventSourceMapping(ctx, m, mp)
		if err != nil {
			return fmt.Errorf("mapping %s: %w", m.LogicalID, err)
		}
		res.Set(m, Identity{Ref: uuid})
	}
	return nil
}

// Name gives every function and state machine its physical name and ARN, as CloudFormation does
// before it creates them: its name property, or PhysicalName's (64 and 80 characters, the
// services' limits).
func Name(a *Assembly, res *Resolver) {
	for _, f := range a.OfType("AWS::Lambda::Function") {
		name := a.NameOf(res, f, "FunctionName", 64)
		res.Set(f, Identity{Ref: name, Attrs: map[string]string{"Arn": fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", res.Region, res.Account, name)}})
	}
	for _, m := range a.OfType("AWS::StepFunctions::StateMachine") {
		name := a.NameOf(res, m, "StateMachineName", 80)
		arn := fmt.Sprintf("arn:aws:states:%s:%s:stateMachine:%s", res.Region, res.Account, name)
		res.Set(m, Identity{Ref: arn, Attrs: map[string]string{"Arn": arn, "Name": name}})
	}
}

// StateMachine is an AWS::StepFunctions::StateMachine as CreateStateMachine takes it.
type StateMachine struct {
	Name, ARN string
	// Definition is the resolved definition, its DefinitionSubstitutions applied.
	Definition string
	RoleArn    string // "" when the template names none
}

// ReadStateMachine reads a state machine's name and ARN (Name must have run) and resolves its
// definition, from DefinitionString or Definition, with its substitutions.
func (a *Assembly) ReadStateMachine(res *Resolver, m *Resource) (StateMachine, error) {
	id, ok := res.Identity(m)
	if !ok {
		return StateMachine{}, fmt.Errorf("state machine %s has no name yet", m.LogicalID)
	}
	sm := StateMachine{Name: id.Attrs["Name"], ARN: id.Ref}
	if raw, ok := m.Properties["DefinitionString"]; ok {
		s, err := res.ResolveString(m.Stack, raw)
		if err != nil {
			return StateMachine{}, fmt.Errorf("%s.DefinitionString: %w", m.LogicalID, err)
		}
		sm.Definition = s
	} else if raw, ok := m.Properties["Definition"]; ok {
		v, err := res.Resolve(m.Stack, raw)
		if err != nil {
			return StateMachine{}, fmt.Errorf("%s.Definition: %w", m.LogicalID, err)
		}
		b, _ := json.Marshal(v)
		sm.Definition = string(b)
	}
	var subs map[string]string
	if err := a.Prop(res, m, "DefinitionSubstitutions", &subs); err != nil {
		return StateMachine{}, err
	}
	for k, v := range subs {
		sm.Definition = strings.ReplaceAll(sm.Definition, "${"+k+"}", v)
	}
	if err := a.Prop(res, m, "RoleArn", &sm.RoleArn); err != nil {
		return StateMachine{}, err
	}
	return sm, nil
}

// Table is an AWS::DynamoDB::Table: its name (PhysicalName's, of at most 255 characters, when the
// template sets none) and key.
type Table struct {
	Name                 string
	KeySchema            []KeyElement
	AttributeDefinitions []AttributeDefinition
}

// KeyElement is one attribute of a table's key: KeyType HASH or RANGE.
type KeyElement struct{ AttributeName, KeyType string }

// AttributeDefinition is a key attribute's type: S, N or B.
type AttributeDefinition struct{ AttributeName, AttributeType string }

// ReadTable reads a table's name and key schema.
func (a *Assembly) ReadTable(res *Resolver, tr *Resource) (Table, error) {
	var t Table
	for k, into := range map[string]any{"TableName": &t.Name, "KeySchema": &t.KeySchema, "AttributeDefinitions": &t.AttributeDefinitions} {
		if err := a.Prop(res, tr, k, into); err != nil {
			return Table{}, err
		}
	}
	if t.Name == "" {
		t.Name = PhysicalName(tr, 255)
	}
	if len(t.KeySchema) == 0 {
		return Table{}, fmt.Errorf("table %s: no KeySchema", tr.LogicalID)
	}
	return t, nil
}

// LogGroup is an AWS::Logs::LogGroup: its name, its ARN as CloudWatch Logs names it in a KMS
// encryption context (aws:logs:arn, without Fn::GetAtt's ":*"), and its KmsKeyId ("" for none).
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html
type LogGroup struct{ Name, ARN, KmsKeyId string }

// ReadLogGroup reads a log group's name (the Resolver's: its LogGroupName, or the name
// CloudFormation makes) and key.
func (a *Assembly) ReadLogGroup(res *Resolver, lr *Resource) (LogGroup, error) {
	name, err := res.ResolveString(lr.Stack, json.RawMessage(fmt.Sprintf(`{"Ref":%q}`, lr.LogicalID)))
	if err != nil {
		return LogGroup{}, fmt.Errorf("log group %s: %w", lr.LogicalID, err)
	}
	g := LogGroup{Name: name, ARN: fmt.Sprintf("arn:aws:logs:%s:%s:log-group:%s", res.Region, res.Account, name)}
	if err := a.Prop(res, lr, "KmsKeyId", &g.KmsKeyId); err != nil {
		return LogGroup{}, err
	}
	return g, nil
}

// InsightRule is an AWS::CloudWatch::InsightRule: its name and its rule body (JSON).
type InsightRule struct{ Name, Body string }

// InvokeConfig is an AWS::Lambda::EventInvokeConfig: a function's asynchronous retries and event
// age (https://docs.aws.amazon.com/lambda/latest/api/API_PutFunctionEventInvokeConfig.html).
type InvokeConfig struct {
	FunctionName string
	// MaximumRetryAttempts is nil when the template leaves Lambda's default (2).
	MaximumRetryAttempts *int
	// MaximumEventAge is 0 when the template leaves Lambda's default (6 hours).
	MaximumEventAge time.Duration
	// MaximumEventAgeSeconds is the template's value, for messages.
	MaximumEventAgeSeconds int
	// Destinations tells whether the template sets a DestinationConfig.
	Destinations bool
}

// ReadInvokeConfig reads an event invoke config.
func ReadInvokeConfig(res *Resolver, c *Resource) (InvokeConfig, error) {
	var props struct {
		FunctionName             string
		MaximumRetryAttempts     *int
		MaximumEventAgeInSeconds int
		DestinationConfig        map[string]any
	}
	if err := res.ResolveProperties(c, &props); err != nil {
		return InvokeConfig{}, fmt.Errorf("event invoke config %s: %w", c.LogicalID, err)
	}
	return InvokeConfig{FunctionName: props.FunctionName, MaximumRetryAttempts: props.MaximumRetryAttempts,
		MaximumEventAge: time.Duration(props.MaximumEventAgeInSeconds) * time.Second, MaximumEventAgeSeconds: props.MaximumEventAgeInSeconds,
		Destinations: len(props.DestinationConfig) > 0}, nil
}
