package main

import (
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/metrics"
)

// headMetrics are the figures of the file at the head of the tenant's queue, added to every
// delivery's EMF line. They separate the two reasons a head file can be old:
//   - HeadQueuedSeconds: how long it was queued before its execution started (StartDate −
//     SentTimestamp), or, while no execution has started, how long it has been queued so far
//     (now − SentTimestamp). A large value means files wait long behind earlier ones.
//   - HeadRunningSeconds: how long its execution has been running (now − StartDate, or the later
//     RedriveDate), only while RUNNING. It can only grow up to the workflow timeout.
//
// Blocked is 0 on every delivery that did not find the tenant halted, so that its alarm sees "not
// blocked" as data and can treat missing data as missing.
func (h *Handler) headMetrics(d *delivery) []metrics.Metric {
	var out []metrics.Metric
	now := h.now()
	if sent, ok := sentAt(d.rec); ok {
		queued := now.Sub(sent)
		if d.exec != nil && d.exec.StartDate != nil {
			queued = d.exec.StartDate.Sub(sent)
		}
		out = append(out, metrics.Seconds(metrics.HeadQueuedSeconds, max(0, queued)))
	}
	if d.exec != nil && d.exec.Status == sfntypes.ExecutionStatusRunning {
		if since := runningSince(d.exec); !since.IsZero() {
			out = append(out, metrics.Seconds(metrics.HeadRunningSeconds, max(0, now.Sub(since))))
		}
	}
	if !slices.ContainsFunc(d.metrics, func(m metrics.Metric) bool { return m.Name == metrics.Blocked }) {
		out = append(out, metrics.Count(metrics.Blocked, 0))
	}
	return out
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
