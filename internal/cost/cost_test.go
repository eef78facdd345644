package cost

import (
	"math"
	"reflect"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

// TestPrice checks the price table and the arithmetic against answers worked out by hand from the
// pricing pages.
func TestPrice(t *testing.T) {
	for _, tc := range []struct {
		name string
		u    Usage
		want Bill
	}{
		{"1,000 transitions cost $0.025", Usage{StateTransitions: 1000}, Bill{StepFunctions: 0.025}},
		{"1M Lambda requests cost $0.20", Usage{LambdaRequests: 1e6}, Bill{LambdaRequests: 0.20}},
		{"1M records at 20 ms and 256 MB: 5,000 GB-s", Usage{LambdaGBSeconds: 1e6 * 0.020 * 0.25}, Bill{LambdaDuration: 0.066667}},
		{"1,000 PUTs and 1,000 GETs", Usage{S3Tier1Requests: 1000, S3Tier2Requests: 1000}, Bill{S3: 0.0054}},
		{"1M FIFO requests cost $0.50", Usage{SQSRequests: 1e6}, Bill{SQS: 0.50}},
		{"1M File Processed events cost $1.00", Usage{EventBridgeEvents: 1e6}, Bill{EventBridge: 1.00}},
		{"1M read and 1M write request units cost $0.125 and $0.625", Usage{DynamoDBReadUnits: 1e6, DynamoDBWriteUnits: 1e6}, Bill{DynamoDB: 0.75}},
		{"1 GB of log lines costs $0.50", Usage{LogBytes: 1e9}, Bill{Logs: 0.50}},
		{"1M matched log events cost $0.02", Usage{InsightMatches: 1e6}, Bill{Insights: 0.02}},
		{"AssumeRole is free", Usage{STSCalls: 1e6}, Bill{}},
		{"1M REST API requests cost $3.50", Usage{APIGatewayRequests: 1e6}, Bill{APIGateway: 3.50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := USEast1.Price(tc.u)
			for _, p := range [][2]float64{
				{got.StepFunctions, tc.want.StepFunctions}, {got.LambdaRequests, tc.want.LambdaRequests},
				{got.LambdaDuration, tc.want.LambdaDuration}, {got.S3, tc.want.S3}, {got.SQS, tc.want.SQS},
				{got.EventBridge, tc.want.EventBridge}, {got.DynamoDB, tc.want.DynamoDB}, {got.Logs, tc.want.Logs},
				{got.Insights, tc.want.Insights}, {got.STS, tc.want.STS}, {got.APIGateway, tc.want.APIGateway}, {got.Total(), tc.want.Total()},
			} {
				if math.Abs(p[0]-p[1]) > 1e-6 {
					t.Errorf("got %+v, want %+v", got, tc.want)
					break
				}
			}
		})
	}
}

// TestScale checks the scaling to a unit of work and the sum of the terms.
func TestScale(t *testing.T) {
	// 3,000 records measured: 36 transitions, 3 invocations, 16.2 GB-s, 1 PUT, 61 GETs, 9 SQS.
	measured := Usage{StateTransitions: 36, LambdaRequests: 3, LambdaGBSeconds: 16.2, S3Tier1Requests: 1, S3Tier2Requests: 61, SQSRequests: 9}
	got := Per(measured, 3000, 1e6)
	want := Usage{StateTransitions: 12000, LambdaRequests: 1000, LambdaGBSeconds: 5400, S3Tier1Requests: 1000.0 / 3, S3Tier2Requests: 61000.0 / 3, SQSRequests: 3000}
	if !near(got.StateTransitions, want.StateTransitions) || !near(got.LambdaRequests, want.LambdaRequests) || !near(got.LambdaGBSeconds, want.LambdaGBSeconds) ||
		!near(got.S3Tier1Requests, want.S3Tier1Requests) || !near(got.S3Tier2Requests, want.S3Tier2Requests) || !near(got.SQSRequests, want.SQSRequests) {
		t.Errorf("Per(3,000 records → 1M): got %+v, want %+v", got, want)
	}
	// $0.30 + $0.0002 + $0.0720003 + $0.0016667 + $0.0081333 + $0.0015
	b := USEast1.Price(got)
	if total, want := b.Total(), 0.3+0.0002+5400*0.0000133334+1000.0/3*0.000005+61000.0/3*0.0000004+0.0015; !near(total, want) {
		t.Errorf("total: got %.7f, want %.7f", total, want)
	}
	if terms := b.Terms(); terms[0].Name != "Step Functions transitions" || terms[1].Name != "Lambda duration" {
		t.Errorf("largest terms: got %v, want Step Functions transitions, then Lambda duration", terms[:2])
	}
	if got := Per(measured, 0, 1e6); got != (Usage{}) {
		t.Errorf("Per of zero units: got %+v, want zero", got)
	}
	// Every term, so that one Add, Scale or Price leaves out fails here.
	var every Usage
	v := reflect.ValueOf(&every).Elem()
	for i := range v.NumField() {
		v.Field(i).SetFloat(float64(i + 1))
	}
	sum, twice := every.Add(every), every.Scale(2)
	if sum != twice {
		t.Errorf("Add: got %+v, want %+v", sum, twice)
	}
	for i := range v.NumField() {
		if got := reflect.ValueOf(sum).Field(i).Float(); got != float64(2*(i+1)) {
			t.Errorf("Add and Scale leave out %s: got %v, want %v", v.Type().Field(i).Name, got, 2*(i+1))
		}
	}
	priced, prices := USEast1.Price(every), reflect.ValueOf(USEast1)
	// Prices lists its prices in Usage's order.
	var wantTotal float64
	for i := range prices.NumField() {
		wantTotal += prices.Field(i).Float() * float64(i+1)
	}
	if !near(priced.Total(), wantTotal) || prices.NumField() != v.NumField() || len(priced.Terms()) != reflect.ValueOf(priced).NumField() {
		t.Errorf("Price of every term: total %v, want %v (Prices has %d fields, Usage %d; %d terms of %d)",
			priced.Total(), wantTotal, prices.NumField(), v.NumField(), len(priced.Terms()), reflect.ValueOf(priced).NumField())
	}
}
