package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestWakeKeys(t *testing.T) {
	if got, want := WakeStateKey(SiloOwner("acme")), "control/acme/wake.json"; got != want {
		t.Errorf("WakeStateKey: got %q, want %q", got, want)
	}
	if got, want := WakeDoneKey(SiloOwner("acme")), "control/acme/wake-done.json"; got != want {
		t.Errorf("WakeDoneKey: got %q, want %q", got, want)
	}
}

// The sequence's objects sit under the tenant's control prefix, which the bucket's Deny protects
// and the controller may list.
func TestSequencePrefix(t *testing.T) {
	if got, want := SequencePrefix(SiloOwner("acme")), "control/acme/sequence/"; got != want {
		t.Errorf("SequencePrefix: got %q, want %q", got, want)
	}
}

func TestDecodeWakeState(t *testing.T) {
	good := readFixture(t, "wake-state.json")
	want := WakeState{
		Version:       1,
		ExecutionName: "6f1c2a3b-0d4e-4f5a-8b6c-7d8e9fa0b1c2",
		ExecutionARN:  "arn:aws:states:eu-west-1:123456789012:execution:acme-files:6f1c2a3b-0d4e-4f5a-8b6c-7d8e9fa0b1c2",
		MessageID:     "5fea7756-0ea4-451a-a703-a558b933e274",
		ReceiptHandle: "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a+MqX9S+sZ6Sr+8mY5PL+Ul4mgz5xlqKw8GAQsK6ETBchfgIN+jnsc+QMoTv2Jb/tO0xGhN==",
		QueueURL:      "https://sqs.eu-west-1.amazonaws.com/123456789012/acme.fifo",
		WrittenAt:     time.Date(2024, 5, 1, 9, 0, 0, 123e6, time.UTC),
	}
	tests := []struct {
		name    string
		in      string
		wantErr string // "" means valid
	}{
		{"fixture", good, ""},
		{"trailing newline is whitespace", good + "\n", ""},
		{"trailing object", good + `{}`, "data after the JSON object"},
		{"trailing garbage", good + ` x`, "data after"},
		{"unknown field", strings.Replace(good, `"version":1`, `"version":1,"status":"RUNNING"`, 1), "unknown field"},
		{"other version", strings.Replace(good, `"version":1`, `"version":2`, 1), "version 2, want 1"},
		{"no receipt handle", strings.Replace(good, want.ReceiptHandle, "", 1), "receiptHandle is empty"},
		{"no writtenAt", strings.Replace(good, `,"writtenAt":"2024-05-01T09:00:00.123Z"`, "", 1), "writtenAt is missing"},
		{"null", "null", "version 0"},
		{"empty", "", "EOF"},
		{"array", "[]", "cannot unmarshal"},
		{"too large", good[:len(good)-1] + strings.Repeat(" ", MaxWakeObjectBytes) + "}", "more than the 8192"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeWakeState([]byte(tt.in))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
				if got != want {
					t.Errorf("got %+v, want %+v", got, want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestWakeStateRoundTrip(t *testing.T) {
	s, err := DecodeWakeState([]byte(readFixture(t, "wake-state.json")))
	if err != nil {
		t.Fatal(err)
	}
	b, err := EncodeWakeState(s)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), readFixture(t, "wake-state.json"); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	s.QueueURL = ""
	if _, err := EncodeWakeState(s); err == nil || !strings.Contains(err.Error(), "queueUrl is empty") {
		t.Errorf("got error %v, want one naming queueUrl", err)
	}
}

func TestDecodeWakeDone(t *testing.T) {
	good := readFixture(t, "wake-done.json")
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"fixture", good, ""},
		{"failed", strings.Replace(good, "SUCCEEDED", "FAILED", 1), ""},
		{"timed out", strings.Replace(good, "SUCCEEDED", "TIMED_OUT", 1), ""},
		{"aborted", strings.Replace(good, "SUCCEEDED", "ABORTED", 1), ""},
		{"running is not an end", strings.Replace(good, "SUCCEEDED", "RUNNING", 1), `status "RUNNING" is not a terminal status`},
		{"pending redrive is not an end", strings.Replace(good, "SUCCEEDED", "PENDING_REDRIVE", 1), "not a terminal status"},
		{"lower case", strings.Replace(good, "SUCCEEDED", "succeeded", 1), "not a terminal status"},
		{"trailing data", good + good, "data after"},
		{"unknown field", strings.Replace(good, `"version":1`, `"version":1,"receiptHandle":"x"`, 1), "unknown field"},
		{"with the event's dates", strings.Replace(good, `"version":1`, `"version":1,"startDate":"2024-05-01T09:00:00Z","stopDate":"2024-05-01T09:04:10Z"`, 1), ""},
		{"no name", strings.Replace(good, `"executionName":"6f1c2a3b-0d4e-4f5a-8b6c-7d8e9fa0b1c2"`, `"executionName":""`, 1), "executionName is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeWakeDone([]byte(tt.in))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
				if got.ExecutionName != "6f1c2a3b-0d4e-4f5a-8b6c-7d8e9fa0b1c2" || got.EventID != "315c1398-40ff-a850-213b-158f73e60175" {
					t.Errorf("got %+v, want the fixture's name and event id", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
