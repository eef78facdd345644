package router

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/testfake"
)

const badKey = testfake.BadRowKey

// The router routes by the index alone: a tenant whose row does not decode still gets its files
// in its own message group, in order, where the pool controller keeps them; an ERROR line names
// the tenant and the problem, and the other tenants are routed as ever.
func TestRouterBadRow(t *testing.T) {
	rr := newRouterRigWith(t, map[string]string{pipeline.EnvPoolSettings: testfake.BadRowSettings(t, testPool, testPoolPrefix, "undecodable")})
	ev := intakeBatch(t, acmeKey, badKey, globexKey, badKey+"2")
	resp, err := rr.r.Handle(context.Background(), ev)
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if len(resp.BatchItemFailures) != 0 {
		t.Errorf("got batch item failures %v, want none", resp.BatchItemFailures)
	}
	var got []string
	for _, in := range rr.sqs.Sends {
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
	for _, l := range rr.out.Lines(t) {
		if l["level"] == "ERROR" && l["tenant"] == "bad" && strings.Contains(l["error"].(string), `unknown field "fxrmat"`) {
			found = true
		}
		if l["level"] == "ERROR" && l["tenant"] != "bad" {
			t.Errorf("got ERROR %v, want ERROR lines of the bad tenant only", l)
		}
	}
	if !found {
		t.Errorf("got no ERROR line naming tenant bad and its problem; lines: %v", rr.out.Lines(t))
	}
}
