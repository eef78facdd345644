package spec

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// Sequence is a tenant's own order of files (README, "Order"): each file's name carries a
// sequence value, and the tenant's files run in that order instead of the order their events
// reached the queue. A file ahead of its turn is held; a file that cannot run (its name does not
// match, or its value was processed, is held already or comes too late) is refused, with results
// saying why, and stays in the bucket.
type Sequence struct {
	// Pattern is an RE2 regular expression over the file's name relative to the tenant's prefix,
	// with exactly one named group "seq" that captures the file's sequence value. Required.
	Pattern string `json:"pattern"`
	// Kind is "number" (seq is a decimal integer; files run in ascending number, each number once,
	// the next expected being the last one plus one) or "name" (seq compares as text, for example a
	// timestamp; a file waits Settle after its arrival for earlier names). Default: "number".
	Kind string `json:"kind,omitempty"`
	// Start is the first number a new tenant expects, 0 or more (kind number). Default: 1.
	Start *int64 `json:"start,omitempty"`
	// Settle is how long a file waits after its arrival for files with earlier names, as a Go
	// duration ("60s", "5m"), 0 to 24h (kind name). Default: "60s".
	Settle string `json:"settle,omitempty"`
	// GapTimeout is how long a missing number may hold later files before the SequenceGap alarm
	// goes off and, with OnGap "skip", the missing numbers are skipped: a Go duration, 1s to 336h
	// (14 days) (kind number). Default: "1h".
	GapTimeout string `json:"gapTimeout,omitempty"`
	// OnGap is "hold" (later files wait until the missing file arrives or an operator skips its
	// number) or "skip" (after GapTimeout the missing numbers are recorded as skipped and the tenant
	// goes on; a skipped file that arrives later is refused as late) (kind number). Default: "hold".
	OnGap string `json:"onGap,omitempty"`
}

// Sequence kinds, gap policies and limits.
const (
	SequenceNumber = "number"
	SequenceName   = "name"

	OnGapHold = "hold"
	OnGapSkip = "skip"

	// SequenceGroup is the named group of Sequence.Pattern that captures the value.
	SequenceGroup = "seq"

	DefaultSequenceStart      = 1
	DefaultSequenceSettle     = 60 * time.Second
	MaxSequenceSettle         = 24 * time.Hour
	DefaultSequenceGapTimeout = time.Hour
	MinSequenceGapTimeout     = time.Second
	MaxSequenceGapTimeout     = 14 * 24 * time.Hour
	// MaxSequencePatternBytes bounds the pattern: it travels in every execution's settings.
	MaxSequencePatternBytes = 512
)

// withDefaults is s with its kind's defaults filled in.
func (s Sequence) withDefaults() Sequence {
	if s.Kind == "" {
		s.Kind = SequenceNumber
	}
	switch s.Kind {
	case SequenceNumber:
		if s.Start == nil {
			start := int64(DefaultSequenceStart)
			s.Start = &start
		}
		if s.GapTimeout == "" {
			s.GapTimeout = DefaultSequenceGapTimeout.String()
		}
		if s.OnGap == "" {
			s.OnGap = OnGapHold
		}
	case SequenceName:
		if s.Settle == "" {
			s.Settle = DefaultSequenceSettle.String()
		}
	}
	return s
}

// check reports the problems of a sequence with its defaults, each under path "sequence.<field>".
func (s Sequence) check(bad func(path, format string, args ...any)) {
	if _, err := s.Compile(); err != nil {
		bad("sequence.pattern", "%v", err)
	}
	switch s.Kind {
	case SequenceNumber:
		if s.Settle != "" {
			bad("sequence.settle", "is set, but only kind %q waits to settle; a number's gaps are known: leave it out", SequenceName)
		}
		if s.Start != nil && *s.Start < 0 {
			bad("sequence.start", "%d is out of range: use 0 or more, or leave it out for %d", *s.Start, DefaultSequenceStart)
		}
		if d, err := time.ParseDuration(s.GapTimeout); err != nil || d < MinSequenceGapTimeout || d > MaxSequenceGapTimeout {
			bad("sequence.gapTimeout", "%q is invalid: use a duration from 1s to 336h (14 days), such as \"30m\", or leave it out for 1h", s.GapTimeout)
		}
		if s.OnGap != OnGapHold && s.OnGap != OnGapSkip {
			bad("sequence.onGap", "%q is invalid: use %q or %q", s.OnGap, OnGapHold, OnGapSkip)
		}
	case SequenceName:
		for _, f := range []struct {
			path string
			set  bool
		}{{"sequence.start", s.Start != nil}, {"sequence.gapTimeout", s.GapTimeout != ""}, {"sequence.onGap", s.OnGap != ""}} {
			if f.set {
				bad(f.path, "is set, but kind %q has no numbers and so no gaps: leave it out, or use kind %q", SequenceName, SequenceNumber)
			}
		}
		if d, err := time.ParseDuration(s.Settle); err != nil || d < 0 || d > MaxSequenceSettle {
			bad("sequence.settle", "%q is invalid: use a duration from 0s to 24h, such as \"60s\", or leave it out for 60s", s.Settle)
		}
	default:
		bad("sequence.kind", "%q is invalid: use %q or %q", s.Kind, SequenceNumber, SequenceName)
	}
}

// SequenceRule is a checked Sequence, ready to read a file's value.
type SequenceRule struct {
	Kind       string
	Start      int64
	Settle     time.Duration
	GapTimeout time.Duration
	OnGap      string
	re         *regexp.Regexp
	group      int
}

// Compile checks the pattern and returns the rule of s (with its defaults).
func (s Sequence) Compile() (SequenceRule, error) {
	s = s.withDefaults()
	if s.Pattern == "" {
		return SequenceRule{}, fmt.Errorf("is required: an RE2 regular expression over the file's name relative to the tenant's prefix, with one named group (?P<%s>...)", SequenceGroup)
	}
	if len(s.Pattern) > MaxSequencePatternBytes {
		return SequenceRule{}, fmt.Errorf("is %d bytes, over the %d-byte limit", len(s.Pattern), MaxSequencePatternBytes)
	}
	re, err := regexp.Compile(s.Pattern)
	if err != nil {
		return SequenceRule{}, fmt.Errorf("%q is not an RE2 regular expression: %v", s.Pattern, err)
	}
	group, named := -1, 0
	for i, n := range re.SubexpNames() {
		switch {
		case n == SequenceGroup && group < 0:
			group = i
			named++
		case n != "":
			named++
		}
	}
	if group < 0 || named != 1 {
		return SequenceRule{}, fmt.Errorf("%q must have exactly one named group, (?P<%s>...), and no other named group", s.Pattern, SequenceGroup)
	}
	r := SequenceRule{Kind: s.Kind, OnGap: s.OnGap, re: re, group: group}
	if s.Start != nil {
		r.Start = *s.Start
	}
	r.Settle, _ = time.ParseDuration(s.Settle)
	r.GapTimeout, _ = time.ParseDuration(s.GapTimeout)
	return r, nil
}

// SequenceValue is a file's place in its tenant's sequence: Num for kind number, Text for kind
// name. Text holds the captured value for both kinds.
type SequenceValue struct {
	Num  int64
	Text string
}

// Value reads the sequence value of a file named name (relative to the tenant's prefix); ok is
// false when the name does not match, or a number's digits are not a decimal integer that fits
// in 63 bits.
func (r SequenceRule) Value(name string) (v SequenceValue, ok bool) {
	m := r.re.FindStringSubmatchIndex(name)
	if m == nil || m[2*r.group] < 0 {
		return SequenceValue{}, false
	}
	v.Text = name[m[2*r.group]:m[2*r.group+1]]
	if r.Kind != SequenceNumber {
		return v, v.Text != ""
	}
	for _, c := range v.Text {
		if c < '0' || c > '9' {
			return SequenceValue{}, false
		}
	}
	n, err := strconv.ParseInt(v.Text, 10, 64)
	if err != nil {
		return SequenceValue{}, false
	}
	v.Num = n
	return v, true
}

// Check reports the problems of s (its kind's defaults filled in), each under "sequence.<field>":
// the Lambdas check the sequence their settings carry with it, as the tenants file does.
func (s Sequence) Check() []Problem {
	var ps []Problem
	s.withDefaults().check(func(path, format string, args ...any) { ps = append(ps, Problemf(path, format, args...)) })
	return ps
}
