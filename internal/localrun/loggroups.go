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
// A key the templates do not create (an imported keyArn) has a policy the local run does not
// know: its log groups are not judged, and the run's log says so; synth warns with the statements
// that key's policy needs.
func (c *Cloud) CreateLogGroup(_ context.Context, _ *deploy.Resource, g deploy.LogGroup) error {
	if g.KmsKeyId == "" {
		return nil
	}
	if !c.auth.templateKey(g.KmsKeyId) {
		fmt.Fprintf(c.logs, "localrun: log group %s: key %s is not a key of the templates; CloudWatch Logs' use of it is not judged\n", g.Name, g.KmsKeyId)
		return nil
	}
	if ok, why := c.auth.logsMayUse(g.KmsKeyId, g.ARN); !ok {
		c.auth.refuse()
		c.auth.say("CloudWatch Logs CreateLogGroup %s: InvalidParameterException: %s", g.ARN, why)
		return fmt.Errorf("InvalidParameterException: The specified KMS key does not exist or is not allowed to be used with Arn '%s' (local IAM: %s)", g.ARN, why)
	}
	return nil
}
