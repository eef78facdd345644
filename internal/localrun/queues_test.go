//go:build e2e || figures

package localrun

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// A queue is created in fauxqs with the template's attributes, high throughput mode's two among
// them (a pool's queues), and a queue without them gets SQS's defaults.
func TestCreateQueueKeepsFIFOThroughputMode(t *testing.T) {
	client := startFauxqs(t)
	res, err := deploy.NewResolver(&deploy.Assembly{}, emulate.Region, emulate.Account)
	if err != nil {
		t.Fatal(err)
	}
	r := &Cloud{sqsAdmin: client, queues: map[string]*Queue{}}
	for _, tc := range []struct {
		name, props               string
		wantLimit, wantDedupScope string
	}{
		{"high-throughput", `{"FifoQueue": true, "ContentBasedDeduplication": true, "FifoThroughputLimit": "perMessageGroupId", "DeduplicationScope": "messageGroup"}`, "perMessageGroupId", "messageGroup"},
		{"default", `{"FifoQueue": true, "ContentBasedDeduplication": true}`, "perQueue", "queue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var props map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tc.props), &props); err != nil {
				t.Fatal(err)
			}
			qr := &deploy.Resource{Stack: &deploy.Stack{}, LogicalID: "Queue" + tc.name, Type: "AWS::SQS::Queue", Properties: props}
			q, err := deploy.ReadQueue(res, qr)
			if err != nil {
				t.Fatal(err)
			}
			url, err := r.CreateQueue(t.Context(), qr, q)
			if err != nil {
				t.Fatal(err)
			}
			out, err := client.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
				AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameFifoThroughputLimit, sqstypes.QueueAttributeNameDeduplicationScope}})
			if err != nil {
				t.Fatal(err)
			}
			if got := out.Attributes["FifoThroughputLimit"]; got != tc.wantLimit {
				t.Errorf("FifoThroughputLimit: got %q, want %q", got, tc.wantLimit)
			}
			if got := out.Attributes["DeduplicationScope"]; got != tc.wantDedupScope {
				t.Errorf("DeduplicationScope: got %q, want %q", got, tc.wantDedupScope)
			}
		})
	}
}

// fauxqs answers a FIFO ReceiveMessage as SQS does (local/fauxqs/server.mjs): as many messages of one
// message group as it has, in order, then the next available groups'; a group with a message in
// flight gives none.
func TestFIFOReceiveFillsABatchFromOneGroup(t *testing.T) {
	client := startFauxqs(t)
	q := createTestQueue(t, client, "receive-groups.fifo")
	// a1 b1 a2 b2 ... a6 b6 c1: the groups interleaved, as the intake holds a burst.
	var sent []string
	for i := 1; i <= 6; i++ {
		sent = append(sent, fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i))
	}
	sent = append(sent, "c1")
	for _, body := range sent {
		if _, err := client.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(body),
			MessageGroupId: aws.String(body[:1]), MessageDeduplicationId: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	receive := func(n int32) string {
		out, err := client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL), MaxNumberOfMessages: n})
		if err != nil {
			t.Fatal(err)
		}
		var bodies []string
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
		}
		return strings.Join(bodies, " ")
	}
	for _, tc := range []struct {
		n    int32
		want string
	}{
		{10, "a1 a2 a3 a4 a5 a6 b1 b2 b3 b4"}, // all of a, then b's first
		{10, "c1"},                            // a and b are in flight
		{10, ""},
	} {
		if got := receive(tc.n); got != tc.want {
			t.Errorf("ReceiveMessage(%d): got %q, want %q", tc.n, got, tc.want)
		}
	}
}
