package main

import (
	"context"
	"fmt"
	"io"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
)

// The CDK app's first compile, a slow step under --setup-timeout; tests replace both.
var (
	appBuilt = deploy.AppBuilt
	buildApp = deploy.BuildApp
)

// firstCompile says what a first run compiles and about how long it takes: cdk synth runs the Go
// CDK app, and its first build compiles the CDK's Go bindings, about 340 packages. The figure is
// the one measured on 2 cores (docs/development.md, "First run"); a warm build takes seconds.
const firstCompile = "compiling the CDK app (first run only: about 10 minutes on 2 cores)"

// compileApp compiles the CDK app on its own before cdk synth when it is not in the build cache,
// so that the minutes it takes are announced and counted as what they are instead of as synth.
// When go list cannot tell, the app is compiled: a built app costs the step seconds.
func compileApp(ctx context.Context, stdout io.Writer, root string) error {
	if built, err := appBuilt(ctx, root); err == nil && built {
		return nil
	}
	fmt.Fprintf(stdout, "phase 1/3: %s ...\n", firstCompile)
	return phase(ctx, stdout, firstCompile, func(ctx context.Context) error { return buildApp(ctx, root) })
}
