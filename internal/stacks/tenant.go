package stacks

import (
	"slices"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/tenants"
)

// pipelineTenant converts a tenants-file entry to the construct's public Tenant type; its core
// system is the app's construct of that name.
func pipelineTenant(t tenants.Tenant, coreSystems map[string]*tenantpipeline.CoreSystem) tenantpipeline.Tenant {
	return tenantpipeline.Tenant{
		ID: t.ID, Prefix: t.Prefix, Format: t.Format, Encoding: t.Encoding, Delimiter: t.Delimiter,
		ChunkSize: t.ChunkSize, MaxFieldBytes: t.MaxFieldBytes, OnFailure: t.OnFailure,
		IdempotencyKey: t.IdempotencyKey, RegisterURL: t.RegisterURL, RegisterAuthSecretARN: t.RegisterAuthSecretARN,
		RegisterMode: t.RegisterMode, MaxBatchBytes: t.MaxBatchBytes, DynamoDB: dynamoDB(t.DynamoDB),
		CoreSystem: coreSystems[t.CoreSystem], Weight: t.Weight, MaxRecordsPerSecond: t.MaxRecordsPerSecond,
		OnInvalidRecord: t.OnInvalidRecord, MaxInvalidRecords: t.MaxInvalidRecords, RejectStatuses: slices.Clone(t.RejectStatuses),
		RecordOrder: t.RecordOrder, KeyColumns: slices.Clone(t.KeyColumns), MaxRecordsInFlight: t.MaxRecordsInFlight,
		SmallFileBytes: t.SmallFileBytes,
	}
}

func dynamoDB(d *tenants.DynamoDB) *tenantpipeline.DynamoDB {
	if d == nil {
		return nil
	}
	return &tenantpipeline.DynamoDB{Key: append([]string(nil), d.Key...), Table: d.Table, Concurrency: d.Concurrency}
}
