package localrun

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// A queue is created in fauxqs with the template's attributes, high throughput mode's two among
// them (a pool's queues), and a queue without them gets SQS's defaults.
func TestCreateQueueKeepsFIFOThroughputMode(t *testing.T) {
	client := startFauxqs(t)
	res, err := NewResolver(&Assembly{}, region, account)
	if err != nil {
		t.Fatal(err)
	}
	r := &Run{sqsAdmin: client}
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
			q, err := r.createQueue(t.Context(), nil, res, &Resource{Stack: &Stack{}, LogicalID: "Queue" + tc.name, Type: "AWS::SQS::Queue", Properties: props})
			if err != nil {
				t.Fatal(err)
			}
			out, err := client.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.URL),
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
