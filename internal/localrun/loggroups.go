package localrun

import (
	"context"
	"fmt"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
)

// CreateLogGroup creates a log group of the templates (deploy.Account). The local run keeps the
// functions' lines by log group (insightrules.go) and encrypts nothing, but it judges a log group
// under a key of the templates as CloudWatch Logs does when it is created with the key: unless the
// key's policy lets the service use the key for that log group (logsMayUse), CreateLogGroup fails
// with InvalidParameterException, "The specified KMS key does not exist or is not allowed to be
// used with Arn ...", and so does the deploy.
// https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_CreateLogGroup.html
// An imported key is judged by the policy synth asked its owner to write (importedKeyPolicy).
func (c *Cloud) CreateLogGroup(_ context.Context, _ *deploy.Resource, g deploy.LogGroup) error {
	if g.KmsKeyId == "" {
		return nil
	}
	if ok, why := c.auth.logsMayUse(g.KmsKeyId, g.ARN); !ok {
		c.auth.refuse()
		c.auth.say("CloudWatch Logs CreateLogGroup %s: InvalidParameterException: %s", g.ARN, why)
		return fmt.Errorf("InvalidParameterException: The specified KMS key does not exist or is not allowed to be used with Arn '%s' (local IAM: %s)", g.ARN, why)
	}
	return nil
}
