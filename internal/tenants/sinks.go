package tenants

import (
	"slices"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/spec"
)

// dynamoDBSettings is the sink as it travels in every execution.
func dynamoDBSettings(d *spec.DynamoDB) *pipeline.DynamoDBSink {
	if d == nil {
		return nil
	}
	return &pipeline.DynamoDBSink{Key: slices.Clone(d.Key), Table: d.Table, Concurrency: d.Concurrency}
}
