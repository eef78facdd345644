package spec

// WithDefaults returns t with every unset field at its documented default. Tier, Pool and a
// pooled tenant's prefix are the tenants file's app's (they depend on its pools and context).
func (t Tenant) WithDefaults() Tenant {
	if t.Prefix == "" && t.ID != "" {
		t.Prefix = "inbox/" + t.ID + "/"
	}
	t.Format = or(t.Format, FormatCSV)
	t.Encoding = or(t.Encoding, EncodingUTF8)
	if t.Format == FormatCSV {
		t.Delimiter = or(t.Delimiter, ",")
	}
	if t.ChunkSize == 0 {
		t.ChunkSize = DefaultChunkSize
	}
	if t.MaxFieldBytes == 0 {
		t.MaxFieldBytes = DefaultMaxFieldBytes
	}
	if t.Sequence != nil || t.RecordOrder == RecordOrderKey {
		// A tenant that declared its own order (a sequence, or records in order per key) has it
		// kept under failure too: a failed file holds the later ones until it is redriven or
		// skipped. Under "continue" later files pass a failed one, and its redrive would register
		// its records behind theirs. An explicit "continue" stays allowed.
		t.OnFailure = or(t.OnFailure, OnFailureHalt)
	}
	t.OnFailure = or(t.OnFailure, OnFailureContinue)
	t.IdempotencyKey = or(t.IdempotencyKey, IdempotencyObjectVersion)
	t.OnInvalidRecord = or(t.OnInvalidRecord, OnInvalidFailFile)
	if t.OnInvalidRecord == OnInvalidSkipRecord && t.MaxInvalidRecords == 0 {
		t.MaxInvalidRecords = DefaultMaxInvalidRecords
	}
	// registerMode stays empty when unset: empty is record mode, everywhere.
	if t.RegisterMode == RegisterModeBatch && t.MaxBatchBytes == 0 {
		t.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if t.DynamoDB != nil && t.DynamoDB.Concurrency == 0 {
		d := *t.DynamoDB
		d.Concurrency = DefaultDynamoDBConcurrency
		t.DynamoDB = &d
	}
	if t.RecordOrder == RecordOrderKey && t.MaxRecordsInFlight == 0 {
		t.MaxRecordsInFlight = DefaultMaxRecordsInFlight
	}
	if t.Sequence != nil {
		seq := t.Sequence.withDefaults()
		t.Sequence = &seq
	}
	return t
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
