package results

import "github.com/example/tenantpipeline/internal/pipeline"

// RegisterPartKey is the key of the rejections of one Register invocation: the JSON Lines of its
// Rejections, in record order, named by the chunk and the first record the invocation sent. A
// retry of the invocation starts at the same cursor, so it rewrites the same key.
func RegisterPartKey(o pipeline.Owner, execution string, chunk int, firstRecord int64) string {
	return PartKey(o, execution, RegisterPart(chunk, firstRecord))
}
