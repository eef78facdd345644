package test

import (
	"encoding/json"
	"fmt"
	"github.com/example/tenantpipeline/spec"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/stacks"
)

// TestLargestStackFitsCloudFormation synthesizes the largest stack the app allows:
// MaxTenantsPerStack tenants with 32-character ids, each with a DynamoDB table the construct
// creates, and checks it against CloudFormation's limits: 500 resources, 200 outputs and 1 MB for
// a template body read from S3 (how the CDK CLI deploys large templates). With a customer-managed
// key the key's grants make each tenant larger: that group must fit too.
func TestLargestStackFitsCloudFormation(t *testing.T) {
	for _, tc := range []struct {
		name       string
		encryption string
		tenants    int
	}{
		{"no key", "", stacks.MaxTenantsPerStack},
		{"customer-managed key", `"encryption": {"key": "create"}, `, stacks.MaxTenantsPerStack},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var entries []string
			for i := range tc.tenants {
				id := fmt.Sprintf("tenant-%02d-", i) + strings.Repeat("x", 32-10)
				entries = append(entries, fmt.Sprintf(`{"id": %q, "onFailure": "halt", "dynamodb": {"key": ["customer-account-number", "order-line-identifier"]}}`, id))
			}
			file := filepath.Join(t.TempDir(), "largest.json")
			if err := os.WriteFile(file, []byte(`{`+tc.encryption+`"tenants": [`+strings.Join(entries, ",")+`]}`), 0o644); err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out)})
			built, err := stacks.Build(app, stacks.Options{TenantsFile: file, TenantsPerStack: stacks.MaxTenantsPerStack})
			if err != nil {
				t.Fatal(err)
			}
			if len(built.TenantStacks) != 1 {
				t.Fatalf("got %d tenant stacks, want 1", len(built.TenantStacks))
			}
			app.Synth(nil)
			path := filepath.Join(out, *built.TenantStacks[0].StackName()+".template.json")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var tpl struct {
				Resources map[string]any
				Outputs   map[string]any
			}
			flattenJSON(t, string(b), &tpl)
			t.Logf("largest stack: %d resources, %d outputs, %d bytes", len(tpl.Resources), len(tpl.Outputs), len(b))
			// cdk-nag's suppressions are read at synth and left out of the template.
			if strings.Contains(string(b), `"cdk_nag"`) {
				t.Error("got cdk_nag metadata in the template, want it left out")
			}
			if len(tpl.Resources) > 500 || len(tpl.Outputs) > 200 || len(b) > tenantpipeline.MaxTemplateBytes {
				t.Errorf("got %d resources, %d outputs, %d bytes; want at most 500, 200, %d", len(tpl.Resources), len(tpl.Outputs), len(b), tenantpipeline.MaxTemplateBytes)
			}
		})
	}
}

// TestSegmentLoopFitsFor2MRecords: the arithmetic of docs/data-path.md for a 2,000,000-record file
// at the default 100 records per chunk, from the rendered segment definition. Its worst case is one
// chunk per Register invocation (a core system so slow that a chunk takes half the function
// timeout); it must still fit 25,000 history events with room for retries, and no state payload
// may come near 256 KiB. https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html
func TestSegmentLoopFitsFor2MRecords(t *testing.T) {
	sharedApp(t)
	_, seg, _, _ := stateMachines(t, "acme")
	states := get(t, seg, "States").(map[string]any)
	// Walk the loop from Register back to Register: a Task state writes 5 events per entry
	// (entered, scheduled, started, succeeded, exited), any other state 2.
	perInvocation, name := 0, "Register"
	for range len(states) {
		st := states[name].(map[string]any)
		if st["Type"] == "Task" {
			perInvocation += 5
		} else {
			perInvocation += 2
		}
		next, _ := st["Next"].(string)
		if next == "" {
			next, _ = st["Default"].(string)
		}
		if name = next; name == "Register" || name == "" {
			break
		}
	}
	if name != "Register" || perInvocation != 7 {
		t.Fatalf("the Register loop: got %d events per invocation (back at %q), want 7 (Register, NextChunks)", perInvocation, name)
	}
	const records, limit = 2_000_000, 25_000
	chunks := records / pipeline.DefaultChunkSize
	segments := pipeline.Segments(chunks)
	// started 1, the loop, SegmentDone 2, succeeded 1.
	worst := 1 + pipeline.SegmentChunks*perInvocation + 2 + 1
	if worst > limit-3*1000 {
		t.Errorf("a segment's worst case: got %d events, want room for at least 1,000 retries (3 events each) under %d", worst, limit)
	}
	// started 1, FileSize 2, SmallFile handing on 5, Split 5, OneSegment 2, Map
	// entered/started/succeeded/exited 4, per segment 8, Results 5, succeeded 1.
	file := 1 + 2 + 5 + 5 + 2 + 4 + 8*len(segments) + 5 + 1
	if len(segments) != 20 || file > limit {
		t.Errorf("file execution: got %d segments and %d events, want 20 and at most %d", len(segments), file, limit)
	}
	// A file of one segment runs the loop in its own execution: the file's loop writes what the
	// segment's does, from Register back to Register.
	fileASL, _, _, _ := stateMachines(t, "acme")
	fileStates := get(t, fileASL, "States").(map[string]any)
	inline, at := 0, "Register"
	for range len(fileStates) {
		st := fileStates[at].(map[string]any)
		if st["Type"] == "Task" {
			inline += 5
		} else {
			inline += 2
		}
		next, _ := st["Default"].(string)
		if n, ok := st["Next"].(string); ok {
			next = n
		}
		if at = next; at == "Register" || at == "" {
			break
		}
	}
	// started 1, FileSize 2, SmallFile 5, Split 5, OneSegment 2, the loop, Results 5, succeeded 1.
	oneSegment := 1 + 2 + 5 + 5 + 2 + pipeline.SegmentChunks*inline + 5 + 1
	if at != "Register" || inline != perInvocation || oneSegment > limit-3*1000 {
		t.Errorf("a file of one segment: got %d events per invocation (back at %q), %d in all, want %d, with room for at least 1,000 retries under %d",
			inline, at, oneSegment, perInvocation, limit)
	}
	t.Logf("2,000,000 records: %d chunks, %d segments; file history %d events; segment history at most %d events (%d retries of headroom); transitions per file 2 + 2×%d + 2×invocations: %d to %d (per-chunk design: %d)",
		chunks, len(segments), file, worst, (limit-worst)/3, len(segments), 2+2*len(segments)+2*len(segments), 2+2*len(segments)+2*chunks, 2+3*len(segments)+chunks)

	// The largest payloads: the segment's state (its input and the cursor) and Register's input,
	// with a 16 KiB header and the longest key S3 allows.
	header := []string{strings.Repeat("h", pipeline.MaxHeaderBytes-4)}
	src := pipeline.Source{Bucket: strings.Repeat("b", 63), Key: strings.Repeat("k", 1024), VersionID: strings.Repeat("v", 32),
		ETag: strings.Repeat("e", 32) + "-10000", Size: 1 << 40, Sequencer: strings.Repeat("0", 40), EventTime: "2026-12-01T00:00:00Z"}
	tenant := pipeline.Tenant{Tenant: spec.Tenant{ID: strings.Repeat("t", 32), Format: "csv", Encoding: "utf-8", ChunkSize: 100, MaxFieldBytes: 65536, RegisterURL: "https://" + strings.Repeat("u", 200), RegisterAuthSecretARN: strings.Repeat("s", 200)}}
	manifest := pipeline.Location{Bucket: src.Bucket, Key: pipeline.ManifestKey(pipeline.SiloOwner(tenant.ID), strings.Repeat("e", 80))}
	last := segments[len(segments)-1]
	state := map[string]any{
		"input":  pipeline.SegmentInput{Tenant: tenant, Source: src, ExecutionName: strings.Repeat("e", 80), Manifest: manifest, Records: records, Header: header, Segment: last},
		"cursor": map[string]any{"chunk": last.LastChunk, "record": records, "done": false},
	}
	req := pipeline.ChunkRequest{Tenant: tenant, Source: src, ExecutionName: strings.Repeat("e", 80), Manifest: manifest, Records: records,
		Header: header, Chunk: last.LastChunk, LastChunk: last.LastChunk, Segment: &last, Record: records}
	for name, v := range map[string]any{"segment state": state, "Register input": req} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 24<<10 {
			t.Errorf("%s: got %d bytes, want at most 24 KiB (256 KiB is the limit)", name, len(b))
		}
		t.Logf("%s: %d bytes", name, len(b))
	}
}
