// Package maketest is the package TestMakeTest runs make test on: one test that passes, one that
// fails when MAKETEST_FAIL is set, and one of the e2e lane (e2e_test.go). It is under testdata, so ./... never includes it.
package maketest

import (
	"os"
	"testing"
	"time"
)

func TestPasses(t *testing.T) { time.Sleep(50 * time.Millisecond) }

func TestFailsWhenAsked(t *testing.T) {
	if os.Getenv("MAKETEST_FAIL") != "" {
		t.Fatal("failing, as MAKETEST_FAIL asks")
	}
}
