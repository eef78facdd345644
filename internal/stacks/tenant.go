package stacks

import (
	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/tenants"
)

// pipelineTenant converts a tenants-file entry to the construct's public Tenant type.
func pipelineTenant(t tenants.Tenant) tenantpipeline.Tenant {
	return tenantpipeline.Tenant{
		ID: t.ID, Prefix: t.Prefix, Format: t.Format, Encoding: t.Encoding, Delimiter: t.Delimiter,
		ChunkSize: t.ChunkSize, MaxFieldBytes: t.MaxFieldBytes, OnFailure: t.OnFailure,
		IdempotencyKey: t.IdempotencyKey, RegisterURL: t.RegisterURL, RegisterAuthSecretARN: t.RegisterAuthSecretARN,
	}
}
