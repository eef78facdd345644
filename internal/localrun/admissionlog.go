package localrun

import (
	"bytes"
	"encoding/json"
	"sync"
)

// admissionWaits reads the controllers' admission log lines (internal/controller/admission.go) as
// the function processes write them: "file admitted" carries the file's whole admission wait,
// from its first admission ask to its admission; each "waiting for admission" the wait so far.
// The report shows it as part of a file's queued time.
type admissionWaits struct {
	mu       sync.Mutex
	admitted map[string]float64 // by execution name
	waiting  map[string]float64 // the longest wait logged so far, by execution name
}

// The controller's messages and attributes.
const (
	logFileAdmitted       = "file admitted"
	logWaitingAdmission   = "waiting for admission"
	logAttrAdmissionWait  = "admissionWaitSeconds"
	logAttrExecutionName  = "executionName"
	admissionLogSubstring = "admission"
)

// observe reads one log line; lines that are no admission line are ignored.
func (a *admissionWaits) observe(line []byte) {
	if !bytes.Contains(line, []byte(admissionLogSubstring)) {
		return
	}
	var l map[string]any
	if json.Unmarshal(line, &l) != nil {
		return
	}
	msg, _ := l["msg"].(string)
	name, _ := l[logAttrExecutionName].(string)
	wait, ok := l[logAttrAdmissionWait].(float64)
	if name == "" || !ok || (msg != logFileAdmitted && msg != logWaitingAdmission) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.admitted == nil {
		a.admitted, a.waiting = map[string]float64{}, map[string]float64{}
	}
	if msg == logFileAdmitted {
		a.admitted[name] = max(a.admitted[name], wait)
	} else {
		a.waiting[name] = max(a.waiting[name], wait)
	}
}

// of is the execution's admission wait: the admitted line's, else the longest wait logged; false
// when its controller logged neither (no gate, or admitted at once).
func (a *admissionWaits) of(execution string) (float64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w, ok := a.admitted[execution]; ok {
		return w, true
	}
	w, ok := a.waiting[execution]
	return w, ok
}
