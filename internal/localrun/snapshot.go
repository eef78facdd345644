package localrun

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
)

type execInput struct {
	Source struct {
		Key       string `json:"key"`
		VersionID string `json:"versionId"`
		ETag      string `json:"etag"`
	} `json:"source"`
}

// names reports whether the execution input is about the uploaded object version. The controller
// passes the key as the event carried it (eventKey: raw or form-encoded, S3Options.EventKeyForm).
func (in execInput) names(u *Upload, eventKey string) bool {
	return in.Source.Key == eventKey && (u.VersionID == "" || in.Source.VersionID == u.VersionID) &&
		(u.VersionID != "" || in.Source.ETag == "" || in.Source.ETag == u.ETag)
}

// Snapshot builds the report from the state of the run now.
func (r *Run) Snapshot(ctx context.Context) (*report.Report, error) {
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
	rep := &report.Report{Tenants: map[string]*report.TenantReport{}, APICalls: r.Counter.Snapshot(), WallSeconds: end.Sub(r.started).Seconds(),
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
	rep.CoreSystemBreakers = r.breakers.byCoreSystem()
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
	var gapParts []report.GapPart
	var total int64
	groups := map[string]map[string]int{} // the pool queues' depths by group, listed once (tenantDepth)
	for _, t := range r.Tenants {
		tr := &report.TenantReport{Files: []report.FileReport{}, Tier: cmp.Or(t.Tier, TierSilo), Pool: t.Pool}
		rep.Tenants[t.ID] = tr
		execs := byMachine[t.FileMachine]
		registered := r.Sink.Registered(t.ID)
		perSource, perReplay := recordsOf(registered)
		tr.RecordsRegistered = int64(len(registered))
		total += tr.RecordsRegistered
		used := map[string]bool{}
		// Each execution's input, decoded once for all the tenant's uploads (nil if it is not JSON).
		inputs := make([]*execInput, len(execs))
		for i, e := range execs {
			var in execInput
			if json.Unmarshal([]byte(r.executionInput(ctx, e.ExecutionArn)), &in) == nil {
				inputs[i] = &in
			}
		}
		for _, u := range uploads {
			if u.Tenant != t.ID {
				continue
			}
			fr := report.FileReport{Key: u.Key, VersionID: u.VersionID, ETag: u.ETag, Status: "WAITING", UploadedAt: u.At, Expected: -1}
			key := r.eventKey(u.Key)
			for _, in := range inputs {
				if in != nil && in.names(u, key) {
					fr.Executions++
				}
			}
			for i, e := range execs {
				if used[e.ExecutionArn] || inputs[i] == nil || !inputs[i].names(u, key) {
					continue
				}
				used[e.ExecutionArn] = true
				r.fillExecution(ctx, t, &fr, e, byParent[e.ExecutionArn])
				r.fillCounts(ctx, t.Owner(), &fr)
				break
			}
			fr.Records = perSource[u.Key+"\x00"+u.VersionID]
			if t.DynamoDBTable() == "" && !rep.ExternalEndpoint {
				countRuns(&fr, registered)
			}
			if t.DynamoDBTable() != "" { // the records its execution wrote to the table (dynamodb.go)
				fr.Records = r.dynamoWritten(fr.ExecutionName)
				tr.RecordsRegistered += fr.Records
				total += fr.Records
			} else if rep.ExternalEndpoint {
				total += fr.SplitCount()
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
				fr := report.FileReport{Key: f.Key, VersionID: f.VersionID, ETag: f.ETag, Replay: true, Expected: -1}
				r.fillExecution(ctx, t, &fr, e, byParent[e.ExecutionArn])
				fr.UploadedAt = *fr.StartedAt     // a control message, not an upload: no queued time is known
				r.fillCounts(ctx, t.Owner(), &fr) // a replay is an execution of its own, with its own summary
				fr.Records = perReplay[fr.ExecutionName]
				if t.DynamoDBTable() != "" {
					fr.Records = r.dynamoWritten(fr.ExecutionName)
				} else if rep.ExternalEndpoint {
					total += fr.SplitCount()
				}
				tr.Replays = append(tr.Replays, fr)
				break
			}
		}
		sort.Slice(tr.Replays, func(i, j int) bool { return tr.Replays[i].StartedAt.Before(*tr.Replays[j].StartedAt) })
		if rule, seq := t.SequenceRule(); seq {
			r.fillSequence(ctx, t, rule, tr)
		}
		gaps = append(gaps, tr.Gaps()...)
		gapParts = append(gapParts, tr.GapParts()...)
		if n, err := r.tenantDepth(ctx, t, groups); err == nil {
			tr.Queued = n
		}
		tr.Halted = halted(t, tr)
	}
	rep.InterFileGapSecond = report.SummarizeGaps(gaps)
	rep.InterFileGapWakeUpSecond, rep.InterFileGapAdmissionSecond = report.SummarizeGapParts(gapParts)
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

// fillCounts sets the file's registered, rejected and unprocessed counts from its execution's
// summary.json; they stay nil when it has none (or it cannot be read).
func (r *Run) fillCounts(ctx context.Context, o pipeline.Owner, f *report.FileReport) {
	if f.ExecutionName == "" || r.s3 == nil {
		return
	}
	out, err := r.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(results.Key(o, f.ExecutionName, results.SummaryFile))})
	if err != nil {
		return
	}
	defer out.Body.Close()
	var s results.Summary
	if json.NewDecoder(out.Body).Decode(&s) != nil {
		return
	}
	f.SetCounts(s)
}

// fillExecution sets what the file's execution e (and its segment executions) tell.
func (r *Run) fillExecution(ctx context.Context, t *Tenant, fr *report.FileReport, e sfnExecution, segments []sfnExecution) {
	start := unixTime(e.StartDate)
	fr.ExecutionName, fr.Status, fr.Error, fr.StartedAt, fr.HistoryEvents, fr.MaxPayloadBytes, fr.RedriveCount = e.Name, e.Status, e.Error, &start, e.HistoryEvents, e.MaxPayloadBytes, e.RedriveCount
	if e.Status != "RUNNING" {
		stop := unixTime(e.StopDate)
		fr.StoppedAt = &stop
	}
	switch e.Status {
	case "SUCCEEDED":
		fr.Expected = r.splitRecords(ctx, e.ExecutionArn)
	case "FAILED", "TIMED_OUT", "ABORTED":
		fr.Skipped = r.skipMarked(ctx, t.Owner(), e.Name)
	}
	fr.OutOfOrder = r.outOfOrder(ctx, t.Owner(), e)
	if e.RedriveCount > 0 {
		fr.Runs = r.redriveHistory(ctx, e)
		if len(fr.Runs) > 0 {
			fr.FirstStop = fr.Runs[0].StoppedAt
		}
		for _, run := range fr.Runs[min(1, len(fr.Runs)):] {
			fr.Redrives = append(fr.Redrives, run.StartedAt)
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
// (pipeline.SkipMarkerKey names it, for the controller and pipectl alike).
func (r *Run) skipMarked(ctx context.Context, o pipeline.Owner, execution string) bool {
	key := pipeline.SkipMarkerKey(o, execution)
	_, err := r.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &r.Bucket, Key: &key})
	return err == nil
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

// checkInvariants checks, per tenant: executions started in upload order and never overlapped;
// records were first registered file by file in that order and, inside a file, in record order,
// with an operator's replay or redrive checked as a run of its own (operatorruns.go);
// every record of a succeeded file was registered exactly once by its idempotency key; and the
// registration windows of two files (first POST to the end of the last, at the sink) never overlap.
func (r *Run) checkInvariants(rep *report.Report) []string {
	v := []string{} // the report's "violations" is [] when none, never null
	_, _, _, bad := r.Sink.Stats()
	v = append(v, bad...)
	for _, t := range r.Tenants {
		tr := rep.Tenants[t.ID]
		// A sequenced tenant's files run in the order of their values, not of their uploads.
		files, earlier := tr.Files, "an earlier upload"
		if rule, seq := t.SequenceRule(); seq {
			files, earlier = sequenceOrder(rule, t.Prefix, tr.Files), "a file before it in the sequence"
			for _, f := range tr.Files {
				if f.Status == report.StatusRefused && f.Records > 0 {
					v = append(v, fmt.Sprintf("%s: %s was refused (%s) but %d of its records were registered", t.ID, f.Key, f.Refusal, f.Records))
				}
			}
		}
		var lastStart, lastStop *time.Time
		for i, f := range files {
			if f.StartedAt == nil {
				continue
			}
			if lastStart != nil && f.StartedAt.Before(*lastStart) {
				v = append(v, fmt.Sprintf("%s: file %d (%s) started before %s", t.ID, i+1, f.Key, earlier))
			}
			if lastStop == nil && lastStart != nil {
				v = append(v, fmt.Sprintf("%s: file %d (%s) started while the previous file was still running", t.ID, i+1, f.Key))
			} else if lastStop != nil && f.StartedAt.Before(*lastStop) {
				v = append(v, fmt.Sprintf("%s: file %d (%s) started before the previous file's execution stopped", t.ID, i+1, f.Key))
			}
			lastStart, lastStop = f.StartedAt, f.OwnStop()
		}
		v = append(v, redriveViolations(t.ID, tr.Files)...)
		if r.cfg.RegisterURL != "" {
			continue // an external endpoint: the harness cannot see what it registered
		}
		order := map[string]int{}
		for i, f := range tr.Files {
			order[f.Key+"\x00"+f.VersionID] = i
			if f.Status == "SUCCEEDED" && f.Expected >= 0 && f.Records != f.Expected {
				v = append(v, fmt.Sprintf("%s: %s has %d records but %d were registered", t.ID, f.Key, f.Expected, f.Records))
			}
		}
		if t.DynamoDBTable() != "" {
			continue // order is the table's to show (the scenarios read it back); the sink saw nothing
		}
		v = append(v, registrationViolations(t.ID, t.Keyed(), files, r.Sink.Registered(t.ID), r.Sink.Requests(t.ID))...)
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
func RegistrationWindows(reqs []emulate.SinkRequest) map[string]*Window {
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
func windowOverlaps(tenant string, files []report.FileReport, reqs []emulate.SinkRequest) []string {
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

// Drained reports whether every upload has been processed: no message left in any queue (a
// sequenced tenant's tick aside), no file held ahead of its turn, no execution running and no event
// source mapping invocation in flight.
func (r *Run) Drained(ctx context.Context) (bool, error) { return r.drained(ctx, nil) }

// drained is Drained, except that the queues of the tenants in halted may hold messages (a halted
// tenant holds its head file's message and every file behind it), and their held files may wait
// (a tenant holding files for a missing number, TenantReport.Holding).
func (r *Run) drained(ctx context.Context, halted map[string]bool) (bool, error) {
	if r.inFlight() > 0 {
		return false, nil
	}
	groups := map[string]map[string]int{}
	for _, t := range r.Tenants {
		if halted[t.ID] {
			continue
		}
		n, err := r.tenantDepth(ctx, t, groups)
		if err != nil {
			return false, err
		}
		if n > 0 {
			return false, nil
		}
		if rule, seq := t.SequenceRule(); seq {
			// Held files wait for their turn: a missing number, a skip after gapTimeout, a name
			// settling. None of them is in the queue.
			held, err := r.sequenceStore(t, rule).List(ctx, 0)
			if err != nil {
				return false, err
			}
			if held.Count > 0 {
				return false, nil
			}
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

// countRuns gives each run of a redriven file the records registered during it: a record
// registered at or after the n-th redrive began is redrive n's (operatorRun). A replay's records
// are its own execution's, not the file's.
func countRuns(f *report.FileReport, registered []emulate.SinkRecord) {
	if len(f.Runs) == 0 {
		return
	}
	f.Runs = append([]report.ExecutionRun(nil), f.Runs...) // the runs of a stopped execution are cached (redriveHistory)
	counts := make([]int64, len(f.Runs))
	for _, rec := range registered {
		if replayKey(rec.Key) || rec.Source != f.Key || rec.VersionID != f.VersionID {
			continue
		}
		if n := f.RunAt(rec.At); n < len(counts) {
			counts[n]++
		}
	}
	for i := range f.Runs {
		f.Runs[i].Records = &counts[i]
	}
}

// recordsOf counts a tenant's registered records per file (source key and version id, by
// perSource) and per replay (its execution name): a replay's records are its own execution's,
// told by their Idempotency-Keys, not the file's.
func recordsOf(registered []emulate.SinkRecord) (perSource, perReplay map[string]int64) {
	perSource, perReplay = map[string]int64{}, map[string]int64{}
	for _, rec := range registered {
		if replayKey(rec.Key) {
			perReplay[executionOfKey(rec.Key)]++
			continue
		}
		perSource[rec.Source+"\x00"+rec.VersionID]++
	}
	return perSource, perReplay
}
