package tenantpipeline

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
)

// VendedLogsPrefix starts the name of every workflow log group. Step Functions delivers logs as
// vended logs, and each log group outside this prefix adds an entry to the account's single
// CloudWatch Logs resource policy (at most 5,120 characters): deploys fail after a few dozen
// tenants. Under this prefix, one policy entry covers every group.
// https://docs.aws.amazon.com/step-functions/latest/dg/bp-cwl.html
// It is API: a key policy written outside the app names the workflow log groups by it (KeyPolicy).
const VendedLogsPrefix = "/aws/vendedlogs/states/"

// workflowLogGroupName is unique per stack and tenant: the stack's name starts with the app's stack
// prefix, and a tenant id appears once per app.
func (t *TenantPipeline) workflowLogGroupName() string {
	return VendedLogsPrefix + *awscdk.Stack_Of(t.Construct).StackName() + "/" + t.Props.Tenant.ID
}
