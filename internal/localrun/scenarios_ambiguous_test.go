//go:build e2e || figures

package localrun

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// Ambiguous failures: a call whose outcome the caller never learnt. The work behind it may still be
// running (a Register invocation), or may have happened (a child execution started); the pipeline
// must neither overlap the next file with it nor start it twice.

// fileTaskErrors returns the error names of the failed task attempts of a file execution itself.
func fileTaskErrors(t *testing.T, ctx context.Context, r *Run, arn string) []string {
	t.Helper()
	var errs []string
	p := sfn.NewGetExecutionHistoryPaginator(r.StepFunctions(), &sfn.GetExecutionHistoryInput{ExecutionArn: aws.String(arn), MaxResults: 1000})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("GetExecutionHistory %s: %v", arn, err)
		}
		for _, ev := range page.Events {
			if d := ev.TaskFailedEventDetails; d != nil {
				errs = append(errs, aws.ToString(d.Error))
			}
		}
	}
	return errs
}

// Register hangs past Step Functions' client timeout on every attempt, so each attempt ends with
// Lambda.ClientExecutionTimeoutException while its invocation goes on posting; after the last
// retry the file fails. The core system never accepts hung.csv's last record, so no invocation
// finishes it (one that did would record the progress, and the next attempt would find the file
// done instead of hanging again). The controller holds the failed file until the stop of the
// execution that ran the hung task + the Register timeout + 30 s, so the next file's first record
// arrives only after the hung invocation has ended. Both of the file execution's own tasks that
// register: a one-chunk file hangs in its SmallFile task; a file of two chunks, for a tenant
// without the small-file path (the file is within the bound), in the Register loop the file
// execution runs itself for its one segment. (A segment execution's hung Register is the
// controller's TestFailedFileHold.)
func TestScenarioAmbiguousRegisterHold(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		records int
		tenants string
	}{
		{"small file", 30, scenarioTenants},
		{"one segment", 130, withTenantJSON(scenarioTenants, "cont", "smallFileBytes", -1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ambiguousRegisterHold(t, tc.records, tc.tenants)
		})
	}
}

func ambiguousRegisterHold(t *testing.T, records int, tenants string) {
	const registerTimeout = 8 * time.Second
	r := startScenario(t, tenants, Config{
		EnvFor: map[string][]string{
			registerPkg:   {"HTTP_TIMEOUT_SECONDS=1"},
			controllerPkg: {"REGISTER_TIMEOUT_SECONDS=8"},
		},
		Lambda: LambdaOptions{FunctionTimeout: map[string]time.Duration{registerPkg: registerTimeout}},
		StepFunctions: StepFunctionsOptions{
			// Step Functions gives up on Register's Invoke after 1 s.
			LambdaClientTimeout: map[string]time.Duration{registerPkg: time.Second},
			// The template retries the client timeout after Register's 2-minute timeout + 30 s; scaled
			// to 7.5 s, still longer than one hung attempt (30 records × 150 ms).
			RetryIntervalScale: 0.05,
		},
	})
	// The last chunk's records (the last 30) are slow, and its last record is never accepted.
	slow := int64(records - 30)
	r.Sink.SetDelay(func(tenant, source string, n int64) time.Duration {
		if tenant == "cont" && strings.HasSuffix(source, "/hung.csv") && n > slow {
			return 150 * time.Millisecond
		}
		return 0
	})
	r.Sink.SetFault(func(tenant, source string, n int64, _ int) int {
		if tenant == "cont" && strings.HasSuffix(source, "/hung.csv") && n == int64(records) {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	uploadAll(t, ctx, r, []upload{{"cont", "hung.csv", csvOf(records)}, {"cont", "next.csv", csvOf(10)}})
	rep := drain(t, ctx, r)
	assertInvariants(t, r, rep, nil, false)
	wantStatuses(t, rep, "cont", "FAILED", "SUCCEEDED")

	hung, next := fileOf(t, rep, "cont", "hung.csv"), fileOf(t, rep, "cont", "next.csv")
	if got, want := strings.Join(taskErrors(t, ctx, r, "cont", hung), " "), strings.Repeat("Lambda.ClientExecutionTimeoutException ", 3); got+" " != want {
		t.Errorf("hung.csv: Register task failures: got %q, want three Lambda.ClientExecutionTimeoutException", got)
	}
	w := RegistrationWindows(r.Sink.Requests("cont"))
	wh, wn := w[hung.Key+"\x00"+hung.VersionID], w[next.Key+"\x00"+next.VersionID]
	if wh == nil || wn == nil || hung.StoppedAt == nil {
		t.Fatalf("registration windows: got %v and %v (hung.csv stopped at %v), want both files registering", wh, wn, hung.StoppedAt)
	}
	// The scenario only means something if the last invocation went on posting after the file failed.
	if !wh.Last.After(*hung.StoppedAt) {
		t.Errorf("hung.csv's last POST: got %s, want after the file failed at %s (the invocation keeps running)", wh.Last.Format(time.StampMilli), hung.StoppedAt.Format(time.StampMilli))
	}
	if !wn.First.After(wh.Last) {
		t.Errorf("next.csv's first POST at %s: want after hung.csv's last POST at %s", wn.First.Format(time.StampMilli), wh.Last.Format(time.StampMilli))
	}
	if next.Records != 10 {
		t.Errorf("next.csv: got %d records, want 10", next.Records)
	}
	t.Logf("hung.csv failed at %s; its last invocation posted until %s; next.csv's first POST %s after that",
		hung.StoppedAt.Format(time.StampMilli), wh.Last.Format(time.StampMilli), wn.First.Sub(wh.Last).Round(time.Millisecond))
}

// Every segment execution's start succeeds, but the file execution sees an SDK client error
// instead of the answer. Its Retry starts the same name with the same input, which finds the
// running child: one child per segment, named from the file's name, and the records in order.
func TestScenarioChildStartAmbiguous(t *testing.T) {
	t.Parallel()
	const records = 1050 // chunk size 1: two segments, of 1,000 and 50 chunks
	r := startScenario(t, scenarioTenants, Config{
		StepFunctions: StepFunctionsOptions{
			// big.csv's two segments; small.csv is a small file, which starts no child.
			LoseChildStartAnswers: 2,
			// The start is retried after up to 5 s (full jitter); scaled to 0.1 s, so the retry comes while
			// the child still runs, however fast this machine registers 50 chunks.
			RetryIntervalScale: 0.02,
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	uploadAll(t, ctx, r, []upload{{"wide", "big.csv", csvOf(records)}, {"wide", "small.csv", csvOf(5)}})
	rep := drain(t, ctx, r)
	assertInvariants(t, r, rep, nil, false)
	wantStatuses(t, rep, "wide", "SUCCEEDED", "SUCCEEDED")

	big := fileOf(t, rep, "wide", "big.csv")
	if big.Records != records || big.SegmentExecutions != 2 {
		t.Errorf("big.csv: got %d records and %d segment executions, want %d and 2 (one per segment)", big.Records, big.SegmentExecutions, records)
	}
	st, err := r.sfnStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	parent := executionARN(t, r, "wide", big.ExecutionName)
	var children []string
	for _, e := range st.Executions {
		if e.ParentArn == parent {
			children = append(children, e.Name)
		}
	}
	want := []string{pipeline.SegmentExecutionName(big.ExecutionName, 0, 0), pipeline.SegmentExecutionName(big.ExecutionName, 1, 0)}
	if !slices.Equal(children, want) {
		t.Errorf("big.csv's segment executions: got %v, want %v", children, want)
	}
	// Each segment's first start answered an SDK error.
	if got := fileTaskErrors(t, ctx, r, parent); !slices.Equal(got, []string{"StepFunctions.SdkClientException", "StepFunctions.SdkClientException"}) {
		t.Errorf("big.csv: RegisterSegment failures: got %v, want two StepFunctions.SdkClientException", got)
	}
	// small.csv's five chunks are a small file: the SmallFile task, no child execution.
	if small := fileOf(t, rep, "wide", "small.csv"); small.SegmentExecutions != 0 || small.Records != 5 {
		t.Errorf("small.csv: got %d records and %d segment executions, want 5 and 0 (the small-file path)", small.Records, small.SegmentExecutions)
	}
	t.Logf("big.csv: %d records, children %v, %.1fs", big.Records, children, rep.WallSeconds)
}
