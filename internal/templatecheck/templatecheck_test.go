package templatecheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

func TestMain(m *testing.M) {
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}

// recorder is the part of a test that Assert and Require use: it records what they report
// instead of failing the real test.
type recorder struct {
	testing.TB
	errors []string
	failed bool
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// FailNow ends the calling goroutine, as testing.T's does.
func (r *recorder) FailNow() {
	r.failed = true
	runtime.Goexit()
}

// TestAssertReportsAFailedTemplateAssertion: a real template assertion that does not hold (one
// queue, two asked) becomes the test's error with CDK's message, and the assertions after it still
// run; one that holds reports nothing. Require ends the test at a failure and nowhere else.
func TestAssertReportsAFailedTemplateAssertion(t *testing.T) {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Check"), nil)
	awssqs.NewQueue(stack, jsii.String("Queue"), &awssqs.QueueProps{Fifo: jsii.Bool(true)})
	tpl := assertions.Template_FromStack(stack, nil)
	queues := func(n float64) func() {
		return func() { tpl.ResourceCountIs(jsii.String("AWS::SQS::Queue"), jsii.Number(n)) }
	}
	fifo := func() { tpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{"FifoQueue": true}) }

	for _, tc := range []struct {
		name       string
		checks     []func()
		want       []bool // what Assert returns for each check
		wantErrors []string
	}{
		{"holds", []func(){queues(1), fifo}, []bool{true, true}, nil},
		{"a mismatch, then a check that holds", []func(){queues(2), fifo}, []bool{false, true},
			[]string{"template assertion failed: AssertionError: Expected 2 resources of type AWS::SQS::Queue but found 1"}},
		{"a plain panic", []func(){func() { panic("boom") }}, []bool{false}, []string{"template assertion failed: boom"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			for i, check := range tc.checks {
				if got := Assert(r, check); got != tc.want[i] {
					t.Errorf("check %d: got %v, want %v", i, got, tc.want[i])
				}
			}
			if len(r.errors) != len(tc.wantErrors) {
				t.Fatalf("got errors %q, want %d starting %q", r.errors, len(tc.wantErrors), tc.wantErrors)
			}
			for i, want := range tc.wantErrors {
				if !strings.HasPrefix(r.errors[i], want) {
					t.Errorf("got error %q, want it to start with %q", r.errors[i], want)
				}
			}
		})
	}

	t.Run("Require", func(t *testing.T) {
		for _, tc := range []struct {
			name      string
			check     func()
			wantEnded bool
		}{{"holds", queues(1), false}, {"does not hold", queues(2), true}} {
			r := &recorder{TB: t}
			reached := make(chan bool, 1)
			done := make(chan struct{})
			go func() {
				defer close(done)
				Require(r, tc.check)
				reached <- true
			}()
			<-done
			ended := len(reached) == 0
			if ended != tc.wantEnded || r.failed != tc.wantEnded {
				t.Errorf("%s: got the test ended %v (FailNow %v), want %v", tc.name, ended, r.failed, tc.wantEnded)
			}
		}
	})
}
