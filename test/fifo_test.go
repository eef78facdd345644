package test

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/templatecheck"
)

// highThroughputFIFO are the queue properties of SQS's high throughput mode for FIFO queues: both
// are required (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/enable-high-throughput-fifo.html).
var highThroughputFIFO = map[string]any{
	"FifoQueue":           true,
	"FifoThroughputLimit": "perMessageGroupId",
	"DeduplicationScope":  "messageGroup",
}

// TestFIFOThroughputMode: each pool's intake and pool queue, which carry many message groups, are in
// high throughput mode; a silo tenant's queue, one message group, keeps the default mode
// (constructs/tenantpipeline, highThroughput).
func TestFIFOThroughputMode(t *testing.T) {
	built, _ := poolTemplate(t)
	for _, s := range built.PoolStacks {
		t.Run(*s.StackName(), func(t *testing.T) {
			tpl := stackAssertions(t, s)
			templatecheck.Assert(t, func() { tpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), highThroughputFIFO) })
			found := tpl.FindResources(jsii.String("AWS::SQS::Queue"), &map[string]any{
				"Properties": assertions.Match_ObjectLike(&highThroughputFIFO),
			})
			var ids []string
			for id := range *found {
				ids = append(ids, id)
			}
			for _, prefix := range []string{"PoolIntake", "PoolQueue"} {
				if !slices.ContainsFunc(ids, func(id string) bool { return strings.HasPrefix(id, prefix) }) {
					t.Errorf("no %s queue in high throughput mode: got %v with %v", prefix, ids, highThroughputFIFO)
				}
			}
			if len(ids) != 2 {
				t.Errorf("queues in high throughput mode: got %v, want the intake and the pool queue", ids)
			}
		})
	}
	t.Run("silo", func(t *testing.T) {
		sharedApp(t)
		queues := 0
		for id, q := range byType(shared.template, "AWS::SQS::Queue") {
			p := props(q)
			if p["FifoQueue"] != true {
				continue
			}
			queues++
			for _, k := range []string{"FifoThroughputLimit", "DeduplicationScope"} {
				if v, ok := p[k]; ok {
					t.Errorf("%s: %s %v, want the default mode for a queue of one message group", id, k, v)
				}
			}
		}
		if queues == 0 {
			t.Fatal("no silo FIFO queue in the template")
		}
	})
}
