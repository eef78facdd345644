package stacks

import (
	"errors"
	"fmt"

	"github.com/example/tenantpipeline/internal/tenants"
)

// admissionTablesOutsideTablePrefixes refuses a pool's tablePrefix that could cover an admission
// table. The app's admission tables (core systems' and pools') have names CloudFormation
// generates, starting with their stack's name, "<stackPrefix>-…"; a pool's Register may PutItem on
// every table under its tablePrefix, so such a prefix would let it overwrite leases that only
// controllers may write.
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-dynamodb-table.html (TableName)
func admissionTablesOutsideTablePrefixes(f *tenants.File, o Options) error {
	generated := o.StackPrefix + "-"
	var errs []error
	for _, name := range f.PoolNames() {
		p := f.Pool(name).TablePrefix
		if p != "" && tenants.PrefixesOverlap(p, generated) {
			errs = append(errs, fmt.Errorf("pools.%s.tablePrefix %q overlaps %q, how the names of the app's admission tables begin, so the pool's Register could write them: "+
				"choose a prefix that does not begin like %q", name, p, generated, generated))
		}
	}
	return errors.Join(errs...)
}
