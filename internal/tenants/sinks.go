package tenants

import (
	"regexp"
	"slices"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// The sink settings: registerMode, maxBatchBytes and dynamodb. Their defaults,
// validation and the one rule on registerUrl live here.

// NeedsRegisterURL reports whether the tenant's sink is the HTTP register adapter, which needs a
// registerUrl; a tenant with a DynamoDB sink has none. This is the one place the rule lives.
func (t Tenant) NeedsRegisterURL() bool { return t.DynamoDB == nil }

// sinkDefaults fills in maxBatchBytes in batch mode and the DynamoDB concurrency. registerMode
// stays empty when unset: empty is record mode, everywhere.
func (t Tenant) sinkDefaults() Tenant {
	if t.RegisterMode == pipeline.RegisterModeBatch && t.MaxBatchBytes == 0 {
		t.MaxBatchBytes = pipeline.DefaultMaxBatchBytes
	}
	if t.DynamoDB != nil && t.DynamoDB.Concurrency == 0 {
		d := *t.DynamoDB
		d.Concurrency = pipeline.DefaultDynamoDBConcurrency
		t.DynamoDB = &d
	}
	return t
}

// tableNamePattern is DynamoDB's table name rule:
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html
var tableNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// maxKeyNameBytes is the longest a key attribute's name may be (same page: "The following
// attribute names are limited to 255 characters": partition and sort key names).
const maxKeyNameBytes = 255

func (t Tenant) validateSink(bad func(field, format string, args ...any)) {
	switch t.RegisterMode {
	case "", pipeline.RegisterModeRecord, pipeline.RegisterModeBatch:
	default:
		bad("registerMode", "%q is invalid: use %q or %q", t.RegisterMode, pipeline.RegisterModeRecord, pipeline.RegisterModeBatch)
	}
	if t.MaxBatchBytes != 0 {
		switch {
		case t.RegisterMode != pipeline.RegisterModeBatch:
			bad("maxBatchBytes", "%d is set, but only registerMode %q sends batches", t.MaxBatchBytes, pipeline.RegisterModeBatch)
		case t.MaxBatchBytes < pipeline.MinMaxBatchBytes || t.MaxBatchBytes > pipeline.MaxMaxBatchBytes:
			bad("maxBatchBytes", "%d is out of range: use %d to %d bytes", t.MaxBatchBytes, pipeline.MinMaxBatchBytes, pipeline.MaxMaxBatchBytes)
		}
	}
	d := t.DynamoDB
	if d == nil {
		return
	}
	if t.RegisterURL != "" {
		bad("registerUrl", "is set with dynamodb: a tenant has one sink; remove registerUrl or dynamodb")
	}
	if t.RegisterMode != "" {
		bad("registerMode", "%q is set with dynamodb: the DynamoDB sink writes each record; remove registerMode", t.RegisterMode)
	}
	if t.RegisterAuthSecretARN != "" {
		bad("registerAuthSecretArn", "is set with dynamodb, which never sends an Authorization header; remove it")
	}
	if len(d.Key) < 1 || len(d.Key) > 2 {
		bad("dynamodb.key", "has %d fields: use 1 (partition key) or 2 (partition key, sort key), e.g. [\"id\"]", len(d.Key))
	}
	for i, k := range d.Key {
		switch {
		case k == "":
			bad("dynamodb.key", "field %d is empty: name a record field", i+1)
		case k == pipeline.SeqAttribute || k == pipeline.MetaAttribute:
			bad("dynamodb.key", "%q is reserved: the sink writes %q and %q itself", k, pipeline.SeqAttribute, pipeline.MetaAttribute)
		case len(k) > maxKeyNameBytes:
			bad("dynamodb.key", "field %d is %d bytes: a key attribute name is at most %d", i+1, len(k), maxKeyNameBytes)
		case slices.Index(d.Key, k) < i:
			bad("dynamodb.key", "%q appears twice: the partition and sort keys are two different fields", k)
		}
	}
	if d.Table != "" && !tableNamePattern.MatchString(d.Table) {
		bad("dynamodb.table", "%q is invalid: use 3-255 letters, digits, '_', '-' or '.', or leave it out to have the construct create the table", d.Table)
	}
	if d.Concurrency < 1 || d.Concurrency > pipeline.MaxDynamoDBConcurrency {
		bad("dynamodb.concurrency", "%d is out of range: use 1 to %d", d.Concurrency, pipeline.MaxDynamoDBConcurrency)
	}
}

// settings is the sink as it travels in every execution.
func (d *DynamoDB) settings() *pipeline.DynamoDBSink {
	if d == nil {
		return nil
	}
	return &pipeline.DynamoDBSink{Key: slices.Clone(d.Key), Table: d.Table, Concurrency: d.Concurrency}
}
