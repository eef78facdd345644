package tenantpipeline

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3assets"
	"github.com/aws/jsii-runtime-go"
)

// Lambda packages, relative to the module root. The harness reads them from the functions'
// metadata (MetadataSource) to run the same code locally.
const (
	pkgController = "lambdas/controller"
	pkgSplit      = "lambdas/split"
	pkgRegister   = "lambdas/register"

	// MetadataSource is the resource metadata key naming a function's Go main package.
	MetadataSource = "tenantpipeline:source"
)

// goBundler builds a Lambda main package on this machine, without Docker: linux/arm64, static,
// -tags lambda.norpc, an executable named bootstrap for the provided.al2023 runtime.
// https://docs.aws.amazon.com/lambda/latest/dg/golang-package.html
//
// The asset hash is taken from the output, so a change in any shared package redeploys the
// function, and -trimpath with an empty build id keeps the binary (and so the hash) the same on
// every machine with the same Go version.
type goBundler struct {
	pkg string
	// files are written into the asset beside bootstrap: a pool's tenants file (PoolSettingsFile).
	files map[string][]byte
}

// TryBundle implements awscdk.ILocalBundling.
func (b *goBundler) TryBundle(outputDir *string, _ *awscdk.BundlingOptions) *bool {
	// outputDir is a bundling-temp-* folder inside the cloud assembly (cdk.out), which CDK renames
	// to asset.<hash> once the output is hashed.
	assembly := filepath.Dir(*outputDir)
	bin, err := builds.build(b.pkg, assembly)
	if err == nil {
		err = linkOrCopy(bin, filepath.Join(*outputDir, "bootstrap"))
	}
	for name, b := range b.files {
		if err == nil {
			err = os.WriteFile(filepath.Join(*outputDir, name), b, 0o644)
		}
	}
	if err != nil {
		// Returning false would make CDK fall back to Docker, which is neither wanted nor present;
		// failing synth with the build error is the useful outcome.
		panic(fmt.Errorf("bundling %s: %w", b.pkg, err))
	}
	return jsii.Bool(true)
}

// buildDir is the folder inside the cloud assembly where the binaries are built, so a synth leaves
// nothing behind in the system's temp folder: cdk.out is the one place synth writes to.
const buildDir = "tenantpipeline-build"

// buildCache builds each package once per process while its assembly is there, however many
// tenants and apps use it. CDK already bundles an asset once per assembly; the cache saves the
// link step when one process synthesizes several apps (the tests).
type buildCache struct {
	mu   sync.Mutex
	bins map[string]string
}

var builds = &buildCache{bins: map[string]string{}}

func (c *buildCache) build(pkg, assembly string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if bin, ok := c.bins[pkg]; ok {
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(assembly, buildDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, strings.ReplaceAll(pkg, "/", "_"))
	// A binary from an earlier synth into the same cdk.out is hard-linked into an asset folder
	// named by its hash: the new build must be a new file, never a rewrite of that one.
	if err := os.Remove(bin); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	cmd := exec.Command("go", "build", "-trimpath", "-tags", "lambda.norpc", "-ldflags", "-s -w -buildid=", "-o", bin, "./"+pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./%s in %s: %w\n%s", pkg, root, err, out.String())
	}
	c.bins[pkg] = bin
	return bin, nil
}

// moduleRoot finds this module's source, both in its own checkout and when a user's CDK app
// imports the construct from the module cache.
var moduleRoot = sync.OnceValues(func() (string, error) {
	mod := strings.TrimSuffix(reflect.TypeFor[Props]().PkgPath(), "/constructs/tenantpipeline")
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod).Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s with go list: %w", mod, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("module %s has no source directory", mod)
	}
	return dir, nil
})

// linkOrCopy puts the binary into the asset folder as a hard link, so the assembly holds one
// copy of it; across file systems it copies.
func linkOrCopy(src, dst string) error {
	if os.Link(src, dst) == nil {
		return nil
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

// lambdaCode returns the bundled code of a Lambda package.
func lambdaCode(pkg string) awslambda.Code { return lambdaCodeWith(pkg, nil) }

// lambdaCodeWith returns the bundled code of a Lambda package with files beside its executable.
func lambdaCodeWith(pkg string, files map[string][]byte) awslambda.Code {
	root, err := moduleRoot()
	if err != nil {
		panic(err)
	}
	return awslambda.Code_FromAsset(jsii.String(root), &awss3assets.AssetOptions{
		AssetHashType: awscdk.AssetHashType_OUTPUT,
		Bundling: &awscdk.BundlingOptions{
			// Required by the type, never pulled: local bundling always succeeds or fails synth.
			Image: awscdk.DockerImage_FromRegistry(jsii.String("scratch")),
			// CDK keys its bundling cache on these options, not on the Go bundler value, so the
			// command that describes the build must name the package, or every function of a
			// stack would get the first one's binary.
			Command: jsii.Strings(append([]string{"go", "build", "-trimpath", "-tags", "lambda.norpc", "-o", "/asset-output/bootstrap", "./" + pkg}, filesDigest(files)...)...),
			Local:   &goBundler{pkg: pkg, files: files},
		},
	})
}

// filesDigest names the extra files of an asset in its bundling command, for the same reason the
// command names the package: CDK keys its bundling cache on the options.
func filesDigest(files map[string][]byte) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		sum := sha256.Sum256(files[name])
		out = append(out, "&&", "write", name, "sha256:"+hex.EncodeToString(sum[:]))
	}
	return out
}
