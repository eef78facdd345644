//go:build e2e

package maketest

import (
	"testing"
	"time"
)

// TestEndToEndLane stands for the end-to-end lane: make test runs it, make test-fast does not. It
// is the slowest of the package, so that it heads the slowest tests.
func TestEndToEndLane(t *testing.T) { time.Sleep(100 * time.Millisecond) }
