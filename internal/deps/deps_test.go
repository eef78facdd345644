package deps

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/example/tenantpipeline"

// sdkServices are the AWS SDK's service clients: the synth side (the CDK app, the construct, the
// workflows, the stacks) describes resources and never calls AWS, so it links none of them.
const sdkServices = "github.com/aws/aws-sdk-go-v2/service/"

// synthSide are the packages that make up the CDK app: `cdk synth` compiles every one of them on
// a first run, so each SDK client they pulled in would be minutes of compiling for nothing.
var synthSide = []string{
	".",
	"constructs/...",
	"workflows",
	"internal/stacks",
	"internal/localrun/deploy/synthbatch",
}

// lambdaRoles is each Lambda's allowed set of the module's packages: its role's package and what
// the role shares (configuration, the contract, the pool's credentials). A Lambda's main.go is
// wiring; a new import here is a new duty of the function, and should be a decision.
var lambdaRoles = map[string][]string{
	"lambdas/controller": {"internal/awsconfig", "internal/controller", "internal/pipeline", "internal/router", "internal/tenantcreds"},
	"lambdas/register":   {"internal/awsconfig", "internal/deployed", "internal/pipeline", "internal/register", "internal/split", "internal/tenantcreds"},
	"lambdas/split":      {"internal/awsconfig", "internal/deployed", "internal/pipeline", "internal/split", "internal/tenantcreds"},
}

// cdkModules are the CDK's Go bindings (jsii): a Lambda that linked them would carry the jsii
// runtime into every cold start.
var cdkModules = []string{"github.com/aws/aws-cdk-go/", "github.com/aws/jsii-runtime-go", "github.com/aws/constructs-go/", "github.com/cdklabs/"}

// pkg is what the policy reads of one package (go list -json).
type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// rel is p relative to the module, "." for the module's root package.
func rel(p string) string {
	if p == module {
		return "."
	}
	return strings.TrimPrefix(p, module+"/")
}

// matches reports whether the module package p (relative) is named by pattern ("dir" or "dir/...").
func matches(pattern, p string) bool {
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == dir || strings.HasPrefix(p, dir+"/")
	}
	return p == pattern
}

func under(prefixes []string, dep string) bool {
	return slices.ContainsFunc(prefixes, func(pre string) bool { return strings.HasPrefix(dep, pre) })
}

func isStd(p string) bool { return !strings.Contains(strings.Split(p, "/")[0], ".") }

// check applies the policy to the module's packages and returns every violation.
func check(pkgs []pkg) []string {
	var bad []string
	seen := map[string]bool{}
	for _, p := range pkgs {
		r := rel(p.ImportPath)
		seen[r] = true
		if slices.ContainsFunc(synthSide, func(pat string) bool { return matches(pat, r) }) {
			var clients []string
			for _, d := range p.Deps {
				if strings.HasPrefix(d, sdkServices) {
					clients = append(clients, d)
				}
			}
			if len(clients) > 0 {
				bad = append(bad, fmt.Sprintf("%s (synth side) depends on the SDK client %s and %d more SDK service packages: move what needs them out of what the app imports", r, clients[0], len(clients)-1))
			}
		}
		if matches("internal/...", r) && r != "internal/stacks" {
			// internal/stacks assembles the app's stacks from the construct; every other internal
			// package is what the Lambdas, the tools and the construct use, never the construct.
			for _, d := range p.Imports {
				if matches("constructs/...", rel(d)) && strings.HasPrefix(d, module+"/") {
					bad = append(bad, fmt.Sprintf("%s imports the construct package %s", r, rel(d)))
				}
			}
		}
		if matches("internal/localrun/emulate/...", r) {
			for _, d := range p.Deps {
				if strings.HasPrefix(d, module+"/") && matches("internal/localrun/deploy/...", rel(d)) {
					bad = append(bad, fmt.Sprintf("%s (the emulated account) depends on %s (the deployment)", r, rel(d)))
				}
			}
		}
		if r == "internal/schema" {
			for _, d := range p.Imports {
				if !isStd(d) {
					bad = append(bad, fmt.Sprintf("internal/schema (a leaf) imports %s: it imports the standard library only", d))
				}
			}
		}
		if matches("lambdas/...", r) {
			allowed, ok := lambdaRoles[r]
			if !ok {
				bad = append(bad, fmt.Sprintf("%s has no row in lambdaRoles: write down which packages it may import", r))
			}
			for _, d := range p.Imports {
				if strings.HasPrefix(d, module+"/") && !slices.Contains(allowed, rel(d)) {
					bad = append(bad, fmt.Sprintf("%s imports %s, outside its role's packages %v", r, rel(d), allowed))
				}
			}
			for _, d := range p.Deps {
				if under(cdkModules, d) {
					bad = append(bad, fmt.Sprintf("%s depends on the CDK's bindings %s", r, d))
				}
			}
		}
	}
	// A rule about a package that no longer exists guards nothing.
	for _, pat := range append(slices.Clone(synthSide), "internal/stacks", "internal/schema", "internal/localrun/emulate", "internal/localrun/deploy") {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(seen)), func(r string) bool { return matches(pat, r) }) {
			bad = append(bad, fmt.Sprintf("the policy names %s, which go list did not find", pat))
		}
	}
	for l := range lambdaRoles {
		if !seen[l] {
			bad = append(bad, fmt.Sprintf("lambdaRoles names %s, which go list did not find", l))
		}
	}
	sort.Strings(bad)
	return slices.Compact(bad)
}

// list runs go list over the whole module: each package's direct imports and every package it
// depends on, without building anything.
func list(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Deps", module+"/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestImportPolicy holds the module to the policy above.
func TestImportPolicy(t *testing.T) {
	for _, v := range check(list(t)) {
		t.Error(v)
	}
}

// TestPolicyCatches gives the checker a module graph that breaks each rule once and a clean one:
// each rule must name its break, and the clean graph must pass.
func TestPolicyCatches(t *testing.T) {
	m := func(p string) string {
		if p == "." {
			return module
		}
		return path.Join(module, p)
	}
	clean := []pkg{
		{ImportPath: m("."), Imports: []string{m("internal/stacks")}, Deps: []string{m("internal/stacks"), m("constructs/tenantpipeline")}},
		{ImportPath: m("constructs/tenantpipeline"), Imports: []string{m("internal/schema")}, Deps: []string{m("internal/schema"), "fmt"}},
		{ImportPath: m("workflows")},
		{ImportPath: m("internal/stacks"), Imports: []string{m("constructs/tenantpipeline")}, Deps: []string{m("constructs/tenantpipeline")}},
		{ImportPath: m("internal/localrun/deploy/synthbatch"), Imports: []string{m("internal/stacks")}},
		{ImportPath: m("internal/schema"), Imports: []string{"fmt", "hash/fnv"}},
		{ImportPath: m("internal/localrun/emulate"), Deps: []string{sdkServices + "dynamodb"}},
		{ImportPath: m("internal/localrun/deploy")},
		{ImportPath: m("lambdas/controller"), Imports: []string{m("internal/controller")}, Deps: []string{sdkServices + "sqs"}},
		{ImportPath: m("lambdas/register"), Imports: []string{m("internal/register")}},
		{ImportPath: m("lambdas/split"), Imports: []string{m("internal/split")}},
	}
	if got := check(clean); len(got) != 0 {
		t.Fatalf("clean graph: got %q, want no violation", got)
	}
	with := func(change func([]pkg) []pkg) []pkg {
		c := make([]pkg, len(clean))
		for i, p := range clean {
			c[i] = pkg{p.ImportPath, slices.Clone(p.Imports), slices.Clone(p.Deps)}
		}
		return change(c)
	}
	set := func(rel string, f func(*pkg)) func([]pkg) []pkg {
		return func(ps []pkg) []pkg {
			for i := range ps {
				if ps[i].ImportPath == m(rel) {
					f(&ps[i])
				}
			}
			return ps
		}
	}
	for _, tc := range []struct {
		name  string
		graph []pkg
		want  string
	}{
		{"construct links an SDK client", with(set("constructs/tenantpipeline", func(p *pkg) { p.Deps = append(p.Deps, sdkServices+"s3") })),
			"constructs/tenantpipeline (synth side) depends on the SDK client"},
		{"app links an SDK client", with(set(".", func(p *pkg) { p.Deps = append(p.Deps, sdkServices+"sqs/types") })),
			". (synth side) depends on the SDK client"},
		{"workflows link an SDK client", with(set("workflows", func(p *pkg) { p.Deps = append(p.Deps, sdkServices+"sfn") })),
			"workflows (synth side)"},
		{"internal package imports the construct", with(func(ps []pkg) []pkg {
			return append(ps, pkg{ImportPath: m("internal/ops"), Imports: []string{m("constructs/tenantpipeline")}})
		}), "internal/ops imports the construct package"},
		{"emulator depends on the deployment", with(set("internal/localrun/emulate", func(p *pkg) { p.Deps = append(p.Deps, m("internal/localrun/deploy")) })),
			"internal/localrun/emulate (the emulated account) depends on internal/localrun/deploy"},
		{"schema imports a module", with(set("internal/schema", func(p *pkg) { p.Imports = append(p.Imports, "github.com/aws/aws-sdk-go-v2/aws") })),
			"internal/schema (a leaf) imports github.com/aws/aws-sdk-go-v2/aws"},
		{"lambda imports another role", with(set("lambdas/split", func(p *pkg) { p.Imports = append(p.Imports, m("internal/controller")) })),
			"lambdas/split imports internal/controller, outside its role's packages"},
		{"lambda links the CDK", with(set("lambdas/register", func(p *pkg) { p.Deps = append(p.Deps, "github.com/aws/aws-cdk-go/awscdk/v2") })),
			"lambdas/register depends on the CDK's bindings"},
		{"new lambda without a row", with(func(ps []pkg) []pkg { return append(ps, pkg{ImportPath: m("lambdas/sweep")}) }),
			"lambdas/sweep has no row in lambdaRoles"},
		{"rule about a removed package", with(func(ps []pkg) []pkg {
			return slices.DeleteFunc(ps, func(p pkg) bool { return p.ImportPath == m("internal/schema") })
		}), "the policy names internal/schema, which go list did not find"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := check(tc.graph)
			if !slices.ContainsFunc(got, func(v string) bool { return strings.Contains(v, tc.want) }) {
				t.Errorf("got %q, want a violation containing %q", got, tc.want)
			}
		})
	}
}
