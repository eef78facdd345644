package router

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/s3event"
)

// Test fixtures shared by the router's tests.
const (
	testQueueURL   = "https://sqs.eu-west-1.amazonaws.com/123456789012/acme.fifo"
	testBucket     = "ingest"
	testPool       = "shared-1"
	testPoolPrefix = "inbox/"
	evID1          = "6f1c2a3b-0d4e-4f5a-8b6c-7d8e9fa0b1c2"
	evID2          = "7a2d3b4c-1e5f-4a6b-9c7d-8e9fa0b1c2d3"
	acmeKey        = "inbox/acme/2024-05-01 orders.csv"
	globexKey      = "inbox/globex/2024-05-01 orders.jsonl"
)

var testStart = time.Date(2024, 5, 1, 9, 0, 0, 0, time.UTC)

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// eventBody is the EventBridge event S3 sends for one new object version under the tenant prefix.
func eventBody(t *testing.T, id, key string) string {
	t.Helper()
	ev := s3event.ObjectCreated(id, testStart.Add(-2*time.Minute), testBucket, s3event.Object{
		Key: key, Size: 1234, ETag: "9b2cf535f27731c974343645a3985328", VersionID: "v-" + id[:8], Sequencer: "0062E99A88DC407460",
	})
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
