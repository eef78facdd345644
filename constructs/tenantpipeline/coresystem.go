package tenantpipeline

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/schema"
	"github.com/example/tenantpipeline/internal/tenants"
	"github.com/example/tenantpipeline/spec"
)

// CoreSystemProps configures a core system: a destination tenants register into, protected by
// admission. A file of a tenant naming it (Tenant.CoreSystem) starts only while fewer than
// MaxRunningFiles of the core system's files run, in both tiers together.
type CoreSystemProps struct {
	// Name names the core system in its tenants' settings and admission's partition key
	// (core#<name>): 1-32 lower-case letters, digits and hyphens. Required.
	Name string
	// MaxRunningFiles bounds the files of every tenant naming the core system that run at once.
	// Required: 1 to 1,000 (tenants.MaxRunningFiles).
	MaxRunningFiles int
	// MaxRecordsPerSecond bounds the records sent to the core system per second, across all its
	// running files. Default: 0, no rate limit. Negative values are refused.
	MaxRecordsPerSecond float64
	// Adaptive lets the effective running-file limit fall when the core system answers 429 or 503
	// (or sends Retry-After) and grow back on success, never above MaxRunningFiles.
	// Default: false, the limit is MaxRunningFiles.
	Adaptive bool
	// MaxRequestsInFlight bounds the requests in flight to the core system across all its running
	// files, which share it by what each can use (a keyed tenant's Tenant.MaxRecordsInFlight, one
	// for the others), by weight when they want more than there is, at least one each, recomputed
	// as files start and end (SharedProps.RequestShares). At least MaxRunningFiles, since each
	// running file sends at least one request, and at most 10,000 (tenants.MaxRequestsInFlight, a
	// bound against typos). Default: 0, which is MaxRunningFiles: one request per running file.
	MaxRequestsInFlight int
	// Breaker tunes the core system's circuit breaker (spec.Breaker): failures of the core system
	// (5xx other than 503, timeouts, refused or reset connections) open it, and while it is open
	// the core system's files hold at their cursor instead of failing. Default: nil, on with
	// spec.Breaker's defaults.
	Breaker *spec.Breaker
	// Maintenance declares windows, in UTC, during which nothing of the core system is admitted
	// and running files hold at their cursor (spec.MaintenanceWindow). Default: none.
	Maintenance []spec.MaintenanceWindow
	// IdempotencyRetention is how long the core system keeps an Idempotency-Key, at least a
	// minute; records whose first send is older are looked up (LookupURL) before they are sent
	// again. Default: 0, keys are kept forever.
	IdempotencyRetention time.Duration
	// LookupURL answers whether a record is registered: an absolute http(s) URL template with
	// "{key}"; 200 means registered, 404 not registered, anything else holds like a 503.
	// Default: none.
	LookupURL string
	// CompleteURL receives one POST per file after its last record; its answer is recorded in
	// the file's summary. Default: none.
	CompleteURL string
	// AdmissionWaitAlarm is how long a file may wait for admission before the AdmissionWait
	// alarm fires: the core system's oldest wait (the maximum of AdmissionWaitSeconds over 5
	// minutes) at or above it. Default: 30 minutes. At least 5 minutes, one alarm period.
	AdmissionWaitAlarm time.Duration
	// AlarmTopic receives the core system's alarm state changes. Default: the alarm has no actions.
	AlarmTopic awssns.ITopic
	// EncryptionKey is the customer-managed KMS key of the admission table; the controllers (and
	// Register functions, for the adaptive limit and the breaker) of its tenants get the KMS calls DynamoDB
	// makes for them. Default: nil, the AWS-managed key.
	EncryptionKey awskms.IKey
}

// DefaultAdmissionWaitAlarm is CoreSystemProps.AdmissionWaitAlarm's default: API, as the value
// the zero field takes.
const DefaultAdmissionWaitAlarm = 30 * time.Minute

// CoreSystem is one core system's admission state: a DynamoDB table of its running-file leases,
// its waiting tenants and, with Adaptive, its effective limit (package internal/admission). Pass
// its name to every tenant that registers into it (Tenant.CoreSystem), silo or pooled: one table per
// core system is what makes its limit hold across tiers and stacks.
type CoreSystem struct {
	constructs.Construct

	// Props are the props as given; invalid props fail synth.
	Props CoreSystemProps
	// Table is the core system's admission table: string partition key "pk", string sort key
	// "sk", TTL on "expiresAt", on demand, AWS-managed encryption, destroyed with the construct.
	Table awsdynamodb.Table
	// AdmissionWait fires when a file of the core system has waited for admission longer than
	// Props.AdmissionWaitAlarm (coresystemalarms.go).
	AdmissionWait awscloudwatch.Alarm
	// LostLeases fires when a running file of the core system had lost its running-file lease and
	// took it again, perhaps beyond maxRunningFiles (metric LostLeases, dimension CoreSystem).
	LostLeases awscloudwatch.Alarm
	// BreakerOpen (alarm CoreSystemBreakerOpen) fires while the core system's breaker is open:
	// its files hold at their cursor and none is admitted (metric CoreSystemBreakerOpen, dimension
	// CoreSystem, maximum over 5 minutes at least 1).
	BreakerOpen awscloudwatch.Alarm
	// WakeFailures fires when slots handed to the core system's waiting files could not wake them
	// more than once in five minutes (metric AdmissionWakeFailures, dimension CoreSystem): each
	// such file waits for its safety net, and its slot for the reconciler.
	WakeFailures awscloudwatch.Alarm
	// Dashboard shows the core system's running files against its limit, its oldest admission
	// wait, its admissions and waits, and its alarm. DashboardName is its name.
	Dashboard     awscloudwatch.Dashboard
	DashboardName *string

	// nameTaken says another core system of the app has the name (registerCoreSystem).
	nameTaken error
	// reconcilers decide which controller runs the core system's reconciler schedule (reconcile.go).
	reconcilers reconcilers
}

// NewCoreSystem creates the core system's admission table under scope/id. Props are checked at
// synth through the node's validation, as TenantPipeline's are: every problem at once, each message
// naming the prop.
func NewCoreSystem(scope constructs.Construct, id string, props *CoreSystemProps) *CoreSystem {
	if props == nil {
		props = &CoreSystemProps{}
	}
	c := &CoreSystem{Construct: constructs.NewConstruct(scope, jsii.String(id)), Props: *props}
	c.Table = newAdmissionTable(c.Construct, "Table", props.EncryptionKey)
	c.newMonitoring()
	c.nameTaken = registerCoreSystem(c)
	c.Node().AddValidation(&coreSystemValidation{c})
	return c
}

// validate reports every problem of the props, each naming the prop, the value and the fix.
func (p CoreSystemProps) validate() error {
	var errs []error
	if err := tenants.CheckCoreSystemName("CoreSystemProps.Name", p.Name); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, tenants.CheckCoreSystem(p.config(), coreSystemGoName, nil)...)
	if w := p.AdmissionWaitAlarm; w != 0 && w < alarmPeriod {
		errs = append(errs, fmt.Errorf("CoreSystemProps.AdmissionWaitAlarm %v must be at least %v (one alarm period), or 0 for the default %v",
			w, alarmPeriod, DefaultAdmissionWaitAlarm))
	}
	return errors.Join(errs...)
}

// coreSystemGoName names a field of the props by its JSON path inside a core system:
// "breaker.window" is CoreSystemProps.Breaker.Window, "lookupUrl" CoreSystemProps.LookupURL.
func coreSystemGoName(path string) string {
	parts := strings.Split(path, ".")
	for i, part := range parts {
		part = strings.ToUpper(part[:1]) + part[1:]
		if s, ok := strings.CutSuffix(part, "Url"); ok {
			part = s + "URL"
		}
		parts[i] = part
	}
	return "CoreSystemProps." + strings.Join(parts, ".")
}

func (p CoreSystemProps) config() spec.CoreSystem {
	c := spec.CoreSystem{MaxRunningFiles: p.MaxRunningFiles, MaxRecordsPerSecond: p.MaxRecordsPerSecond, Adaptive: p.Adaptive,
		MaxRequestsInFlight: p.MaxRequestsInFlight, Breaker: p.Breaker, Maintenance: p.Maintenance,
		LookupURL: p.LookupURL, CompleteURL: p.CompleteURL}
	if p.IdempotencyRetention != 0 {
		c.IdempotencyRetention = p.IdempotencyRetention.String()
	}
	return c
}

type coreSystemValidation struct{ c *CoreSystem }

// Validate implements constructs.IValidation.
func (v *coreSystemValidation) Validate() *[]*string {
	return answer(v.c, messages(errors.Join(v.c.Props.validate(), v.c.nameTaken)))
}

// settings is the core system as it travels in its tenants' settings: without its table, whose
// name is a CloudFormation token; the controller adds it from CORE_SYSTEM_TABLES.
func (c *CoreSystem) settings() *pipeline.CoreSystem {
	return pipeline.CoreSystemOf(c.Props.Name, c.Props.config())
}

// newAdmissionTable creates an admission table (internal/admission's layout). It holds mostly
// short-lived state: leases of running files, which the controller releases when a file ends,
// and waiting entries, which expire by TTL. So it has no point-in-time recovery and is destroyed
// with its construct: a restored lease would hold a slot for a file that has long ended. A core
// system's table also holds operators' steering (its pause and limit override, with their audit
// items, internal/corecontrol): a deploy never writes items, and an update of these properties
// keeps the table, so steering outlasts a redeploy; only removing the core system deletes it.
// TTL deletes expired items "typically within a few days", so admission compares expiresAt itself.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/howitworks-ttl.html
func newAdmissionTable(scope constructs.Construct, id string, encryptionKey awskms.IKey) awsdynamodb.Table {
	key := func(name string) *awsdynamodb.Attribute {
		return &awsdynamodb.Attribute{Name: jsii.String(name), Type: awsdynamodb.AttributeType_STRING}
	}
	props := &awsdynamodb.TableProps{
		PartitionKey:        key(schema.AttrPK),
		SortKey:             key(schema.AttrSK),
		TimeToLiveAttribute: jsii.String(schema.AttrExpiresAt),
		// On demand: admission's calls come in bursts, a few per file start and end.
		BillingMode:   awsdynamodb.BillingMode_PAY_PER_REQUEST,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	}
	// encryptionKey, else the AWS managed key (encryption.table).
	newEncryption(scope, encryptionKey).table(props)
	table := awsdynamodb.NewTable(scope, jsii.String(id), props)
	cdknag.NagSuppressions_AddResourceSuppressions(table, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-DDB3"),
		Reason: jsii.String("The admission table holds only short-lived leases of running files and waiting entries that expire by TTL; " +
			"a point-in-time restore would bring back leases of files that have ended, and the state rebuilds itself as files start and end."),
	}}, jsii.Bool(true))
	return table
}

// leaseActions are the controller's calls on an admission table: read a gate, take and renew a
// lease (conditional put and update), release it, list a gate's leases and waiting tenants.
var leaseActions = []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:Query"}

// grantLeases lets fn manage leases in the tables, and nothing else on them.
func grantLeases(fn awslambda.IFunction, tables ...awsdynamodb.ITable) {
	var arns []string
	for _, t := range tables {
		arns = append(arns, *t.TableArn())
	}
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(leaseActions...),
		Resources: jsii.Strings(arns...),
	}))
}

// WakeTagKey is the tag a queue carries when files waiting in it may be handed a running-file slot
// of the core system: its value is "true". Admission's releases wake the next waiter wherever it
// waits, a silo tenant's queue or a pool's, so every controller that takes the core system's slots
// may make a message of such a queue visible (grantWakeUps), and only of such a queue.
func WakeTagKey(coreSystem string) string { return "tenantpipeline:wake:" + coreSystem }

// MaxQueueTags is the most tags an SQS queue takes
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-queues.html).
const MaxQueueTags = 50

// MaxWakeTags is the most core systems one queue is tagged for (one WakeTagKey each): the rest of
// MaxQueueTags is kept for the tags an app puts on its stacks, which CDK copies onto the queue.
const MaxWakeTags = MaxQueueTags - 10

// wakeTagsFit refuses a queue whose tenants name more core systems than it can carry wake-up tags
// for: a deployment would fail on the queue's tags.
func wakeTagsFit(expr string, cs []*CoreSystem) error {
	n := len(coreSystemsOf(cs))
	if n <= MaxWakeTags {
		return nil
	}
	return fmt.Errorf("%s: the tenants name %d core systems, over %d: the queue carries one wake-up tag per core system "+
		"(%s), SQS allows %d tags a queue and %d are kept for the app's own tags; split the tenants over more pools",
		expr, n, MaxWakeTags, WakeTagKey("<name>"), MaxQueueTags, MaxQueueTags-MaxWakeTags)
}

// tagForWakeUps tags q for the wake-ups of each core system.
func tagForWakeUps(q awssqs.IQueue, cs ...*CoreSystem) {
	for _, c := range cs {
		awscdk.Tags_Of(q).Add(jsii.String(WakeTagKey(c.Props.Name)), jsii.String("true"), nil)
	}
}

// grantWakeUps lets fn make visible, with sqs:ChangeMessageVisibility and nothing else, the
// messages of the account's queues tagged for the core system's wake-ups: attribute-based access
// control keeps the policy one statement whatever the number of tenants
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-abac-condition-keys.html:
// aws:ResourceTag applies to queue resource operations in IAM policies).
func grantWakeUps(fn awslambda.IFunction, c *CoreSystem) {
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("sqs:ChangeMessageVisibility"),
		Resources: jsii.Strings(fmt.Sprintf("arn:%s:sqs:%s:%s:*", *awscdk.Aws_PARTITION(), *awscdk.Aws_REGION(), *awscdk.Aws_ACCOUNT_ID())),
		Conditions: &map[string]any{"StringEquals": map[string]any{
			"aws:ResourceTag/" + WakeTagKey(c.Props.Name): "true",
		}},
	}))
}

// grantAdaptiveLimit lets Register read and change the core system's adaptive limit item, its
// breaker item (internal/breaker) and its request shares (internal/shares, which writes only by
// UpdateItem), and no item outside the core system's gate:
// dynamodb:LeadingKeys holds the partition key of every item the request touches, and both items
// are in the gate's partition.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/specifying-conditions.html
func grantAdaptiveLimit(fn awslambda.IFunction, c *CoreSystem) {
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("dynamodb:GetItem", "dynamodb:UpdateItem"),
		Resources: jsii.Strings(*c.Table.TableArn()),
		Conditions: &map[string]any{"ForAllValues:StringEquals": map[string]any{
			"dynamodb:LeadingKeys": []string{schema.CoreGate(c.Props.Name)},
		}},
	}))
}

// registerKeepsItems says whether Register reads and writes items of the core system's table: its
// request shares (unless shares is static), its adaptive limit, or its breaker (on unless
// disabled). With a customer-managed key it then needs the KMS calls DynamoDB makes for it, or
// every read of the item would fail.
func (c *CoreSystem) registerKeepsItems(shares string) bool {
	return shares != pipeline.RequestSharesStatic || c.Props.Adaptive || !c.Props.config().BreakerSettings().Disabled
}

// coreSystemsOf are the distinct core systems of cs, by name.
func coreSystemsOf(cs []*CoreSystem) []*CoreSystem {
	byName := map[string]*CoreSystem{}
	for _, c := range cs {
		if c != nil {
			byName[c.Props.Name] = c
		}
	}
	var out []*CoreSystem
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, byName[name])
	}
	return out
}

// coreSystemTables is the CORE_SYSTEM_TABLES variable: a JSON object of core system name to
// table name (tokens, resolved at deploy time).
func coreSystemTables(scope constructs.Construct, cs []*CoreSystem) string {
	m := map[string]string{}
	for _, c := range cs {
		m[c.Props.Name] = *c.Table.TableName()
	}
	return *toJSON(scope, m)
}

// addAdmissionEnv gives the controller its admission variables: the pool gate's table and limit,
// and the tables of its tenants' core systems.
func (t *TenantPool) addAdmissionEnv(env map[string]string) {
	t.CoreSystems = coreSystemsOf(t.coreSystems)
	env[pipeline.EnvPoolAdmissionTable] = *t.AdmissionTable.TableName()
	env[pipeline.EnvPoolMaxRunningFiles] = strconv.Itoa(t.Props.MaxRunningFiles)
	if len(t.CoreSystems) > 0 {
		env[pipeline.EnvCoreSystemTables] = coreSystemTables(t.Construct, t.CoreSystems)
	}
}

// grantAdmission lets the controller manage leases in the pool's table and its core systems'
// tables, and Register read and update each core system's adaptive limit and breaker.
func (t *TenantPool) grantAdmission() {
	tables := []awsdynamodb.ITable{t.AdmissionTable}
	for _, c := range t.CoreSystems {
		tables = append(tables, c.Table)
		grantAdaptiveLimit(t.Register, c)
	}
	grantLeases(t.Controller, tables...)
	tagForWakeUps(t.Queue, t.CoreSystems...)
	for _, c := range t.CoreSystems {
		grantWakeUps(t.Controller, c)
	}
}
