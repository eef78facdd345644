// Package cost prices what a local run measured (state transitions, Lambda requests and
// GB-seconds, S3, SQS and API Gateway requests, DynamoDB request units, log bytes, ...) at AWS list prices, and scales it to a unit of work (a million
// records, a thousand files). Free tiers are left out: the figures are the marginal cost of the work.
package cost

import "sort"

// Usage is what AWS bills for a piece of work, as counted by the local run. Counts are float64 so
// that a scaled usage keeps its fractions.
type Usage struct {
	// StateTransitions of Step Functions Standard workflows, child executions included.
	StateTransitions float64
	// LambdaRequests and LambdaGBSeconds of every function (arm64).
	LambdaRequests  float64
	LambdaGBSeconds float64
	// S3Tier1Requests are PUT, COPY, POST and LIST requests; S3Tier2Requests are GET and every other
	// request but DELETE, which is free.
	S3Tier1Requests float64
	S3Tier2Requests float64
	// SQSRequests are FIFO queue requests, each 64 KB chunk of a payload counted as one request.
	SQSRequests float64
	// EventBridgeEvents are the custom events put (the File Processed events), each 64 KB chunk
	// of an entry counted as one event; the events AWS services put are free.
	EventBridgeEvents float64
	// DynamoDBReadUnits and DynamoDBWriteUnits are on-demand read and write request units, as
	// DynamoDB rounds them (ReadUnits, QueryReadUnits, WriteUnits).
	DynamoDBReadUnits  float64
	DynamoDBWriteUnits float64
	// LogBytes are the bytes of the lines the functions write, which Lambda sends to CloudWatch
	// Logs (standard log class).
	LogBytes float64
	// InsightMatches are the log events that match a Contributor Insights rule, counted once per
	// rule they match.
	InsightMatches float64
	// STSCalls are AssumeRole calls: free, counted so that the figure shows them.
	STSCalls float64
	// APIGatewayRequests are REST API requests (a pool's per-tenant intake: one per event
	// EventBridge delivers, retries included; a refused authorization is not billed).
	APIGatewayRequests float64
}

// Add sums two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		StateTransitions:   u.StateTransitions + o.StateTransitions,
		LambdaRequests:     u.LambdaRequests + o.LambdaRequests,
		LambdaGBSeconds:    u.LambdaGBSeconds + o.LambdaGBSeconds,
		S3Tier1Requests:    u.S3Tier1Requests + o.S3Tier1Requests,
		S3Tier2Requests:    u.S3Tier2Requests + o.S3Tier2Requests,
		SQSRequests:        u.SQSRequests + o.SQSRequests,
		EventBridgeEvents:  u.EventBridgeEvents + o.EventBridgeEvents,
		DynamoDBReadUnits:  u.DynamoDBReadUnits + o.DynamoDBReadUnits,
		DynamoDBWriteUnits: u.DynamoDBWriteUnits + o.DynamoDBWriteUnits,
		LogBytes:           u.LogBytes + o.LogBytes,
		InsightMatches:     u.InsightMatches + o.InsightMatches,
		STSCalls:           u.STSCalls + o.STSCalls,
		APIGatewayRequests: u.APIGatewayRequests + o.APIGatewayRequests,
	}
}

// Scale multiplies every count by f: the usage of `measured` units of work, scaled to `to` units,
// is u.Scale(to / measured).
func (u Usage) Scale(f float64) Usage {
	return Usage{
		StateTransitions:   u.StateTransitions * f,
		LambdaRequests:     u.LambdaRequests * f,
		LambdaGBSeconds:    u.LambdaGBSeconds * f,
		S3Tier1Requests:    u.S3Tier1Requests * f,
		S3Tier2Requests:    u.S3Tier2Requests * f,
		SQSRequests:        u.SQSRequests * f,
		EventBridgeEvents:  u.EventBridgeEvents * f,
		DynamoDBReadUnits:  u.DynamoDBReadUnits * f,
		DynamoDBWriteUnits: u.DynamoDBWriteUnits * f,
		LogBytes:           u.LogBytes * f,
		InsightMatches:     u.InsightMatches * f,
		STSCalls:           u.STSCalls * f,
		APIGatewayRequests: u.APIGatewayRequests * f,
	}
}

// Per is the usage of one unit of work when u is the usage of `units` of it, scaled to `to` units:
// Per(u, 3000, 1e6) is the usage of a million records measured on 3,000.
func Per(u Usage, units, to float64) Usage {
	if units <= 0 {
		return Usage{}
	}
	return u.Scale(to / units)
}

// Prices are list prices in US dollars per unit of Usage.
type Prices struct {
	StateTransition   float64
	LambdaRequest     float64
	LambdaGBSecond    float64
	S3Tier1Request    float64
	S3Tier2Request    float64
	SQSRequest        float64
	EventBridgeEvent  float64
	DynamoDBReadUnit  float64
	DynamoDBWriteUnit float64
	LogByte           float64
	InsightMatch      float64
	STSCall           float64
	APIGatewayRequest float64
}

// USEast1 are the us-east-1 list prices of the first pricing tier, as the pricing pages showed
// them on 2026-12-01.
var USEast1 = Prices{
	// Standard workflows: $0.025 per 1,000 state transitions.
	// https://aws.amazon.com/step-functions/pricing/
	StateTransition: 0.025 / 1000,
	// Requests: $0.20 per 1M, either architecture. https://aws.amazon.com/lambda/pricing/
	LambdaRequest: 0.20 / 1e6,
	// Duration, Arm (the functions are arm64), first 7.5 billion GB-seconds a month:
	// $0.0000133334 per GB-second. https://aws.amazon.com/lambda/pricing/
	LambdaGBSecond: 0.0000133334,
	// S3 Standard: PUT, COPY, POST, LIST requests $0.005 per 1,000; GET, SELECT and all other
	// requests $0.0004 per 1,000 (DELETE and CANCEL are free). https://aws.amazon.com/s3/pricing/
	S3Tier1Request: 0.005 / 1000,
	S3Tier2Request: 0.0004 / 1000,
	// FIFO queues, first 100 billion requests a month: $0.50 per 1M; each 64 KB chunk of a payload
	// is billed as one request. https://aws.amazon.com/sqs/pricing/
	SQSRequest: 0.50 / 1e6,
	// Custom events: $1.00 per million events put (each 64 KB chunk of a payload is one event).
	// https://aws.amazon.com/eventbridge/pricing/
	EventBridgeEvent: 1.00 / 1e6,
	// On-demand, Standard table class: $0.125 per million read request units and $0.625 per
	// million write request units (the prices since the on-demand price cut of 2024-11-01).
	// https://aws.amazon.com/dynamodb/pricing/on-demand/
	DynamoDBReadUnit:  0.125 / 1e6,
	DynamoDBWriteUnit: 0.625 / 1e6,
	// CloudWatch Logs, standard log class, first tier of Lambda's logs: $0.50 per GB ingested.
	// The page does not say whether a GB is 10^9 or 2^30 bytes here; 10^9, the higher price.
	// https://aws.amazon.com/cloudwatch/pricing/
	LogByte: 0.50 / 1e9,
	// Contributor Insights for CloudWatch Logs: $0.02 per million log events that match a rule
	// (and $0.50 per rule a month, a fixed cost, left out like the alarms).
	// https://aws.amazon.com/cloudwatch/pricing/
	InsightMatch: 0.02 / 1e6,
	// AWS STS has no charge: it is IAM's token service, and "IAM is an AWS service that you can use
	// with no additional charge"
	// (https://docs.aws.amazon.com/cost-management/latest/userguide/security-iam.html; the IAM FAQs,
	// https://aws.amazon.com/iam/faqs/, say the same of IAM and STS).
	STSCall: 0,
	// REST APIs, first 333 million requests a month: $3.50 per million.
	// https://aws.amazon.com/api-gateway/pricing/
	APIGatewayRequest: 3.50 / 1e6,
}

// Bill is a usage priced term by term, in US dollars.
type Bill struct {
	StepFunctions  float64
	LambdaRequests float64
	LambdaDuration float64
	S3             float64
	SQS            float64
	EventBridge    float64
	DynamoDB       float64
	Logs           float64
	Insights       float64
	STS            float64
	APIGateway     float64
}

// Price prices a usage.
func (p Prices) Price(u Usage) Bill {
	return Bill{
		StepFunctions:  u.StateTransitions * p.StateTransition,
		LambdaRequests: u.LambdaRequests * p.LambdaRequest,
		LambdaDuration: u.LambdaGBSeconds * p.LambdaGBSecond,
		S3:             u.S3Tier1Requests*p.S3Tier1Request + u.S3Tier2Requests*p.S3Tier2Request,
		SQS:            u.SQSRequests * p.SQSRequest,
		EventBridge:    u.EventBridgeEvents * p.EventBridgeEvent,
		DynamoDB:       u.DynamoDBReadUnits*p.DynamoDBReadUnit + u.DynamoDBWriteUnits*p.DynamoDBWriteUnit,
		Logs:           u.LogBytes * p.LogByte,
		Insights:       u.InsightMatches * p.InsightMatch,
		STS:            u.STSCalls * p.STSCall,
		APIGateway:     u.APIGatewayRequests * p.APIGatewayRequest,
	}
}

// Total is the sum of the terms.
func (b Bill) Total() float64 {
	return b.StepFunctions + b.LambdaRequests + b.LambdaDuration + b.S3 + b.SQS + b.EventBridge +
		b.DynamoDB + b.Logs + b.Insights + b.STS + b.APIGateway
}

// Term is one term of a bill.
type Term struct {
	Name    string
	Dollars float64
}

// Terms lists the terms, the largest first.
func (b Bill) Terms() []Term {
	terms := []Term{
		{"Step Functions transitions", b.StepFunctions},
		{"Lambda requests", b.LambdaRequests},
		{"Lambda duration", b.LambdaDuration},
		{"S3 requests", b.S3},
		{"SQS requests", b.SQS},
		{"EventBridge events", b.EventBridge},
		{"DynamoDB request units", b.DynamoDB},
		{"CloudWatch Logs ingestion", b.Logs},
		{"Contributor Insights matches", b.Insights},
		{"STS calls", b.STS},
		{"API Gateway requests", b.APIGateway},
	}
	sort.SliceStable(terms, func(i, j int) bool { return terms[i].Dollars > terms[j].Dollars })
	return terms
}
