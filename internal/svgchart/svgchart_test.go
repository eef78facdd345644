package svgchart

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
)

// element is a parsed SVG element with its attributes and text.
type element struct {
	name  string
	attrs map[string]string
	text  string
}

// parse checks the document is well-formed XML and returns its elements in order.
func parse(t *testing.T, doc []byte) []element {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	var out []element
	var stack []int
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, doc)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := element{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			out = append(out, e)
			stack = append(stack, len(out)-1)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				out[stack[len(stack)-1]].text += string(tok)
			}
		}
	}
	return out
}

func byClass(els []element, name, class string) []element {
	var out []element
	for _, e := range els {
		if e.name == name && e.attrs["class"] == class {
			out = append(out, e)
		}
	}
	return out
}

func TestBarChart(t *testing.T) {
	tests := []struct {
		name      string
		chart     BarChart
		wantBars  int
		wantTexts []string
	}{
		{
			name: "throughput on a log axis",
			chart: BarChart{Title: "register throughput", Sections: []Section{{Log: true, Bars: []Bar{
				{"record", 90, "90 rec/s"}, {"batch", 13730, "13,730 rec/s"}, {"dynamodb", 890, "890 rec/s"}}}}},
			wantBars:  3,
			wantTexts: []string{"register throughput", "record", "13,730 rec/s"},
		},
		{
			name: "labels with markup, quotes and Japanese are text",
			chart: BarChart{Title: `a <b> & "c"`, Note: "注文 <x>", Sections: []Section{{Title: "<script>", Bars: []Bar{
				{`<img src=x onerror="y">`, 1, "1 'one'"}}}}},
			wantBars:  1,
			wantTexts: []string{`a <b> & "c"`, "注文 <x>", "<script>", `<img src=x onerror="y">`, "1 'one'"},
		},
		{
			name: "a zero value draws an empty bar",
			chart: BarChart{Title: "calls", Sections: []Section{{Title: "describe", Bars: []Bar{
				{"events on", 0, "0.0"}, {"polling", 897, "897"}}}}},
			wantBars:  2,
			wantTexts: []string{"0.0", "897"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := tt.chart.SVG()
			els := parse(t, doc)
			if got := len(byClass(els, "rect", "bar")); got != tt.wantBars {
				t.Errorf("bars: got %d, want %d", got, tt.wantBars)
			}
			var texts []string
			for _, e := range els {
				if e.name == "text" {
					texts = append(texts, e.text)
				}
			}
			for _, want := range tt.wantTexts {
				if !contains(texts, want) {
					t.Errorf("texts: got %q, want one to be %q", texts, want)
				}
			}
			if bytes.Contains(doc, []byte("<script")) || bytes.Contains(doc, []byte("<img")) {
				t.Errorf("got markup from a label in the document:\n%s", doc)
			}
			for _, e := range els {
				for k, v := range e.attrs {
					if k == "href" || (strings.Contains(v, "http") && k != "xmlns") {
						t.Errorf("%s %s=%q: got a link, want a self-contained file", e.name, k, v)
					}
				}
			}
		})
	}
}

func TestBarWidthsFollowTheAxis(t *testing.T) {
	doc := BarChart{Title: "x", Sections: []Section{{Log: true, Bars: []Bar{{"a", 10, ""}, {"b", 100, ""}, {"c", 1000, ""}}}}}.SVG()
	bars := byClass(parse(t, doc), "rect", "bar")
	w := make([]float64, len(bars))
	for i, b := range bars {
		w[i] = num(t, b.attrs["width"])
	}
	// Decades 10..1000: 100 is halfway, 1000 the whole plot.
	full := float64(plotRight - plotLeft)
	for i, want := range []float64{0, full / 2, full} {
		if math.Abs(w[i]-want) > 0.2 {
			t.Errorf("bar %d width: got %.1f, want %.1f", i, w[i], want)
		}
	}
}

func TestStripChart(t *testing.T) {
	c := StripChart{
		Title: "inter-file gap", Unit: "s", Log: true,
		Series: []Series{{"this design", []float64{0.7, 0.71, 0.77}}, {"fixed 30 s wait (old design)", []float64{29.7, 29.8}}, {"none", nil}},
		Lines:  []Line{{30, "fixed wait 30 s"}},
	}
	els := parse(t, c.SVG())
	if got := len(byClass(els, "circle", "point")); got != 5 {
		t.Errorf("points: got %d, want 5 (one per value)", got)
	}
	if got := len(byClass(els, "line", "mean")); got != 2 {
		t.Errorf("mean marks: got %d, want 2 (series with values)", got)
	}
	refs := byClass(els, "line", "ref")
	if len(refs) != 1 {
		t.Fatalf("reference lines: got %d, want 1", len(refs))
	}
	// Axis 0.1..100 s in decades: 30 s is at log10(300)/3 of the plot.
	want := plotLeft + math.Log10(300)/3*float64(plotRight-plotLeft)
	if got := num(t, refs[0].attrs["x1"]); math.Abs(got-want) > 0.2 {
		t.Errorf("30 s line: got x %.1f, want %.1f", got, want)
	}
	var texts []string
	for _, e := range els {
		if e.name == "text" {
			texts = append(texts, e.text)
		}
	}
	for _, w := range []string{"n=3 mean 0.73 s", "p95 0.77 max 0.77 s", "n=0", "fixed wait 30 s"} {
		if !contains(texts, w) {
			t.Errorf("texts: got %q, want one to be %q", texts, w)
		}
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		in   []float64
		want Stats
	}{
		{nil, Stats{}},
		{[]float64{2}, Stats{N: 1, Min: 2, Mean: 2, P95: 2, Max: 2}},
		{[]float64{3, 1, 2, 4}, Stats{N: 4, Min: 1, Mean: 2.5, P95: 4, Max: 4}},
		// 20 values: the nearest-rank p95 is the 19th.
		{[]float64{20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, Stats{N: 20, Min: 1, Mean: 10.5, P95: 19, Max: 20}},
	}
	for _, tt := range tests {
		if got := Summarize(tt.in); got != tt.want {
			t.Errorf("Summarize(%v): got %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestFormat(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.003: "0.003", 0.71: "0.71", 9.99: "9.99", 59.56: "59.6", 90: "90", 897: "897", 13730: "13,730", 1234567: "1,234,567"} {
		if got := Format(v); got != want {
			t.Errorf("Format(%v): got %q, want %q", v, got, want)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	var f float64
	if _, err := fmt.Sscan(s, &f); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return f
}
