package emulate

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// builtBinaries remembers the binaries this process built, by module root and package, so that
// several runs in one process (the scenario tests) link each package once.
var builtBinaries sync.Map

// buildLocks serializes builds of one package, so that runs starting side by side (parallel
// scenarios) never write the same binary at once.
var buildLocks sync.Map

// BuildFunctionBinary builds a Lambda main package for the host (the deployed asset is
// linux/arm64), with the tag the deployed build uses, once per package and process.
func BuildFunctionBinary(ctx context.Context, moduleRoot, pkg, outDir string) (string, error) {
	if err := ctx.Err(); err != nil {
		// Setup's time is up: say so even for a binary an earlier run of this process built.
		return "", fmt.Errorf("go build %s: %w", pkg, err)
	}
	cacheKey := moduleRoot + "\x00" + pkg
	mu, _ := buildLocks.LoadOrStore(cacheKey, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if p, ok := builtBinaries.Load(cacheKey); ok {
		if _, err := os.Stat(p.(string)); err == nil {
			return p.(string), nil
		}
	}
	out, err := goBuild(ctx, moduleRoot, pkg, outDir)
	if err == nil {
		builtBinaries.Store(cacheKey, out)
	}
	return out, err
}

func goBuild(ctx context.Context, moduleRoot, pkg, outDir string) (string, error) {
	out := outDir + "/" + strings.ReplaceAll(strings.Trim(pkg, "./"), "/", "_")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-o", out, "./"+strings.TrimPrefix(pkg, "./"))
	cmd.Dir = moduleRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			// Killed because the caller's time ran out: say so, not "signal: killed".
			return "", fmt.Errorf("go build %s: %w", pkg, ctx.Err())
		}
		return "", fmt.Errorf("go build %s: %v: %s", pkg, err, stderr.String())
	}
	return out, nil
}
