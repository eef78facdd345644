package pipeline

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCheckControlRecord(t *testing.T) {
	n := int64(7)
	msg := ControlMessage{Type: ControlType, Version: ControlVersion, Action: ControlSequenceSkip, Tenant: "acme", Number: &n,
		RequestedBy: "arn:aws:iam::123456789012:user/alice", Reason: "lost upload", RequestedAt: time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC), RequestID: "r-1"}
	encode := func(edit func(m *ControlMessage)) []byte {
		m := msg
		if edit != nil {
			edit(&m)
		}
		b, err := EncodeControl(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	other := int64(8)
	tests := []struct {
		name    string
		record  []byte
		wantErr string // "" for none
	}{
		{"the message's own body", encode(nil), ""},
		{"the same message, spaced differently", []byte(strings.ReplaceAll(string(encode(nil)), `,"`, `, "`)), ""},
		{"another number", encode(func(m *ControlMessage) { m.Number = &other }), "differs from its control record: number"},
		{"another requester and reason", encode(func(m *ControlMessage) { m.RequestedBy = "arn:aws:iam::123456789012:user/mallory"; m.Reason = "x" }),
			"differs from its control record: reason, requestedBy"},
		{"another action", encode(func(m *ControlMessage) { m.Action = ControlSequenceSet }), "differs from its control record: action"},
		{"not a control message", []byte(`{"hello":1}`), "the record is not a control message"},
		{"too large", []byte(strings.Repeat(" ", MaxControlRecordBytes+1)), "over 16384 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckControlRecord(msg, tt.record)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("got %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
			if !errors.Is(err, ErrInvalidControl) || !errors.Is(err, ErrControlRecordDiffers) {
				t.Errorf("got %v, want it to wrap ErrInvalidControl and ErrControlRecordDiffers", err)
			}
			if strings.Contains(err.Error(), "mallory") || strings.Contains(err.Error(), "lost upload") {
				t.Errorf("got %v: the error quotes a value", err)
			}
		})
	}
}

func TestControlRecordKeys(t *testing.T) {
	if got, want := ControlRequestKey(SiloOwner("acme"), "5b0e-1"), "control/acme/requests/5b0e-1.json"; got != want {
		t.Errorf("ControlRequestKey: got %q, want %q", got, want)
	}
	if !strings.HasPrefix(ControlRequestKey(SiloOwner("acme"), "x"), ControlRequestsPrefix(SiloOwner("acme"))) {
		t.Error("a record is not under its tenant's requests prefix")
	}
	for action, want := range map[string]bool{ControlRedrive: true, ControlReplay: true, ControlSequenceSkip: true, ControlSequenceSet: true,
		ControlSequenceWake: false, ControlSequenceTick: false} {
		if NeedsRecord(action) != want {
			t.Errorf("NeedsRecord(%q) = %v, want %v", action, !want, want)
		}
	}
	if !errors.Is(ErrNoControlRecord, ErrInvalidControl) {
		t.Error("ErrNoControlRecord does not wrap ErrInvalidControl: the controller would retry it")
	}
}
