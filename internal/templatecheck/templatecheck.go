// Package templatecheck makes a failed CDK template assertion a failure of its own test.
//
// The assertions module's Template methods (HasResourceProperties, ResourceCountIs, HasResource,
// AllResourcesProperties, ...) report a mismatch by throwing in the jsii kernel, which the Go
// binding turns into a panic. Left alone, that panic ends the whole test binary at the first
// mismatch, so a run names only one failure and none of the tests after it run. Assert recovers
// it and reports the message through the test.
package templatecheck

import (
	"fmt"
	"testing"
)

// Assert runs check, one or more template assertions, and reports a panic out of it as a failure
// of t (t.Errorf), so the test goes on; it returns whether check passed.
func Assert(t testing.TB, check func()) (ok bool) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Helper()
			t.Errorf("template assertion failed: %s", message(r))
			ok = false
		}
	}()
	check()
	return true
}

// Require is Assert for an assertion the rest of the test depends on: a failure ends the test
// (t.FailNow), and the binary's other tests still run.
func Require(t testing.TB, check func()) {
	t.Helper()
	if !Assert(t, check) {
		t.FailNow()
	}
}

func message(r any) string {
	if err, ok := r.(error); ok {
		return err.Error()
	}
	return fmt.Sprint(r)
}
