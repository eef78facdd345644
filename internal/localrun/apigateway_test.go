//go:build e2e || figures

package localrun

import (
	"context"
	"encoding/json"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// TestIntakeRequestTemplate renders the intake's SendMessage template, as API Gateway would, for
// the keys an "Object Created" event under a pool's prefix can carry: each event goes to its
// tenant's message group, whatever the key holds, with the event's id as its deduplication id
// and the event, unchanged, as its body.
func TestIntakeRequestTemplate(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, stop, err := emulate.StartMappingRenderer(ctx, deploy.NodeBinary(root), root, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	long := strings.Repeat("x", 300)
	for _, c := range []struct {
		prefix, key, group string
	}{
		{"pools/default/", "pools/default/t-01/2026/a.csv", "t-01"},
		{"pools/default/", "pools/default/t-01/a+b%C3%A9.csv", "t-01"},
		{"in/", "in/acme/x.csv", "acme"},
		{"a/b/c/", "a/b/c/z9/x.csv", "z9"},
		// A segment of no tenant is encoded, so SQS takes it; the router finds no tenant there.
		{"pools/default/", "pools/default/caf%C3%A9+x/f.csv", "caf%25C3%25A9%2Bx"},
		{"pools/default/", "pools/default/" + long + "/f.csv", long[:tenantpipeline.MaxMessageGroupIDLength]},
		{"pools/default/", "pools/default//f.csv", "-"},
		{"pools/default/", "pools/default/f.csv", "f.csv"},
	} {
		event := map[string]any{"id": "7bf73129-1428-4cd3-a780-95db273d1602", "detail-type": "Object Created",
			"detail": map[string]any{"bucket": map[string]any{"name": "ingest"}, "object": map[string]any{"key": c.key, "size": 3}}}
		body, _ := json.Marshal(event)
		out, err := r.Render(ctx, tenantpipeline.IntakeRequestTemplate(c.prefix), emulate.MappingRequest{Body: string(body)})
		if err != nil {
			t.Fatalf("%s: %v", c.key, err)
		}
		form, err := url.ParseQuery(out)
		if err != nil {
			t.Fatalf("%s: the body %q is no form: %v", c.key, out, err)
		}
		want := url.Values{"Action": {"SendMessage"}, "MessageGroupId": {c.group}, "MessageDeduplicationId": {"7bf73129-1428-4cd3-a780-95db273d1602"}, "MessageBody": {string(body)}}
		for k, v := range want {
			if got := form[k]; len(got) != 1 || got[0] != v[0] {
				t.Errorf("%s (prefix %s): %s = %q, want %q", c.key, c.prefix, k, got, v[0])
			}
		}
		if len(form) != len(want) {
			t.Errorf("%s: the form has %d parameters, want %d: %q", c.key, len(form), len(want), out)
		}
	}
}
