//go:build e2e || figures

package localrun

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
)

// TestCostCounting runs one small file and checks that what the cost figure counts is consistent,
// so that the measurement cannot break unnoticed: the state transitions the server bills equal the
// states entered in the executions' histories (no retry happens here), every function invoked bills
// requests and GB-seconds, and the S3 and SQS requests of the file and its log bytes are there.
func TestCostCounting(t *testing.T) {
	t.Parallel()
	r := startScenario(t, scenarioTenants, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	uploadAll(t, ctx, r, []upload{{"cont", "cost.csv", csvOf(150)}})
	rep := drain(t, ctx, r)
	if f := fileOf(t, rep, "cont", "cost.csv"); f.Status != "SUCCEEDED" {
		t.Fatalf("cost.csv: got %s, want SUCCEEDED", f.Status)
	}
	u, err := r.Usage(ctx, "cont")
	if err != nil {
		t.Fatal(err)
	}

	st, err := r.sfnStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	for _, e := range st.Executions {
		if e.StateMachineArn == r.Tenant("cont").FileMachine {
			files[e.ExecutionArn] = true
		}
	}
	var entered, executions int
	for _, e := range st.Executions {
		if !files[e.ExecutionArn] && !files[e.ParentArn] {
			continue
		}
		executions++
		for p := sfn.NewGetExecutionHistoryPaginator(r.StepFunctions(), &sfn.GetExecutionHistoryInput{ExecutionArn: aws.String(e.ExecutionArn), MaxResults: 1000}); p.HasMorePages(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range page.Events {
				if strings.HasSuffix(string(ev.Type), "StateEntered") {
					entered++
				}
			}
		}
	}
	// One file execution: 150 records, two chunks of 100, are a small file (the SmallFile task,
	// which starts no child execution).
	if executions != 1 {
		t.Errorf("executions: got %d, want 1", executions)
	}
	t.Logf("usage of one 150-record file: %+v", u)
	// At least one state per execution, whatever the Register design.
	if u.StateTransitions != float64(entered) || entered < executions {
		t.Errorf("state transitions: got %v, want the %d states entered in the histories, at least one per execution", u.StateTransitions, entered)
	}
	if u.LambdaRequests < 2 || u.LambdaGBSeconds <= 0 {
		t.Errorf("Lambda: got %v requests and %v GB-s, want at least 2 requests (controller, the SmallFile task) and some GB-s", u.LambdaRequests, u.LambdaGBSeconds)
	}
	// The SmallFile task reads the file and the segment's progress (absent), and writes the results.
	if u.S3Tier1Requests < 1 || u.S3Tier2Requests < 2 {
		t.Errorf("S3: got %v PUT-class and %v GET-class requests, want at least 1 and 2", u.S3Tier1Requests, u.S3Tier2Requests)
	}
	// EventBridge sends the message, the event source mapping receives and deletes it.
	if u.SQSRequests < 3 {
		t.Errorf("SQS: got %v requests, want at least 3", u.SQSRequests)
	}
	// Every function writes log lines; no tenant here has a table, a pool's session or a rule.
	if u.LogBytes <= 0 || u.DynamoDBReadUnits+u.DynamoDBWriteUnits != 0 || u.STSCalls != 0 || u.InsightMatches != 0 {
		t.Errorf("logs, DynamoDB, STS, Contributor Insights: got %+v, want log bytes and nothing else", u)
	}
	if other, _ := r.Usage(ctx, "halt"); other.StateTransitions != 0 || other.S3Tier1Requests != 0 {
		t.Errorf("tenant halt, which had no file: got %+v, want no transitions and no PUT", other)
	}
}
