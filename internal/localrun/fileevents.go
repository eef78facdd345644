package localrun

// The pipeline's own events on EventBridge: the controller puts a "File Processed" event at each
// end of a file execution (internal/controller/fileevent.go). The functions reach this PutEvents
// endpoint through AWS_ENDPOINT_URL_EVENTBRIDGE; each entry is routed by the synthesized rules, as
// an uploaded file's event is, and the File Processed ones are kept for report.json (fileEvents).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/results"
)

// putEventsEntry is one entry of a PutEvents request
// (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEventsRequestEntry.html).
type putEventsEntry struct {
	Source       string
	DetailType   string
	Detail       string
	EventBusName string
	Resources    []string
}

// servePutEvents is EventBridge's PutEvents (JSON 1.1, X-Amz-Target AWSEvents.PutEvents), the one
// action the functions call. A session's entry is judged by its role's policies
// (putEventAllowed); a refused entry fails alone, as AWS reports it in the entry.
func (c *Cloud) servePutEvents(w http.ResponseWriter, req *http.Request) {
	if target := req.Header.Get("X-Amz-Target"); target != "AWSEvents.PutEvents" {
		http.Error(w, `{"__type":"UnknownOperationException","message":"only PutEvents is served locally"}`, http.StatusBadRequest)
		return
	}
	var in struct{ Entries []putEventsEntry }
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		http.Error(w, `{"__type":"ValidationException","message":"body is not a PutEvents request"}`, http.StatusBadRequest)
		return
	}
	type resultEntry struct {
		EventId      string `json:",omitempty"`
		ErrorCode    string `json:",omitempty"`
		ErrorMessage string `json:",omitempty"`
	}
	out := struct {
		FailedEntryCount int
		Entries          []resultEntry
	}{Entries: []resultEntry{}}
	session, judged := c.auth.session(req)
	for _, e := range in.Entries {
		if judged {
			if ok, why := c.auth.putEventAllowed(session, e, secureTransport(req)); !ok {
				c.auth.refuse()
				c.auth.say("EventBridge PutEvents %s from %s: NotAuthorizedForSourceException: %s", e.EventBusName, e.Source, why)
				out.FailedEntryCount++
				out.Entries = append(out.Entries, resultEntry{ErrorCode: "NotAuthorizedForSourceException",
					ErrorMessage: "Not authorized for the source " + e.Source + " on the event bus " + e.EventBusName})
				continue
			}
		}
		var detail map[string]any
		if err := json.Unmarshal([]byte(e.Detail), &detail); err != nil {
			out.FailedEntryCount++
			out.Entries = append(out.Entries, resultEntry{ErrorCode: "MalformedDetail", ErrorMessage: "Detail is not a JSON object"})
			continue
		}
		id, now := emulate.NewID(), time.Now().UTC()
		if e.Source == results.EventSource && e.DetailType == results.EventDetailType {
			var ev results.Event
			json.Unmarshal([]byte(e.Detail), &ev)
			if c.watch != nil {
				c.watch.fileProcessed(report.FileEvent{ID: id, Time: now, Bus: e.EventBusName, Detail: ev})
			}
		}
		resources := e.Resources
		if resources == nil {
			resources = []string{}
		}
		c.PutEvent(req.Context(), map[string]any{
			"version": "0", "id": id, "detail-type": e.DetailType, "source": e.Source, "account": emulate.Account,
			"time": now.Format(time.RFC3339), "region": emulate.Region, "resources": resources, "detail": detail,
		})
		out.Entries = append(out.Entries, resultEntry{EventId: id})
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	json.NewEncoder(w).Encode(out)
}

// fileProcessed records a File Processed event the pipeline put.
func (r *Run) fileProcessed(ev report.FileEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fileEvents = append(r.fileEvents, ev)
}

// FileEvents are the File Processed events put so far, in order.
func (r *Run) FileEvents() []report.FileEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]report.FileEvent{}, r.fileEvents...)
}

// putEventAllowed judges one PutEvents entry of session s: events:PutEvents on the event bus it
// names (a name, "default" when empty, or an ARN), with the entry's source and detail-type as the
// condition keys events:source and events:detail-type. AWS fails such an entry alone, with
// NotAuthorizedForSourceException (or NotAuthorizedForDetailTypeException).
// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-conditions.html
// https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEventsResultEntry.html
func (a *tenantAuth) putEventAllowed(s tenantSession, e putEventsEntry, secure bool) (bool, string) {
	bus := e.EventBusName
	if bus == "" {
		bus = "default"
	}
	if !strings.HasPrefix(bus, "arn:") {
		bus = fmt.Sprintf("arn:aws:events:%s:%s:event-bus/%s", a.res.Region, a.res.Account, bus)
	}
	return a.decide(s, "events:PutEvents", bus, map[string]string{
		"aws:SecureTransport": fmt.Sprint(secure), "events:source": e.Source, "events:detail-type": e.DetailType,
	})
}
