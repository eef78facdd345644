package tenantpipeline

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// Alarm thresholds that only a stuck tenant reaches derive from the workflow timeout.
func TestAlarmDefaultsDeriveFromWorkflowTimeout(t *testing.T) {
	for _, tc := range []struct {
		name            string
		workflowTimeout time.Duration
		margin          time.Duration
		wantOldest      time.Duration
		wantRunning     time.Duration
	}{
		{"default 24h timeout", 0, 0, 25 * time.Hour, 18 * time.Hour},
		{"2h timeout", 2 * time.Hour, 0, 3 * time.Hour, 90 * time.Minute},
		{"2h timeout, 30m margin", 2 * time.Hour, 30 * time.Minute, 150 * time.Minute, 90 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			p.WorkflowTimeout = tc.workflowTimeout
			p.Alarms.OldestMessageMargin = tc.margin
			a := p.withDefaults().Alarms
			if a.OldestMessageAge != tc.wantOldest {
				t.Errorf("OldestMessageAge: got %v, want %v", a.OldestMessageAge, tc.wantOldest)
			}
			if a.HeadRunning != tc.wantRunning {
				t.Errorf("HeadRunning: got %v, want %v", a.HeadRunning, tc.wantRunning)
			}
		})
	}
	a := valid().withDefaults().Alarms
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"HeadQueued", a.HeadQueued, 2 * time.Hour},
		{"StalledMinutes", a.StalledMinutes, 15},
		{"BlockedDatapoints", a.BlockedDatapoints, 2},
		{"BlockedPeriods", a.BlockedPeriods, 3},
		{"EvaluationMinutes", a.EvaluationMinutes, 5},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestAlarmValidateRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Props)
		want   string
	}{
		{"period shorter than the halted recheck", func(p *Props) { p.HaltedRecheck = 10 * time.Minute },
			`alarm evaluation period 5m0s is shorter than the halted recheck 10m0s`},
		{"blocked datapoints above periods", func(p *Props) { p.Alarms.BlockedDatapoints = 4 }, `alarm blocked datapoints 4 is invalid: use 1 to BlockedPeriods (3)`},
		{"blocked range above a day", func(p *Props) { p.Alarms.BlockedPeriods = 300 }, `alarm blocked periods 300 is invalid`},
		{"stalled minutes", func(p *Props) { p.Alarms.StalledMinutes = 2000 }, `alarm stalled minutes 2000 is invalid`},
		{"head running", func(p *Props) { p.Alarms.HeadRunning = time.Second }, `alarm head running 1s is invalid`},
		{"negative reserved concurrency is none, above 1000 is not", func(p *Props) { p.ControllerReservedConcurrency = 1001 },
			`controller reserved concurrency 1001 is invalid: use 1 to 1000, or 0 for none`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.change(&p)
			err := p.withDefaults().validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	p := valid()
	p.HaltedRecheck = 10 * time.Minute
	p.Alarms.EvaluationMinutes = 10
	if err := p.withDefaults().validate(); err != nil {
		t.Errorf("period equal to the halted recheck: got %v, want no error", err)
	}
}

// Defaults come from the tenants-file rules: a public Tenant defaults like a tenants.json entry.
func TestTenantDefaults(t *testing.T) {
	got := Tenant{ID: "acme"}.WithDefaults()
	want := Tenant{ID: "acme", Prefix: "inbox/acme/", Format: "csv", Encoding: "utf-8", Delimiter: ",", ChunkSize: 100,
		MaxFieldBytes: 65536, OnFailure: "continue", IdempotencyKey: "object-version", OnInvalidRecord: "failFile"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// The head-time alarms look back over a safety net and one period more, so that an unchanged
// health line, written once per safety net, keeps them in ALARM; CloudWatch allows one day.
func TestHeadAlarmPeriods(t *testing.T) {
	for _, tt := range []struct {
		safetyNet time.Duration
		minutes   int
		want      int
	}{
		{5 * time.Minute, 5, 2},
		{time.Second, 5, 2},
		{30 * time.Minute, 5, 7},
		{31 * time.Minute, 5, 8},
		{5 * time.Minute, 1, 6},
		{12 * time.Hour, 60, 13},
		{12 * time.Hour, 1, 721},
		{12 * time.Hour, 720, 2},
		{5 * time.Minute, 1440, 1},
	} {
		got := headAlarmPeriods(tt.safetyNet, tt.minutes)
		if got != tt.want {
			t.Errorf("safety net %v, %d-minute periods: got %d periods, want %d", tt.safetyNet, tt.minutes, got, tt.want)
		}
		if got*tt.minutes > 24*60 {
			t.Errorf("safety net %v, %d-minute periods: got %d periods, more than one day", tt.safetyNet, tt.minutes, got)
		}
		if covered := time.Duration(got) * time.Duration(tt.minutes) * time.Minute; got*tt.minutes < 24*60 && covered < tt.safetyNet+time.Duration(tt.minutes)*time.Minute {
			t.Errorf("safety net %v, %d-minute periods: got %d periods (%v), want a safety net and a period", tt.safetyNet, tt.minutes, got, covered)
		}
	}
}
