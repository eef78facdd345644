package emulate

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// handleNext hands the next invocation to the function process. The headers are the ones
// aws-lambda-go reads (lambda/runtime_api_client.go).
func (inst *instance) handleNext(w http.ResponseWriter, r *http.Request) {
	inst.initEnd.CompareAndSwap(0, time.Now().UnixNano())
	select {
	case inv := <-inst.next:
		inv.began.Store(time.Now().UnixNano())
		inst.mu.Lock()
		inst.cur = inv
		inst.mu.Unlock()
		h := w.Header()
		h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
		h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(inv.deadline.UnixMilli(), 10))
		h.Set("Lambda-Runtime-Invoked-Function-Arn", inst.fn.ARN)
		h.Set("Lambda-Runtime-Trace-Id", "Root=1-"+inv.id[:8]+"-"+inv.id[8:32]+";Sampled=0")
		h.Set("Content-Type", "application/json")
		w.Write(inv.payload)
	case <-r.Context().Done():
	case <-inst.exited:
	}
}

func (inst *instance) current(id string) *invocation {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	if inst.cur == nil || inst.cur.id != id {
		return nil
	}
	inv := inst.cur
	inst.cur = nil
	return inv
}

func (inst *instance) handleResponse(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if hook := inst.fn.BeforeResponse; hook != nil && hook(inst.fn, r.PathValue("id"), body) {
		inst.kill()
		return
	}
	inv := inst.current(r.PathValue("id"))
	if inv == nil {
		http.Error(w, "unknown request id", http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	inv.finish(Result{Payload: body})
}

func (inst *instance) handleError(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	inv := inst.current(r.PathValue("id"))
	if inv == nil {
		http.Error(w, "unknown request id", http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	inv.finish(errorResult(r, body))
}

func (inst *instance) handleInitError(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(inst.fn.Logs, "%s: init error: %s\n", inst.fn.Name, body)
	inst.kill()
}

func errorResult(r *http.Request, body []byte) Result {
	var e struct {
		ErrorType string `json:"errorType"`
	}
	json.Unmarshal(body, &e)
	typ := cmp.Or(e.ErrorType, r.Header.Get("Lambda-Runtime-Function-Error-Type"), "Unhandled")
	return Result{Payload: body, ErrorType: typ}
}

func cmpOrInt(v, def int) int {
	if v != 0 {
		return v
	}
	return def
}

func NewID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}
