package controller

import (
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/metrics"
)

// headMetrics are the figures of the file at the head of the tenant's queue, added to a
// delivery's EMF line when they are due (headLine.due). They separate the two reasons a head file
// can be old:
//   - HeadQueuedSeconds: how long it was queued before its execution started (StartDate −
//     SentTimestamp), or, while no execution has started, how long it has been queued so far
//     (now − SentTimestamp). A large value means files wait long behind earlier ones.
//   - HeadRunningSeconds: how long its execution has been running (now − StartDate, or the later
//     RedriveDate), only while RUNNING. It can only grow up to the workflow timeout.
//
// Blocked is 0 on a line of a tenant that is not halted, so that its alarm sees "not blocked" as
// data and can treat missing data as missing. A delivery that finds the tenant halted writes
// Blocked 1 itself, every time (handler.go): once per halted recheck.
func (h *Handler) headMetrics(d *delivery) []metrics.Metric {
	now := h.now()
	blocked := slices.ContainsFunc(d.metrics, func(m metrics.Metric) bool { return m.Name == metrics.Blocked })
	f := headFigures{blocked: blocked}
	var out []metrics.Metric
	if sent, ok := sentAt(d.rec); ok {
		f.sent = sent
		queued := now.Sub(sent)
		if d.exec != nil && d.exec.StartDate != nil {
			f.started = *d.exec.StartDate
			queued = f.started.Sub(sent)
		}
		out = append(out, metrics.Seconds(metrics.HeadQueuedSeconds, max(0, queued)))
	}
	if d.exec != nil && d.exec.Status == sfntypes.ExecutionStatusRunning {
		if since := runningSince(d.exec); !since.IsZero() {
			f.runningSince = since
			out = append(out, metrics.Seconds(metrics.HeadRunningSeconds, max(0, now.Sub(since))))
		}
	}
	if !blocked {
		out = append(out, metrics.Count(metrics.Blocked, 0))
	}
	if !h.head.due(f, now, h.cfg.SafetyNet) {
		return nil
	}
	return out
}

// The tenant's health line (the head figures above, which a pool's Contributor Insights rules key
// by $.Tenant) is written when one of its values changes, and otherwise at least once per safety
// net, not on every delivery: a busy tenant's deliveries (backoff waits, admission waits,
// throttles, each file's start and end) would each write one, and every such line of a pooled
// tenant is a log event its Blocked rule matches, billed per million matched
// (https://aws.amazon.com/cloudwatch/pricing/, Contributor Insights).
//
// "Changes" is taken on what the figures are measured from: the head file (its SentTimestamp),
// its start, its run's start, and whether the tenant is blocked. Between changes HeadQueuedSeconds
// (before the start) and HeadRunningSeconds only grow with the clock, and the line written at
// least once per safety net carries them on. That keeps the alarms' data: a running head file's
// delivery already comes once per safety net with wake-up events (wake.go), and a halted tenant's
// once per halted recheck, with Blocked 1 on each.
//
// The state is the warm function's, in memory, one per Handler: a pool keeps at most maxHandlers
// of them (pool.go), and a cold start or a dropped Handler writes the line again, which is harmless.

// headFigures are what a health line's figures are measured from; zero times are absent.
type headFigures struct {
	blocked                     bool
	sent, started, runningSince time.Time
}

func (f headFigures) equal(g headFigures) bool {
	return f.blocked == g.blocked && f.sent.Equal(g.sent) && f.started.Equal(g.started) && f.runningSince.Equal(g.runningSince)
}

// headLine is the tenant's last written health line.
type headLine struct {
	mu      sync.Mutex
	written bool
	last    headFigures
	at      time.Time
}

// refreshShare is the part of the safety net after which an unchanged line is written again. A
// delivery that comes back after a wait of one safety net was held after its previous line's
// checks but before that line was written; the tenth of the safety net allowed for that is far
// more than the few calls in between.
const refreshShare = 0.9

// due reports whether a line with the figures f is to be written at now, and if so records it:
// the first line, a change, or an unchanged line once refreshShare of safetyNet has passed since
// the last one (every line when safetyNet is 0, or l is nil).
func (l *headLine) due(f headFigures, now time.Time, safetyNet time.Duration) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	refresh := time.Duration(float64(safetyNet) * refreshShare)
	if l.written && l.last.equal(f) && now.Sub(l.at) < refresh {
		return false
	}
	l.written, l.last, l.at = true, f, now
	return true
}

// runningSince is when the execution's current run began: its start, or its last redrive.
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html
func runningSince(st *sfn.DescribeExecutionOutput) time.Time {
	var since time.Time
	if st.StartDate != nil {
		since = *st.StartDate
	}
	if st.RedriveDate != nil && st.RedriveDate.After(since) {
		since = *st.RedriveDate
	}
	return since
}
