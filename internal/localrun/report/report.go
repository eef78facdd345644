// Package report is what a local run says about itself: the JSON report (Report, as
// docs/local-run.md describes it), the terminal's progress line and summary table, and report.html.
// It only reads a Report; the local run builds one from the emulators' state (localrun.Snapshot).
package report

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/svgchart"
	"github.com/example/tenantpipeline/spec"
)

// Report is the JSON report of a run (docs/local-run.md, "Report").
type Report struct {
	Tenants            map[string]*TenantReport `json:"tenants"`
	InterFileGapSecond GapStats                 `json:"interFileGapSeconds"`
	// The gaps in two parts (TenantReport.GapParts): the admission wait, and the rest, the
	// wake-up: from the stop to the controller's admission ask, and from the admission to the start.
	InterFileGapWakeUpSecond    GapStats                    `json:"interFileGapWakeUpSeconds"`
	InterFileGapAdmissionSecond GapStats                    `json:"interFileGapAdmissionSeconds"`
	APICalls                    map[string]map[string]int64 `json:"apiCalls"`
	WallSeconds                 float64                     `json:"wallSeconds"`
	RecordsPerSecond            float64                     `json:"recordsPerSecond"`
	APICallsPer1000             map[string]float64          `json:"apiCallsPer1000Records"`
	Violations                  []string                    `json:"violations"`
	// ExternalEndpoint is true when the run registered to --register-url: the harness sees no
	// record, so the record checks (record order, exactly once, registration windows) are skipped.
	ExternalEndpoint bool `json:"externalEndpoint"`
	// LambdaThrottles counts, per function (its local name), the invocations Lambda refused with
	// TooManyRequestsException: the account's or a reserved concurrency in use
	// (LambdaOptions.Concurrency), or LambdaOptions.Throttle. Only throttled functions appear; {} when none.
	LambdaThrottles map[string]int64 `json:"lambdaThrottles"`
	// SinkMaxInFlight is the most POSTs the embedded sink had in progress at once (those it
	// answered 429 included), and Sink429 how many it answered 429 for CoreOptions.MaxInFlight.
	SinkMaxInFlight int   `json:"sinkMaxInFlight"`
	Sink429         int64 `json:"sink429"`
	// FileEvents are the File Processed events the pipeline put on EventBridge, in the order they
	// were put (docs/local-run.md); [] when none.
	FileEvents []FileEvent `json:"fileEvents"`
	// CoreSystemBreakers are the core systems' breakers over the run, from Register's logs, by
	// core system; {} when none changed.
	CoreSystemBreakers map[string]CoreSystemBreaker `json:"coreSystemBreakers"`
}

// Tenant tiers (TenantReport.Tier).
const (
	TierSilo = "silo"
	TierPool = "pool"
)

// TenantReport is one tenant's files, in upload order.
type TenantReport struct {
	// Tier is "silo" (the tenant's own queue and functions) or "pool" (a message group of its
	// pool's queue); Pool is the pool's name, "" for a silo tenant.
	Tier              string       `json:"tier"`
	Pool              string       `json:"pool"`
	Files             []FileReport `json:"files"`
	RecordsRegistered int64        `json:"recordsRegistered"`
	// Halted is the file a halt tenant is stopped at, null when it is not halted.
	Halted *Halt `json:"halted"`
	// Queued is the tenant's queue depth (visible, in flight and delayed messages).
	Queued int `json:"queued"`
	// Replays are the executions that ran an uploaded file again (a replay control message), in
	// start order; each is marked replay and is not one of Files.
	Replays []FileReport `json:"replays,omitempty"`
	// Sequence is a sequenced tenant's place in its sequence; absent for a tenant without one.
	Sequence *SequenceReport `json:"sequence,omitempty"`
}

// SequenceReport is a sequenced tenant's place in its sequence, as its state and held files in
// the bucket tell it (internal/sequence).
type SequenceReport struct {
	Kind  string `json:"kind"`
	OnGap string `json:"onGap,omitempty"`
	// Next is the number expected next (kind number), or the last name processed (kind name).
	Next string `json:"next"`
	// Held is how many files are held ahead of their turn now, HeldFirst the lowest of them.
	Held      int    `json:"held"`
	HeldFirst string `json:"heldFirst,omitempty"`
	// GapSince is when the tenant began to wait for its missing number Next; null without a gap.
	GapSince *time.Time `json:"gapSince"`
	// Skipped is how many skips the state records (an operator's, or onGap "skip" after gapTimeout).
	Skipped int `json:"skipped,omitempty"`
}

// Statuses of a sequenced tenant's file that has no execution (FileReport.Status), beside
// WAITING: held ahead of its turn, or refused by the controller (never to run).
const (
	StatusHeld    = "HELD"
	StatusRefused = results.StatusRefused
)

// Holding reports whether a sequenced tenant holds files for a missing number that only the
// file, or an operator's skip, can end (onGap "hold"), with nothing else to run: like a halted
// tenant, it waits for someone.
func (tr *TenantReport) Holding() bool {
	s := tr.Sequence
	if s == nil || s.Held == 0 || s.GapSince == nil || s.OnGap != spec.OnGapHold || tr.Queued > 0 {
		return false
	}
	for _, f := range tr.Files {
		if f.Status == "RUNNING" || f.Status == "WAITING" {
			return false
		}
	}
	return true
}

// FileReport is one uploaded file and its execution.
type FileReport struct {
	Key           string `json:"key"`
	VersionID     string `json:"versionId,omitempty"`
	ETag          string `json:"etag,omitempty"`
	ExecutionName string `json:"executionName"`
	Status        string `json:"status"` // an execution status, or WAITING before one started
	Error         string `json:"error,omitempty"`
	// Cause is the failed execution's cause, or that of its failed segment execution.
	Cause      string     `json:"cause,omitempty"`
	UploadedAt time.Time  `json:"uploadedAt"`
	StartedAt  *time.Time `json:"startedAt"`
	StoppedAt  *time.Time `json:"stoppedAt"`
	Records    int64      `json:"records"`
	// RecordsCountedBy is absent when Records are what the harness saw registered (its sink, or
	// the tenant's DynamoDB table). When the run registered to --register-url the harness sees no
	// record: it is "split" when Records is instead the count Split reported for the file (a
	// succeeded execution's $.split.records), and "none" when no count is known (Records is 0,
	// shown as "–").
	RecordsCountedBy string `json:"recordsCountedBy,omitempty"`
	// Registered, Rejected and Unprocessed are what Register reported for the file, read from its
	// summary.json (results/<tenant>/<execution>/summary.json), so they hold with --register-url
	// too; null while the file has no summary of its execution's current run. Unprocessed is the
	// records never sent because the file failed or halted first.
	Registered  *int64 `json:"registered"`
	Rejected    *int64 `json:"rejected"`
	Unprocessed *int64 `json:"unprocessed"`
	// HistoryEvents is the file execution's history length; SegmentHistoryEventsMax is the largest
	// of its segment executions. Each must stay below 25,000.
	HistoryEvents           int `json:"historyEvents"`
	SegmentHistoryEventsMax int `json:"segmentHistoryEventsMax"`
	SegmentExecutions       int `json:"segmentExecutions"`
	// MaxPayloadBytes is the largest state input or output of the file and its segment executions.
	MaxPayloadBytes int `json:"maxPayloadBytes"`
	RedriveCount    int `json:"redriveCount,omitempty"`
	// Executions is how many executions of the tenant's file state machine name this exact file
	// (key and version) in their input: 1 when nothing was started twice.
	Executions int `json:"executions"`
	// Skipped is true for a failed file whose skip marker an operator wrote
	// (control/<tenant>/skip/<execution name>), which released its halted tenant.
	Skipped bool `json:"skipped,omitempty"`
	// Replay is true for an entry of TenantReport.Replays.
	Replay bool `json:"replay,omitempty"`
	// OutOfOrder is the operator's reason for running the file after later files of its tenant
	// (a redrive or replay with pipectl --out-of-order, audited in its results folder's
	// out-of-order.json); absent otherwise.
	OutOfOrder string `json:"outOfOrder,omitempty"`
	// Sequence is the value the file's name carries in its tenant's sequence (a number without its
	// zeros); Refusal why a REFUSED file will not run (its summary.json's: "unmatched",
	// "duplicate" or "late"), and ExecutionName is then the name its summary is under.
	Sequence string `json:"sequence,omitempty"`
	Refusal  string `json:"refusal,omitempty"`
	// Runs are the runs of a redriven execution, in order: the file's own (redrive 0), then one per
	// redrive, each with its own status and times; absent for an execution never redriven, whose
	// one run is StartedAt to StoppedAt. A redriven execution keeps its start date, so StartedAt to
	// StoppedAt spans every run and what ran between them.
	Runs []ExecutionRun `json:"runs,omitempty"`
	// AdmissionWaitSeconds is the part of the file's queued time it waited for admission: from
	// its first admission ask to its admission (the controller's "file admitted" line), or the
	// wait so far while it waits; absent when the file never waited for a gate.
	AdmissionWaitSeconds *float64 `json:"admissionWaitSeconds,omitempty"`

	// Expected is the records Split found, -1 when unknown. It is not in report.json.
	Expected int64 `json:"-"`
	// FirstStop is when the file's own run stopped and Redrives when each operator redrive began,
	// for a redriven execution (the local run reads them from its history, operatorruns.go).
	FirstStop *time.Time  `json:"-"`
	Redrives  []time.Time `json:"-"`
}

// ExecutionRun is one run of an execution: its first, or a redrive.
type ExecutionRun struct {
	// Redrive is 0 for the execution's own run, n for its n-th redrive.
	Redrive   int        `json:"redrive"`
	Status    string     `json:"status"`
	StartedAt time.Time  `json:"startedAt"`
	StoppedAt *time.Time `json:"stoppedAt"`
	// Error and Cause are those of a run that failed, timed out or was aborted.
	Error string `json:"error,omitempty"`
	Cause string `json:"cause,omitempty"`
	// Records are the records registered during this run, as the harness saw them at its sink:
	// from the run's start up to the next redrive's (FileReport.RunAt); null when it cannot tell
	// (a DynamoDB sink, or an external endpoint).
	Records *int64 `json:"records"`
}

// RunAt is the run of the file's execution a registration at a time belongs to: n when at is at
// or after the n-th redrive began, 0 (the file's own run) before the first.
func (f *FileReport) RunAt(at time.Time) int {
	for n := len(f.Redrives); n > 0; n-- {
		if !at.Before(f.Redrives[n-1]) {
			return n
		}
	}
	return 0
}

// runs are the file's executions, in order: its Runs when redriven, else its one execution (none
// before it started).
func (f *FileReport) runs() []ExecutionRun {
	if len(f.Runs) > 0 {
		return f.Runs
	}
	if f.StartedAt == nil {
		return nil
	}
	return []ExecutionRun{{Status: f.Status, StartedAt: *f.StartedAt, StoppedAt: f.StoppedAt}}
}

// GapStats summarizes inter-file gaps.
type GapStats struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	P95  float64 `json:"p95"`
	Max  float64 `json:"max"`
}

// SplitCount makes Split's count the records of a file the harness cannot see registered (an
// external endpoint), and returns it: 0 when unknown.
func (f *FileReport) SplitCount() int64 {
	if f.Expected < 0 {
		f.Records, f.RecordsCountedBy = 0, "none"
		return 0
	}
	f.Records, f.RecordsCountedBy = f.Expected, "split"
	return f.Expected
}

// SetCounts takes the counts of s when it describes the file's execution as it is now: the same
// execution, run and status, as the controller reads it for the File Processed event. A summary of
// another run or status is an earlier end of a redriven execution (each end rewrites it), or was
// written by the results task of an execution not yet stopped.
func (f *FileReport) SetCounts(s results.Summary) {
	if s.Execution != f.ExecutionName || s.Status != f.Status || s.RedriveCount != f.RedriveCount {
		return
	}
	f.Registered, f.Rejected, f.Unprocessed = &s.Registered, &s.Rejected, &s.Unprocessed
}

// CountText is a count for the summary and report.html: "–" when it is not known.
func CountText(n *int64) string {
	if n == nil {
		return "–"
	}
	return fmt.Sprint(*n)
}

// RecordsText is the file's records as the summary and report.html print them: "–" when no
// count is known.
func (f FileReport) RecordsText() string {
	if f.RecordsCountedBy == "none" {
		return "–"
	}
	return fmt.Sprint(f.Records)
}

// records is the tenant's records as the summary and report.html count them: those registered,
// plus, for files the harness could not see registered, Split's counts (RecordsCountedBy).
func (tr *TenantReport) records() int64 {
	n := tr.RecordsRegistered
	for _, f := range append(append([]FileReport(nil), tr.Files...), tr.Replays...) {
		if f.RecordsCountedBy == "split" {
			n += f.Records
		}
	}
	return n
}

// splitCounted reports whether some file's records are Split's count, not registrations seen.
func (rep *Report) splitCounted() bool {
	for _, tr := range rep.Tenants {
		for _, f := range append(append([]FileReport(nil), tr.Files...), tr.Replays...) {
			if f.RecordsCountedBy != "" {
				return true
			}
		}
	}
	return false
}

// Gaps are the tenant's inter-file gaps in seconds, in upload order (gapSpans).
func (tr *TenantReport) Gaps() []float64 {
	var gaps []float64
	for _, g := range tr.gapSpans() {
		gaps = append(gaps, g.to.Sub(g.from).Seconds())
	}
	return gaps
}

// GapPart is one inter-file gap in two parts that add up to it: Admission, the part the file
// waited for an admission slot (its AdmissionWaitSeconds, at most the gap); WakeUp, the rest,
// which the wake-up and the controller take.
type GapPart struct{ WakeUp, Admission float64 }

// GapParts are the tenant's inter-file gaps split in two, in the order of Gaps.
func (tr *TenantReport) GapParts() []GapPart {
	var parts []GapPart
	for _, g := range tr.gapSpans() {
		gap := g.to.Sub(g.from).Seconds()
		admission := min(g.admission, gap)
		parts = append(parts, GapPart{WakeUp: gap - admission, Admission: admission})
	}
	return parts
}

// gapSpan is one inter-file gap: from the stop of the execution a file waited for to its start,
// with the file's admission wait in seconds (0 when it did not wait for a gate).
type gapSpan struct {
	from, to  time.Time
	admission float64
}

// gapSpans are the tenant's inter-file gaps, in upload order: for each file, from the last stop of
// any execution of the tenant (a file's run, a redrive or a replay) at or before the file's start,
// to that start, when the file was uploaded before that stop (a file uploaded later never waited,
// so its gap says nothing about the pipeline). The stop a gap starts from is never after the start
// it ends at, so no gap is negative, whatever the runs of a redriven file were.
func (tr *TenantReport) gapSpans() []gapSpan {
	type stop struct {
		at   time.Time
		file int // the index of the execution's entry: Files, then Replays
	}
	var stops []stop
	for i, f := range append(append([]FileReport(nil), tr.Files...), tr.Replays...) {
		for _, run := range f.runs() {
			if run.StoppedAt != nil {
				stops = append(stops, stop{*run.StoppedAt, i})
			}
		}
	}
	var gaps []gapSpan
	for i, f := range tr.Files {
		if f.StartedAt == nil {
			continue
		}
		var prev *time.Time
		for j, s := range stops {
			if s.file != i && !s.at.After(*f.StartedAt) && (prev == nil || s.at.After(*prev)) {
				prev = &stops[j].at
			}
		}
		if prev != nil && f.UploadedAt.Before(*prev) {
			g := gapSpan{from: *prev, to: *f.StartedAt}
			if f.AdmissionWaitSeconds != nil {
				g.admission = max(*f.AdmissionWaitSeconds, 0)
			}
			gaps = append(gaps, g)
		}
	}
	return gaps
}

// SummarizeGapParts summarizes each part of the gaps: the wake-up, then the admission wait.
func SummarizeGapParts(parts []GapPart) (wakeUp, admission GapStats) {
	var w, a []float64
	for _, p := range parts {
		w, a = append(w, p.WakeUp), append(a, p.Admission)
	}
	return SummarizeGaps(w), SummarizeGaps(a)
}

// SummarizeGaps is the count, mean, p95 and maximum of gaps in seconds, to the millisecond.
func SummarizeGaps(g []float64) GapStats {
	s := svgchart.Summarize(g)
	round := func(x float64) float64 { return math.Round(x*1000) / 1000 }
	return GapStats{N: s.N, Mean: round(s.Mean), P95: round(s.P95), Max: round(s.Max)}
}

// CauseType is the error type of a failure whose cause is "Error: cause" (a failed segment
// execution's) or the execution's own (pipeline.FailureOf).
func CauseType(errName, cause string) string {
	if name, rest, ok := strings.Cut(cause, ": {"); ok && !strings.ContainsAny(name, " {") {
		errType, _ := pipeline.FailureOf(name, "{"+rest)
		return errType
	}
	errType, _ := pipeline.FailureOf(errName, cause)
	return errType
}

// ReadableCause shows a Lambda error's type and message (pipeline.FailureOf, as pipectl shows
// them); the cause is "Error: cause" for a failed segment execution, or the execution's own cause.
func ReadableCause(cause string) string {
	i := strings.Index(cause, "{")
	if i < 0 {
		return cause
	}
	name, isNamed := strings.CutSuffix(cause[:i], ": ")
	if i > 0 && !isNamed {
		return cause
	}
	errType, message := pipeline.FailureOf(name, cause[i:])
	if message == cause[i:] {
		return cause
	}
	if !isNamed {
		return message
	}
	return errType + ": " + message
}

// FileEvent is one File Processed event the pipeline put: report.json's fileEvents, in the order
// they were put.
type FileEvent struct {
	// ID is the id the local EventBridge gave the event; Detail.EventID is the pipeline's own.
	ID     string        `json:"id"`
	Time   time.Time     `json:"time"`
	Bus    string        `json:"bus"`
	Detail results.Event `json:"detail"`
}

// OwnStop is when the file's own run stopped: before its first redrive, if it was redriven.
func (f *FileReport) OwnStop() *time.Time {
	if f.FirstStop != nil {
		return f.FirstStop
	}
	return f.StoppedAt
}
