package tenantpipeline_test

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
)

// One core system shared by a silo tenant and a pooled tenant: at most 20 of their files run at
// once, together, and their records reach the core system at most 500 per second.
func ExampleNewCoreSystem() {
	app := awscdk.NewApp(nil)
	shared := awscdk.NewStack(app, jsii.String("Shared"), nil)
	bucket := awss3.NewBucket(shared, jsii.String("Ingest"), &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true)})
	ledger := tenantpipeline.NewCoreSystem(shared, "Ledger", &tenantpipeline.CoreSystemProps{
		Name: "ledger", MaxRunningFiles: 20, MaxRecordsPerSecond: 500, Adaptive: true,
	})

	tenantpipeline.New(awscdk.NewStack(app, jsii.String("Acme"), nil), "Tenant-acme", &tenantpipeline.Props{
		Tenant: tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/acme", CoreSystem: ledger.Props.Name},
		Bucket: bucket,
	})
	tenantpipeline.NewPool(awscdk.NewStack(app, jsii.String("Pool"), nil), "Pool", &tenantpipeline.PoolProps{
		Name:            "default",
		Bucket:          bucket,
		MaxRunningFiles: 50, // the pool's own gate, besides the core system's
		Tenants: []tenantpipeline.Tenant{
			{ID: "hooli", RegisterURL: "https://core.example.com/hooli", CoreSystem: ledger.Props.Name, Weight: 2, MaxRecordsPerSecond: 100},
		},
	})
	app.Synth(nil)
}
