package localrun

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
)

// Upload orders: in which order a run uploads each tenant's files (cmd/local's --upload-order).
const (
	// UploadLexical uploads each tenant's files in lexical order of their names, as they list.
	UploadLexical = "lexical"
	// UploadShuffle uploads each tenant's files in an order drawn from a seed.
	UploadShuffle = "shuffle"
	// UploadReverse uploads each tenant's files in reverse lexical order.
	UploadReverse = "reverse"
)

// UploadOrders are the orders OrderUploads knows, in the order a usage message lists them.
var UploadOrders = []string{UploadLexical, UploadShuffle, UploadReverse}

// OrderUploads reorders files, which are in lexical order of tenant then name, inside each
// tenant's run of files, and leaves the tenants in their order: arrivals are scrambled against
// the names (and the sequence numbers they carry), and tenants follow one another as before.
// A tenant's shuffle is drawn from a generator seeded with seed and the tenant's id, so its
// order depends on the seed and its own files alone, not on the other tenants of the inbox.
func OrderUploads[F any](files []F, tenantOf func(F) string, order string, seed uint64) error {
	if !slices.Contains(UploadOrders, order) {
		return fmt.Errorf("upload order %q: want %s, %s or %s", order, UploadLexical, UploadShuffle, UploadReverse)
	}
	for start := 0; start < len(files); {
		tenant := tenantOf(files[start])
		end := start + 1
		for end < len(files) && tenantOf(files[end]) == tenant {
			end++
		}
		run := files[start:end]
		switch order {
		case UploadShuffle:
			h := fnv.New64a()
			h.Write([]byte(tenant))
			rand.New(rand.NewPCG(seed, h.Sum64())).Shuffle(len(run), func(i, j int) { run[i], run[j] = run[j], run[i] })
		case UploadReverse:
			slices.Reverse(run)
		}
		start = end
	}
	return nil
}
