package results

// RegisterPartKey is the key of the rejections of one Register invocation: the JSON Lines of its
// Rejections, in record order, named by the chunk and the first record the invocation sent. A
// retry of the invocation starts at the same cursor, so it rewrites the same key.
func RegisterPartKey(tenant, execution string, chunk int, firstRecord int64) string {
	return PartKey(tenant, execution, RegisterPart(chunk, firstRecord))
}
