package register

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// emfLine is the part of an Embedded Metric Format line the dashboard and CloudWatch rely on
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html).
type emfLine struct {
	AWS struct {
		Timestamp         int64
		CloudWatchMetrics []struct {
			Namespace  string
			Dimensions [][]string
			Metrics    []struct{ Name, Unit string }
		}
	} `json:"_aws"`
	Tenant            string
	Pool              *string
	RecordsRegistered *float64
}

func parseEMF(t *testing.T, out string) []emfLine {
	t.Helper()
	var lines []emfLine
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		var e emfLine
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("got a line that is not JSON: %q: %v", l, err)
		}
		lines = append(lines, e)
	}
	return lines
}

// TestRecordsRegisteredMetric: one EMF line per chunk that succeeds, in the record, batch and
// DynamoDB sinks, counting the chunk's records with the Tenant dimension (in a pool: the Pool
// dimension, and Tenant a property); none for a chunk that fails.
func TestRecordsRegisteredMetric(t *testing.T) {
	okCore := newCore(t, nil)
	failCore := newCore(t, func(int, seenRequest) int { return http.StatusBadRequest })
	batch := newBatchCore(t, nil)
	for _, tc := range []struct {
		name      string
		tenant    pipeline.Tenant
		src       pipeline.Source
		data      []byte
		v2        bool
		namespace string
		pool      string
		want      []float64 // one value per chunk line; nil: no line
		wantNS    string
		wantErr   bool
	}{
		{name: "record mode, two chunks", tenant: csvTenant(okCore.srv.URL), src: pipeline.Source{Bucket: ingest, Key: "inbox/t1/a.csv", ETag: "etag-1"},
			data: []byte("id\n1\n2\n3\n4\n"), want: []float64{3, 1}, wantNS: pipeline.DefaultMetricsNamespace},
		{name: "pooled tenant: the pool's metric, Tenant a property", tenant: csvTenant(okCore.srv.URL), src: pipeline.Source{Bucket: ingest, Key: "inbox/t1/a.csv", ETag: "etag-1"},
			data: []byte("id\n1\n"), pool: "shared", want: []float64{1}, wantNS: pipeline.DefaultMetricsNamespace},
		{name: "record mode, own namespace", tenant: csvTenant(okCore.srv.URL), src: pipeline.Source{Bucket: ingest, Key: "inbox/t1/a.csv", ETag: "etag-1"},
			data: []byte("id\n1\n"), namespace: "Custom", want: []float64{1}, wantNS: "Custom"},
		{name: "batch mode", tenant: batchTenant(batch.srv.URL), src: pipeline.Source{Bucket: ingest, Key: "inbox/t1/b.csv", ETag: "etag-1"},
			data: batchRows(20), v2: true, want: []float64{16, 4}, wantNS: pipeline.DefaultMetricsNamespace},
		{name: "dynamodb", tenant: ddbTenant("csv", "id"), src: ddbSource("k", "2026-11-30T12:47:49Z"),
			data: []byte("id,v\n1,a\n2,b\n"), want: []float64{2}, wantNS: pipeline.DefaultMetricsNamespace},
		{name: "a failed chunk emits nothing", tenant: csvTenant(failCore.srv.URL), src: pipeline.Source{Bucket: ingest, Key: "inbox/t1/a.csv", ETag: "etag-1"},
			data: []byte("id\n1\n"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s3 := sourcetest.NewFakeS3()
			var reqs []pipeline.ChunkRequest
			if tc.v2 {
				reqs = fixtureV2(t, s3, tc.tenant, tc.src, tc.data)
			} else {
				reqs = fixture(t, s3, tc.tenant, tc.src, tc.data)
			}
			h := ddbHandler(s3, newFakeDynamo("id"))
			var out bytes.Buffer
			h.Metrics, h.MetricsNamespace, h.Pool = &out, tc.namespace, tc.pool
			wantDims := "Tenant"
			if tc.pool != "" {
				wantDims = "Pool"
			}
			for _, req := range reqs {
				_, err := h.Handle(context.Background(), req)
				if (err != nil) != tc.wantErr {
					t.Fatalf("got error %v, want error %v", err, tc.wantErr)
				}
			}
			lines := parseEMF(t, out.String())
			if len(lines) != len(tc.want) {
				t.Fatalf("got %d EMF lines %q, want %d", len(lines), out.String(), len(tc.want))
			}
			for i, l := range lines {
				if l.RecordsRegistered == nil || *l.RecordsRegistered != tc.want[i] {
					t.Errorf("line %d: got RecordsRegistered %v, want %v", i, l.RecordsRegistered, tc.want[i])
				}
				if l.Tenant != "t1" || l.AWS.Timestamp == 0 || len(l.AWS.CloudWatchMetrics) != 1 {
					t.Fatalf("line %d: got tenant %q, timestamp %d, %d directives, want t1, a timestamp, 1", i, l.Tenant, l.AWS.Timestamp, len(l.AWS.CloudWatchMetrics))
				}
				d := l.AWS.CloudWatchMetrics[0]
				if d.Namespace != tc.wantNS || len(d.Dimensions) != 1 || strings.Join(d.Dimensions[0], ",") != wantDims ||
					len(d.Metrics) != 1 || d.Metrics[0].Name != "RecordsRegistered" || d.Metrics[0].Unit != "Count" {
					t.Errorf("line %d: got directive %+v, want namespace %s, dimensions [[%s]], RecordsRegistered Count", i, d, tc.wantNS, wantDims)
				}
				if tc.pool != "" && (l.Pool == nil || *l.Pool != tc.pool) {
					t.Errorf("line %d: got Pool %v, want %s", i, l.Pool, tc.pool)
				}
			}
		})
	}
}

// emfDirectives are a line's directives, each as "[dimension sets] metric,metric", and the line's
// fields.
func emfDirectives(t *testing.T, line string) ([]string, map[string]any) {
	t.Helper()
	var doc map[string]any
	var meta struct {
		AWS struct {
			CloudWatchMetrics []struct {
				Dimensions [][]string
				Metrics    []struct{ Name string }
			}
		} `json:"_aws"`
	}
	if err := json.Unmarshal([]byte(line), &doc); err != nil {
		t.Fatalf("got a line that is not JSON: %q: %v", line, err)
	}
	if err := json.Unmarshal([]byte(line), &meta); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range meta.AWS.CloudWatchMetrics {
		var names []string
		for _, m := range d.Metrics {
			names = append(names, m.Name)
		}
		out = append(out, fmt.Sprint(d.Dimensions)+" "+strings.Join(names, ","))
	}
	return out, doc
}

// TestCoreSystemMetrics: a tenant naming a core system records its slow-down answers under
// [Tenant] and [CoreSystem], and the POSTs sent (resends included) under [CoreSystem] alone, in
// the invocation's one line, whether it succeeds or fails; without a core system the line keeps
// [Tenant] alone. The DynamoDB sink sends no POST.
func TestCoreSystemMetrics(t *testing.T) {
	ledger := &pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 4, Table: "adm"}
	throttleOnce := func() func(int, string) (int, string) {
		var once sync.Once
		return func(_ int, key string) (int, string) {
			status := 200
			if key == IdempotencyKey(execName, 2) {
				once.Do(func() { status = 429 })
			}
			return status, "0"
		}
	}
	tests := []struct {
		name          string
		core          *pipeline.CoreSystem
		answer        func(int, string) (int, string)
		wantErr       bool
		wantDirs      []string
		wantThrottles float64
		wantRequests  float64 // 0: no CoreSystemRequests field
	}{
		{name: "a 429 then success", core: ledger, answer: throttleOnce(),
			wantDirs:      []string{"[[Tenant]] RecordsRegistered,CoreSystemThrottles", "[[CoreSystem]] CoreSystemThrottles,CoreSystemRequests"},
			wantThrottles: 1, wantRequests: 4},
		{name: "no slow-down answer", core: ledger, answer: func(int, string) (int, string) { return 200, "" },
			wantDirs:     []string{"[[Tenant]] RecordsRegistered", "[[CoreSystem]] CoreSystemRequests"},
			wantRequests: 3},
		{name: "a failed invocation: its requests only", core: ledger, answer: func(int, string) (int, string) { return 400, "" }, wantErr: true,
			wantDirs:     []string{"[[CoreSystem]] CoreSystemRequests"},
			wantRequests: 1},
		{name: "no core system: [Tenant] alone", answer: throttleOnce(),
			wantDirs:      []string{"[[Tenant]] RecordsRegistered,CoreSystemThrottles"},
			wantThrottles: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Now()}
			c := newThrottlingCore(t, tc.answer)
			var out bytes.Buffer
			h, _ := pacedHandler(sourcetest.NewFakeS3(), clock, &out)
			tenant := csvTenant(c.srv.URL)
			tenant.CoreSystem = tc.core
			if _, err := runPaced(t, h, clock, tenant, 3, 0); (err != nil) != tc.wantErr {
				t.Fatalf("got error %v, want error %v", err, tc.wantErr)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != 1 {
				t.Fatalf("got %d EMF lines %q, want 1", len(lines), out.String())
			}
			dirs, doc := emfDirectives(t, lines[0])
			if !slices.Equal(dirs, tc.wantDirs) {
				t.Errorf("got directives %q, want %q", dirs, tc.wantDirs)
			}
			if got, _ := doc["CoreSystemThrottles"].(float64); got != tc.wantThrottles {
				t.Errorf("got CoreSystemThrottles %v, want %v", got, tc.wantThrottles)
			}
			if got, _ := doc["CoreSystemRequests"].(float64); got != tc.wantRequests {
				t.Errorf("got CoreSystemRequests %v, want %v", got, tc.wantRequests)
			}
			wantCore := ""
			if tc.core != nil {
				wantCore = tc.core.Name
			}
			if got, _ := doc["CoreSystem"].(string); got != wantCore || doc["Tenant"] != "t1" {
				t.Errorf("got CoreSystem %q, Tenant %v, want %q, t1", got, doc["Tenant"], wantCore)
			}
		})
	}
	t.Run("dynamodb sends no POST", func(t *testing.T) {
		s3 := sourcetest.NewFakeS3()
		var out bytes.Buffer
		h, _ := pacedHandler(s3, &fakeClock{t: time.Now()}, &out)
		h.DynamoDB = newFakeDynamo("id")
		tenant := ddbTenant("csv", "id")
		tenant.CoreSystem = ledger
		if err := registerFile(t, h, s3, tenant, ddbSource("k.csv", "2026-12-01T00:00:00Z"), "id,v\n1,a\n2,b\n"); err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			if dirs, _ := emfDirectives(t, l); !slices.Equal(dirs, []string{"[[Tenant]] RecordsRegistered"}) {
				t.Errorf("got directives %q, want [[[Tenant]] RecordsRegistered]", dirs)
			}
		}
	})
}
