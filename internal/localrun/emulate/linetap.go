package emulate

import (
	"bytes"
	"io"
)

// NewLineTap writes to w and gives observe each whole line written.
func NewLineTap(w io.Writer, observe func([]byte)) *lineTap { return &lineTap{w: w, observe: observe} }

// lineTap passes a process's output through to w and hands each complete line to observe. One
// tap serves one stream of one process, so its lines are never interleaved with another's.
type lineTap struct {
	w       io.Writer
	observe func([]byte)
	buf     []byte
}

func (t *lineTap) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.buf = append(t.buf, p...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			break
		}
		t.observe(t.buf[:i])
		t.buf = t.buf[i+1:]
	}
	if len(t.buf) > 1<<20 { // a line longer than any log line: drop it
		t.buf = nil
	}
	return n, err
}
