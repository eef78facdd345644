package tenantpipeline

import (
	"regexp"

	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// suppress records, next to scope's resources (its children too), why a cdk-nag AwsSolutions
// finding is intended. Each suppression is as narrow as the finding: wildcards are matched by
// pattern. cdk-nag records it on the children scope has when it is called.
func suppress(scope any, rule, reason string, appliesTo ...any) {
	s := &cdknag.NagPackSuppression{Id: jsii.String(rule), Reason: jsii.String(reason)}
	if len(appliesTo) > 0 {
		s.AppliesTo = &appliesTo
	}
	cdknag.NagSuppressions_AddResourceSuppressions(scope, &[]*cdknag.NagPackSuppression{s}, jsii.Bool(true))
}

// basicExecutionRole is the managed policy every function's role has (AwsSolutions-IAM4).
const basicExecutionRole = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"

// suppressNagFindings records why each cdk-nag AwsSolutions finding of the tenant's own grants is
// intended, after the pipeline's (suppressCoreNagFindings).
func (t *TenantPipeline) suppressNagFindings() {
	t.suppressCoreNagFindings("the tenant's")
	objects := func(prefixes ...string) any {
		re := ""
		for i, p := range prefixes {
			if i > 0 {
				re += "|"
			}
			re += regexp.QuoteMeta(p)
		}
		return &cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::.+\/(` + re + `)\*$/`)}
	}
	suppress(t.Controller, "AwsSolutions-IAM5",
		"Object-level grants on exactly the tenant's quarantine prefix (writes unprocessable messages), skip-marker prefix (reads operator decisions) "+
			"and control-record prefix (reads the operator's record of each redrive, replay or sequence request, named by its request id; "+
			"with a sequence, writes the record of the gap skip it asks for itself); "+
			"execution-level DescribeExecution, GetExecutionHistory and RedriveExecution (an operator's redrive, performed in the tenant's "+
			"message group) on the tenant's own file state machine, and DescribeExecution and "+
			"StopExecution on its own segment state machine (a stopped file's running segment is stopped before the next file starts); "+
			"execution names are per file and per segment.",
		objects(pipeline.QuarantineDir(t.owner()), pipeline.ControlDir(t.owner())+"skip/", pipeline.ControlRequestsPrefix(t.owner())),
		&cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:.+:\*$/`)})
	suppress(t.Controller, "AwsSolutions-IAM5",
		"Reads summary.json and reads and writes the File Processed event markers (event-<redrive count>.json) of exactly the tenant's "+
			"results, one folder per file execution, whose names are not known in advance.",
		&cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::.+\/` + regexp.QuoteMeta(pipeline.ResultsDir(t.owner())) + `\*\/(summary\.json|event-\*\.json)$/`)})
	if t.Props.Tenant.Sequence != nil {
		suppress(t.Controller, "AwsSolutions-IAM5",
			"Reads, writes and deletes objects under exactly the tenant's sequence prefix: its sequence state and one object per file held "+
				"ahead of its turn, named by the file's sequence value, which is not known in advance.",
			objects(pipeline.SequencePrefix(t.owner())))
	}
	if t.coreSystem != nil {
		suppress(t.Controller, "AwsSolutions-IAM5",
			"sqs:ChangeMessageVisibility alone, on only the queues tagged for the tenant's core system's wake-ups (aws:ResourceTag): "+
				"a release hands the freed running-file slot to the core system's next waiting file, in whichever tenant's queue it waits, "+
				"and makes its message visible; the queues' names are not known to this stack.",
			"Resource::arn:<AWS::Partition>:sqs:<AWS::Region>:<AWS::AccountId>:*")
	}
	suppress(t.Split, "AwsSolutions-IAM5",
		"Reads objects under exactly the tenant's inbox prefix, writes manifests under exactly its work prefix (and, for the results task, "+
			"reads them and the segments' progress there), and reads the rejection parts and writes each file's results under exactly its "+
			"results prefix; object keys are not known in advance.",
		objects(t.Props.Tenant.Prefix, pipeline.WorkDir(t.owner()), pipeline.ResultsDir(t.owner())))
	if t.bundled != nil {
		suppress(t.bundled, "AwsSolutions-IAM5",
			"Reads objects under exactly the tenant's inbox prefix and its manifests under its work prefix, and writes its rejections under "+
				"exactly the tenant's results prefix; object keys are not known in advance.",
			objects(t.Props.Tenant.Prefix, pipeline.WorkDir(t.owner()), pipeline.ResultsDir(t.owner())))
	}
}
