//go:build e2e || figures

package localrun

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/example/tenantpipeline/internal/localrun/report"
)

// The workload of sequenced tenants that TestScenarioSequence and TestFiguresSequence share:
// numbered files orders-<n>.csv, uploaded shuffled per tenant.

func orderName(n int) string { return fmt.Sprintf("orders-%d.csv", n) }

// shuffledSequence is each tenant's numbered files 1..n, but missing, shuffled per tenant as
// --upload-order shuffle does with seed, each file of records records.
func shuffledSequence(tenants []string, n, missing int, seed uint64, records int) []upload {
	var files []upload
	for _, tn := range tenants {
		for i := 1; i <= n; i++ {
			if i != missing {
				files = append(files, upload{tn, orderName(i), csvOf(records)})
			}
		}
	}
	if err := OrderUploads(files, func(u upload) string { return u.tenant }, UploadShuffle, seed); err != nil {
		panic(err)
	}
	return files
}

// outOfOrder counts the uploads that arrived after a higher number of their tenant: the arrivals
// the sequence has to put right.
func outOfOrder(files []upload) int {
	highest, n := map[string]int{}, 0
	for _, f := range files {
		v, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(f.rel, "orders-"), ".csv"))
		if err != nil {
			continue
		}
		if v < highest[f.tenant] {
			n++
		}
		highest[f.tenant] = max(highest[f.tenant], v)
	}
	return n
}

// registeredOrder is the tenant's files in the order the core system first registered their
// records, each once.
func registeredOrder(r *Run, tenant string) []string {
	var keys []string
	for _, rec := range r.Sink.Registered(tenant) {
		if len(keys) == 0 || keys[len(keys)-1] != rec.Source {
			keys = append(keys, rec.Source)
		}
	}
	return keys
}

// countStatus counts the tenant's files of a status.
func countStatus(rep *report.Report, tenant, status string) int {
	n := 0
	if tr := rep.Tenants[tenant]; tr != nil {
		for _, f := range tr.Files {
			if f.Status == status {
				n++
			}
		}
	}
	return n
}
