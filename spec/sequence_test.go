package spec

import (
	"testing"
	"time"
)

func TestSequenceDefaults(t *testing.T) {
	n := Tenant{ID: "acme", Sequence: &Sequence{Pattern: `^(?P<seq>\d+)$`}}.WithDefaults().Sequence
	if n.Kind != SequenceNumber || n.Start == nil || *n.Start != 1 || n.GapTimeout != "1h0m0s" || n.OnGap != OnGapHold || n.Settle != "" {
		t.Errorf("number defaults: %+v", *n)
	}
	s := Tenant{ID: "acme", Sequence: &Sequence{Pattern: `^(?P<seq>\d+)$`, Kind: SequenceName}}.WithDefaults().Sequence
	if s.Settle != "1m0s" || s.Start != nil || s.GapTimeout != "" || s.OnGap != "" {
		t.Errorf("name defaults: %+v", *s)
	}
	r, err := s.Compile()
	if err != nil || r.Settle != time.Minute {
		t.Errorf("name rule: %+v, %v", r, err)
	}
}

func TestSequenceValue(t *testing.T) {
	num, err := Sequence{Pattern: `^orders-(?P<seq>[0-9]+)\.csv$`}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	name, err := Sequence{Pattern: `^(?:[a-z]+/)?batch-(?P<seq>[0-9T]+)\.csv$`, Kind: SequenceName}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rule SequenceRule
		name string
		ok   bool
		num  int64
		text string
	}{
		{num, "orders-000041.csv", true, 41, "000041"},
		{num, "orders-0.csv", true, 0, "0"},
		{num, "orders-41.csv.tmp", false, 0, ""},
		{num, "sub/orders-41.csv", false, 0, ""},
		{num, "orders-99999999999999999999.csv", false, 0, ""}, // over 63 bits: unmatched, never wrapped
		{name, "batch-20261205T0600.csv", true, 0, "20261205T0600"},
		{name, "eu/batch-20261205T0600.csv", true, 0, "20261205T0600"},
		{name, "batch-.csv", false, 0, ""},
	} {
		v, ok := tc.rule.Value(tc.name)
		if ok != tc.ok || v.Num != tc.num || v.Text != tc.text {
			t.Errorf("%s: got %+v, %v; want %d %q, %v", tc.name, v, ok, tc.num, tc.text, tc.ok)
		}
	}
	// A digit group of another script is not a decimal number here.
	if _, ok := (Sequence{Pattern: `^(?P<seq>\d+|[٠-٩]+)$`}.withDefaults().mustCompile(t)).Value("٤٢"); ok {
		t.Error("Arabic-Indic digits read as a number")
	}
}

func (s Sequence) mustCompile(t *testing.T) SequenceRule {
	r, err := s.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSequenceDefaultsToHalt(t *testing.T) {
	for _, tc := range []struct {
		in   Tenant
		want string
	}{
		{Tenant{ID: "a"}, OnFailureContinue},
		{Tenant{ID: "a", Sequence: &Sequence{Pattern: `(?P<seq>\d+)`}}, OnFailureHalt},
		{Tenant{ID: "a", OnFailure: OnFailureContinue, Sequence: &Sequence{Pattern: `(?P<seq>\d+)`}}, OnFailureContinue},
		{Tenant{ID: "a", RecordOrder: RecordOrderKey, KeyColumns: []string{"order"}}, OnFailureHalt},
		{Tenant{ID: "a", RecordOrder: RecordOrderFile}, OnFailureContinue},
		{Tenant{ID: "a", RecordOrder: RecordOrderKey, KeyColumns: []string{"order"}, OnFailure: OnFailureContinue}, OnFailureContinue},
	} {
		if got := tc.in.WithDefaults().OnFailure; got != tc.want {
			t.Errorf("%+v: onFailure %q, want %q", tc.in, got, tc.want)
		}
	}
}
