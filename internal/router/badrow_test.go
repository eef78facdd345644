package router

import (
	"bytes"
	"context"
	"github.com/example/tenantpipeline/spec"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/example/tenantpipeline/internal/pipeline"
)

const badKey = "inbox/bad/a.csv"

// badRowSettings writes a settings file of acme, globex (as testdata/pool-settings.json) and
// bad, whose row is broken as kind says, and returns its path.
//   - "undecodable": the row's bytes name a field no row has (a damaged file);
//   - "invalid": the row decodes, but its onFailure is no policy.
func badRowSettings(t *testing.T, kind string) string {
	t.Helper()
	s := pipeline.PoolSettings{Pool: testPool, Prefix: testPoolPrefix, Tenants: []pipeline.PoolTenant{
		{Settings: pipeline.Tenant{Tenant: spec.Tenant{ID: "acme", Format: "csv", Encoding: "utf-8", ChunkSize: 100, MaxFieldBytes: 65536}}, Prefix: "inbox/acme/"},
		{Settings: pipeline.Tenant{Tenant: spec.Tenant{ID: "bad", Format: "BADBAD", Encoding: "utf-8", ChunkSize: 100, MaxFieldBytes: 65536}}, Prefix: "inbox/bad/"},
		{Settings: pipeline.Tenant{Tenant: spec.Tenant{ID: "globex", Format: "jsonl", Encoding: "utf-8", ChunkSize: 50, MaxFieldBytes: 4096}}, Prefix: "inbox/globex/",
			OnFailure: pipeline.OnFailureHalt, IdempotencyKey: pipeline.IdempotencyObjectVersion},
	}}
	if kind == "invalid" {
		s.Tenants[1].OnFailure = "stop"
	}
	b, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if kind == "undecodable" {
		b = bytes.Replace(b, []byte(`"format":"BADBAD"`), []byte(`"fxrmat":"BADBAD"`), 1)
	}
	path := filepath.Join(t.TempDir(), pipeline.PoolSettingsFile)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The router routes by the index alone: a tenant whose row does not decode still gets its files
// in its own message group, in order, where the pool controller keeps them; an ERROR line names
// the tenant and the problem, and the other tenants are routed as ever.
func TestRouterBadRow(t *testing.T) {
	rr := newRouterRigWith(t, map[string]string{pipeline.EnvPoolSettings: badRowSettings(t, "undecodable")})
	ev := intakeBatch(t, acmeKey, badKey, globexKey, badKey+"2")
	resp, err := rr.r.Handle(context.Background(), ev)
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if len(resp.BatchItemFailures) != 0 {
		t.Errorf("got batch item failures %v, want none", resp.BatchItemFailures)
	}
	var got []string
	for _, in := range rr.sqs.sends {
		if aws.ToString(in.QueueUrl) != testQueueURL {
			t.Errorf("got a send to %s, want the pool queue only", aws.ToString(in.QueueUrl))
		}
		got = append(got, aws.ToString(in.MessageGroupId)+" "+keyOf(t, aws.ToString(in.MessageBody)))
	}
	want := []string{"acme " + acmeKey, "bad " + badKey, "globex " + globexKey, "bad " + badKey + "2"}
	if !slices.Equal(got, want) {
		t.Errorf("got sends %v, want %v", got, want)
	}
	found := false
	for _, l := range rr.out.lines(t) {
		if l["level"] == "ERROR" && l["tenant"] == "bad" && strings.Contains(l["error"].(string), `unknown field "fxrmat"`) {
			found = true
		}
		if l["level"] == "ERROR" && l["tenant"] != "bad" {
			t.Errorf("got ERROR %v, want ERROR lines of the bad tenant only", l)
		}
	}
	if !found {
		t.Errorf("got no ERROR line naming tenant bad and its problem; lines: %v", rr.out.lines(t))
	}
}
