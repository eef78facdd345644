package test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/stacks"
)

// Many tests read the same app (testdata/pool.json above all): building it and rendering a stack's
// template are the slow steps of this package (a synth each, through jsii), so both are done once
// per test binary and input. An app is keyed by its options and the bytes of its tenants and
// assignment files, so a test that writes its own tenants file gets its own app. Each caller gets
// its own decoded copy of a template, so a test that edits one (intakeRules does) cannot change
// what another reads.
//
// Every app of the test binary writes its cloud assembly to a folder of its own under one folder
// that lives as long as the test binary (testApp), never to a test's temporary folder: the
// construct builds each Lambda package once per process while the assembly that holds the binary
// is there, so each package is built once per test binary rather than once per app.

var synthCache struct {
	sync.Mutex
	dir       string // holds the output folder of every app; removed by TestMain
	apps      map[string]*cachedApp
	templates map[awscdk.Stack][]byte
}

// testApp is a new app writing to a new folder under the one every app of the test binary shares.
func testApp(t *testing.T) awscdk.App {
	t.Helper()
	return testAppWithContext(t, nil)
}

// testAppWithContext is testApp with context values (nil for none).
func testAppWithContext(t *testing.T, context map[string]any) awscdk.App {
	t.Helper()
	synthCache.Lock()
	defer synthCache.Unlock()
	props := &awscdk.AppProps{Outdir: jsii.String(appOutdir(t))}
	if context != nil {
		props.Context = &context
	}
	return awscdk.NewApp(props)
}

// appOutdir is a new output folder for one app; the caller holds synthCache.
func appOutdir(t *testing.T) string {
	t.Helper()
	if synthCache.dir == "" {
		dir, err := os.MkdirTemp("", "test-cdk-out-")
		if err != nil {
			t.Fatal(err)
		}
		synthCache.dir = dir
	}
	dir, err := os.MkdirTemp(synthCache.dir, "app-")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

type cachedApp struct {
	app   awscdk.App
	built *stacks.App
	err   error
}

// builtApp builds the app for o once per test binary (stacks.Build, as `cdk synth` would). The app
// is shared: read it, never add to it.
func builtApp(t *testing.T, o stacks.Options) (awscdk.App, *stacks.App) {
	t.Helper()
	key := appKey(t, o)
	synthCache.Lock()
	defer synthCache.Unlock()
	c, ok := synthCache.apps[key]
	if !ok {
		if synthCache.apps == nil {
			synthCache.apps, synthCache.templates = map[string]*cachedApp{}, map[awscdk.Stack][]byte{}
		}
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(appOutdir(t))})
		c = &cachedApp{app: app}
		c.built, c.err = stacks.Build(app, o)
		synthCache.apps[key] = c
	}
	if c.err != nil {
		t.Fatalf("Build: %v", c.err)
	}
	return c.app, c.built
}

// appKey names an app by its options and the contents of the files it reads.
func appKey(t *testing.T, o stacks.Options) string {
	t.Helper()
	assignment := o.AssignmentFile
	if assignment == "" {
		assignment = o.TenantsFile[:len(o.TenantsFile)-len(filepath.Ext(o.TenantsFile))] + ".stacks.json"
	}
	h := sha256.New()
	fmt.Fprintf(h, "%#v\x00", o)
	for _, f := range []string{o.TenantsFile, assignment} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// stackTemplate is the template of a stack, rendered once per stack (each render synthesizes the
// whole app) and decoded afresh for each caller.
func stackTemplate(t *testing.T, stack awscdk.Stack) map[string]any {
	t.Helper()
	synthCache.Lock()
	b, ok := synthCache.templates[stack]
	if !ok {
		var err error
		if b, err = json.Marshal(templateJSON(assertions.Template_FromStack(stack, nil))); err != nil {
			synthCache.Unlock()
			t.Fatal(err)
		}
		if synthCache.templates == nil {
			synthCache.templates = map[awscdk.Stack][]byte{}
		}
		synthCache.templates[stack] = b
	}
	synthCache.Unlock()
	var tpl map[string]any
	if err := json.Unmarshal(b, &tpl); err != nil {
		t.Fatal(err)
	}
	return tpl
}

// stackAssertions is stackTemplate as an assertions.Template, for the matchers.
func stackAssertions(t *testing.T, stack awscdk.Stack) assertions.Template {
	t.Helper()
	tpl := stackTemplate(t, stack)
	return assertions.Template_FromJSON(&tpl, nil)
}

// removeSynthCache removes the apps' output folders (TestMain, after the tests).
func removeSynthCache() {
	if synthCache.dir != "" {
		os.RemoveAll(synthCache.dir)
	}
}
