package results

import "time"

// OutOfOrderFile is the audit record of an operator's run of a file after later files of its
// tenant ran (pipectl redrive or replay --out-of-order): in the file's results folder, beside
// summary.json, written by pipectl before it asks for the run.
const OutOfOrderFile = "out-of-order.json"

// OutOfOrder is out-of-order.json: the file ran (or is asked to run) out of the tenant's order,
// who asked, why, and the later files it runs after.
type OutOfOrder struct {
	OutOfOrder bool `json:"outOfOrder"`
	// Action is "redrive" or "replay"; Execution the execution that runs the file (a replay's own).
	Action      string    `json:"action"`
	Execution   string    `json:"execution"`
	Reason      string    `json:"reason"`
	RequestedBy string    `json:"requestedBy"`
	RequestedAt time.Time `json:"requestedAt"`
	RequestID   string    `json:"requestId,omitempty"`
	// Later are the later files (at most 10, newest first); LaterCount how many there were.
	Later      []LaterFile `json:"later"`
	LaterCount int         `json:"laterCount"`
	// Queued is how many files of the tenant were queued ahead of the run (it runs after them).
	Queued int `json:"queued"`
}

// LaterFile is one file of the tenant that ran before the out-of-order run.
type LaterFile struct {
	Key       string `json:"key"`
	Execution string `json:"execution"`
	Status    string `json:"status"`
}
