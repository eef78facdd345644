package controller

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// The execution's input and name as the controller starts it: the object's key as it is, the
// deduplicating name of the object-version key, and the tenant's settings with or without URLs.

// Keys are used raw in the execution input: never URL-decoded.
func TestStartInputKeepsRawKey(t *testing.T) {
	keys := []string{
		"inbox/acme/red flower.csv",
		"inbox/acme/a+b.csv",
		"inbox/acme/100%25 done%.csv",
		"inbox/acme/請求書 ①～㎡.csv",
	}
	for _, key := range keys {
		t.Run(key, func(t *testing.T) {
			r := newRig(t, nil)
			if _, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", eventBody(t, evID1, key), 1)}}); err != nil {
				t.Fatal(err)
			}
			in := r.sfn.input(t, arn1)
			want := pipeline.WorkflowInput{
				Tenant:  r.h.cfg.Tenant,
				EventID: evID1,
				Source: pipeline.Source{Bucket: testBucket, Key: key, VersionID: "v-6f1c2a3b", ETag: "9b2cf535f27731c974343645a3985328",
					Size: 1234, Sequencer: "0062E99A88DC407460", EventTime: testStart.Add(-2 * time.Minute).UTC().Format(time.RFC3339Nano)},
				// When the controller admitted the file: summary.json's timings.admitted.
				Admitted: testStart.UTC().Format(time.RFC3339Nano),
			}
			if !reflect.DeepEqual(in, want) {
				t.Errorf("got input %+v, want %+v", in, want)
			}
			// Split checks the object's key against it.
			if in.Tenant.Prefix != "inbox/acme/" {
				t.Errorf("got tenant prefix %q in the input, want %q (TENANT_PREFIX)", in.Tenant.Prefix, "inbox/acme/")
			}
		})
	}
}

// Under the object-version key a duplicate event (new event id, same object version) finds the
// first event's execution and starts nothing.
func TestObjectVersionKeyDeduplicates(t *testing.T) {
	r := newRig(t, map[string]string{pipeline.EnvIdempotencyKey: pipeline.IdempotencyObjectVersion})
	first := eventBody(t, evID1, key1)
	dup := strings.Replace(first, evID1, evID2, 1)
	if first == dup {
		t.Fatal("test setup: duplicate has the same event id")
	}
	if _, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", first, 1)}}); err != nil {
		t.Fatal(err)
	}
	if len(r.sfn.created) != 1 {
		t.Fatalf("got %d executions, want 1", len(r.sfn.created))
	}
	r.sfn.set(r.sfn.created[0], sfntypes.ExecutionStatusSucceeded)
	resp, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m2", dup, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.failures(resp); len(got) != 0 {
		t.Errorf("got failures %v, want none", got)
	}
	if got := len(r.sfn.created); got != 1 {
		t.Errorf("got %d executions, want 1", got)
	}
	if name := strings.TrimPrefix(r.sfn.created[0], testExecPrefix); !strings.HasPrefix(name, objectVersionNamePrefix) {
		t.Errorf("got execution name %q, want the %q prefix", name, objectVersionNamePrefix)
	}
}

// With INPUT_WITHOUT_URLS, an execution's input carries no core system URL and no secret's ARN
// (Split and Register take them from their deployed settings), and the tenant's other settings as
// they are; without it, the input is the tenant's settings whole.
func TestStartInputWithoutURLs(t *testing.T) {
	tenant := `{"id":"acme","format":"csv","encoding":"utf-8","chunkSize":100,"maxFieldBytes":65536,` +
		`"registerUrl":"https://core.example.com/acme","registerAuthSecretArn":"arn:aws:secretsmanager:us-east-1:123456789012:secret:acme-AbCdEf"}`
	for _, tc := range []struct {
		flag     string
		wantURLs bool
	}{{"true", false}, {"false", true}} {
		t.Run(pipeline.EnvInputWithoutURLs+"="+tc.flag, func(t *testing.T) {
			r := newRig(t, map[string]string{pipeline.EnvTenant: tenant, pipeline.EnvInputWithoutURLs: tc.flag})
			if _, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", eventBody(t, evID1, key1), 1)}}); err != nil {
				t.Fatal(err)
			}
			in := r.sfn.input(t, arn1)
			raw := r.sfn.execs[arn1].input
			hasURLs := strings.Contains(raw, "core.example.com") || strings.Contains(raw, "secretsmanager")
			if hasURLs != tc.wantURLs {
				t.Errorf("got input %s, want the URL and the secret's ARN in it: %v", raw, tc.wantURLs)
			}
			if in.Tenant.ID != "acme" || in.Tenant.Format != "csv" || in.Tenant.Prefix != "inbox/acme/" {
				t.Errorf("got tenant %+v in the input, want acme's other settings as they are", in.Tenant)
			}
			if !tc.wantURLs && !reflect.DeepEqual(in.Tenant, r.h.cfg.Tenant.WithoutURLs()) {
				t.Errorf("got tenant %+v, want the settings without URLs %+v", in.Tenant, r.h.cfg.Tenant.WithoutURLs())
			}
		})
	}
}
