package tenantpipeline

import (
	"os"
	"testing"

	"github.com/aws/jsii-runtime-go"
)

// TestMain closes the jsii runtime once the package's tests that build constructs are done.
func TestMain(m *testing.M) {
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}
