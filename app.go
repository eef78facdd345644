// Command tenantpipeline is the CDK app: it reads the tenants file named by the tenantsFile context
// (default tenants.json) and synthesizes the ingest stack and the tenant stacks.
//
// Invalid input (the tenants file, context, props) prints one message naming every problem and
// exits with status 1; it never ends in a goroutine dump.
package main

import (
	"fmt"
	"os"

	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/stacks"
)

func main() {
	code := run()
	if code != 0 {
		// The jsii runtime forwards its child's stderr through os.Stderr. After a failed call
		// (a bundling failure, say) the child can still be writing when it is closed, and then
		// reports a broken pipe with a stack trace; the message already printed is the whole
		// story, so that noise goes nowhere.
		if devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
			os.Stderr = devNull
		}
	}
	jsii.Close()
	os.Exit(code)
}

func run() int {
	if err := stacks.Synth(stacks.NewApp(nil)); err != nil {
		fmt.Fprintln(os.Stderr, "synth failed:", err)
		return 1
	}
	return 0
}
