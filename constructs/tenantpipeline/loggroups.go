package tenantpipeline

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/example/tenantpipeline/spec"
)

// VendedLogsPrefix starts the name of every workflow log group (spec.VendedLogsPrefix: why, and
// why it is API).
const VendedLogsPrefix = spec.VendedLogsPrefix

// workflowLogGroupName is unique per stack and tenant: the stack's name starts with the app's stack
// prefix, and a tenant id appears once per app.
func (t *TenantPipeline) workflowLogGroupName() string {
	return VendedLogsPrefix + *awscdk.Stack_Of(t.Construct).StackName() + "/" + t.Props.Tenant.ID
}
