package tenantpipeline

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
)

// PropsError is what New and NewPool panic with when their props are invalid. It is raised before
// the construct creates anything, so no Lambda asset is bundled for a prop mistake: the app fails
// in the time it takes to reach the construct, not after every asset was built. Err joins every
// problem (errors.Join), each naming the prop to change as the caller wrote it (Props.X, or
// PoolProps.Shared.X as "Shared.X" under the pool's name). Synth returns it as an error.
type PropsError struct {
	// Path is the construct's path, as CDK names it in its own messages.
	Path string
	// Err holds every problem, joined.
	Err error
}

func newPropsError(scope constructs.Construct, id string, err error) *PropsError {
	path := id
	if parent := *scope.Node().Path(); parent != "" {
		path = parent + "/" + id
	}
	return &PropsError{Path: path, Err: err}
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
// as one error, whatever stops either: build's own error, a construct's invalid props (a
// *PropsError, before anything was bundled), or CDK's validation failure at synth ("Validation
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
	if err := build(); err != nil {
		return err
	}
	app.Synth(nil)
	return nil
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
