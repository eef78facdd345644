// Package svgchart draws the small SVG charts of the figures: horizontal bars, and strips of points
// on a shared axis. A chart is one self-contained file: no script, no external font, no link.
package svgchart

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Layout, in SVG user units. The label column is wide enough for "fixed 30 s wait (old design)".
const (
	width      = 760
	labelWidth = 220
	valueWidth = 150
	plotLeft   = labelWidth + 10
	plotRight  = width - valueWidth
	rowHeight  = 26
	titleSpace = 34
)

// palette is one colour per row, in order; readable on white and for the common colour-vision
// deficiencies (Okabe-Ito).
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"}

// Bar is one bar: its label, its value on the axis, and the value as printed beside it.
type Bar struct {
	Label string
	Value float64
	Text  string
}

// Section is a group of bars on one axis, under its own title.
type Section struct {
	Title string
	// Log draws the axis in decades, for values that differ by orders of magnitude.
	Log  bool
	Bars []Bar
}

// BarChart is a titled stack of sections; Note is a line of small print under the chart.
type BarChart struct {
	Title    string
	Note     string
	Sections []Section
}

// SVG renders the chart.
func (c BarChart) SVG() []byte {
	var body bytes.Buffer
	y := titleSpace
	for _, s := range c.Sections {
		if s.Title != "" {
			y += 18
			fmt.Fprintf(&body, `<text x="%d" y="%d" class="section">%s</text>`+"\n", 10, y, esc(s.Title))
			y += 8
		}
		var vals []float64
		for _, b := range s.Bars {
			vals = append(vals, b.Value)
		}
		ax := newAxis(vals, s.Log)
		body.WriteString(ax.grid(y, y+4+len(s.Bars)*rowHeight+2))
		y += 4
		for i, b := range s.Bars {
			x0, x1 := ax.pos(ax.min), ax.pos(b.Value)
			if b.Value <= 0 || x1 < x0 {
				x1 = x0
			}
			cy := y + rowHeight/2
			fmt.Fprintf(&body, `<text x="%d" y="%d" class="label">%s</text>`+"\n", labelWidth, cy+4, esc(b.Label))
			fmt.Fprintf(&body, `<rect class="bar" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s: %s</title></rect>`+"\n",
				x0, y+4, x1-x0, rowHeight-8, palette[i%len(palette)], esc(b.Label), esc(b.Text))
			fmt.Fprintf(&body, `<text x="%.1f" y="%d" class="value">%s</text>`+"\n", x1+6, cy+4, esc(b.Text))
			y += rowHeight
		}
		y += 24
	}
	return document(c.Title, c.Note, y, body.Bytes())
}

// Series is one row of a strip chart: each value a point.
type Series struct {
	Label  string
	Values []float64
}

// Line is a vertical reference line across every row, such as a design's fixed wait.
type Line struct {
	At    float64
	Label string
}

// StripChart shows distributions side by side: one row of points per series on one axis, the
// mean marked, and n, mean, p95 and max printed at the right.
type StripChart struct {
	Title string
	Note  string
	// Unit follows every printed value ("s").
	Unit   string
	Log    bool
	Series []Series
	Lines  []Line
}

// SVG renders the chart.
func (c StripChart) SVG() []byte {
	var all []float64
	for _, s := range c.Series {
		all = append(all, s.Values...)
	}
	for _, l := range c.Lines {
		all = append(all, l.At)
	}
	ax := newAxis(all, c.Log)
	var body bytes.Buffer
	top := titleSpace + 18
	y := top + 4
	const stripHeight = 40
	bottom := y + len(c.Series)*(stripHeight+6)
	body.WriteString(ax.grid(top, bottom))
	for i, s := range c.Series {
		colour := palette[i%len(palette)]
		st := Summarize(s.Values)
		fmt.Fprintf(&body, `<text x="%d" y="%d" class="label">%s</text>`+"\n", labelWidth, y+stripHeight/2+4, esc(s.Label))
		for j, v := range s.Values {
			// A fixed jitter in five rows keeps equal values apart and the file byte-for-byte stable.
			cy := float64(y) + 8 + float64(j%5)*6
			fmt.Fprintf(&body, `<circle class="point" cx="%.1f" cy="%.1f" r="3" fill="%s" fill-opacity="0.55"><title>%s</title></circle>`+"\n",
				ax.pos(v), cy, colour, esc(Format(v)+" "+c.Unit))
		}
		if st.N > 0 {
			mx := ax.pos(st.Mean)
			fmt.Fprintf(&body, `<line class="mean" x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#000" stroke-width="2"/>`+"\n", mx, mx, y+2, y+stripHeight-2)
			fmt.Fprintf(&body, `<text x="%d" y="%d" class="value">n=%d mean %s</text>`+"\n", plotRight+10, y+stripHeight/2-2, st.N, esc(Format(st.Mean)+" "+c.Unit))
			fmt.Fprintf(&body, `<text x="%d" y="%d" class="value">p95 %s max %s</text>`+"\n", plotRight+10, y+stripHeight/2+12, esc(Format(st.P95)), esc(Format(st.Max)+" "+c.Unit))
		} else {
			fmt.Fprintf(&body, `<text x="%d" y="%d" class="value">n=0</text>`+"\n", plotRight+10, y+stripHeight/2+4)
		}
		y += stripHeight + 6
	}
	for _, l := range c.Lines {
		x := ax.pos(l.At)
		fmt.Fprintf(&body, `<line class="ref" x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#555" stroke-dasharray="4 3"/>`+"\n", x, x, top-8, y)
		fmt.Fprintf(&body, `<text x="%.1f" y="%d" class="ref" text-anchor="middle">%s</text>`+"\n", x, top-11, esc(l.Label))
	}
	fmt.Fprintf(&body, `<text x="%d" y="%d" class="tick" text-anchor="middle">%s</text>`+"\n", (plotLeft+plotRight)/2, y+30, esc(c.Unit))
	return document(c.Title, c.Note, y+36, body.Bytes())
}

// Stats summarize a distribution. P95 is the nearest-rank 95th percentile.
type Stats struct {
	N                   int
	Min, Mean, P95, Max float64
}

// Summarize returns the statistics of values (zero for none).
func Summarize(values []float64) Stats {
	if len(values) == 0 {
		return Stats{}
	}
	s := append([]float64(nil), values...)
	sort.Float64s(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	return Stats{N: len(s), Min: s[0], Mean: sum / float64(len(s)), P95: s[int(math.Ceil(0.95*float64(len(s))))-1], Max: s[len(s)-1]}
}

// Format prints a value with the precision its size needs: 13,730; 59.6; 90; 0.71; 0.003.
func Format(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 1000 || (a >= 10 && v == math.Trunc(v)):
		return thousands(int64(math.Round(v)))
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 0.1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
}

// tickLabel prints an axis tick as short as it is exact: 0.1, 10, 1,000.
func tickLabel(v float64) string {
	if v >= 1000 {
		return thousands(int64(math.Round(v)))
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// axis maps values to x between plotLeft and plotRight.
type axis struct {
	min, max float64
	log      bool
}

func newAxis(values []float64, log bool) axis {
	lo, hi := math.Inf(1), 0.0
	for _, v := range values {
		if v > 0 {
			lo = min(lo, v)
		}
		hi = max(hi, v)
	}
	if hi <= 0 {
		return axis{min: 0, max: 1}
	}
	if log {
		a := axis{min: math.Pow(10, math.Floor(math.Log10(lo))), max: math.Pow(10, math.Ceil(math.Log10(hi)-1e-9)), log: true}
		if a.max <= a.min {
			a.max = a.min * 10
		}
		return a
	}
	step := niceStep(hi / 4)
	return axis{min: 0, max: math.Ceil(hi/step) * step}
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

func (a axis) pos(v float64) float64 {
	f := 0.0
	switch {
	case a.log && v > 0:
		f = (math.Log10(v) - math.Log10(a.min)) / (math.Log10(a.max) - math.Log10(a.min))
	case !a.log:
		f = (v - a.min) / (a.max - a.min)
	}
	f = max(0, min(1, f))
	return plotLeft + f*(plotRight-plotLeft)
}

func (a axis) ticks() []float64 {
	var t []float64
	if a.log {
		for v := a.min; v <= a.max*1.0001; v *= 10 {
			t = append(t, v)
		}
		return t
	}
	step := niceStep(a.max / 4)
	for v := a.min; v <= a.max+step/1000; v += step {
		t = append(t, v)
	}
	return t
}

// grid draws the axis's tick lines from top to bottom and their labels below.
func (a axis) grid(top, bottom int) string {
	var b strings.Builder
	for _, v := range a.ticks() {
		x := a.pos(v)
		fmt.Fprintf(&b, `<line class="grid" x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#ddd"/>`+"\n", x, x, top, bottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="tick" text-anchor="middle">%s</text>`+"\n", x, bottom+14, esc(tickLabel(v)))
	}
	return b.String()
}

func document(title, note string, height int, body []byte) []byte {
	var b bytes.Buffer
	if note != "" {
		height += 16
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	b.WriteString(`<style>.title{font-size:15px;font-weight:bold}.section{font-weight:bold}.label{text-anchor:end}.tick,.note,.ref{font-size:10px;fill:#555}</style>` + "\n")
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="10" y="20" class="title">%s</text>`+"\n", esc(title))
	b.Write(body)
	if note != "" {
		fmt.Fprintf(&b, `<text x="10" y="%d" class="note">%s</text>`+"\n", height-8, esc(note))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// esc escapes text for SVG content and attribute values.
func esc(s string) string { return html.EscapeString(s) }
