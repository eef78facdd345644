// Command synthbatch is the CDK app synthesizing many apps in one process, for the local run's
// tests (deploy.Batch): one request per line on stdin, {"outdir": DIR, "context": {...}} with the
// context `cdk synth` would pass (deploy.CLIContext), and one answer per line on stdout,
// {"error": ""} or the message that `cdk synth` would end with. It exits when stdin closes.
//
// Each app is the product's own (stacks.NewApp, stacks.Synth), so the assembly is the one cdk
// synth writes. What one process saves over a cdk synth per app: the CLI's and the jsii runtime's
// start, and the Lambda builds, which are linked once per process and hard-linked into each
// assembly.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/stacks"
)

type request struct {
	Outdir  string         `json:"outdir"`
	Context map[string]any `json:"context"`
}

type answer struct {
	Error string `json:"error"`
}

func main() {
	defer jsii.Close()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req request
		var a answer
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			a.Error = fmt.Sprintf("request: %v", err)
		} else if err := synth(req); err != nil {
			a.Error = err.Error()
		}
		if err := out.Encode(a); err != nil {
			fmt.Fprintln(os.Stderr, "synthbatch:", err)
			os.Exit(1)
		}
	}
}

// synth synthesizes one app. CDK's cache of staged assets is keyed by the assembly folder too, so
// each app gets its own assets, as with one cdk synth per app.
func synth(req request) error {
	return stacks.Synth(stacks.NewApp(&awscdk.AppProps{Outdir: jsii.String(req.Outdir), Context: &req.Context}))
}
