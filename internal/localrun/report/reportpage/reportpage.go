// Package reportpage reads a report.html back as the tests of the report and of the local run look
// at it: its elements, the timeline's lanes and bars with their times, and the table of files.
package reportpage

import (
	"bytes"
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"
)

// Element is one element of a parsed HTML page: its attributes and its text.
type Element struct {
	Name  string
	Attrs map[string]string
	Text  string
}

func (e Element) HasClass(c string) bool {
	for _, x := range strings.Fields(e.Attrs["class"]) {
		if x == c {
			return true
		}
	}
	return false
}

// Lanes is the page's timeline as the DOM holds it: per lane (data-tenant), its bars.
type Lanes struct {
	Tenants []string
	Bars    map[string][]Element
}

// Parse reads a page with encoding/xml in its HTML mode (void elements, HTML entities),
// which the report's own markup and Chromium's serialization of it both satisfy.
func Parse(t *testing.T, page []byte) ([]Element, Lanes) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict, d.AutoClose, d.Entity = false, xml.HTMLAutoClose, xml.HTMLEntity
	var els []Element
	var open []int
	lanes := Lanes{Bars: map[string][]Element{}}
	lane := ""
	laneDepth := -1
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("parse the page: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := Element{Name: strings.ToLower(tok.Name.Local), Attrs: map[string]string{}}
			for _, a := range tok.Attr {
				name := a.Name.Local
				if a.Name.Space != "" {
					name = a.Name.Space + ":" + name
				}
				e.Attrs[name] = a.Value
			}
			els = append(els, e)
			open = append(open, len(els)-1)
			switch {
			case e.HasClass("lane"):
				lane, laneDepth = e.Attrs["data-tenant"], len(open)
				lanes.Tenants = append(lanes.Tenants, lane)
			case e.HasClass("bar") && lane != "":
				lanes.Bars[lane] = append(lanes.Bars[lane], e)
			}
		case xml.EndElement:
			if len(open) == laneDepth {
				lane, laneDepth = "", -1
			}
			open = open[:len(open)-1]
		case xml.CharData:
			for _, i := range open {
				els[i].Text += string(tok)
			}
		}
	}
	return els, lanes
}

// Span is a bar's times from its data attributes, in ms from the first upload.
type Span struct {
	Start, RunStart, Stop int64
	Started               bool
}

func SpanOf(t *testing.T, bar Element) Span {
	t.Helper()
	ms := func(name string) int64 {
		v, err := strconv.ParseInt(bar.Attrs[name], 10, 64)
		if err != nil {
			t.Fatalf("bar %q: %s=%q: %v", bar.Attrs["data-key"], name, bar.Attrs[name], err)
		}
		return v
	}
	s := Span{Start: ms("data-start"), Stop: ms("data-stop")}
	if _, ok := bar.Attrs["data-run-start"]; ok {
		s.RunStart, s.Started = ms("data-run-start"), true
	}
	return s
}

// RunningOverlaps lists pairs of bars of one lane whose running parts overlap.
func RunningOverlaps(t *testing.T, bars []Element) []string {
	t.Helper()
	var out []string
	for i := range bars {
		for j := i + 1; j < len(bars); j++ {
			a, b := SpanOf(t, bars[i]), SpanOf(t, bars[j])
			if a.Started && b.Started && a.RunStart < b.Stop && b.RunStart < a.Stop {
				out = append(out, bars[i].Attrs["data-key"]+" and "+bars[j].Attrs["data-key"])
			}
		}
	}
	return out
}

// FileTableRow is a row of the page's table of files: its attributes and its cells by class.
type FileTableRow struct {
	Attrs map[string]string
	Cells map[string]Element
}

// FileTable reads the page's table of files, in order: each tr.file and the cells up to the next row.
func FileTable(els []Element) []FileTableRow {
	var rows []FileTableRow
	inTable := false
	for _, e := range els {
		switch {
		case e.Name == "table":
			inTable = e.Attrs["id"] == "files"
		case !inTable:
		case e.Name == "tr" && e.HasClass("file"):
			rows = append(rows, FileTableRow{Attrs: e.Attrs, Cells: map[string]Element{}})
		case e.Name == "tr":
		case e.Name == "td" && len(rows) > 0:
			for _, c := range strings.Fields(e.Attrs["class"]) {
				if _, ok := rows[len(rows)-1].Cells[c]; !ok && c != "some" {
					rows[len(rows)-1].Cells[c] = e
				}
			}
		}
	}
	return rows
}
