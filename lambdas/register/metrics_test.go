package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

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
// DynamoDB sinks, counting the chunk's records with the Tenant dimension; none for a chunk that
// fails.
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
		want      []float64 // one value per chunk line; nil: no line
		wantNS    string
		wantErr   bool
	}{
		{name: "record mode, two chunks", tenant: csvTenant(okCore.srv.URL), src: pipeline.Source{Bucket: ingest, Key: "inbox/t1/a.csv", ETag: "etag-1"},
			data: []byte("id\n1\n2\n3\n4\n"), want: []float64{3, 1}, wantNS: pipeline.DefaultMetricsNamespace},
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
			h.Metrics, h.MetricsNamespace = &out, tc.namespace
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
				if d.Namespace != tc.wantNS || len(d.Dimensions) != 1 || strings.Join(d.Dimensions[0], ",") != "Tenant" ||
					len(d.Metrics) != 1 || d.Metrics[0].Name != "RecordsRegistered" || d.Metrics[0].Unit != "Count" {
					t.Errorf("line %d: got directive %+v, want namespace %s, dimensions [[Tenant]], RecordsRegistered Count", i, d, tc.wantNS)
				}
			}
		})
	}
}
