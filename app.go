// Command tenantpipeline is the CDK app: it reads the tenants file named by the tenantsFile context
// (default tenants.json) and synthesizes the ingest stack and the tenant stacks.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/stacks"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	opts, err := stacks.OptionsFromContext(app)
	if err == nil {
		_, err = stacks.Build(app, opts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "synth failed:", err)
		jsii.Close()
		os.Exit(1)
	}
	app.Synth(nil)
}
