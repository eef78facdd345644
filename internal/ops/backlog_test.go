package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/example/tenantpipeline/internal/backlog"
	"github.com/example/tenantpipeline/internal/backlog/backlogtest"
	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/s3event"
)

// The replay tests keep the backlog in dynalite (backlogtest), started only by them; everything
// else is the ops fake.
func TestMain(m *testing.M) {
	code := m.Run()
	backlogtest.Stop()
	os.Exit(code)
}

// A replay into a pool goes through the tenant's bound: counted and sent (with its backlog id)
// while the tenant has room, parked behind the tenant's files when it has its most queued.
func TestReplayIntoAPoolGoesThroughTheBound(t *testing.T) {
	url, err := backlogtest.Dynalite("../..")
	if err != nil {
		t.Fatalf("these tests need dynalite (make setup): %v", err)
	}
	for _, tc := range []struct {
		name       string
		queued     int // the tenant's counted messages before the replay
		wantSent   bool
		wantParked int64
	}{
		{"room in the queue", 1, true, 0},
		{"the queue holds the tenant's most", 2, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, table := backlogtest.Table(t, url)
			w := opsfake.New(coreNow)
			pool := opsfake.Pool("default")
			ts := w.AddPool("TenantPipeline-Pool-default", pool, map[string]string{"hooli": pipeline.OnFailureContinue})
			for k, v := range map[string]string{pipeline.EnvPoolAdmissionTable: table, pipeline.EnvMaxQueuedFilesPerTenant: "2"} {
				w.Env[pool.ControllerFunction][k] = v
			}
			key := "pool/default/hooli/a.csv"
			w.Objects["ingest/"+key] = &opsfake.Object{VersionID: "v1", ETag: `"e1"`, Body: "id\n1\n", LastModified: coreNow.Add(-time.Hour)}
			c := w.Clients()
			c.DynamoDB = db
			b := &backlog.Backlog{DB: db, Table: table, S3: w, Bucket: "ingest", SQS: c.SQS, QueueURL: pool.QueueURL, Max: 2}
			for i := range tc.queued {
				m := backlog.Message{Tenant: "hooli", ID: fmt.Sprintf("ev-%d", i), Body: "{}"}
				if ok, err := b.Admit(context.Background(), m); err != nil || !ok {
					t.Fatalf("admit %s: %v, %v", m.ID, ok, err)
				}
			}
			o := ops.New(c, "TenantPipeline")
			o.Now, o.HTTP, o.NewRequestID = func() time.Time { return coreNow }, w.HTTPClient(), func() string { return "req-1" }
			// The files queued ahead run before the replay: it runs out of order, on purpose.
			res, err := o.ReplayWith(context.Background(), "hooli", key, "", "core lost it", true)
			if err != nil {
				t.Fatal(err)
			}
			sent := w.Queues[ts["hooli"].QueueURL].Sent
			if tc.wantSent {
				if len(sent) != 1 || aws.ToString(sent[0].MessageAttributes[backlog.AttrMessageID].StringValue) != "req-1" || res.MessageID == "" {
					t.Fatalf("got sent %v (message id %q), want the replay sent with %s req-1", sent, res.MessageID, backlog.AttrMessageID)
				}
				if _, err := pipeline.DecodeControl([]byte(aws.ToString(sent[0].MessageBody))); err != nil {
					t.Errorf("got a body that is no control message: %v", err)
				}
			} else if len(sent) != 0 || res.MessageID != "" {
				t.Fatalf("got sent %v (message id %q), want the replay parked", sent, res.MessageID)
			}
			st, err := b.State(context.Background(), "hooli")
			if err != nil {
				t.Fatal(err)
			}
			if want := min(tc.queued+1, 2); st.Queued != want || st.Parked != tc.wantParked {
				t.Errorf("got %d queued, %d parked, want %d, %d", st.Queued, st.Parked, want, tc.wantParked)
			}
			if tc.wantParked > 0 {
				if o, ok := w.Objects["ingest/"+backlog.ParkedKey(w.OwnerOf("hooli"), 0)]; !ok || !strings.Contains(o.Body, `"id":"req-1"`) {
					t.Errorf("got parked object %v, want the replay under %s", o, backlog.ParkedPrefix(w.OwnerOf("hooli")))
				}
			}
		})
	}
}

// replay --from-dlq into a pool sends the tenant's events through its bound too: with room for
// one, the oldest is sent (counted) and the next parked behind it, in arrival order.
func TestReplayFromDLQIntoAPoolGoesThroughTheBound(t *testing.T) {
	url, err := backlogtest.Dynalite("../..")
	if err != nil {
		t.Fatalf("these tests need dynalite (make setup): %v", err)
	}
	db, table := backlogtest.Table(t, url)
	w := opsfake.New(coreNow)
	pool := opsfake.Pool("default")
	pool.DLQURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/pool-default-unrouted"
	ts := w.AddPool("TenantPipeline-Pool-default", pool, map[string]string{"hooli": pipeline.OnFailureContinue})
	for k, v := range map[string]string{pipeline.EnvPoolAdmissionTable: table, pipeline.EnvMaxQueuedFilesPerTenant: "1"} {
		w.Env[pool.ControllerFunction][k] = v
	}
	event := func(id, key string, at time.Time) sqstypes.Message {
		b, _ := json.Marshal(s3event.ObjectCreated(id, at, "ingest", s3event.Object{Key: key, Size: 3}))
		return sqstypes.Message{Body: aws.String(string(b)), ReceiptHandle: aws.String("rh-" + id)}
	}
	w.Queues[pool.DLQURL].Messages = []sqstypes.Message{
		event("e2", "pool/default/hooli/2.csv", coreNow.Add(-time.Minute)),
		event("e1", "pool/default/hooli/1.csv", coreNow.Add(-2*time.Minute)),
	}
	c := w.Clients()
	c.DynamoDB = db
	o := ops.New(c, "TenantPipeline")
	o.Now, o.HTTP = func() time.Time { return coreNow }, w.HTTPClient()
	res, err := o.ReplayFromDLQ(context.Background(), "hooli")
	if err != nil || res.Resent != 2 {
		t.Fatalf("got %+v, %v, want 2 re-sent", res, err)
	}
	sent := w.Queues[ts["hooli"].QueueURL].Sent
	if len(sent) != 1 || aws.ToString(sent[0].MessageDeduplicationId) != "e1" || aws.ToString(sent[0].MessageAttributes[backlog.AttrMessageID].StringValue) != "e1" {
		t.Fatalf("got sent %v, want e1 only, counted", sent)
	}
	b := &backlog.Backlog{DB: db, Table: table, S3: w, Bucket: "ingest", Max: 1}
	if st, err := b.State(context.Background(), "hooli"); err != nil || st.Queued != 1 || st.Parked != 1 || st.LastParked != "e2" {
		t.Errorf("got %+v (%v), want e1 queued and e2 parked", st, err)
	}
}
