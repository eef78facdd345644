package stacks

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// nagMetadataKey is the resource metadata cdk-nag's suppressions are written to
// (NagSuppressions.addResourceSuppressions).
const nagMetadataKey = "cdk_nag"

// dropNagMetadata removes the cdk-nag suppressions from the app's resources once every other
// aspect has visited them: cdk-nag reads them from there when a rule pack runs as an aspect of the
// same app (the tests run AwsSolutionsChecks), and nothing reads them from a deployed template.
// With each suppression's reason they are about a sixth of a tenant stack's template, which
// CloudFormation bounds at 1 MB (tenantpipeline.MaxTemplateBytes); the reasons stay beside the
// code that adds them.
func dropNagMetadata(app awscdk.App) {
	// After the default priority, which rule packs take: a later aspect of the same node runs
	// after them.
	awscdk.Aspects_Of(app).Add(&nagMetadataDropper{}, &awscdk.AspectOptions{Priority: jsii.Number(*awscdk.AspectPriority_DEFAULT() + 100)})
}

type nagMetadataDropper struct{}

// Visit implements awscdk.IAspect.
func (nagMetadataDropper) Visit(node constructs.IConstruct) {
	r, ok := node.(awscdk.CfnResource)
	if !ok {
		return
	}
	md := r.CfnOptions().Metadata()
	if md == nil {
		return
	}
	if _, has := (*md)[nagMetadataKey]; !has {
		return
	}
	kept := map[string]any{}
	for k, v := range *md {
		if k != nagMetadataKey {
			kept[k] = v
		}
	}
	r.CfnOptions().SetMetadata(&kept)
}
