package spec_test

import (
	"fmt"

	"github.com/example/tenantpipeline/spec"
)

// A tenant whose files carry a number: orders-000041.csv runs after orders-000040.csv, whatever
// order they arrive in; a missing number holds the later files for at most 30 minutes before the
// SequenceGap alarm, and the tenant halts at a failed file by default.
func ExampleSequence() {
	t := spec.Tenant{ID: "acme", RegisterURL: "https://core.example.com/records",
		Sequence: &spec.Sequence{Pattern: `^orders-(?P<seq>[0-9]+)\.csv$`, GapTimeout: "30m"}}.WithDefaults()
	fmt.Println(len(t.Check()), "problems; onFailure", t.OnFailure)
	r, _ := t.Sequence.Compile()
	for _, name := range []string{"orders-000041.csv", "orders-41.csv.tmp"} {
		v, ok := r.Value(name)
		fmt.Println(name, v.Num, ok)
	}
	// Output:
	// 0 problems; onFailure halt
	// orders-000041.csv 41 true
	// orders-41.csv.tmp 0 false
}

// A sequence the rules refuse names the field, as the tenants file renders it.
func ExampleSequence_Check() {
	for _, p := range (spec.Sequence{Pattern: `^orders-([0-9]+)\.csv$`, Kind: "date"}).Check() {
		fmt.Println(p.Path)
	}
	// Output:
	// sequence.pattern
	// sequence.kind
}
