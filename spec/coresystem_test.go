package spec

import (
	"strings"
	"testing"
	"time"
)

func TestCoreSystemCheckHealth(t *testing.T) {
	cases := []struct {
		name string
		c    CoreSystem
		want []string // "path: substring", in order; none: valid
	}{
		{"none", CoreSystem{MaxRunningFiles: 2}, nil},
		{"all valid", CoreSystem{MaxRunningFiles: 2,
			Breaker:              &Breaker{ConsecutiveFailures: 3, WindowFailures: 10, Window: "30s", ProbeInterval: "500ms", MaxProbeInterval: "2s"},
			Maintenance:          []MaintenanceWindow{{Cron: "0 2 * * SUN", Duration: "1h"}, {Cron: "@daily", Duration: "5m"}},
			IdempotencyRetention: "24h", LookupURL: "https://erp.example/records/{key}", CompleteURL: "https://erp.example/files"}, nil},
		{"breaker out of range", CoreSystem{Breaker: &Breaker{ConsecutiveFailures: -1, WindowFailures: 200000, Window: "2h", ProbeInterval: "1ms", MaxProbeInterval: "x"}},
			[]string{"breaker.consecutiveFailures: must be 1 to 1000", "breaker.windowFailures: must be 1 to 100000", "breaker.window: from 1s to 1h0m0s",
				"breaker.probeInterval: from 100ms", "breaker.maxProbeInterval: \"x\" must be a Go duration"}},
		{"max probe below probe", CoreSystem{Breaker: &Breaker{ProbeInterval: "10s", MaxProbeInterval: "5s"}},
			[]string{"breaker.maxProbeInterval: must be at least breaker.probeInterval"}},
		{"maintenance", CoreSystem{Maintenance: []MaintenanceWindow{{Cron: "", Duration: "1h"}, {Cron: "0 2 * *", Duration: "1h"},
			{Cron: "0 25 * * *", Duration: "1h"}, {Cron: "0 2 * * SUN"}, {Cron: "0 2 * * SUN", Duration: "10s"}}},
			[]string{"maintenance[0].cron: is required", "maintenance[1].cron: must have five fields", "maintenance[2].cron: is not a cron expression",
				"maintenance[3].duration: is required", "maintenance[4].duration: from 1m0s to 168h0m0s"}},
		{"retention", CoreSystem{IdempotencyRetention: "10s"}, []string{"idempotencyRetention: at least 1m0s"}},
		{"lookup without key", CoreSystem{LookupURL: "https://erp.example/records"}, []string{"lookupUrl: must contain {key}"}},
		{"lookup not a url", CoreSystem{LookupURL: "erp/{key}"}, []string{"lookupUrl: absolute http(s) URL"}},
		{"complete not a url", CoreSystem{CompleteURL: "ftp://x/y"}, []string{"completeUrl: absolute http(s) URL"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps := tc.c.CheckHealth()
			if len(ps) != len(tc.want) {
				t.Fatalf("got %d problems %v, want %d", len(ps), ps, len(tc.want))
			}
			for i, p := range ps {
				path, sub, _ := strings.Cut(tc.want[i], ": ")
				msg := p.Message(func(s string) string { return s })
				if p.Path != path || !strings.Contains(msg, sub) {
					t.Errorf("problem %d: %s: %s, want %s: …%s…", i, p.Path, msg, path, sub)
				}
			}
		})
	}
}

func TestBreakerSettingsDefaults(t *testing.T) {
	got := CoreSystem{}.BreakerSettings()
	want := BreakerSettings{ConsecutiveFailures: 5, WindowFailures: 20, Window: time.Minute, ProbeInterval: time.Second, MaxProbeInterval: 4 * time.Second}
	if got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	got = CoreSystem{Breaker: &Breaker{Disabled: true, ConsecutiveFailures: 2, ProbeInterval: "10s"}}.BreakerSettings()
	if !got.Disabled || got.ConsecutiveFailures != 2 || got.ProbeInterval != 10*time.Second || got.MaxProbeInterval != 10*time.Second {
		t.Errorf("set %+v: want disabled, 2 failures, probes from 10s capped at 10s", got)
	}
}

func TestMaintenance(t *testing.T) {
	sunday2am := []MaintenanceWindow{{Cron: "0 2 * * SUN", Duration: "1h"}}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name      string
		windows   []MaintenanceWindow
		now       string
		open      bool
		end, next string
	}{
		{"before", sunday2am, "2026-12-06T01:59:59Z", false, "", "2026-12-06T02:00:00Z"},
		{"at start", sunday2am, "2026-12-06T02:00:00Z", true, "2026-12-06T03:00:00Z", ""},
		{"inside", sunday2am, "2026-12-06T02:59:59Z", true, "2026-12-06T03:00:00Z", ""},
		{"at end", sunday2am, "2026-12-06T03:00:00Z", false, "", "2026-12-13T02:00:00Z"},
		{"other zone, same instant", sunday2am, "2026-12-06T11:30:00+09:00", true, "2026-12-06T03:00:00Z", ""},
		{"overlapping starts extend", []MaintenanceWindow{{Cron: "0,20 2 * * *", Duration: "30m"}}, "2026-12-06T02:10:00Z", true, "2026-12-06T02:50:00Z", ""},
		{"a later start open when the first has ended", []MaintenanceWindow{{Cron: "0,20 2 * * *", Duration: "30m"}}, "2026-12-06T02:30:00Z", true, "2026-12-06T02:50:00Z", ""},
		{"every minute for two, at the turn of a minute", []MaintenanceWindow{{Cron: "* * * * *", Duration: "2m"}}, "2026-12-06T02:00:00.5Z", true, "2026-12-06T03:05:00Z", ""},
		{"two windows, next is the nearer", []MaintenanceWindow{{Cron: "0 4 * * *", Duration: "1h"}, {Cron: "0 3 * * *", Duration: "1h"}},
			"2026-12-06T00:00:00Z", false, "", "2026-12-06T03:00:00Z"},
		{"bad window ignored", []MaintenanceWindow{{Cron: "nope", Duration: "1h"}}, "2026-12-06T00:00:00Z", false, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			open, end, next := Maintenance(tc.windows, at(tc.now))
			if open != tc.open {
				t.Fatalf("open %v, want %v", open, tc.open)
			}
			if tc.end != "" && !end.Equal(at(tc.end)) {
				t.Errorf("end %v, want %s", end, tc.end)
			}
			if tc.next == "" && !next.IsZero() || tc.next != "" && !next.Equal(at(tc.next)) {
				t.Errorf("next %v, want %q", next, tc.next)
			}
		})
	}
}

func TestLookupFor(t *testing.T) {
	c := CoreSystem{LookupURL: "https://erp.example/records/{key}?v=1"}
	if got, want := c.LookupFor("a/b c"), "https://erp.example/records/a%2Fb%20c?v=1"; got != want {
		t.Errorf("LookupFor = %s, want %s", got, want)
	}
}
