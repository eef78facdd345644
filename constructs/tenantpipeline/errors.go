package tenantpipeline

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// refused reports whether err holds problems of a construct's props, and if so adds them to
// scope's validation, one message each: synth then fails with CDK's "Validation failed with the
// following errors", every problem of every construct listed at once, and the construct, which
// stays the empty scope, creates and bundles nothing. Nothing panics on the way, so an app that
// calls app.Synth itself gets CDK's own failure.
func refused(scope constructs.Construct, err error) bool {
	msgs := messages(err)
	if len(msgs) == 0 {
		return false
	}
	scope.Node().AddValidation(&propsValidation{scope, msgs})
	return true
}

// propsValidation is the validation of a construct refused for its props.
type propsValidation struct {
	scope constructs.Construct
	msgs  []string
}

// Validate implements constructs.IValidation.
func (v *propsValidation) Validate() *[]*string { return answer(v.scope, v.msgs) }

// synths counts the Synth calls under way: inside one, CDK's validation failure is returned as an
// error (Synth recovers the panic jsii raises for it).
var synths atomic.Int32

// exiting is set once a validation has started to report the app's problems and exit.
var exiting atomic.Bool

// answer is a construct's validation answer, msgs. When there are problems and nothing can
// recover what follows, that is an app that calls app.Synth itself, outside Synth and outside a
// test binary, it reports them as CDK would and exits with status 1 instead: CDK throws
// "Validation failed with the following errors" after its validations, which jsii raises in Go as
// a panic no one recovers, and that ends the app with a goroutine dump and status 2. This is the
// package's one exit, and it ends only a synth that would have ended anyway.
func answer(c constructs.Construct, msgs []string) *[]*string {
	if len(msgs) > 0 && synths.Load() == 0 && !testBinary() && exiting.CompareAndSwap(false, true) {
		fmt.Fprintln(os.Stderr, appValidationFailure(c))
		os.Exit(1)
	}
	return jsii.Strings(msgs...)
}

// testBinary reports whether the process is a go test binary, whose tests may recover CDK's
// failure themselves: the testing package registers its -test.v flag before any test runs.
func testBinary() bool { return flag.Lookup("test.v") != nil }

// appValidationFailure is CDK's message for the app of c: every construct's validation problems,
// in the tree's pre-order, each under its construct's path (aws-cdk-lib's synthesis, validateTree).
// The calls back into each validation find exiting set, so they only answer.
func appValidationFailure(c constructs.Construct) string {
	var lines []string
	for _, n := range *c.Node().Root().Node().FindAll(constructs.ConstructOrder_PREORDER) {
		for _, m := range *n.Node().Validate() {
			lines = append(lines, fmt.Sprintf("[%s] %s", *n.Node().Path(), *m))
		}
	}
	return "Validation failed with the following errors:\n  " + strings.Join(lines, "\n  ")
}

// PropsError is what a construct's method panics with when it is called wrongly (GrantUpload with
// a tenant the pool does not have). Err joins every problem (errors.Join). Synth returns it as an
// error.
type PropsError struct {
	// Path is the construct's path, as CDK names it in its own messages.
	Path string
	// Err holds every problem, joined.
	Err error
}

// Error lists every problem under the construct's path, in the shape of CDK's own validation
// failure, so that both read alike.
func (e *PropsError) Error() string {
	var lines []string
	for _, m := range messages(e.Err) {
		lines = append(lines, fmt.Sprintf("[%s] %s", e.Path, m))
	}
	return "Validation failed with the following errors:\n  " + strings.Join(lines, "\n  ")
}

func (e *PropsError) Unwrap() error { return e.Err }

// Synth runs build, which adds the app's stacks and constructs, then synthesizes app. It returns,
// as one error, whatever stops either: build's own error, a *PropsError, or CDK's validation
// failure at synth (a construct's invalid props among them) ("Validation
// failed with the following errors", which jsii raises as a panic), without the JavaScript stack
// jsii appends. A Go runtime error (a bug) is not turned into an error: it panics on, with its
// stack. A Go CDK app's main prints the error and exits with status 1 (see the package example).
func Synth(app awscdk.App, build func() error) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if re, ok := r.(runtime.Error); ok {
			panic(re)
		}
		var pe *PropsError
		if e, ok := r.(error); ok && errors.As(e, &pe) {
			err = pe
			return
		}
		err = errors.New(panicMessage(r))
	}()
	synths.Add(1)
	defer synths.Add(-1)
	if err := build(); err != nil {
		return err
	}
	return templatesFit(app.Synth(nil))
}

// MaxTemplateBytes is the largest template CloudFormation takes: "Template body size in an Amazon
// S3 object: 1 MB", and CDK deploys every template through S3 once it is over 50 KB.
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html
const MaxTemplateBytes = 1 << 20

// templatesFit fails a synth whose assembly holds a template CloudFormation would refuse at
// deploy (MaxTemplateBytes), naming each such stack, its size and what to change: a deploy that
// would fail is told at synth, before any stack is touched.
func templatesFit(asm cxapi.CloudAssembly) error {
	var errs []error
	for _, st := range *asm.Stacks() {
		info, err := os.Stat(*st.TemplateFullPath())
		if err != nil {
			return fmt.Errorf("stack %s: %w", *st.StackName(), err)
		}
		if info.Size() > MaxTemplateBytes {
			errs = append(errs, fmt.Errorf("stack %s: its template is %d bytes, over CloudFormation's %d (1 MB): "+
				"give some of its tenants another stack (a lower tenantsPerStack, or a \"stack\" of their own)",
				*st.StackName(), info.Size(), MaxTemplateBytes))
		}
	}
	return errors.Join(errs...)
}

// panicMessage keeps the message of a panic and drops the JavaScript stack trace jsii appends.
func panicMessage(r any) string {
	var keep []string
	for _, line := range strings.Split(fmt.Sprint(r), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "at ") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.TrimSpace(strings.Join(keep, "\n"))
}
