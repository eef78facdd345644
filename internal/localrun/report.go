package localrun

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/svgchart"
)

// Report is the JSON report of a run (docs/local-run.md, "Report").
type Report struct {
	Tenants            map[string]*TenantReport    `json:"tenants"`
	InterFileGapSecond GapStats                    `json:"interFileGapSeconds"`
	APICalls           map[string]map[string]int64 `json:"apiCalls"`
	WallSeconds        float64                     `json:"wallSeconds"`
	RecordsPerSecond   float64                     `json:"recordsPerSecond"`
	APICallsPer1000    map[string]float64          `json:"apiCallsPer1000Records"`
	Violations         []string                    `json:"violations"`
	// ExternalEndpoint is true when the run registered to --register-url: the harness sees no
	// record, so the record checks (record order, exactly once, registration windows) are skipped.
	ExternalEndpoint bool `json:"externalEndpoint"`
	// LambdaThrottles counts, per function (its local name), the invocations Lambda refused with
	// TooManyRequestsException: the account's or a reserved concurrency in use
	// (Config.LambdaConcurrency), or Config.Throttle. Only throttled functions appear; {} when none.
	LambdaThrottles map[string]int64 `json:"lambdaThrottles"`
	// SinkMaxInFlight is the most POSTs the embedded sink had in progress at once (those it
	// answered 429 included), and Sink429 how many it answered 429 for Config.SinkMaxInFlight.
	SinkMaxInFlight int   `json:"sinkMaxInFlight"`
	Sink429         int64 `json:"sink429"`
	// FileEvents are the File Processed events the pipeline put on EventBridge, in the order they
	// were put (docs/local-run.md); [] when none.
	FileEvents []FileEvent `json:"fileEvents"`
}

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
	// Runs are the runs of a redriven execution, in order: the file's own (redrive 0), then one per
	// redrive, each with its own status and times; absent for an execution never redriven, whose
	// one run is StartedAt to StoppedAt. A redriven execution keeps its start date, so StartedAt to
	// StoppedAt spans every run and what ran between them.
	Runs []ExecutionRun `json:"runs,omitempty"`
	// AdmissionWaitSeconds is the part of the file's queued time it waited for admission: from
	// its first admission ask to its admission (the controller's "file admitted" line), or the
	// wait so far while it waits; absent when the file never waited for a gate.
	AdmissionWaitSeconds *float64 `json:"admissionWaitSeconds,omitempty"`

	expected int64 // records Split found, -1 when unknown
	// firstStop is when the file's own run stopped and redrives when each operator redrive began,
	// for a redriven execution (operatorruns.go).
	firstStop *time.Time
	redrives  []time.Time
}

// ExecutionRun is one run of an execution: its first, or a redrive (operatorruns.go).
type ExecutionRun struct {
	// Redrive is 0 for the execution's own run, n for its n-th redrive.
	Redrive   int        `json:"redrive"`
	Status    string     `json:"status"`
	StartedAt time.Time  `json:"startedAt"`
	StoppedAt *time.Time `json:"stoppedAt"`
	// Error and Cause are those of a run that failed, timed out or was aborted.
	Error string `json:"error,omitempty"`
	Cause string `json:"cause,omitempty"`
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

type execInput struct {
	Source struct {
		Key       string `json:"key"`
		VersionID string `json:"versionId"`
		ETag      string `json:"etag"`
	} `json:"source"`
}

// names reports whether the execution input is about the uploaded object version. The controller
// passes the key as the event carried it (eventKey: raw or form-encoded, Config.EventKeyForm).
func (in execInput) names(u *Upload, eventKey string) bool {
	return in.Source.Key == eventKey && (u.VersionID == "" || in.Source.VersionID == u.VersionID) &&
		(u.VersionID != "" || in.Source.ETag == "" || in.Source.ETag == u.ETag)
}

// Snapshot builds the report from the state of the run now.
func (r *Run) Snapshot(ctx context.Context) (*Report, error) {
	st, err := r.sfnStats(ctx)
	if err != nil {
		return nil, fmt.Errorf("read Step Functions state: %w", err)
	}
	byParent := map[string][]sfnExecution{}
	byMachine := map[string][]sfnExecution{}
	for _, e := range st.Executions {
		if e.ParentArn != "" {
			byParent[e.ParentArn] = append(byParent[e.ParentArn], e)
		}
		byMachine[e.StateMachineArn] = append(byMachine[e.StateMachineArn], e)
	}
	r.mu.Lock()
	end := r.drainedAt
	r.mu.Unlock()
	if end.IsZero() {
		end = time.Now()
	}
	rep := &Report{Tenants: map[string]*TenantReport{}, APICalls: r.Counter.Snapshot(), WallSeconds: end.Sub(r.started).Seconds(),
		ExternalEndpoint: r.cfg.RegisterURL != ""}
	var lambdaCalls = map[string]int64{}
	rep.LambdaThrottles = map[string]int64{}
	for _, f := range r.functions {
		lambdaCalls["Invoke"] += f.Invocations()
		if n := f.Throttles(); n > 0 {
			rep.LambdaThrottles[f.Name] = n
		}
	}
	rep.SinkMaxInFlight, rep.Sink429 = r.Sink.InFlight()
	rep.FileEvents = r.FileEvents()
	rep.APICalls["lambda"] = lambdaCalls
	if rep.APICalls["stepfunctions"] == nil {
		rep.APICalls["stepfunctions"] = map[string]int64{}
	}
	// Child executions started by the workflow itself (startExecution.sync:2) are Step Functions
	// service integration calls, not calls of the pipeline's code; they are reported separately.
	for _, e := range st.Executions {
		if e.ParentArn != "" {
			rep.APICalls["stepfunctions"]["StartExecution(workflow)"]++
		}
	}

	uploads := r.Uploads()
	var gaps []float64
	var total int64
	for _, t := range r.Tenants {
		tr := &TenantReport{Files: []FileReport{}, Tier: cmpOr(t.Tier, TierSilo), Pool: t.Pool}
		rep.Tenants[t.ID] = tr
		execs := byMachine[t.FileMachine]
		registered := r.Sink.Registered(t.ID)
		perSource := map[string]int64{}
		for _, rec := range registered {
			if replayKey(rec.Key) {
				continue // a replay's records are its own execution's, not the file's
			}
			perSource[rec.Source+"\x00"+rec.VersionID]++
		}
		tr.RecordsRegistered = int64(len(registered))
		total += tr.RecordsRegistered
		used := map[string]bool{}
		for _, u := range uploads {
			if u.Tenant != t.ID {
				continue
			}
			fr := FileReport{Key: u.Key, VersionID: u.VersionID, ETag: u.ETag, Status: "WAITING", UploadedAt: u.At, expected: -1}
			for _, e := range execs {
				var in execInput
				if json.Unmarshal([]byte(r.executionInput(ctx, e.ExecutionArn)), &in) == nil && in.names(u, r.eventKey(u.Key)) {
					fr.Executions++
				}
			}
			for _, e := range execs {
				if used[e.ExecutionArn] {
					continue
				}
				var in execInput
				if err := json.Unmarshal([]byte(r.executionInput(ctx, e.ExecutionArn)), &in); err != nil {
					continue
				}
				if !in.names(u, r.eventKey(u.Key)) {
					continue
				}
				used[e.ExecutionArn] = true
				r.fillExecution(ctx, t, &fr, e, byParent[e.ExecutionArn])
				r.fillCounts(ctx, t.ID, &fr)
				break
			}
			fr.Records = perSource[u.Key+"\x00"+u.VersionID]
			if t.DynamoDBTable() != "" { // the records its execution wrote to the table (dynamodb.go)
				fr.Records = r.dynamoWritten(fr.ExecutionName)
				tr.RecordsRegistered += fr.Records
				total += fr.Records
			} else if rep.ExternalEndpoint {
				total += fr.splitCount()
			}
			tr.Files = append(tr.Files, fr)
		}
		// An execution left over names a file that already has one: the file ran again.
		for _, e := range execs {
			if used[e.ExecutionArn] {
				continue
			}
			var in execInput
			if json.Unmarshal([]byte(r.executionInput(ctx, e.ExecutionArn)), &in) != nil {
				continue
			}
			for _, f := range tr.Files {
				u := &Upload{Key: f.Key, VersionID: f.VersionID, ETag: f.ETag}
				if f.ExecutionName == "" || !in.names(u, r.eventKey(f.Key)) {
					continue
				}
				fr := FileReport{Key: f.Key, VersionID: f.VersionID, ETag: f.ETag, Replay: true, expected: -1}
				r.fillExecution(ctx, t, &fr, e, byParent[e.ExecutionArn])
				fr.UploadedAt = *fr.StartedAt // a control message, not an upload: no queued time is known
				r.fillCounts(ctx, t.ID, &fr)  // a replay is an execution of its own, with its own summary
				if t.DynamoDBTable() != "" {
					fr.Records = r.dynamoWritten(fr.ExecutionName)
				} else if rep.ExternalEndpoint {
					total += fr.splitCount()
				}
				tr.Replays = append(tr.Replays, fr)
				break
			}
		}
		sort.Slice(tr.Replays, func(i, j int) bool { return tr.Replays[i].StartedAt.Before(*tr.Replays[j].StartedAt) })
		gaps = append(gaps, tr.Gaps()...)
		if n, err := r.tenantDepth(ctx, t); err == nil {
			tr.Queued = n
		}
		tr.Halted = halted(t, tr)
	}
	rep.InterFileGapSecond = gapStats(gaps)
	if rep.WallSeconds > 0 {
		rep.RecordsPerSecond = float64(total) / rep.WallSeconds
	}
	if total > 0 {
		rep.APICallsPer1000 = map[string]float64{}
		for svc, ops := range rep.APICalls {
			var n int64
			for op, v := range ops {
				if op != "StartExecution(workflow)" {
					n += v
				}
			}
			rep.APICallsPer1000[svc] = math.Round(float64(n)*1000/float64(total)*100) / 100
		}
	}
	rep.Violations = r.checkInvariants(rep)
	return rep, nil
}

// splitCount makes Split's count the records of a file the harness cannot see registered (an
// external endpoint), and returns it: 0 when unknown.
func (f *FileReport) splitCount() int64 {
	if f.expected < 0 {
		f.Records, f.RecordsCountedBy = 0, "none"
		return 0
	}
	f.Records, f.RecordsCountedBy = f.expected, "split"
	return f.expected
}

// fillCounts sets the file's registered, rejected and unprocessed counts from its execution's
// summary.json; they stay nil when it has none (or it cannot be read).
func (r *Run) fillCounts(ctx context.Context, tenant string, f *FileReport) {
	if f.ExecutionName == "" || r.s3 == nil {
		return
	}
	out, err := r.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(results.Key(tenant, f.ExecutionName, results.SummaryFile))})
	if err != nil {
		return
	}
	defer out.Body.Close()
	var s results.Summary
	if json.NewDecoder(out.Body).Decode(&s) != nil {
		return
	}
	f.setCounts(s)
}

// setCounts takes the counts of s when it describes the file's execution as it is now: the same
// execution, run and status, as the controller reads it for the File Processed event. A summary of
// another run or status is an earlier end of a redriven execution (each end rewrites it), or was
// written by the results task of an execution not yet stopped.
func (f *FileReport) setCounts(s results.Summary) {
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

// fillExecution sets what the file's execution e (and its segment executions) tell.
func (r *Run) fillExecution(ctx context.Context, t *Tenant, fr *FileReport, e sfnExecution, segments []sfnExecution) {
	start := unixTime(e.StartDate)
	fr.ExecutionName, fr.Status, fr.Error, fr.StartedAt, fr.HistoryEvents, fr.MaxPayloadBytes, fr.RedriveCount = e.Name, e.Status, e.Error, &start, e.HistoryEvents, e.MaxPayloadBytes, e.RedriveCount
	if e.Status != "RUNNING" {
		stop := unixTime(e.StopDate)
		fr.StoppedAt = &stop
	}
	switch e.Status {
	case "SUCCEEDED":
		fr.expected = r.splitRecords(ctx, e.ExecutionArn)
	case "FAILED", "TIMED_OUT", "ABORTED":
		fr.Skipped = r.skipMarked(ctx, t.ID, e.Name)
	}
	if e.RedriveCount > 0 {
		fr.Runs = r.redriveHistory(ctx, e)
		if len(fr.Runs) > 0 {
			fr.firstStop = fr.Runs[0].StoppedAt
		}
		for _, run := range fr.Runs[min(1, len(fr.Runs)):] {
			fr.redrives = append(fr.redrives, run.StartedAt)
		}
	}
	if w, ok := r.admissionWaits.of(e.Name); ok && w > 0 {
		fr.AdmissionWaitSeconds = &w
	}
	fr.Cause = e.Cause
	for _, c := range segments {
		if c.Status == "FAILED" && e.Status == "FAILED" {
			fr.Cause = c.Error + ": " + c.Cause
		}
		fr.SegmentExecutions++
		fr.SegmentHistoryEventsMax = max(fr.SegmentHistoryEventsMax, c.HistoryEvents)
		fr.MaxPayloadBytes = max(fr.MaxPayloadBytes, c.MaxPayloadBytes)
	}
}

// skipMarked reports whether an operator wrote the skip marker of the tenant's execution
// (lambdas/controller/skip.go names it).
func (r *Run) skipMarked(ctx context.Context, tenant, execution string) bool {
	key := pipeline.SkipMarkerKey(tenant, execution)
	_, err := r.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &r.Bucket, Key: &key})
	return err == nil
}

// Gaps are the tenant's inter-file gaps in seconds, in upload order (gapSpans).
func (tr *TenantReport) Gaps() []float64 {
	var gaps []float64
	for _, g := range tr.gapSpans() {
		gaps = append(gaps, g.to.Sub(g.from).Seconds())
	}
	return gaps
}

// gapSpan is one inter-file gap: from the stop of the execution a file waited for to its start.
type gapSpan struct{ from, to time.Time }

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
			gaps = append(gaps, gapSpan{*prev, *f.StartedAt})
		}
	}
	return gaps
}

func (r *Run) executionInput(ctx context.Context, arn string) string {
	r.mu.Lock()
	if r.inputs == nil {
		r.inputs = map[string]string{}
	}
	in, ok := r.inputs[arn]
	r.mu.Unlock()
	if ok {
		return in
	}
	d, err := r.sfn.DescribeExecution(ctx, describeInput(arn))
	if err != nil {
		return ""
	}
	in = deref(d.Input)
	r.mu.Lock()
	r.inputs[arn] = in
	r.mu.Unlock()
	return in
}

// splitRecords reads the record count Split reported from a succeeded file execution's output
// ($.split.records), or -1 when the output does not carry it.
func (r *Run) splitRecords(ctx context.Context, arn string) int64 {
	d, err := r.sfn.DescribeExecution(ctx, describeInput(arn))
	if err != nil || d.Output == nil {
		return -1
	}
	var out struct {
		Split *struct {
			Records *int64 `json:"records"`
		} `json:"split"`
	}
	if json.Unmarshal([]byte(*d.Output), &out) != nil || out.Split == nil || out.Split.Records == nil {
		return -1
	}
	return *out.Split.Records
}

func describeInput(arn string) *sfn.DescribeExecutionInput {
	return &sfn.DescribeExecutionInput{ExecutionArn: &arn}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func unixTime(sec float64) time.Time {
	return time.UnixMilli(int64(math.Round(sec * 1000)))
}

func gapStats(g []float64) GapStats {
	s := svgchart.Summarize(g)
	round := func(x float64) float64 { return math.Round(x*1000) / 1000 }
	return GapStats{N: s.N, Mean: round(s.Mean), P95: round(s.P95), Max: round(s.Max)}
}

// checkInvariants checks, per tenant: executions started in upload order and never overlapped;
// records were first registered file by file in that order and, inside a file, in record order,
// with an operator's replay or redrive checked as a run of its own (operatorruns.go);
// every record of a succeeded file was registered exactly once by its idempotency key; and the
// registration windows of two files (first POST to the end of the last, at the sink) never overlap.
func (r *Run) checkInvariants(rep *Report) []string {
	v := []string{} // the report's "violations" is [] when none, never null
	_, _, _, bad := r.Sink.Stats()
	v = append(v, bad...)
	for _, t := range r.Tenants {
		tr := rep.Tenants[t.ID]
		var lastStart, lastStop *time.Time
		for i, f := range tr.Files {
			if f.StartedAt == nil {
				continue
			}
			if lastStart != nil && f.StartedAt.Before(*lastStart) {
				v = append(v, fmt.Sprintf("%s: file %d (%s) started before an earlier upload", t.ID, i+1, f.Key))
			}
			if lastStop == nil && lastStart != nil {
				v = append(v, fmt.Sprintf("%s: file %d (%s) started while the previous file was still running", t.ID, i+1, f.Key))
			} else if lastStop != nil && f.StartedAt.Before(*lastStop) {
				v = append(v, fmt.Sprintf("%s: file %d (%s) started before the previous file's execution stopped", t.ID, i+1, f.Key))
			}
			lastStart, lastStop = f.StartedAt, f.ownStop()
		}
		v = append(v, redriveViolations(t.ID, tr.Files)...)
		if r.cfg.RegisterURL != "" {
			continue // an external endpoint: the harness cannot see what it registered
		}
		order := map[string]int{}
		for i, f := range tr.Files {
			order[f.Key+"\x00"+f.VersionID] = i
			if f.Status == "SUCCEEDED" && f.expected >= 0 && f.Records != f.expected {
				v = append(v, fmt.Sprintf("%s: %s has %d records but %d were registered", t.ID, f.Key, f.expected, f.Records))
			}
		}
		if t.DynamoDBTable() != "" {
			continue // order is the table's to show (the scenarios read it back); the sink saw nothing
		}
		v = append(v, registrationViolations(t.ID, tr.Files, r.Sink.Registered(t.ID), r.Sink.Requests(t.ID))...)
	}
	return v
}

// Window is the time a file's records were being sent to the core system: from the arrival of its
// first POST to the answer of its last one, whatever the answers were.
type Window struct {
	First, Last time.Time
	Requests    int
}

// RegistrationWindows returns, per file (key and version id), its registration window at the sink.
func RegistrationWindows(reqs []SinkRequest) map[string]*Window {
	w := map[string]*Window{}
	for _, q := range reqs {
		id := q.Source + "\x00" + q.VersionID
		x := w[id]
		if x == nil {
			x = &Window{First: q.Start, Last: q.End}
			w[id] = x
		}
		if q.Start.Before(x.First) {
			x.First = q.Start
		}
		if q.End.After(x.Last) {
			x.Last = q.End
		}
		x.Requests++
	}
	return w
}

// windowOverlaps lists the files whose registration started before an earlier upload's last POST
// was answered: two files of one tenant registering at the same time.
func windowOverlaps(tenant string, files []FileReport, reqs []SinkRequest) []string {
	var v []string
	windows := RegistrationWindows(reqs)
	var prev *Window
	var prevKey string
	for _, f := range files {
		w := windows[f.Key+"\x00"+f.VersionID]
		if w == nil {
			continue
		}
		if prev != nil && !w.First.After(prev.Last) {
			v = append(v, fmt.Sprintf("%s: %s's first POST came %s before %s's last POST was answered (two files registering at once)",
				tenant, f.Key, prev.Last.Sub(w.First).Round(time.Millisecond), prevKey))
		}
		if prev == nil || w.Last.After(prev.Last) {
			prev, prevKey = w, f.Key
		}
	}
	return v
}

// Drained reports whether every upload has been processed: no message left in any queue, no
// execution running and no event source mapping invocation in flight.
func (r *Run) Drained(ctx context.Context) (bool, error) { return r.drained(ctx, nil) }

// drained is Drained, except that the queues of the tenants in halted may hold messages (a halted
// tenant holds its head file's message and every file behind it).
func (r *Run) drained(ctx context.Context, halted map[string]bool) (bool, error) {
	r.mu.Lock()
	busy := r.busy
	r.mu.Unlock()
	if busy > 0 {
		return false, nil
	}
	for _, t := range r.Tenants {
		if halted[t.ID] {
			continue
		}
		n, err := r.tenantDepth(ctx, t)
		if err != nil {
			return false, err
		}
		if n > 0 {
			return false, nil
		}
	}
	st, err := r.sfnStats(ctx)
	if err != nil {
		return false, err
	}
	for _, e := range st.Executions {
		if e.Status == "RUNNING" {
			return false, nil
		}
	}
	return true, nil
}

// TenantIDs lists the tenants in template order.
func (r *Run) TenantIDs() []string {
	ids := make([]string, len(r.Tenants))
	for i, t := range r.Tenants {
		ids[i] = t.ID
	}
	return ids
}

// causeType is the error type of a failure whose cause is "Error: cause" (a failed segment
// execution's) or the execution's own (pipeline.FailureOf).
func causeType(errName, cause string) string {
	if name, rest, ok := strings.Cut(cause, ": {"); ok && !strings.ContainsAny(name, " {") {
		errType, _ := pipeline.FailureOf(name, "{"+rest)
		return errType
	}
	errType, _ := pipeline.FailureOf(errName, cause)
	return errType
}

// readableCause shows a Lambda error's type and message (pipeline.FailureOf, as pipectl shows
// them); the cause is "Error: cause" for a failed segment execution, or the execution's own cause.
func readableCause(cause string) string {
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
