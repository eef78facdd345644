package deploy

// What an assembly deploys, read resource by resource as the local run creates it: each reader
// resolves a resource's properties (Resolver) into the values the emulators take, with the AWS
// defaults the templates leave out, so the local run's steps only create and wire.

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MetadataSource is the resource metadata key naming a function's Go main package.
const MetadataSource = "tenantpipeline:source"

// PhysicalName derives a deterministic local name for a resource without an explicit one: its
// logical id, lower-cased, after its stack's name when another stack has the same logical id, as
// CloudFormation's names hold the stack's ("<stack>-<logical id>-<random>", generatedName).
func PhysicalName(res *Resource, max int) string {
	n := strings.ToLower(res.LogicalID)
	if res.sharedID && res.Stack != nil {
		n = strings.ToLower(res.Stack.Name) + "-" + n
		if len(n) > max {
			n = n[len(n)-max:] // keep the logical id, which says what the resource is
		}
	}
	if len(n) > max {
		n = n[:max]
	}
	return n
}

// Bucket is an AWS::S3::Bucket: its name and whether versioning is enabled.
type Bucket struct {
	Name      string
	Versioned bool
}

// ReadBucket reads a bucket; without a BucketName its name is PhysicalName's (63 characters, S3's
// limit).
func (a *Assembly) ReadBucket(res *Resolver, b *Resource) Bucket {
	var name string
	var versioning struct{ Status string }
	a.Prop(res, b, "BucketName", &name)
	a.Prop(res, b, "VersioningConfiguration", &versioning)
	if name == "" {
		name = PhysicalName(b, 63)
	}
	return Bucket{Name: name, Versioned: versioning.Status == "Enabled"}
}

// NameOf is the name of a resource by its name property (FunctionName, StateMachineName, ...), or
// PhysicalName's of at most max characters when the template sets none.
func (a *Assembly) NameOf(res *Resolver, r *Resource, prop string, max int) string {
	var name string
	a.Prop(res, r, prop, &name)
	if name == "" {
		name = PhysicalName(r, max)
	}
	return name
}

// Queue is an AWS::SQS::Queue as CreateQueue takes it: its name and attributes.
type Queue struct {
	Name       string
	ARN        string // set by Apply
	Attributes map[string]string
}

// ReadQueue reads a queue's name (PhysicalName's, with .fifo for a FIFO queue, when the template
// sets none) and the attributes the template sets.
func ReadQueue(res *Resolver, q *Resource) (Queue, error) {
	var props struct {
		QueueName                     string
		FifoQueue                     any
		ContentBasedDeduplication     any
		VisibilityTimeout             any
		ReceiveMessageWaitTimeSeconds any
		MessageRetentionPeriod        any
		DelaySeconds                  any
		MaximumMessageSize            any
		DeduplicationScope            string
		FifoThroughputLimit           string
	}
	for _, k := range []string{"QueueName", "FifoQueue", "ContentBasedDeduplication", "VisibilityTimeout", "ReceiveMessageWaitTimeSeconds", "MessageRetentionPeriod", "DelaySeconds", "MaximumMessageSize", "DeduplicationScope", "FifoThroughputLimit"} {
		raw, ok := q.Properties[k]
		if !ok {
			continue
		}
		v, err := res.Resolve(q.Stack, raw)
		if err != nil {
			return Queue{}, err
		}
		b, _ := json.Marshal(map[string]any{k: v})
		json.Unmarshal(b, &props)
	}
	fifo := fmt.Sprint(props.FifoQueue) == "true"
	name := props.QueueName
	if name == "" {
		name = PhysicalName(q, 75)
		if fifo {
			name += ".fifo"
		}
	}
	attrs := map[string]string{}
	set := func(k string, v any) {
		if s := AttrString(v); s != "" {
			attrs[k] = s
		}
	}
	if fifo {
		attrs["FifoQueue"] = "true"
	}
	set("ContentBasedDeduplication", props.ContentBasedDeduplication)
	set("VisibilityTimeout", props.VisibilityTimeout)
	set("ReceiveMessageWaitTimeSeconds", props.ReceiveMessageWaitTimeSeconds)
	set("MessageRetentionPeriod", props.MessageRetentionPeriod)
	set("DelaySeconds", props.DelaySeconds)
	set("MaximumMessageSize", props.MaximumMessageSize)
	// High throughput mode (a pool's queues). fauxqs 2.4 stores both attributes and returns them,
	// but has no quota to lift and deduplicates queue-wide whatever DeduplicationScope says
	// (dist/sqs/sqsStore.js): stricter than per message group only for a deduplication id sent to
	// two groups, which the pipeline never does (constructs/tenantpipeline, highThroughput).
	set("DeduplicationScope", props.DeduplicationScope)
	set("FifoThroughputLimit", props.FifoThroughputLimit)
	return Queue{Name: name, Attributes: attrs}, nil
}

// AttrString renders a template value as an SQS attribute value. SQS takes integers as decimal
// strings ("MessageRetentionPeriod – An integer from 60 seconds (1 minute) to 1,209,600 seconds",
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SetQueueAttributes.html);
// a JSON number decodes to float64, which fmt prints as 1.2096e+06.
func AttrString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// Function is an AWS::Lambda::Function as the local Lambda runtime runs it.
type Function struct {
	Name, ARN   string            // as Name gave them; "" before
	Source      string            // its Go main package (MetadataSource); "" when the metadata is absent
	Variables   map[string]string // Environment.Variables, never nil
	Timeout     time.Duration     // Lambda's default 3 s when unset
	MemoryMB    int               // Lambda's default 128 MB when unset
	Reserved    int               // ReservedConcurrentExecutions, 0 when unset
	LogGroup    string            // LoggingConfig.LogGroup
	DeadLetterQ string            // DeadLetterConfig.TargetArn
}

// ReadFunction reads a function's package, environment, limits, log group and dead-letter target
// (the defaults: https://docs.aws.amazon.com/lambda/latest/api/API_CreateFunction.html).
func (a *Assembly) ReadFunction(res *Resolver, fr *Resource) (Function, error) {
	var f Function
	if id, ok := res.Identity(fr); ok {
		f.Name, f.ARN = id.Ref, id.Attrs["Arn"]
	}
	if raw, ok := fr.Metadata[MetadataSource]; ok {
		json.Unmarshal(raw, &f.Source)
	}
	var env struct{ Variables map[string]string }
	if err := a.Prop(res, fr, "Environment", &env); err != nil {
		return Function{}, err
	}
	var timeout int
	a.Prop(res, fr, "Timeout", &timeout)
	a.Prop(res, fr, "ReservedConcurrentExecutions", &f.Reserved)
	a.Prop(res, fr, "MemorySize", &f.MemoryMB)
	if timeout == 0 {
		timeout = 3 // the Lambda default
	}
	if f.MemoryMB == 0 {
		f.MemoryMB = 128 // the Lambda default
	}
	f.Timeout = time.Duration(timeout) * time.Second
	f.Variables = env.Variables
	if f.Variables == nil {
		f.Variables = map[string]string{}
	}
	var logging struct{ LogGroup string }
	if err := a.Prop(res, fr, "LoggingConfig", &logging); err != nil {
		return Function{}, err
	}
	var dlc struct{ TargetArn string }
	if err := a.Prop(res, fr, "DeadLetterConfig", &dlc); err != nil {
		return Function{}, err
	}
	f.LogGroup, f.DeadLetterQ = logging.LogGroup, dlc.TargetArn
	return f, nil
}

// Mapping is an AWS::Lambda::EventSourceMapping of an SQS queue.
type Mapping struct {
	EventSourceArn string
	FunctionName   string
	// BatchSize is the template's, or SQS's default 10.
	BatchSize int
	Enabled   bool // true unless the template disables it
	// ReportBatchItemFailures is whether FunctionResponseTypes names it.
	ReportBatchItemFailures bool
	MaximumConcurrency      int // ScalingConfig.MaximumConcurrency, 0 when unset
}

// ReadMapping reads an event source mapping
// (https://docs.aws.amazon.com/lambda/latest/api/API_CreateEventSourceMapping.html).
func ReadMapping(res *Resolver, m *Resource) (Mapping, error) {
	var props struct {
		EventSourceArn        string
		FunctionName          string
		BatchSize             int
		Enabled               *bool
		FunctionResponseTypes []string
		ScalingConfig         struct{ MaximumConcurrency int }
	}
	if err := res.ResolveProperties(m, &props); err != nil {
		return Mapping{}, fmt.Errorf("mapping %s: %w", m.LogicalID, err)
	}
	out := Mapping{EventSourceArn: props.EventSourceArn, FunctionName: props.FunctionName, BatchSize: props.BatchSize,
		Enabled: props.Enabled == nil || *props.Enabled, MaximumConcurrency: props.ScalingConfig.MaximumConcurrency}
	if out.BatchSize == 0 {
		out.BatchSize = 10 // the SQS default batch size
	}
	for _, t := range props.FunctionResponseTypes {
		out.ReportBatchItemFailures = out.ReportBatchItemFailures || t == "ReportBatchItemFailures"
	}
	return out, nil
}

// ResolveProperties resolves every property of r into into, a struct of the properties read.
func (r *Resolver) ResolveProperties(res *Resource, into any) error {
	all, _ := json.Marshal(res.Properties)
	raw, err := r.Resolve(res.Stack, all)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(raw)
	return json.Unmarshal(b, into)
}

// Rule is an AWS::Events::Rule: its event pattern, as JSON, and its targets.
type Rule struct {
	ARN     string // set by Apply: what the queue's and the key's policies name (aws:SourceArn)
	Pattern []byte
	// Schedule is a scheduled rule's ScheduleExpression ("rate(1 minute)"); "" for a rule with an
	// event pattern.
	Schedule string
	Targets  []RuleTarget
}

// RuleTarget is one target of a rule: a queue (with the message group of its SqsParameters) or a
// function.
type RuleTarget struct {
	Arn            string
	MessageGroupID string
	// RoleArn is the role EventBridge uses to deliver (an API Gateway target's signer).
	RoleArn string
	// Input is the target's constant input (a JSON text), sent instead of the event; "" for none.
	Input string
}

// ReadRule reads a rule's pattern and targets.
func (a *Assembly) ReadRule(res *Resolver, rr *Resource) (Rule, error) {
	var pattern map[string]any
	var schedule string
	var targets []struct {
		Arn           string
		Input         string
		RoleArn       string
		SqsParameters struct{ MessageGroupId string }
	}
	if err := a.Prop(res, rr, "EventPattern", &pattern); err != nil {
		return Rule{}, err
	}
	if err := a.Prop(res, rr, "ScheduleExpression", &schedule); err != nil {
		return Rule{}, err
	}
	if err := a.Prop(res, rr, "Targets", &targets); err != nil {
		return Rule{}, err
	}
	pb, _ := json.Marshal(pattern)
	out := Rule{Pattern: pb, Schedule: schedule}
	for _, t := range targets {
		out.Targets = append(out.Targets, RuleTarget{Arn: t.Arn, MessageGroupID: t.SqsParameters.MessageGroupId, Input: t.Input, RoleArn: t.RoleArn})
	}
	return out, nil
}
