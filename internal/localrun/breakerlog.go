package localrun

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/report"
)

// breakerLog reads Register's breaker log lines (internal/register/breaker.go) as the function
// processes write them: each opening, probe, failed probe and closing of a core system's breaker,
// in the order they were logged. The report shows them per core system.
type breakerLog struct {
	mu     sync.Mutex
	events []report.BreakerEvent
}

// The Register messages, by their start, and the event each is.
var breakerMessages = []struct{ prefix, event string }{
	{"breaker opened", report.BreakerOpened},
	{"breaker probe claimed", report.BreakerProbe},
	{"breaker probe failed", report.BreakerProbeFailed},
	{"breaker closed", report.BreakerClosed},
}

// observe reads one log line; lines that are no breaker line are ignored.
func (b *breakerLog) observe(line []byte) {
	if !bytes.Contains(line, []byte(`"breaker `)) {
		return
	}
	var l struct {
		Time       time.Time `json:"time"`
		Msg        string    `json:"msg"`
		CoreSystem string    `json:"coreSystem"`
		Execution  string    `json:"execution"`
		Reason     string    `json:"reason"`
	}
	if json.Unmarshal(line, &l) != nil || l.CoreSystem == "" {
		return
	}
	for _, m := range breakerMessages {
		if strings.HasPrefix(l.Msg, m.prefix) {
			b.mu.Lock()
			b.events = append(b.events, report.BreakerEvent{At: l.Time, CoreSystem: l.CoreSystem, Event: m.event, Execution: l.Execution, Reason: l.Reason})
			b.mu.Unlock()
			return
		}
	}
}

// byCoreSystem is the breakers' events by core system, in time order; {} when none.
func (b *breakerLog) byCoreSystem() map[string]report.CoreSystemBreaker {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]report.CoreSystemBreaker{}
	for _, e := range b.events {
		c := out[e.CoreSystem]
		c.Events = append(c.Events, e)
		out[e.CoreSystem] = c
	}
	for name, c := range out {
		out[name] = report.SummarizeBreaker(c.Events)
	}
	return out
}
