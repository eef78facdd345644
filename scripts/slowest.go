//go:build ignore

// Slowest prints the packages of a `go test -json` log that took longest, slowest first, one
// line each: go run scripts/slowest.go [-n 5] FILE. make test prints them before gotestsum's
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
	n := flag.Int("n", 5, "how many packages to print")
	flag.Parse()
	if err := run(flag.Arg(0), *n, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "slowest:", err)
		os.Exit(1)
	}
}

func run(path string, n int, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var done []event
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
		case e.Test != "":
		case e.Action == "output" && strings.HasSuffix(e.Output, "(cached)\n"):
			cached[e.Package] = true
		case e.Action == "pass" || e.Action == "fail":
			done = append(done, e)
		}
	}
	slices.SortStableFunc(done, func(a, b event) int { return cmp.Compare(b.Elapsed, a.Elapsed) })
	fmt.Fprintln(out, "slowest packages:")
	for _, e := range done[:min(n, len(done))] {
		note := ""
		if cached[e.Package] {
			note = " (cached)"
		}
		fmt.Fprintf(out, "  %8.1fs  %s %s%s\n", e.Elapsed, e.Action, e.Package, note)
	}
	return nil
}
