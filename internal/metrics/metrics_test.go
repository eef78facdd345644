package metrics

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var clock = func() time.Time { return time.UnixMilli(1700000000123) }

func TestEmitMatchesGolden(t *testing.T) {
	var buf bytes.Buffer
	e := New(&buf, "TenantPipeline", "acme").WithClock(clock)
	if err := e.Emit(Count(Waits, 1), Seconds(HeadQueuedSeconds, 2500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "waits.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got, wantDoc any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("got invalid JSON %q: %v", buf.String(), err)
	}
	if err := json.Unmarshal(want, &wantDoc); err != nil {
		t.Fatal(err)
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(wantDoc)
	if !bytes.Equal(gj, wj) {
		t.Errorf("got %s, want %s", gj, wj)
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 || !strings.HasSuffix(buf.String(), "\n") {
		t.Errorf("got %d newlines, want exactly one line ending in a newline", n)
	}
}

func TestEmitRejects(t *testing.T) {
	tests := []struct {
		name string
		ms   []Metric
	}{
		{"dimension name", []Metric{Count(DimensionTenant, 1)}},
		{"metadata key", []Metric{Count("_aws", 1)}},
		{"empty name", []Metric{Count("", 1)}},
		{"duplicate", []Metric{Count(Waits, 1), Count(Waits, 2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := New(&buf, "ns", "t").Emit(tt.ms...)
			if err == nil {
				t.Fatalf("got no error, want one")
			}
			if buf.Len() != 0 {
				t.Errorf("got output %q, want none", buf.String())
			}
		})
	}
}

func TestEmitNothing(t *testing.T) {
	var buf bytes.Buffer
	if err := New(&buf, "ns", "t").Emit(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Errorf("got output %q, want none", buf.String())
	}
}
