package pipeline

import (
	"strings"
	"testing"
	"time"
)

func TestProgressKey(t *testing.T) {
	got := ProgressKey(SiloOwner("acme"), "acme-3f2a", 12)
	if want := "work/acme/acme-3f2a/progress-s12.json"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if m := ManifestKey(SiloOwner("acme"), "acme-3f2a"); !strings.HasPrefix(got, m[:strings.LastIndex(m, "/")+1]) {
		t.Errorf("got %q, want it in the manifest's folder %q", got, m)
	}
}

func TestDecodeProgress(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    int
		record  int64
		sent    string
		window  int
		wantErr string
	}{
		{name: "as encoded", body: string(EncodeProgress(7, 0)), want: 7},
		{name: "as encoded, inside a chunk", body: string(EncodeProgress(7, 705)), want: 7, record: 705},
		{name: "the chunk cursor alone, as before records", body: `{"version":1,"next":7}`, want: 7},
		{name: "negative record", body: `{"version":1,"next":7,"record":-1}`, wantErr: "record -1 is negative"},
		{name: "zero", body: `{"version":1,"next":0}`, want: 0},
		{name: "empty", body: ``, wantErr: "empty"},
		{name: "not JSON", body: `next=7`, wantErr: "syntax"},
		{name: "unknown field", body: `{"version":1,"next":7,"done":true}`, wantErr: "unknown field"},
		{name: "trailing data", body: `{"version":1,"next":7}{}`, wantErr: "data after"},
		{name: "no version", body: `{"next":7}`, wantErr: "version 0"},
		{name: "a later version", body: `{"version":2,"next":7}`, wantErr: "version 2"},
		{name: "negative", body: `{"version":1,"next":-1}`, wantErr: "negative"},
		{name: "next a string", body: `{"version":1,"next":"7"}`, wantErr: "JSON type"},
		{name: "next fractional", body: `{"version":1,"next":7.5}`, wantErr: "JSON type"},
		{name: "with the first send", body: string(Progress{Next: 7, Record: 705, SentAt: "2026-12-05T10:00:00.5Z"}.Encode()), want: 7, record: 705, sent: "2026-12-05T10:00:00.5Z"},
		{name: "with a keyed file's window", body: string(Progress{Next: 7, Record: 705, Window: 3}.Encode()), want: 7, record: 705, window: 3},
		{name: "a window as written", body: `{"version":1,"next":7,"window":5}`, want: 7, window: 5},
		{name: "negative window", body: `{"version":1,"next":7,"window":-1}`, wantErr: "window -1 is outside"},
		{name: "a window above the largest maxRecordsInFlight", body: `{"version":1,"next":7,"window":65}`, wantErr: "window 65 is outside"},
		{name: "sentAt not a time", body: `{"version":1,"next":7,"sentAt":"yesterday"}`, wantErr: "sentAt is not an RFC 3339 time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := DecodeProgress([]byte(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %+v, %v; want an error containing %q", p, err, tt.wantErr)
				}
				return
			}
			if err != nil || p.Next != tt.want || p.Record != tt.record || p.Version != ProgressV1 || p.SentAt != tt.sent || p.Window != tt.window {
				t.Errorf("got %+v, %v; want next %d, record %d, sentAt %q, window %d", p, err, tt.want, tt.record, tt.sent, tt.window)
			}
			if want, _ := time.Parse(time.RFC3339Nano, tt.sent); !p.Sent().Equal(want) {
				t.Errorf("got Sent() %v, want %v", p.Sent(), want)
			}
		})
	}
}
