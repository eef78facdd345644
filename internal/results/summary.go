package results

import (
	"regexp"
	"strconv"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// SummaryVersion is the version of summary.json's format.
const SummaryVersion = 1

// Summary is summary.json: what became of one file execution.
type Summary struct {
	Version   int    `json:"version"`
	Tenant    string `json:"tenant"`
	Tier      string `json:"tier"` // "silo" or "pool"
	Execution string `json:"execution"`
	// RedriveCount is which run of the execution the summary describes: 0 for its first, n after
	// its n-th redrive, whose summary replaces the earlier one.
	RedriveCount int `json:"redriveCount"`
	// ExecutionARN is the file execution's ARN.
	ExecutionARN string `json:"executionArn,omitempty"`
	Source       Source `json:"source"`
	// Status is the execution's: SUCCEEDED, FAILED, TIMED_OUT or ABORTED; or REFUSED for a file of
	// a sequenced tenant that was not registered (Refusal says why, and Execution is the name its
	// execution would have had).
	Status string `json:"status"`
	// Sequence is the file's value in its tenant's sequence; absent for a tenant without one.
	Sequence string `json:"sequence,omitempty"`
	// Refusal is why a REFUSED file was not registered: "unmatched" (its name does not match the
	// sequence's pattern), "duplicate" (its value was processed or is held already) or "late" (its
	// value was skipped, or is below the last name processed).
	Refusal string  `json:"refusal,omitempty"`
	Timings Timings `json:"timings"`
	// The counts: records in the file (the header not counted), registered in the core system,
	// rejected (by validation under skipRecord, or by the core system), and unprocessed (never
	// sent, because the file failed or halted first). records = registered + rejected + unprocessed.
	Records     int64 `json:"records"`
	Registered  int64 `json:"registered"`
	Rejected    int64 `json:"rejected"`
	Unprocessed int64 `json:"unprocessed"`
	// RegisteredAfterHalt are the records after the first record never sent that were registered
	// all the same, counted in Registered and absent from the unprocessed file: a file in key
	// order (recordOrder "key") halts at its first failed record, and records of other keys after
	// it may already be registered. Ascending ranges, each {"first":…,"last":…}; absent in file
	// order, and for a file that succeeded.
	RegisteredAfterHalt []pipeline.RecordRange `json:"registeredAfterHalt,omitempty"`
	// OnInvalidRecord is the tenant's policy the file ran under: failFile or skipRecord.
	OnInvalidRecord string `json:"onInvalidRecord"`
	// Failure is why the file failed, if it did.
	Failure *Failure `json:"failure,omitempty"`
	Files   Files    `json:"files"`
	// Complete is the core system's answer to the file's completion POST (its completeUrl);
	// absent when none was sent: no completeUrl, or the file did not succeed.
	Complete *Completion `json:"complete,omitempty"`
}

// Completion is what became of a file's completion POST to its core system's completeUrl.
type Completion struct {
	// Status is the last answer's HTTP status; 0 when there was none.
	Status int `json:"status"`
	// Body is the first 256 bytes of the last answer's body.
	Body string `json:"body,omitempty"`
	// Attempts is the POSTs sent.
	Attempts int `json:"attempts"`
	// Error says why the completion failed; absent when the core system took it (2xx or 409).
	Error string     `json:"error,omitempty"`
	At    *time.Time `json:"at,omitempty"`
}

// StatusRefused is the status of a sequenced tenant's file that was not registered.
const StatusRefused = "REFUSED"

// Source is the object the file execution read.
type Source struct {
	Bucket  string `json:"bucket"`
	Key     string `json:"key"`
	Version string `json:"version,omitempty"`
}

// Timings are the file's moments, in UTC; a moment the file never reached is absent: queued (the
// S3 event's time), admitted (the controller admitted the file and started its execution),
// started (the execution's start, or its redrive's) and stopped (its end).
type Timings struct {
	Queued   *time.Time `json:"queued,omitempty"`
	Admitted *time.Time `json:"admitted,omitempty"`
	Started  *time.Time `json:"started,omitempty"`
	Stopped  *time.Time `json:"stopped,omitempty"`
}

// Failure is a failed file's error: its Step Functions error name, message and, when the problem
// is in the file, the physical line.
type Failure struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Line    int64  `json:"line,omitempty"`
}

// Files are the s3:// URIs of the results files; an absent file has no entry. Rejected is
// rejected.csv for a CSV file, rejected.jsonl for a JSON Lines file; RejectedNotCSV is a CSV
// file's rejected.jsonl, of its rejected rows that are not valid CSV.
type Files struct {
	Summary        string `json:"summary"`
	Rejected       string `json:"rejected,omitempty"`
	RejectedNotCSV string `json:"rejectedNotCsv,omitempty"`
	Unprocessed    string `json:"unprocessed,omitempty"`
}

// The completion event, put on EventBridge once per file end (each replay and each redrive emits
// its own).
const (
	EventSource     = "tenantpipeline"
	EventDetailType = "File Processed"
)

// Event is the detail of a "File Processed" event.
type Event struct {
	// EventID is "<execution name>/<redrive count>": the same for every attempt to announce one end
	// of one run, so a consumer that sees it twice drops the second.
	EventID string `json:"eventId"`
	Tenant  string `json:"tenant"`
	Tier    string `json:"tier"`
	Source  Source `json:"source"`
	Status  string `json:"status"`
	// Sequence and Refusal are as in Summary.
	Sequence    string `json:"sequence,omitempty"`
	Refusal     string `json:"refusal,omitempty"`
	Records     int64  `json:"records"`
	Registered  int64  `json:"registered"`
	Rejected    int64  `json:"rejected"`
	Unprocessed int64  `json:"unprocessed"`
	// Summary is the s3:// URI of the file's summary.json.
	Summary      string   `json:"summary"`
	Execution    string   `json:"execution"`
	ExecutionARN string   `json:"executionArn"`
	Failure      *Failure `json:"failure,omitempty"`
	// CountsFrom says where the counts come from: CountsFromSummary (summary.json of this end of
	// the run), CountsFromExecution (the execution's output) or CountsFromNone (neither could be
	// read: the counts are 0 and mean "unknown").
	CountsFrom string `json:"countsFrom"`
}

// Where an Event's counts come from (Event.CountsFrom).
const (
	CountsFromSummary   = "summary"
	CountsFromExecution = "execution"
	CountsFromNone      = "none"
)

// EventID is the id of the File Processed event of one end of a run: "<execution name>/<redrive
// count>".
func EventID(execution string, redriveCount int) string {
	return execution + "/" + strconv.Itoa(redriveCount)
}

// EventMarkerKey is the marker the controller writes once the File Processed event of one end of a
// run was put: results/<tenant>/<execution>/event-<redrive count>.json.
func EventMarkerKey(o pipeline.Owner, execution string, redriveCount int) string {
	return Key(o, execution, "event-"+strconv.Itoa(redriveCount)+".json")
}

var lineRE = regexp.MustCompile(`\bline (\d+)\b`)

// LineOf is the physical line a failure message names ("line 14: …", "first at line 14"), 0 when
// it names none: a failure in the file names its line, a failure of the core system its record.
func LineOf(message string) int64 {
	m := lineRE.FindStringSubmatch(message)
	if m == nil {
		return 0
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// URI is the s3:// URI of a key in bucket.
func URI(bucket, key string) string { return "s3://" + bucket + "/" + key }
