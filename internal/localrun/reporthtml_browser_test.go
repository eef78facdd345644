//go:build e2e || figures

package localrun

import (
	"bytes"
	"context"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/localrun/report/reportpage"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chromium finds Debian's headless-capable browser, or skips the test saying how to install it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium not found (not on PATH, not /usr/bin/chromium): the HTML report is not rendered in a browser here; " +
		"install it with `apt-get install chromium` (CI's .ci/run does)")
	return ""
}

// runChromium runs headless Chromium on page with args and returns its standard output. Each run
// has its own profile, so tests and people running Chromium beside it do not share one.
func runChromium(t *testing.T, bin, page string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir(), "--window-size=1200,800"}
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), "file://"+page)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, tail(stderr.String(), 3000))
	}
	return stdout.Bytes()
}

// TestReportHTMLInChromium renders the HTML report of a real run (the fixture templates: two
// tenants, one of them with a file that fails and files queued behind it) in headless Chromium,
// takes a screenshot, and checks the DOM after the page's script ran: one lane per tenant, one bar
// per file, within a lane no two files running at the same time, and one row per file in the table
// of files with the report's counts ("–" for a file without a summary).
func TestReportHTMLInChromium(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	r := startFixture(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, u := range []struct {
		tenant, rel string
		body        []byte
	}{
		{"acme", "1 注文.csv", csv(7, false)}, {"acme", "2 bad.csv", badCSV()}, {"acme", "3.csv", csv(4, false)},
		{"globex", "x.csv", csv(5, false)}, {"globex", "y.csv", csv(3, false)},
	} {
		if _, err := r.Upload(ctx, u.tenant, u.rel, u.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.WaitDrained(ctx, nil, 250*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	rep, err := r.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := report.WriteHTML(&b, rep, r.TenantIDs(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	shot := filepath.Join(dir, "report.png")
	runChromium(t, bin, page, "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if got := img.Bounds().Size(); got.X != 1200 || got.Y != 800 {
		t.Errorf("screenshot: got %v, want 1200x800", got)
	}
	if keep := os.Getenv("LOCALRUN_SCREENSHOT"); keep != "" {
		png, _ := os.ReadFile(shot)
		if err := os.WriteFile(keep, png, 0o644); err != nil {
			t.Error(err)
		}
	}

	// --virtual-time-budget lets the page's script run before the DOM is serialized.
	dom := runChromium(t, bin, page, "--virtual-time-budget=3000", "--dump-dom")
	els, lanes := reportpage.Parse(t, dom)
	if got, want := strings.Join(lanes.Tenants, ","), strings.Join(r.TenantIDs(), ","); got != want {
		t.Errorf("lanes: got %s, want one per tenant: %s", got, want)
	}
	for _, id := range r.TenantIDs() {
		var got, want []string
		for _, bar := range lanes.Bars[id] {
			got = append(got, bar.Attrs["data-key"])
		}
		for _, f := range rep.Tenants[id].Files {
			want = append(want, f.Key)
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s bars: got %q, want one per file: %q", id, got, want)
		}
		for _, bar := range lanes.Bars[id] {
			if s := reportpage.SpanOf(t, bar); !s.Started || s.Start > s.RunStart || s.RunStart > s.Stop {
				t.Errorf("%s %s: got upload %d, start %d, stop %d ms, want a started file in that order", id, bar.Attrs["data-key"], s.Start, s.RunStart, s.Stop)
			}
		}
		if o := reportpage.RunningOverlaps(t, lanes.Bars[id]); len(o) > 0 {
			t.Errorf("%s: got files running at the same time: %v", id, o)
		}
	}
	var failed reportpage.Element
	for _, bar := range lanes.Bars["acme"] {
		if strings.HasSuffix(bar.Attrs["data-key"], "/2 bad.csv") {
			failed = bar
		}
	}
	if !failed.HasClass("kind-failed") || failed.Attrs["data-error"] != "ValidationError" {
		t.Errorf("2 bad.csv: got class %q, error %q; want kind-failed, ValidationError", failed.Attrs["class"], failed.Attrs["data-error"])
	}
	// The script opened the details panel on the failed file.
	var panel string
	for _, e := range els {
		if e.Attrs["id"] == "details" {
			panel = e.Text
		}
	}
	if !strings.Contains(panel, "inbox/acme/2 bad.csv") || !strings.Contains(panel, "ValidationError") || !strings.Contains(panel, "registered") {
		t.Errorf("details panel after the script ran: got %q, want the failed file's key, error and counts", panel)
	}
	var want []string
	for _, id := range r.TenantIDs() {
		for _, f := range rep.Tenants[id].Files {
			want = append(want, strings.Join([]string{id, f.Key, report.CountText(f.Registered), report.CountText(f.Rejected), report.CountText(f.Unprocessed)}, " | "))
		}
	}
	var got []string
	for _, row := range reportpage.FileTable(els) {
		var cells []string
		for _, c := range []string{"tenant", "key", "registered", "rejected", "unprocessed"} {
			cells = append(cells, strings.TrimSpace(row.Cells[c].Text))
		}
		got = append(got, strings.Join(cells, " | "))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("table of files (tenant | key | registered | rejected | unprocessed):\ngot\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	t.Logf("screenshot: %s (set LOCALRUN_SCREENSHOT=FILE to keep it)", shot)
}
