//go:build ignore

// Slowest prints the tests and the packages of a `go test -json` log that took longest, slowest
// first, one line each: go run scripts/slowest.go [-n 15] [-packages 5] FILE. A test is a
// top-level test (its subtests' time is part of it); a parallel test's time runs from when it
// resumed, so it is its own, not its wait for a slot. make test prints them before gotestsum's
// summary.
package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// event is the part of a test2json event this needs; a package's own events have no Test.
type event struct {
	Action, Package, Test, Output string
	Elapsed                       float64
}

func main() {
	tests := flag.Int("n", 15, "how many tests to print")
	packages := flag.Int("packages", 5, "how many packages to print")
	flag.Parse()
	if err := run(flag.Arg(0), *tests, *packages, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "slowest:", err)
		os.Exit(1)
	}
}

func run(path string, nTests, nPackages int, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var tests, packages []event
	cached := map[string]bool{} // a cached result's time is not this run's
	dec := json.NewDecoder(f)
	for {
		var e event
		if err := dec.Decode(&e); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		switch {
		case e.Action == "output" && e.Test == "" && strings.HasSuffix(e.Output, "(cached)\n"):
			cached[e.Package] = true
		case e.Action != "pass" && e.Action != "fail":
		case e.Test == "":
			packages = append(packages, e)
		case !strings.Contains(e.Test, "/"):
			tests = append(tests, e)
		}
	}
	tests = slices.DeleteFunc(tests, func(e event) bool { return cached[e.Package] })
	slowest := func(title string, events []event, n int, name func(event) string) {
		slices.SortStableFunc(events, func(a, b event) int { return cmp.Compare(b.Elapsed, a.Elapsed) })
		fmt.Fprintln(out, title)
		for _, e := range events[:min(n, len(events))] {
			note := ""
			if cached[e.Package] {
				note = " (cached)"
			}
			fmt.Fprintf(out, "  %8.1fs  %s %s%s\n", e.Elapsed, e.Action, name(e), note)
		}
	}
	slowest("slowest tests:", tests, nTests, func(e event) string { return e.Package + "." + e.Test })
	slowest("slowest packages:", packages, nPackages, func(e event) string { return e.Package })
	return nil
}
