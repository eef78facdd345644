package pipeline

import (
	"github.com/aws/aws-sdk-go-v2/aws"

	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readControl(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "control", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeControlValid(t *testing.T) {
	for _, tc := range []struct {
		file string
		want ControlMessage
	}{
		{"redrive.json", ControlMessage{
			Type: ControlType, Version: 1, Action: ControlRedrive, Tenant: "acme",
			ExecutionName: "0c1f2a3b-4d5e-6f70-8192-a3b4c5d6e7f8",
			RequestedBy:   "arn:aws:sts::123456789012:assumed-role/Operator/alice",
			Reason:        "core system fixed",
			RequestedAt:   time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
			RequestID:     "5b0e6a8e-2f5c-4a0e-9d1e-7c2b9f0a1d3e",
		}},
		{"replay.json", ControlMessage{
			Type: ControlType, Version: 1, Action: ControlReplay, Tenant: "acme",
			Source: &ControlSource{Bucket: "ingest", Key: "inbox/acme/2026-11-29/orders.csv",
				VersionID: "3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY", ETag: `"d41d8cd98f00b204e9800998ecf8427e"`, Size: 1024},
			RequestedBy: "arn:aws:iam::123456789012:user/bob",
			Reason:      "core system lost the batch",
			RequestedAt: time.Date(2026, 11, 30, 12, 5, 0, 123_000_000, time.UTC),
			RequestID:   "9a7c1e2d-0b3f-4e5a-8c6d-1f2e3a4b5c6d",
		}},
		{"replay-original.json", ControlMessage{
			Type: ControlType, Version: 2, Action: ControlReplay, Tenant: "acme",
			Source: &ControlSource{Bucket: "ingest", Key: "inbox/acme/2026-11-29/orders.csv",
				VersionID: "3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY", ETag: `"d41d8cd98f00b204e9800998ecf8427e"`, Size: 1024,
				OriginalExecution: "0c1f2a3b-4d5e-6f70-8192-a3b4c5d6e7f8"},
			RequestedBy: "arn:aws:iam::123456789012:user/bob",
			Reason:      "core system lost the batch",
			RequestedAt: time.Date(2026, 11, 30, 12, 5, 0, 123_000_000, time.UTC),
			RequestID:   "9a7c1e2d-0b3f-4e5a-8c6d-1f2e3a4b5c6d",
		}},
		{"redrive-out-of-order.json", ControlMessage{
			Type: ControlType, Version: 4, Action: ControlRedrive, Tenant: "acme", ExecutionName: "0c1f2a3b-4d5e-6f70-8192-a3b4c5d6e7f8",
			OutOfOrder:  true,
			RequestedBy: "arn:aws:sts::123456789012:assumed-role/Operator/alice", Reason: "the later files hold other orders",
			RequestedAt: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), RequestID: "5b0e6a8e-2f5c-4a0e-9d1e-7c2b9f0a1d3e",
		}},
		{"sequence-skip.json", ControlMessage{
			Type: ControlType, Version: 3, Action: ControlSequenceSkip, Tenant: "acme", Number: aws.Int64(41),
			RequestedBy: "arn:aws:iam::123456789012:user/bob", Reason: "lost upload",
			RequestedAt: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), RequestID: "r1",
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			body := readControl(t, tc.file)
			if !IsControl(body) {
				t.Fatalf("IsControl: got false, want true")
			}
			got, err := DecodeControl(body)
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if got.Type != tc.want.Type || got.Version != tc.want.Version || got.Action != tc.want.Action ||
				got.Tenant != tc.want.Tenant || got.ExecutionName != tc.want.ExecutionName ||
				got.RequestedBy != tc.want.RequestedBy || got.Reason != tc.want.Reason ||
				!got.RequestedAt.Equal(tc.want.RequestedAt) || got.RequestID != tc.want.RequestID ||
				aws.ToInt64(got.Number) != aws.ToInt64(tc.want.Number) || got.OutOfOrder != tc.want.OutOfOrder {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if (got.Source == nil) != (tc.want.Source == nil) || (got.Source != nil && *got.Source != *tc.want.Source) {
				t.Errorf("source: got %+v, want %+v", got.Source, tc.want.Source)
			}
			// The encoder writes what the decoder reads back.
			enc, err := EncodeControl(got)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			again, err := DecodeControl(enc)
			if err != nil || again.RequestID != got.RequestID || again.Action != got.Action {
				t.Errorf("round trip: got %+v, %v, want %+v", again, err, got)
			}
		})
	}
}

func TestDecodeControlRejects(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []string // every fragment must be in the error
	}{
		{"unknown-field.json", []string{`unknown field "priority"`}},
		{"trailing-data.json", []string{"data after the message"}},
		{"version-5.json", []string{"version is 5, want 1 to 4"}},
		{"out-of-order-v3.json", []string{"redrive: outOfOrder needs version 4"}},
		{"out-of-order-no-reason.json", []string{"redrive: outOfOrder needs a reason"}},
		{"sequence-skip-out-of-order.json", []string{"sequence-skip: outOfOrder must be absent"}},
		{"sequence-skip-v2.json", []string{"sequence-skip: needs version 3"}},
		{"sequence-set-no-number.json", []string{"sequence-set: number must be 0 or more"}},
		{"replay-original-v1.json", []string{"replay: source.originalExecution needs version 2"}},
		{"replay-with-execution.json", []string{"replay: executionName must be absent"}},
		{"redrive-bad-name.json", []string{"redrive: executionName must be 1-80"}},
		{"replay-bad-original.json", []string{"replay: source.originalExecution must be 1-80"}},
		{"unknown-action.json", []string{`action is "delete"`}},
		{"missing-fields.json", []string{"tenant is empty", "requestId", "requestedBy is empty", "requestedAt is missing", "replay: source is missing"}},
		{"bad-time.json", []string{"requestedAt is not RFC 3339"}},
		{"long-request-id.json", []string{"requestId must be 1-64"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			_, err := DecodeControl(readControl(t, tc.file))
			if err == nil {
				t.Fatal("got no error, want one")
			}
			if !errors.Is(err, ErrInvalidControl) {
				t.Errorf("got %v, want an error wrapping ErrInvalidControl", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestDecodeControlNeverQuotesBody(t *testing.T) {
	body := []byte(`{"type":"tenantpipeline.control","version":1,"action":"redrive","tenant":"acme","executionName":"SECRET-RECORD-DATA x"}`)
	_, err := DecodeControl(body)
	if err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("got %v, want an error that does not quote the body", err)
	}
}

func TestIsControl(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"type":"tenantpipeline.control"}`, true},
		{`{"version":"0","detail-type":"Object Created","source":"aws.s3"}`, false},
		{`{"type":"other"}`, false},
		{`not json`, false},
	} {
		t.Run(tc.body, func(t *testing.T) {
			if got := IsControl([]byte(tc.body)); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReplayExecutionName(t *testing.T) {
	m := ControlMessage{RequestID: strings.Repeat("a", MaxControlRequestID)}
	// Step Functions execution names are at most 80 characters.
	// https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html#StepFunctions-StartExecution-request-name
	if n := len(m.ReplayExecutionName()); n > 80 {
		t.Errorf("got a %d-character name, want at most 80", n)
	}
	if got, want := (ControlMessage{RequestID: "r1"}).ReplayExecutionName(), "rp-r1"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestControlSourceIsVersionOf(t *testing.T) {
	v := ControlSource{Bucket: "ingest", Key: "inbox/acme/a b+c.csv", VersionID: "v1", ETag: `"e1"`}
	unversioned := ControlSource{Bucket: "ingest", Key: "inbox/acme/a.csv", ETag: `"e1"`}
	for _, tc := range []struct {
		name string
		src  ControlSource
		exec Source
		want bool
	}{
		{"same version", v, Source{Bucket: "ingest", Key: "inbox/acme/a b+c.csv", VersionID: "v1"}, true},
		{"form-encoded key in the event", v, Source{Bucket: "ingest", Key: "inbox/acme/a+b%2Bc.csv", VersionID: "v1"}, true},
		{"another version", v, Source{Bucket: "ingest", Key: "inbox/acme/a b+c.csv", VersionID: "v2"}, false},
		{"another key", v, Source{Bucket: "ingest", Key: "inbox/acme/x.csv", VersionID: "v1"}, false},
		{"another bucket", v, Source{Bucket: "other", Key: "inbox/acme/a b+c.csv", VersionID: "v1"}, false},
		{"unversioned: same ETag, quotes or not", unversioned, Source{Bucket: "ingest", Key: "inbox/acme/a.csv", ETag: "e1"}, true},
		{"unversioned: another ETag", unversioned, Source{Bucket: "ingest", Key: "inbox/acme/a.csv", ETag: "e2"}, false},
		{"unversioned: no ETag", ControlSource{Bucket: "ingest", Key: "inbox/acme/a.csv"}, Source{Bucket: "ingest", Key: "inbox/acme/a.csv"}, false},
		{"one side versioned", unversioned, Source{Bucket: "ingest", Key: "inbox/acme/a.csv", VersionID: "v1", ETag: "e1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.src.IsVersionOf(tc.exec); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
