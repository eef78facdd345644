package localrun

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/example/tenantpipeline/internal/results"
)

// A session's PutEvents entries are judged one by one by its role's policies, with the entry's
// source as events:source: the controller's grant puts File Processed events on its bus and
// nothing else, and a refused entry fails alone with NotAuthorizedForSourceException.
func TestPutEventsJudgedByEntry(t *testing.T) {
	r := newTenantAuthRig(t)
	c := &Cloud{auth: r.auth}
	server := serveTest(t, http.HandlerFunc(c.servePutEvents))
	grant := mustStatement(`{"Effect":"Allow","Action":"events:PutEvents","Resource":"arn:aws:events:us-east-1:123456789012:event-bus/default",
		"Condition":{"StringEquals":{"events:source":"` + results.EventSource + `"}}}`)
	entry := func(source, bus string) ebtypes.PutEventsRequestEntry {
		return ebtypes.PutEventsRequestEntry{Source: aws.String(source), DetailType: aws.String(results.EventDetailType), Detail: aws.String(`{}`), EventBusName: aws.String(bus)}
	}
	for i, tc := range []struct {
		name     string
		identity []statement
		entries  []ebtypes.PutEventsRequestEntry
		failed   []bool
	}{
		{"the pipeline's events on its bus", []statement{grant}, []ebtypes.PutEventsRequestEntry{entry(results.EventSource, "default"), entry(results.EventSource, "")}, []bool{false, false}},
		{"another source fails alone", []statement{grant}, []ebtypes.PutEventsRequestEntry{entry(results.EventSource, "default"), entry("aws.s3", "default")}, []bool{false, true}},
		{"another bus", []statement{grant}, []ebtypes.PutEventsRequestEntry{entry(results.EventSource, "arn:aws:events:us-east-1:123456789012:event-bus/other")}, []bool{true}},
		{"no grant", nil, []ebtypes.PutEventsRequestEntry{entry(results.EventSource, "default")}, []bool{true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := r.sessionConfig(t, fmt.Sprintf("ev%d", i), tc.identity)
			out, err := eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(server) }).
				PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: tc.entries})
			if err != nil {
				t.Fatal(err)
			}
			failed := 0
			for j, want := range tc.failed {
				got := aws.ToString(out.Entries[j].ErrorCode)
				if want != (got == "NotAuthorizedForSourceException") || !want && aws.ToString(out.Entries[j].EventId) == "" {
					t.Errorf("entry %d: got error code %q, event id %q; want failed %v", j, got, aws.ToString(out.Entries[j].EventId), want)
				}
				if want {
					failed++
				}
			}
			if int(out.FailedEntryCount) != failed {
				t.Errorf("got FailedEntryCount %d, want %d", out.FailedEntryCount, failed)
			}
		})
	}
}
