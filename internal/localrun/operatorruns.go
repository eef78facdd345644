package localrun

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// Operator runs.
//
// An operator's replay or redrive registers a file's records again, or its remaining ones, after
// later files: that is the order the operator asked for (docs/operations.md, "Control
// messages"), not a break of the tenant's. The checker therefore counts those records as the
// operator's run and checks order against it instead of against the file's upload position:
//   - a replay is an execution of its own, named pipeline.ReplayExecutionPrefix + request id, and
//     the Idempotency-Key of each of its records starts with that name;
//   - a redrive goes on in the file's own execution, so its records are told by time: those
//     registered at or after the execution's n-th ExecutionRedriven event are redrive n.
// An operator run registers alone (no other run's requests during its own), its records in order
// (a replay from record 1, a redrive from the record after the file's last), and a redrive starts
// only while no other file of the tenant runs.

// operatorRun names the operator's run a registration of file f belongs to, or "" for the file's
// own first run.
func operatorRun(f *report.FileReport, key string, at time.Time) string {
	if replayKey(key) {
		return "replay " + executionOfKey(key)
	}
	if n := f.RunAt(at); n > 0 {
		return fmt.Sprintf("redrive %d", n)
	}
	return ""
}

// replayKey reports whether an Idempotency-Key is a record of a replay's execution.
func replayKey(key string) bool { return strings.HasPrefix(key, pipeline.ReplayExecutionPrefix) }

// executionOfKey is the execution name in an Idempotency-Key: "<name>-<record>" or, for a batch,
// "<name>-c<chunk>" (register.BatchIdempotencyKey).
func executionOfKey(key string) string {
	if i := strings.LastIndexByte(key, '-'); i > 0 {
		return key[:i]
	}
	return key
}

// registrationViolations checks a tenant's registrations at the sink: files in upload order, each
// file's records in order, operator runs as above, and no two runs registering at once.
func registrationViolations(tenant string, keyed bool, files []report.FileReport, regs []emulate.SinkRecord, reqs []emulate.SinkRequest) []string {
	var v []string
	order := map[string]int{}
	for i, f := range files {
		order[f.Key+"\x00"+f.VersionID] = i
	}
	runName := func(i int, op string) string { return files[i].Key + " (" + op + ")" }

	var own []emulate.SinkRequest
	opWindows := map[string]*Window{}
	var opNames []string
	for _, q := range reqs {
		i, ok := order[q.Source+"\x00"+q.VersionID]
		op := ""
		if ok {
			op = operatorRun(&files[i], q.Key, q.Start)
		}
		if op == "" {
			own = append(own, q)
			continue
		}
		name := runName(i, op)
		w := opWindows[name]
		if w == nil {
			w = &Window{First: q.Start, Last: q.End}
			opWindows[name] = w
			opNames = append(opNames, name)
		}
		w.First, w.Last = minTime(w.First, q.Start), maxTime(w.Last, q.End)
		w.Requests++
	}
	v = append(v, windowOverlaps(tenant, files, own)...)
	fileWindows := RegistrationWindows(own)
	overlap := func(a, b *Window) bool { return !a.First.After(b.Last) && !b.First.After(a.Last) }
	for n, name := range opNames {
		w := opWindows[name]
		for _, f := range files {
			if fw := fileWindows[f.Key+"\x00"+f.VersionID]; fw != nil && overlap(w, fw) {
				v = append(v, fmt.Sprintf("%s: %s registered while %s was registering (two runs at once)", tenant, name, f.Key))
			}
		}
		for _, other := range opNames[n+1:] {
			if overlap(w, opWindows[other]) {
				v = append(v, fmt.Sprintf("%s: %s registered while %s was registering (two runs at once)", tenant, other, name))
			}
		}
	}

	last := -1
	lastRec := map[string]int64{} // by file, or by replay: where its numbering goes on
	cur := ""
	seen := map[string]bool{}
	for _, rec := range regs {
		id := rec.Source + "\x00" + rec.VersionID
		i, ok := order[id]
		if !ok {
			v = append(v, fmt.Sprintf("%s: record of a file that was never uploaded: %s", tenant, rec.Source))
			continue
		}
		op := operatorRun(&files[i], rec.Key, rec.At)
		run, label, numbering := id, rec.Source, id
		if op != "" {
			run = runName(i, op)
			label = run
			if strings.HasPrefix(op, "replay ") {
				numbering = run // a replay registers the file anew, from record 1
			}
		}
		switch {
		case op == "" && i < last:
			v = append(v, fmt.Sprintf("%s: record %d of %s registered after records of a later file", tenant, rec.RecordNumber, rec.Source))
		case run != cur && seen[run]:
			v = append(v, fmt.Sprintf("%s: record %d of %s registered after records of another run", tenant, rec.RecordNumber, label))
		case keyed && rec.RecordNumber <= lastRec[numbering+"\x00"+rec.RecordKey]:
			v = append(v, fmt.Sprintf("%s: %s record %d of key %s registered after record %d of that key", tenant, label, rec.RecordNumber, rec.RecordKey, lastRec[numbering+"\x00"+rec.RecordKey]))
		case !keyed && rec.RecordNumber != lastRec[numbering]+1:
			v = append(v, fmt.Sprintf("%s: %s record %d registered after record %d", tenant, label, rec.RecordNumber, lastRec[numbering]))
		}
		if op == "" {
			last = max(last, i)
		}
		if keyed {
			numbering += "\x00" + rec.RecordKey // under key order, records are in order per key
		}
		lastRec[numbering] = rec.RecordNumber
		cur, seen[run] = run, true
	}
	return v
}

// redriveViolations lists the redrives that started while another file of the tenant was running.
func redriveViolations(tenant string, files []report.FileReport) []string {
	var v []string
	for _, f := range files {
		for n, at := range f.Redrives {
			for _, o := range files {
				if o.Key == f.Key && o.VersionID == f.VersionID || o.StartedAt == nil || !o.StartedAt.Before(at) {
					continue
				}
				if stop := o.OwnStop(); stop == nil || stop.After(at) {
					v = append(v, fmt.Sprintf("%s: %s (redrive %d) started while %s was running", tenant, f.Key, n+1, o.Key))
				}
			}
		}
	}
	return v
}

// redriveHistory reads, for a redriven execution, each of its runs from its history: the file's own
// run, from the execution's start to its first ExecutionFailed, TimedOut or Aborted event, then one
// run per ExecutionRedriven event, to the next stop event (ExecutionSucceeded included). A redriven
// execution keeps its startDate, and DescribeExecution tells only the last redrive (redriveDate,
// redriveCount): https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html
// The history is what names every run. A run still going has no stop.
func (r *Run) redriveHistory(ctx context.Context, e sfnExecution) []report.ExecutionRun {
	cacheKey := fmt.Sprintf("%s\x00%d\x00%s", e.ExecutionArn, e.RedriveCount, e.Status)
	r.mu.Lock()
	h, ok := r.redriven[cacheKey]
	r.mu.Unlock()
	if ok {
		return h
	}
	runs := []report.ExecutionRun{{Status: "RUNNING", StartedAt: unixTime(e.StartDate)}}
	in := &sfn.GetExecutionHistoryInput{ExecutionArn: aws.String(e.ExecutionArn), MaxResults: 1000}
	for {
		out, err := r.sfn.GetExecutionHistory(ctx, in)
		if err != nil {
			return nil
		}
		for _, ev := range out.Events {
			cur := &runs[len(runs)-1]
			switch ev.Type {
			case sfntypes.HistoryEventTypeExecutionSucceeded, sfntypes.HistoryEventTypeExecutionFailed,
				sfntypes.HistoryEventTypeExecutionTimedOut, sfntypes.HistoryEventTypeExecutionAborted:
				if cur.StoppedAt == nil && ev.Timestamp != nil {
					t := *ev.Timestamp
					cur.StoppedAt, cur.Status = &t, stopStatus[ev.Type]
					cur.Error, cur.Cause = stopError(ev)
				}
			case sfntypes.HistoryEventTypeExecutionRedriven:
				if ev.Timestamp != nil {
					runs = append(runs, report.ExecutionRun{Redrive: len(runs), Status: "RUNNING", StartedAt: *ev.Timestamp})
				}
			}
		}
		if aws.ToString(out.NextToken) == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	if e.Status != "RUNNING" {
		r.mu.Lock()
		if r.redriven == nil {
			r.redriven = map[string]redriveTimes{}
		}
		r.redriven[cacheKey] = runs
		r.mu.Unlock()
	}
	return runs
}

// redriveTimes are the runs of a redriven execution, as redriveHistory read them (Run.redriven
// caches them by execution, redrive count and status).
type redriveTimes = []report.ExecutionRun

// stopError is the error and cause a stop event of a history carries, if any.
func stopError(ev sfntypes.HistoryEvent) (errorName, cause string) {
	switch {
	case ev.ExecutionFailedEventDetails != nil:
		return aws.ToString(ev.ExecutionFailedEventDetails.Error), aws.ToString(ev.ExecutionFailedEventDetails.Cause)
	case ev.ExecutionTimedOutEventDetails != nil:
		return aws.ToString(ev.ExecutionTimedOutEventDetails.Error), aws.ToString(ev.ExecutionTimedOutEventDetails.Cause)
	case ev.ExecutionAbortedEventDetails != nil:
		return aws.ToString(ev.ExecutionAbortedEventDetails.Error), aws.ToString(ev.ExecutionAbortedEventDetails.Cause)
	}
	return "", ""
}

// stopStatus is the execution status each stop event of a history leaves.
var stopStatus = map[sfntypes.HistoryEventType]string{
	sfntypes.HistoryEventTypeExecutionSucceeded: "SUCCEEDED",
	sfntypes.HistoryEventTypeExecutionFailed:    "FAILED",
	sfntypes.HistoryEventTypeExecutionTimedOut:  "TIMED_OUT",
	sfntypes.HistoryEventTypeExecutionAborted:   "ABORTED",
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
