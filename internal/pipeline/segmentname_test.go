package pipeline

import (
	"regexp"
	"strings"
	"testing"
)

// awsForbidden is the characters AWS forbids in an execution name (whitespace, brackets, wildcards,
// the listed punctuation, control characters); a name is also 1–80 characters long
// (https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html#StepFunctions-StartExecution-request-name).
var awsForbidden = regexp.MustCompile("[\\s<>{}\\[\\]?*\"#%\\\\^|~`$&,;:/\u0000-\u001f\u007f-\u009f]")

func TestSegmentExecutionName(t *testing.T) {
	long := strings.Repeat("a", 80)
	tests := []struct {
		file           string
		index, redrive int
		want           string // known answers: printf '%s' FILE | sha1sum
	}{
		{"ov-0123", 0, 0, "64dbb55a46dcb4418af033c8032012c088bd2051-s0-r0"},
		{"3f9ad4c6-7c1e-4d5a-9a43-0b2f1c2d3e4f", 2499, 1000, "459cc96ef28a7cb17b690f589aa7681877f6b6fe-s2499-r1000"},
		{long, 3, 1, "86f33652fcffd7fa1443e246dd34fe5d00e25ffd-s3-r1"}, // an 80-character file name
	}
	for _, tt := range tests {
		got := SegmentExecutionName(tt.file, tt.index, tt.redrive)
		if got != tt.want {
			t.Errorf("SegmentExecutionName(%q, %d, %d): got %s, want %s", tt.file, tt.index, tt.redrive, got, tt.want)
		}
		if len(got) < 1 || len(got) > 80 || awsForbidden.MatchString(got) {
			t.Errorf("SegmentExecutionName(%q, %d, %d) = %q: not a valid execution name (1-80 characters, allowed set)", tt.file, tt.index, tt.redrive, got)
		}
	}
	if a, b := SegmentExecutionName("f", 1, 0), SegmentExecutionName("f", 1, 1); a == b {
		t.Errorf("a redrive must name a new child: both %s", a)
	}
	if a, b := SegmentExecutionName("f", 1, 0), SegmentExecutionName("f", 2, 0); a == b {
		t.Errorf("two segments must have two names: both %s", a)
	}
}
