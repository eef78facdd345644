package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/report"
)

// make serve and make demo write different report files, so a serve session leaves the last
// demo's report.json and report.html as they were.
func TestServeAndDemoWriteTheirOwnReports(t *testing.T) {
	wd, _ := os.Getwd()
	root, err := deploy.ModuleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	reportFlag := regexp.MustCompile(`--report (\S+)`)
	recipe := func(makefile, target string) string {
		var lines []string
		in := false
		for _, l := range strings.Split(makefile, "\n") {
			switch {
			case strings.HasPrefix(l, target+":"):
				in = true
			case in && strings.HasPrefix(l, "\t"):
				lines = append(lines, l)
			case in:
				return strings.Join(lines, "\n")
			}
		}
		return strings.Join(lines, "\n")
	}
	serve := reportFlag.FindStringSubmatch(recipe(read("Makefile"), "serve"))
	demo := reportFlag.FindStringSubmatch(read("scripts/demo.sh"))
	if serve == nil || demo == nil {
		t.Fatalf("got --report of make serve %v and of scripts/demo.sh %v, want one each", serve, demo)
	}
	if serve[1] == demo[1] || report.HTMLPath(serve[1]) == report.HTMLPath(demo[1]) {
		t.Errorf("make serve writes %s (and %s), make demo %s (and %s): want different files",
			serve[1], report.HTMLPath(serve[1]), demo[1], report.HTMLPath(demo[1]))
	}
	if !strings.Contains(recipe(read("Makefile"), "demo"), "scripts/demo.sh") {
		t.Error("make demo: want it to run scripts/demo.sh")
	}
}
