package tenantpipeline

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"
)

// MaxBucketPolicyBytes is S3's limit on a bucket's policy: "Bucket policies are limited to 20 KB
// in size" (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-policies.html). The page
// does not say how S3 counts; the estimate below counts the compact JSON CloudFormation sends, at
// its longest, so an app under it is under the limit however S3 counts white space it is not sent.
const MaxBucketPolicyBytes = 20 * 1024

// The longest value a deploy-time token of a bucket policy can take: partitions "aws-us-gov" and
// "aws-iso-b", 12-digit account ids, region codes such as "ap-southeast-4", and anything else (a
// bucket's or a key's ARN, an imported value) at 110 characters, longer than an S3 or KMS ARN.
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference-arns.html
// https://docs.aws.amazon.com/global-infrastructure/latest/regions/aws-regions.html
var longestPseudo = map[string]string{
	"AWS::Partition": "aws-us-gov",
	"AWS::AccountId": "123456789012",
	"AWS::Region":    "ap-southeast-4",
	"AWS::URLSuffix": "amazonaws.com.cn",
}

const longestOther = 110

// checkPolicySize fails synth when the policy of bucket, created in this app, would be over
// MaxBucketPolicyBytes: its Denies name each of the app's roles under rolePath (roles.go).
func checkPolicySize(scope awscdk.Stack, what string, bucket awss3.IBucket, rolePath string) {
	policy := bucket.Policy()
	if policy == nil {
		return
	}
	n := policyBytes(scope.Resolve(policy.Document()))
	if n <= MaxBucketPolicyBytes {
		return
	}
	s := rolesUnder(bucket, rolePath)
	s.mu.Lock()
	byPath := s.byPath()
	s.mu.Unlock()
	how := "its statements other than the pipeline's Denies take the room: remove some of them"
	if !byPath {
		how = fmt.Sprintf("its Denies name each of the app's roles under %s by its exact ARN, and its other statements leave them less than the "+
			"%d bytes they may take: remove some of them, or set SharedProps.ExemptRolePath (docs/isolation.md, \"The pipeline's roles, each by its ARN\")",
			rolePath, exactBudget)
	}
	awscdk.Annotations_Of(bucket).AddError(jsii.String(fmt.Sprintf(
		"%s: the policy of the ingest bucket %s would be up to %d bytes, over S3's %d (\"Bucket policies are limited to 20 KB\"): %s",
		what, bucketLabel(bucket), n, MaxBucketPolicyBytes, how)))
}

// policyBytes is the length of the compact JSON of a resolved policy document, each deploy-time
// value at its longest.
func policyBytes(resolved any) int {
	b, err := json.Marshal(longest(resolved))
	if err != nil {
		panic(err) // maps, slices and strings
	}
	return len(b)
}

// longest renders CloudFormation's intrinsic functions in v as their longest values.
func longest(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 1 {
			for fn, arg := range v {
				switch fn {
				case "Ref":
					if s, ok := longestPseudo[fmt.Sprint(arg)]; ok {
						return s
					}
					return strings.Repeat("x", longestOther)
				case "Fn::Join":
					if a, ok := arg.([]any); ok && len(a) == 2 {
						sep, _ := a[0].(string)
						parts, _ := a[1].([]any)
						var out []string
						for _, p := range parts {
							s, _ := longest(p).(string)
							out = append(out, s)
						}
						return strings.Join(out, sep)
					}
				}
				if strings.HasPrefix(fn, "Fn::") {
					return strings.Repeat("x", longestOther)
				}
			}
		}
		out := map[string]any{}
		for k, e := range v {
			out[k] = longest(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = longest(e)
		}
		return out
	}
	return v
}
