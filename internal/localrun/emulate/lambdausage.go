package emulate

import (
	"time"
)

// LambdaUsage is what Lambda bills for a function: requests, and duration in GB-seconds.
type LambdaUsage struct {
	Requests int64
	// BilledMillis sums each invocation's billed duration: "Duration is calculated from the time
	// your code begins executing until it returns or otherwise terminates, rounded up to the nearest
	// 1 ms", and it includes the initialization code of a new execution environment
	// (https://aws.amazon.com/lambda/pricing/).
	BilledMillis int64
	MemoryMB     int
	// LogBytes are the bytes the function's processes wrote to stdout and stderr, which Lambda
	// sends to CloudWatch Logs ("Lambda automatically ... sends logs to CloudWatch Logs",
	// https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs.html). The lines
	// Lambda itself adds (START, END, REPORT) are not in them.
	LogBytes int64
}

// GBSeconds is the billed duration times the configured memory (128 MB is 0.125 GB).
func (u LambdaUsage) GBSeconds() float64 {
	return float64(u.BilledMillis) / 1000 * float64(u.MemoryMB) / 1024
}

// Usage is the function's billed usage so far.
func (f *Function) Usage() LambdaUsage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return LambdaUsage{Requests: f.invokes.Load(), BilledMillis: f.billedMs, MemoryMB: f.MemoryMB, LogBytes: f.logBytes.Load()}
}

// bill adds an invocation's billed duration when Invoke returns: from the moment the process took
// it until now (its response, its error, its timeout or its death), plus the environment's init
// phase when this is its first invocation. An invocation the process never took bills nothing.
func (f *Function) bill(inst *instance, inv *invocation) {
	var d time.Duration
	if began := inv.began.Load(); began != 0 {
		d = time.Since(time.Unix(0, began))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !inst.initBilled {
		if end := inst.initEnd.Load(); end != 0 {
			d += time.Unix(0, end).Sub(inst.startedAt)
			inst.initBilled = true
		}
	}
	f.billedMs += billedMillis(d)
}

// billedMillis rounds a duration up to whole milliseconds, as Lambda bills it.
func billedMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
