package localrun

import (
	"os"
	"testing"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
)

// moduleRoot is the module's root, where the scenarios find the Node the emulators run on; it
// is untagged because the figure charts (TestFigureCharts) write under it too.
func moduleRoot(t *testing.T) string {
	t.Helper()
	wd, _ := os.Getwd()
	root, err := deploy.ModuleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(deploy.NodeBinary(root)); err != nil {
		t.Fatalf("Node 22 is missing (%v): run make setup", err)
	}
	return root
}
