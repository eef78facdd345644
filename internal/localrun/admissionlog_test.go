package localrun

import (
	"bytes"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"testing"
)

// The controllers' log lines give each execution its admission wait: the admitted line's, else the
// longest wait logged; lines split across writes and other lines are read as whole lines.
func TestAdmissionWaitsFromLogs(t *testing.T) {
	var a admissionWaits
	var out bytes.Buffer
	tap := emulate.NewLineTap(&out, a.observe)
	lines := `{"level":"INFO","msg":"waiting for admission","executionName":"acme-a","admissionWaitSeconds":1.5}
{"level":"INFO","msg":"waiting for admission","executionName":"acme-a","admissionWaitSeconds":2.5}
{"level":"INFO","msg":"file admitted","executionName":"acme-a","admissionWaitSeconds":3.25}
{"level":"INFO","msg":"waiting for admission","executionName":"hooli-b","admissionWaitSeconds":7}
{"level":"INFO","msg":"file started","executionName":"globex-c","admissionWaitSeconds":9}
not json, admission
`
	for i := 0; i < len(lines); i += 17 { // arbitrary chunks, as a pipe delivers them
		tap.Write([]byte(lines[i:min(i+17, len(lines))]))
	}
	if out.String() != lines {
		t.Errorf("passed through: got %q, want the lines unchanged", out.String())
	}
	for _, tc := range []struct {
		execution string
		want      float64
		ok        bool
	}{{"acme-a", 3.25, true}, {"hooli-b", 7, true}, {"globex-c", 0, false}, {"none", 0, false}} {
		if got, ok := a.of(tc.execution); got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %v, %v, want %v, %v", tc.execution, got, ok, tc.want, tc.ok)
		}
	}
}
