package opsfake

import (
	"encoding/json"
	"fmt"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/sequence"
	"github.com/example/tenantpipeline/spec"
)

// SetSequence writes a sequenced tenant's state into the bucket, where the controller keeps it
// (sequence.StateKey).
func (w *World) SetSequence(bucket, tenant string, st sequence.State) {
	b, err := json.Marshal(st)
	if err != nil {
		panic(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Objects[bucket+"/"+sequence.StateKey(w.ownerOf(tenant))] = &Object{VersionID: "v-state", ETag: `"etag-state"`, Body: string(b), LastModified: w.Now}
}

// Hold writes the held file of value v of a tenant's sequence of kind kind (sequence.HeldKey), as
// the controller holds a file ahead of its turn.
func (w *World) Hold(bucket, tenant, kind string, v spec.SequenceValue, execution string) {
	h := sequence.Held{Value: v.Text, Num: v.Num, Execution: execution, Key: fmt.Sprintf("inbox/%s/%s.csv", tenant, v.Text), Arrived: w.Now, Body: "{}"}
	b, err := json.Marshal(h)
	if err != nil {
		panic(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Objects[bucket+"/"+sequence.HeldKey(w.ownerOf(tenant), kind, v)] = &Object{VersionID: "v-held", Body: string(b), LastModified: w.Now}
}

// ownerOf is whose keys tenant's are: in the keys of the pool AddPool put it in, if any. w.mu is
// held.
func (w *World) ownerOf(tenant string) pipeline.Owner {
	return pipeline.PoolOwner(w.poolOf[tenant], tenant)
}

// OwnerOf is whose keys tenant's are, for a test to name them.
func (w *World) OwnerOf(tenant string) pipeline.Owner {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ownerOf(tenant)
}
