package register

import "sync"

// window is a keyed file's congestion window: how many requests it may keep in flight toward its
// core system. It follows TCP's congestion avoidance (https://www.rfc-editor.org/rfc/rfc5681#section-3.1):
//   - additive increase: a whole window's worth of answers adds one request (an answer counter,
//     RFC 5681's cwnd += 1/cwnd in whole requests), up to most (the tenant's RecordsInFlight);
//   - multiplicative decrease: a 429 or 503 halves it (at least 1), once per round trip. A
//     slow-down answer to a request sent before the last decrease tells nothing new, since that
//     request went out under the larger window already halved: it does not halve again (as TCP
//     reduces once per window of data, RFC 5681 section 3.2, and NewReno's recovery point,
//     https://www.rfc-editor.org/rfc/rfc6582#section-3.2). Each send takes a sequence number, and
//     the decrease point is the first number sent after the last decrease.
//
// It starts at what the file's previous invocation left (its progress, carried), else at most:
// the tenant's maxRecordsInFlight is what it says its core system takes, a slow-down answer
// halves the window at once, and the core system's share (cap) and adaptive limit bound it, so
// a slow start would only cost a file that has no 429 to learn from its first round trips. What
// made a keyed file restart small was losing a halved window between invocations; the carried
// window keeps it.
//
// cap is the file's share of its core system's requests in flight (setCap); most until set.
// Its methods are safe for the keyed sink's concurrent senders.
type window struct {
	mu   sync.Mutex
	most int
	cap  int
	cwnd int
	acks int    // answers since cwnd last grew
	seq  uint64 // sends so far
	// recover is the first sequence number sent after the last decrease: only a slow-down
	// answer to a send at or after it decreases again.
	recover uint64
}

// newWindow is the window of a file that may keep most requests in flight, starting at carried
// when it is a window the file's previous invocation left (1..most), else at most.
func newWindow(most, carried int) *window {
	most = max(1, most)
	w := &window{most: most, cap: most, cwnd: most}
	w.restore(carried)
	return w
}

// restore starts the window at carried, the window the file's previous invocation left
// (Progress.Window), when it is one (1..most); else it stays where it is.
func (w *window) restore(carried int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if carried >= 1 && carried < w.most {
		w.cwnd, w.acks = carried, 0
	}
}

// size is what may be in flight now: the window, within its cap and most.
func (w *window) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return min(w.cwnd, w.cap, w.most)
}

// setCap bounds the window by the file's share of its core system's requests in flight, at
// least 1: a file whose share is 0 holds before each send instead (pace.take). The window keeps
// growing under the cap (a share is not a sign of congestion), so a share that grows is used at
// once; a slow-down answer halves the window within the cap.
func (w *window) setCap(n int) {
	w.mu.Lock()
	w.cap = max(1, n)
	w.mu.Unlock()
}

// sending numbers one send, for slowed. A nil window (not a keyed file) numbers nothing.
func (w *window) sending() uint64 {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	return w.seq
}

// slowed takes a 429 or 503 answer to send number sent: the window halves unless a decrease
// came after that send already.
func (w *window) slowed(sent uint64) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if sent < w.recover {
		return
	}
	// Halve what was in flight, the window within its cap (as TCP halves its flight size, RFC
	// 5681 equation 4): halving a window above a smaller share would not slow the file.
	w.cwnd, w.acks = max(1, min(w.cwnd, w.cap)/2), 0
	w.recover = w.seq + 1
}

// grow takes one answered request: a window's worth of them add one.
func (w *window) grow() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cwnd >= w.most {
		return
	}
	if w.acks++; w.acks >= w.cwnd {
		w.cwnd, w.acks = w.cwnd+1, 0
	}
}

// carried is the window the file's next invocation starts at (Progress.Window): 0, none, when it
// is at most, where a new window starts anyway.
func (w *window) carried() int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cwnd < w.most {
		return w.cwnd
	}
	return 0
}
