package localrun

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/svgchart"
)

// The figures as charts: make figures writes each beside its text line, into
// LOCALRUN_FIGURES_DIR (make figures: .build/figures). The charts are built from the measured
// values by the functions below, which TestFigureCharts checks on known numbers.

// writeFigure writes an SVG figure and names it in the output, as make figures prints its lines.
func writeFigure(t *testing.T, name string, svg []byte) {
	t.Helper()
	dir := os.Getenv("LOCALRUN_FIGURES_DIR")
	if dir == "" {
		dir = filepath.Join(moduleRoot(t), ".build", "figures")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, svg, 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("figure: %s\n", path)
}

// modeGaps is one design's inter-file gaps, over all tenants of a run.
type modeGaps struct {
	name string
	gaps []float64
}

func allGaps(rep *report.Report, tenants []string) []float64 {
	var g []float64
	for _, id := range tenants {
		g = append(g, rep.Tenants[id].Gaps()...)
	}
	return g
}

// gapFigure is TestFigures' chart: each design's gaps against the old design's fixed wait.
func gapFigure(modes []modeGaps, fixedWait float64, workload string) svgchart.StripChart {
	c := svgchart.StripChart{Title: "Inter-file gap: this design against a fixed wait", Unit: "s", Log: true,
		Lines: []svgchart.Line{{At: fixedWait, Label: fmt.Sprintf("fixed wait %s s", svgchart.Format(fixedWait))}},
		Note:  "log scale; from a file's stop to the next file's start, for files already waiting; " + workload}
	for _, m := range modes {
		c.Series = append(c.Series, svgchart.Series{Label: m.name, Values: m.gaps})
	}
	return c
}

// throughputFigure is TestFiguresRegisterThroughput's chart: records/s of each sink.
func throughputFigure(rec, keyed, bat, ddb float64, latencyMs float64) svgchart.BarChart {
	bar := func(label string, v float64) svgchart.Bar {
		return svgchart.Bar{Label: label, Value: v, Text: svgchart.Format(v) + " rec/s"}
	}
	return svgchart.BarChart{
		Title: fmt.Sprintf("Register throughput by sink, %s ms core latency", svgchart.Format(latencyMs)),
		Note:  "records over the summed run time of the files' executions (log scale); local run, dynalite bounds DynamoDB",
		Sections: []svgchart.Section{{Log: true, Bars: []svgchart.Bar{
			bar("record (1 POST per record)", rec), bar("record in key order (8 in flight, 1,000 keys)", keyed),
			bar("batch (1 POST per 1,000)", bat), bar("DynamoDB (16 writes at once)", ddb)}}},
	}
}

// capacityBars is one request-shares design in TestFiguresCapacity's chart: the core system's mean
// requests in flight while the large file ran alone and over the run, and the large file's rate.
type capacityBars struct {
	name                 string
	alone, overall, rate float64
}

// capacityFigure is TestFiguresCapacity's chart: each design's requests in flight against the core
// system's limit, and the large file's records per second.
func capacityFigure(limit int, designs ...capacityBars) svgchart.BarChart {
	var inFlight, rate []svgchart.Bar
	for _, d := range designs {
		inFlight = append(inFlight,
			svgchart.Bar{Label: d.name + ", large file alone", Value: d.alone, Text: fmt.Sprintf("%.1f of %d", d.alone, limit)},
			svgchart.Bar{Label: d.name + ", over the run", Value: d.overall, Text: fmt.Sprintf("%.1f of %d", d.overall, limit)})
		rate = append(rate, svgchart.Bar{Label: d.name, Value: d.rate, Text: svgchart.Format(d.rate) + " rec/s"})
	}
	return svgchart.BarChart{
		Title: fmt.Sprintf("A core system of %d requests in flight: request shares", limit),
		Note:  "time-weighted mean of the POSTs in flight at the sink; one large key-ordered file, then small files of other tenants",
		Sections: []svgchart.Section{
			{Title: "mean requests in flight", Bars: inFlight},
			{Title: "the large file's records per second", Bars: rate},
		},
	}
}

// controllerCalls is the controller's cost per running file-hour of one run: the pipeline's
// DescribeExecution calls and the controller's invocations (event source mapping and status rule),
// each divided by the summed running time of the file executions.
type controllerCalls struct {
	describePerHour, invocationsPerHour, gapMean float64
	runningHours                                 float64
	describes, invocations                       int64
}

// controllerCallsFigure is TestFiguresControllerCalls' chart: the controller's cost and the gap with
// status events on, with every event dropped, and polling as before the wake-up.
func controllerCallsFigure(on, dropped, before controllerCalls, droppedSafetyNet int) svgchart.BarChart {
	names := []string{"events on", fmt.Sprintf("events dropped (safety net %d s)", droppedSafetyNet), "polling, no events (before)"}
	runs := []controllerCalls{on, dropped, before}
	section := func(title, unit string, v func(controllerCalls) float64) svgchart.Section {
		s := svgchart.Section{Title: title}
		for i, c := range runs {
			s.Bars = append(s.Bars, svgchart.Bar{Label: names[i], Value: v(c), Text: strings.TrimSpace(svgchart.Format(v(c)) + " " + unit)})
		}
		return s
	}
	return svgchart.BarChart{
		Title: "The controller's calls, with status events on and dropped",
		Note:  "per running file-hour: divided by the summed running time of the file executions",
		Sections: []svgchart.Section{
			section("DescribeExecution calls per running file-hour", "", func(c controllerCalls) float64 { return c.describePerHour }),
			section("controller invocations per running file-hour", "", func(c controllerCalls) float64 { return c.invocationsPerHour }),
			section("inter-file gap, mean", "s", func(c controllerCalls) float64 { return c.gapMean }),
		},
	}
}

// TestFigureCharts builds each figure from the numbers of an earlier measurement and checks that
// the chart shows them.
func TestFigureCharts(t *testing.T) {
	tests := []struct {
		name      string
		svg       []byte
		wantTexts []string
	}{
		{
			name:      "gap against the fixed wait",
			svg:       gapFigure([]modeGaps{{"backoff", []float64{0.70, 0.71, 0.77}}, {"fixed 30 s wait (old design)", []float64{29.7, 29.82}}}, 30, "3 tenants").SVG(),
			wantTexts: []string{"fixed wait 30 s", "backoff", "n=3 mean 0.73 s", "fixed 30 s wait (old design)", "n=2 mean 29.8 s"},
		},
		{
			name:      "register throughput",
			svg:       throughputFigure(90, 650, 13730, 890, 10).SVG(),
			wantTexts: []string{"Register throughput by sink, 10 ms core latency", "90 rec/s", "record in key order (8 in flight, 1,000 keys)", "650 rec/s", "13,730 rec/s", "890 rec/s"},
		},
		{
			name: "controller calls",
			svg: controllerCallsFigure(controllerCalls{describePerHour: 0, invocationsPerHour: 89.7, gapMean: 0.03},
				controllerCalls{describePerHour: 40, invocationsPerHour: 120, gapMean: 59.56},
				controllerCalls{describePerHour: 897, invocationsPerHour: 239.2, gapMean: 19.75}, 60).SVG(),
			wantTexts: []string{"events on", "events dropped (safety net 60 s)", "0", "897", "89.7", "0.03 s", "59.6 s", "19.8 s"},
		},
		{
			name: "capacity",
			svg:  capacityFigure(30, capacityBars{"shared", 27.14, 18.3, 1240}, capacityBars{"static", 3, 9.94, 150}).SVG(),
			wantTexts: []string{"A core system of 30 requests in flight: request shares", "shared, large file alone", "27.1 of 30",
				"shared, over the run", "18.3 of 30", "static, large file alone", "3.0 of 30", "9.9 of 30", "1,240 rec/s", "150 rec/s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := string(tt.svg)
			for _, want := range tt.wantTexts {
				if !strings.Contains(doc, ">"+want+"<") {
					t.Errorf("got no text %q in the chart:\n%s", want, doc)
				}
			}
		})
	}
}
