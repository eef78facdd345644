package records

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// bufSize is the read buffer of every stage. A line that fits in it is parsed without copying.
const bufSize = 64 << 10

// errRecordTooLarge stops the parser from buffering a record past the size bound.
var errRecordTooLarge = errors.New("record too large")

// counter passes a stream through, counting its bytes. When lfs is on it also remembers the offset
// just past every '\n' it has delivered and that the parser has not yet moved past. When a limit
// is set (setLimit) it fails once the reader would run more than limit bytes ahead of the parser's
// last record end, which bounds what encoding/csv buffers for one record. Blank lines do not count
// against the limit (blanks): encoding/csv skips them inside one Read, and they are not records.
type counter struct {
	r          io.Reader
	n          int64
	eof        bool
	lfs        bool
	ends       []int64
	head       int
	limit      int64 // 0: none
	check      *textCheck
	blanks     *blankLines // CSV text only
	limitBlank int64       // blanks.n when the limit was set
	kept       *keptBytes  // nil: the bytes read are not kept
}

// keptBytes holds the bytes a counter has read from offset from on, so that a skipped record's
// original bytes can be copied out once the parser has found it invalid. release drops what lies
// before a record end, so only the current record and the read-ahead are ever held. It counts the
// '\n' bytes it drops, so it also knows the physical line at from without holding more.
type keptBytes struct {
	buf   []byte
	start int   // buf[start:] holds the bytes from offset from
	from  int64 // the offset of buf[start]
	lines int64 // '\n' bytes before from, since keep started
}

func (k *keptBytes) add(b []byte) {
	if k.start > 0 && k.start >= len(k.buf)/2 {
		k.buf = k.buf[:copy(k.buf, k.buf[k.start:])]
		k.start = 0
	}
	k.buf = append(k.buf, b...)
}

// release drops the bytes before offset off, counting their line ends.
func (k *keptBytes) release(off int64) {
	if d := off - k.from; d > 0 {
		n := int(min(d, int64(len(k.buf)-k.start)))
		k.lines += int64(bytes.Count(k.buf[k.start:k.start+n], []byte{'\n'}))
		k.start += n
		k.from = off
	}
}

// between copies the bytes of offsets [from, to); both must lie in what is kept.
func (k *keptBytes) between(from, to int64) ([]byte, error) {
	if from < k.from || to < from || to-k.from > int64(len(k.buf)-k.start) {
		return nil, fmt.Errorf("bytes %d-%d are not kept (kept from %d, %d bytes)", from, to, k.from, len(k.buf)-k.start)
	}
	i := int64(k.start) + from - k.from
	return append([]byte(nil), k.buf[i:i+to-from]...), nil
}

// setLimit lets the reader run to offset limit, plus the bytes of any blank lines it reads from now.
func (c *counter) setLimit(limit int64) {
	c.limit = limit
	if c.blanks != nil {
		c.limitBlank = c.blanks.n
	}
}

func (c *counter) Read(p []byte) (int, error) {
	if c.limit > 0 {
		limit := c.limit
		if c.blanks != nil {
			limit += c.blanks.n - c.limitBlank
		}
		if c.n >= limit {
			return 0, errRecordTooLarge
		}
		if int64(len(p)) > limit-c.n {
			p = p[:limit-c.n]
		}
	}
	n, err := c.r.Read(p)
	if c.blanks != nil {
		c.blanks.scan(p[:n])
	}
	if c.lfs {
		for b, off := p[:n], c.n; ; {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				break
			}
			off += int64(i + 1)
			c.ends = append(c.ends, off)
			b = b[i+1:]
		}
	}
	if c.check != nil {
		c.check.scan(p[:n])
	}
	if c.kept != nil {
		c.kept.add(p[:n])
	}
	c.n += int64(n)
	if err == io.EOF {
		c.eof = true
		if c.check != nil {
			c.check.end()
		}
	}
	return n, err
}

// blankLines counts the bytes of the blank lines ("\n" or "\r\n" alone) of CSV text that lie
// outside quoted fields: the lines encoding/csv skips. Inside quotes a line end is field content
// and counts. With LazyQuotes off every '"' of text that parses opens or closes a quoted field or
// is half of a doubled quote inside one, so the parity of the quotes seen tells whether a line end
// is inside a field; text past a quoting error never parses, so a wrong parity there is harmless.
type blankLines struct {
	inQuote bool
	midLine bool // outside quotes, past the start of a line
	cr      bool // at the start of a line, after one '\r'
	n       int64
}

func (s *blankLines) scan(b []byte) {
	for len(b) > 0 {
		if s.inQuote {
			i := bytes.IndexByte(b, '"')
			if i < 0 {
				return
			}
			s.inQuote, s.midLine = false, true
			b = b[i+1:]
			continue
		}
		if !s.midLine {
			switch {
			case b[0] == '\n':
				s.n++
				if s.cr {
					s.n++
				}
				s.cr = false
				b = b[1:]
				continue
			case b[0] == '\r' && !s.cr:
				s.cr = true
				b = b[1:]
				continue
			}
			s.midLine, s.cr = true, false
		}
		// Inside a line, outside quotes: on to the line end or the next quote, whichever is first.
		end := bytes.IndexByte(b, '\n')
		line := b
		if end >= 0 {
			line = b[:end]
		}
		if q := bytes.IndexByte(line, '"'); q >= 0 {
			s.inQuote = true
			b = b[q+1:]
			continue
		}
		if end < 0 {
			return
		}
		s.midLine = false
		b = b[end+1:]
	}
}

// textCheck watches decoded text in the blocks the parser reads and notes whether any of it is
// undecodable. Checking 64 KiB blocks is several times faster than checking every field, so Split
// checks fields one by one (to name the exact line) only once a block has failed.
type textCheck struct {
	cp932 bool
	carry []byte // UTF-8: an incomplete rune ending the last block; CP932: its last two bytes
	bad   bool
}

var replacement = []byte(string(utf8.RuneError))

func (c *textCheck) scan(b []byte) {
	if c.bad || len(b) == 0 {
		return
	}
	if c.cp932 {
		// The decoder writes U+FFFD for every byte it cannot map; it may straddle two blocks.
		joined := append(c.carry, b[:min(len(b), len(replacement)-1)]...)
		c.bad = bytes.Contains(joined, replacement) || bytes.Contains(b, replacement)
		if len(b) >= len(replacement)-1 {
			joined = b
		}
		c.carry = append(c.carry[:0], joined[max(0, len(joined)-(len(replacement)-1)):]...)
		return
	}
	for len(c.carry) > 0 && len(b) > 0 && !utf8.FullRune(c.carry) {
		c.carry, b = append(c.carry, b[0]), b[1:]
	}
	if len(c.carry) > 0 {
		if !utf8.FullRune(c.carry) {
			return
		}
		if !utf8.Valid(c.carry) {
			c.bad = true
			return
		}
		c.carry = c.carry[:0]
	}
	i := len(b) - 1
	for i >= 0 && i > len(b)-utf8.UTFMax && !utf8.RuneStart(b[i]) {
		i--
	}
	if i >= 0 && !utf8.FullRune(b[i:]) {
		c.carry = append(c.carry[:0], b[i:]...)
		b = b[:i]
	}
	c.bad = !utf8.Valid(b)
}

// end is called at the end of the text: a rune still incomplete there is undecodable.
func (c *textCheck) end() {
	if !c.cp932 && len(c.carry) > 0 {
		c.bad = true
	}
}

// rawOffsets maps offsets in the decoded text back to offsets in the raw object.
//
// For UTF-8 the text is the raw stream after the BOM, so the map is a shift. For CP932 it relies
// on one property of the encoding: 0x0A is never the trail byte of a double-byte character, so the
// k-th '\n' of the decoded text is the k-th 0x0A of the raw bytes. Records, and so chunks, always
// start just after a '\n' (or at the start or end of the text), so pairing the two streams' line
// ends is enough; no per-character bookkeeping is needed.
type rawOffsets struct {
	base    int64    // raw bytes before the text (the BOM)
	raw     *counter // raw side, nil for UTF-8
	decoded *counter // decoded side, nil for UTF-8
}

// at returns the raw offset of decoded offset off, which must be 0, just past a '\n', or the end
// of the text. Calls must come in non-decreasing order of off.
func (m *rawOffsets) at(off int64) (int64, error) {
	if m.raw == nil {
		return m.base + off, nil
	}
	if off == 0 {
		return m.base, nil
	}
	d, r := m.decoded, m.raw
	for d.head < len(d.ends) && d.ends[d.head] < off {
		d.head++
		r.head++
	}
	if d.head < len(d.ends) && d.ends[d.head] == off {
		if r.head >= len(r.ends) {
			return 0, fmt.Errorf("decoded line end %d has no raw line end", off)
		}
		raw := r.ends[r.head]
		m.compact()
		return raw, nil
	}
	if d.eof && off == d.n && r.eof {
		return m.base + r.n, nil
	}
	return 0, fmt.Errorf("decoded offset %d is not at a line end", off)
}

// compact keeps the two queues short; the parser only ever asks about the lines it reads next.
func (m *rawOffsets) compact() {
	d, r := m.decoded, m.raw
	if d.head > 1024 && d.head*2 > len(d.ends) {
		d.ends = d.ends[:copy(d.ends, d.ends[d.head:])]
		r.ends = r.ends[:copy(r.ends, r.ends[r.head:])]
		d.head, r.head = 0, 0
	}
}

// text is the decoded input of a scan: the parser reads from its counter, and offsets maps the
// parser's positions back to the raw object.
type text struct {
	in      *counter
	offsets *rawOffsets
	raw     *counter // the counter whose offsets are raw offsets (less the BOM for UTF-8)
}

// keep starts keeping the raw bytes read from now on, for rawBetween.
func (t *text) keep() { t.raw.kept = &keptBytes{from: t.raw.n} }

// rawAt is the raw offset of decoded offset off, in the raw counter's terms; calls in
// non-decreasing order of off, as rawOffsets.at.
func (t *text) rawAt(off int64) (int64, error) {
	raw, err := t.offsets.at(off)
	return raw - t.offsets.base, err
}

// release lets go of the raw bytes before decoded offset off, a record end.
func (t *text) release(off int64) error {
	raw, err := t.rawAt(off)
	if err == nil {
		t.raw.kept.release(raw)
	}
	return err
}

// lineAt is the physical line (from 1) at decoded offset off, a record end or the text's start:
// one more than the 0x0A bytes of the raw object before the raw offset of off (a UTF-8 BOM holds
// none, and in CP932 0x0A is never a trail byte, so they are the decoded text's '\n' bytes too).
// It lets go of the raw bytes before off, from which keep was on; calls in non-decreasing order
// of off, as rawOffsets.at.
func (t *text) lineAt(off int64) (int64, error) {
	if err := t.release(off); err != nil {
		return 0, err
	}
	return t.raw.kept.lines + 1, nil
}

// rawBetween is the raw bytes of decoded offsets [from, to), both record ends (or the text's
// start or end), from which keep was on.
func (t *text) rawBetween(from, to int64) ([]byte, error) {
	a, err := t.rawAt(from)
	if err != nil {
		return nil, err
	}
	b, err := t.rawAt(to)
	if err != nil {
		return nil, err
	}
	return t.raw.kept.between(a, b)
}

// openText decodes CP932, strips a UTF-8 BOM when bom is set (at the start of a file, never of a
// chunk), and wires up the offset map.
func openText(r io.Reader, f Format, bom bool) (*text, error) {
	if f.Encoding != pipeline.EncodingCP932 {
		br, ok := r.(interface {
			io.Reader
			Peek(int) ([]byte, error)
			Discard(int) (int, error)
		})
		if !ok {
			br = newBufReader(r)
		}
		var base int64
		if b, err := br.Peek(len(utf8BOM)); bom && bytes.Equal(b, utf8BOM) {
			if _, err := br.Discard(len(utf8BOM)); err != nil {
				return nil, err
			}
			base = int64(len(utf8BOM))
		} else if err != nil && err != io.EOF {
			return nil, err
		}
		in := &counter{r: br, check: &textCheck{}, blanks: f.blankLines()}
		return &text{in: in, offsets: &rawOffsets{base: base}, raw: in}, nil
	}
	raw := &counter{r: newBufReader(r), lfs: true}
	in := &counter{r: f.decode(raw), lfs: true, check: &textCheck{cp932: true}, blanks: f.blankLines()}
	return &text{in: in, offsets: &rawOffsets{raw: raw, decoded: in}, raw: raw}, nil
}

// blankLines tracks blank lines for a CSV text; JSON Lines are read line by line, so a blank line
// is never buffered with a record.
func (f Format) blankLines() *blankLines {
	if f.Kind == pipeline.FormatCSV {
		return &blankLines{}
	}
	return nil
}

func newBufReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, bufSize) }
