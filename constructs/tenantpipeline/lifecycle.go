package tenantpipeline

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// LifecycleRules are the ingest bucket's lifecycle rules the pipeline expects: what it writes under
// work/ (manifests, progress, Split's kept result) expires after pipeline.WorkExpirationDays, as
// long as a redrive can still read it; each file's results under results/ after resultsDays
// (0 or less: pipeline.DefaultResultsExpirationDays, 30 days); noncurrent versions after the
// queues' 14-day retention; incomplete multipart uploads (a results file whose upload failed)
// after 7 days. Give them to the bucket your app creates:
//
//	awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{
//		Versioned: jsii.Bool(true), EventBridgeEnabled: jsii.Bool(true),
//		LifecycleRules: tenantpipeline.LifecycleRules(90), // results kept 90 days
//	})
//
// For a bucket your app imports, its owner sets the same rules. S3 rounds an expiration up to the
// next midnight UTC (https://docs.aws.amazon.com/AmazonS3/latest/userguide/intro-lifecycle-rules.html).
func LifecycleRules(resultsDays int) *[]*awss3.LifecycleRule {
	if resultsDays <= 0 {
		resultsDays = pipeline.DefaultResultsExpirationDays
	}
	days := func(n int) awscdk.Duration { return awscdk.Duration_Days(jsii.Number(n)) }
	return &[]*awss3.LifecycleRule{
		{
			Id:     jsii.String("ExpireWorkFiles"),
			Prefix: jsii.String(pipeline.WorkPrefix),
			// As long as a redrive can come: one year after the execution's start (the arithmetic
			// and its sources: pipeline.WorkExpirationDays).
			Expiration:                          days(pipeline.WorkExpirationDays),
			NoncurrentVersionExpiration:         days(1),
			AbortIncompleteMultipartUploadAfter: days(7),
		},
		{
			Id:     jsii.String("ExpireResults"),
			Prefix: jsii.String(pipeline.ResultsPrefix),
			// The tenants' copy of each file's results (pipeline.DefaultResultsExpirationDays says
			// why this long); a rewrite by a redrive leaves a noncurrent version.
			Expiration:                          days(resultsDays),
			NoncurrentVersionExpiration:         days(1),
			AbortIncompleteMultipartUploadAfter: days(7),
		},
		{
			Id: jsii.String("ExpireOldVersions"),
			// A queued file is read by version id for at most the queue's 14-day retention.
			NoncurrentVersionExpiration:         days(30),
			AbortIncompleteMultipartUploadAfter: days(7),
		},
	}
}
