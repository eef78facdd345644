package spec

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// IDPattern keeps ids safe everywhere they appear: CloudFormation logical ids and generated names
// (queue names are at most 80 characters including ".fifo", rule names 64), the FIFO message group
// id, S3 prefixes, metric dimensions. Pool and core system names follow it too.
var IDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// StackPattern is what a stack field may hold: it ends a CloudFormation stack name, which allows
// letters, digits and hyphens (128 characters in all).
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cfn-using-console-create-stack-parameters.html
var StackPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,31}$`)

// tableNamePattern is DynamoDB's table name rule:
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html
var tableNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// maxKeyNameBytes is the longest a key attribute's name may be (same page: "The following
// attribute names are limited to 255 characters": partition and sort key names).
const maxKeyNameBytes = 255

// Check reports every problem of t, which must already have its defaults (WithDefaults). Each
// problem names its field by JSON path; rules that need the other tenants, the tier or the pool
// are the tenants file's and the pool's.
func (t Tenant) Check() []Problem {
	var ps []Problem
	bad := func(path, format string, args ...any) { ps = append(ps, Problemf(path, format, args...)) }
	if !IDPattern.MatchString(t.ID) {
		bad("id", "%q is invalid: use 1-32 lower-case letters, digits and hyphens, starting with a letter or digit", t.ID)
	}
	t.checkPrefix(bad)
	if !slices.Contains([]string{FormatCSV, FormatJSONL}, t.Format) {
		bad("format", "%q is invalid: use %q or %q", t.Format, FormatCSV, FormatJSONL)
	}
	if !slices.Contains([]string{EncodingUTF8, EncodingCP932}, t.Encoding) {
		bad("encoding", "%q is invalid: use %q or %q", t.Encoding, EncodingUTF8, EncodingCP932)
	}
	if t.Format == FormatJSONL && t.Delimiter != "" {
		bad("delimiter", "%q is set, but only CSV files have a delimiter", t.Delimiter)
	}
	if t.Format == FormatCSV {
		if err := CheckDelimiter(t.Delimiter, t.Encoding); err != nil {
			bad("delimiter", "%v", err)
		}
	}
	if t.ChunkSize < MinChunkSize || t.ChunkSize > MaxChunkSize {
		bad("chunkSize", "%d is out of range: use %d to %d records, or leave it out for %d", t.ChunkSize, MinChunkSize, MaxChunkSize, DefaultChunkSize)
	}
	if t.MaxFieldBytes < 1 || t.MaxFieldBytes > MaxMaxFieldBytes {
		bad("maxFieldBytes", "%d is out of range: use 1 to 1,048,576 bytes", t.MaxFieldBytes)
	}
	if n := t.SmallFileBytes; n != 0 && n != NoSmallFiles && (n < 1 || n > MaxSmallFileBytes) {
		bad("smallFileBytes", "%d is out of range: use 1 to %d bytes (4 MiB), -1 for no small-file path, or leave it out for the app's bound", n, MaxSmallFileBytes)
	}
	if !slices.Contains([]string{OnFailureContinue, OnFailureHalt}, t.OnFailure) {
		bad("onFailure", "%q is invalid: use %q or %q", t.OnFailure, OnFailureContinue, OnFailureHalt)
	}
	if !slices.Contains([]string{IdempotencyEventID, IdempotencyObjectVersion}, t.IdempotencyKey) {
		bad("idempotencyKey", "%q is invalid: use %q or %q", t.IdempotencyKey, IdempotencyEventID, IdempotencyObjectVersion)
	}
	switch t.OnInvalidRecord {
	case OnInvalidFailFile:
		if t.MaxInvalidRecords != 0 {
			bad("maxInvalidRecords", "%d is set, but onInvalidRecord is %q, which fails the file at its first invalid record; set onInvalidRecord to %q or leave maxInvalidRecords out",
				t.MaxInvalidRecords, OnInvalidFailFile, OnInvalidSkipRecord)
		}
	case OnInvalidSkipRecord:
		if t.MaxInvalidRecords < 1 || t.MaxInvalidRecords > MaxMaxInvalidRecords {
			bad("maxInvalidRecords", "%d is out of range: use 1 to %d records, or leave it out for %d", t.MaxInvalidRecords, MaxMaxInvalidRecords, DefaultMaxInvalidRecords)
		}
	default:
		bad("onInvalidRecord", "%q is invalid: use %q or %q", t.OnInvalidRecord, OnInvalidFailFile, OnInvalidSkipRecord)
	}
	if t.RegisterURL != "" {
		t.checkRegisterURL(bad)
	}
	if t.Stack != "" && !StackPattern.MatchString(t.Stack) {
		bad("stack", "%q is invalid: use 1-32 letters, digits and hyphens, starting with a letter or digit", t.Stack)
	}
	if t.RegisterAuthSecretARN != "" && !secretARNPattern.MatchString(t.RegisterAuthSecretARN) {
		bad("registerAuthSecretArn", "%q is invalid: use the secret's full ARN, arn:<partition>:secretsmanager:<region>:<account>:secret:<name>-<6 characters>, "+
			"as Secrets Manager shows it: the function's role is granted exactly this ARN, and a partial one (without the 6 characters Secrets Manager appends) matches no secret",
			t.RegisterAuthSecretARN)
	}
	for _, problem := range CheckRejectStatuses(t.RejectStatuses, t.OnInvalidRecord) {
		bad("rejectStatuses", "%s", problem)
	}
	t.checkSink(bad)
	t.checkAdmission(bad)
	t.checkKeyOrder(bad)
	if t.Sequence != nil {
		t.Sequence.check(bad)
	}
	return ps
}

// secretARNPattern is a complete Secrets Manager secret ARN: "The ARN includes the name of the
// secret followed by six random characters"
// (https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_CreateSecret.html, the
// response's ARN). The function's role is granted the ARN as given, and an IAM resource without
// those characters matches no secret's ARN.
var secretARNPattern = regexp.MustCompile(`^arn:aws[a-z-]*:secretsmanager:[a-z]{2}(-[a-z]+)+-\d+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$`)

// checkRegisterURL refuses a register URL that is not an absolute http(s) URL, that carries
// credentials (they would be written to the function's environment and logs, and sent to every
// host the URL redirects to), or that is plain http while a secret is set (the secret goes in
// every request's Authorization header, so in clear text).
func (t Tenant) checkRegisterURL(bad func(path, format string, args ...any)) {
	u, err := url.Parse(t.RegisterURL)
	switch {
	case err != nil || !ValidURL(t.RegisterURL):
		bad("registerUrl", "%q is invalid: use an absolute http(s) URL", t.RegisterURL)
	case u.User != nil:
		bad("registerUrl", "%q carries credentials in the URL: they would be stored in the function's environment and logged; "+
			"remove them and give the core system's credentials as %s", u.Redacted(), Field("registerAuthSecretArn"))
	case u.Scheme == "http" && t.RegisterAuthSecretARN != "":
		bad("registerUrl", "%q is http, but %s is set: the secret goes in every request's Authorization header, "+
			"so it would cross the network in clear text; use https", t.RegisterURL, Field("registerAuthSecretArn"))
	}
}

// ValidURL reports whether s is an absolute http(s) URL.
func ValidURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

func (t Tenant) checkPrefix(bad func(path, format string, args ...any)) {
	if t.Prefix == "" && t.ID == "" {
		return // the default prefix is made from the id, whose problem is already reported
	}
	if err := CheckPrefix(t.Prefix, "inbox/"+t.ID+"/"); err != nil {
		bad("prefix", "%v", err)
		return
	}
	for _, r := range ReservedPrefixes {
		if PrefixesOverlap(t.Prefix, r) {
			bad("prefix", "%q overlaps %q, which the pipeline writes to itself; choose a prefix outside it", t.Prefix, r)
		}
	}
}

// checkSink checks registerMode, maxBatchBytes and dynamodb.
func (t Tenant) checkSink(bad func(path, format string, args ...any)) {
	switch t.RegisterMode {
	case "", RegisterModeRecord, RegisterModeBatch:
	default:
		bad("registerMode", "%q is invalid: use %q or %q", t.RegisterMode, RegisterModeRecord, RegisterModeBatch)
	}
	if t.MaxBatchBytes != 0 {
		switch {
		case t.RegisterMode != RegisterModeBatch:
			bad("maxBatchBytes", "%d is set, but only registerMode %q sends batches", t.MaxBatchBytes, RegisterModeBatch)
		case t.MaxBatchBytes < MinMaxBatchBytes || t.MaxBatchBytes > MaxMaxBatchBytes:
			bad("maxBatchBytes", "%d is out of range: use %d to %d bytes", t.MaxBatchBytes, MinMaxBatchBytes, MaxMaxBatchBytes)
		}
	}
	d := t.DynamoDB
	if d == nil {
		return
	}
	if t.RegisterURL != "" {
		bad("registerUrl", "is set with dynamodb: a tenant has one sink; remove registerUrl or dynamodb")
	}
	if t.RegisterMode != "" {
		bad("registerMode", "%q is set with dynamodb: the DynamoDB sink writes each record; remove registerMode", t.RegisterMode)
	}
	if t.RegisterAuthSecretARN != "" {
		bad("registerAuthSecretArn", "is set with dynamodb, which never sends an Authorization header; remove it")
	}
	if len(d.Key) < 1 || len(d.Key) > 2 {
		bad("dynamodb.key", "has %d fields: use 1 (partition key) or 2 (partition key, sort key), e.g. [\"id\"]", len(d.Key))
	}
	for i, k := range d.Key {
		switch {
		case k == "":
			bad("dynamodb.key", "field %d is empty: name a record field", i+1)
		case k == SeqAttribute || k == MetaAttribute:
			bad("dynamodb.key", "%q is reserved: the sink writes %q and %q itself", k, SeqAttribute, MetaAttribute)
		case len(k) > maxKeyNameBytes:
			bad("dynamodb.key", "field %d is %d bytes: a key attribute name is at most %d", i+1, len(k), maxKeyNameBytes)
		case slices.Index(d.Key, k) < i:
			bad("dynamodb.key", "%q appears twice: the partition and sort keys are two different fields", k)
		}
	}
	if d.Table != "" && !tableNamePattern.MatchString(d.Table) {
		bad("dynamodb.table", "%q is invalid: use 3-255 letters, digits, '_', '-' or '.', or leave it out to have the construct create the table", d.Table)
	}
	if d.Concurrency < 1 || d.Concurrency > MaxDynamoDBConcurrency {
		bad("dynamodb.concurrency", "%d is out of range: use 1 to %d", d.Concurrency, MaxDynamoDBConcurrency)
	}
}

// checkAdmission checks a tenant's own admission fields. A tenant's maxRecordsPerSecond above its
// core system's is accepted: the tenant then goes at most at the core system's rate, and its own
// limit takes effect if the core system's is raised (README, "Core systems and admission").
func (t Tenant) checkAdmission(bad func(path, format string, args ...any)) {
	if t.Weight != 0 && (t.Weight < MinWeight || t.Weight > MaxWeight) {
		bad("weight", "%d is out of range: use %d to %d (default %d), the tenant's share when tenants wait for admission",
			t.Weight, MinWeight, MaxWeight, DefaultWeight)
	}
	if t.MaxRecordsPerSecond < 0 {
		bad("maxRecordsPerSecond", "%v must be above 0, or left out for no limit of the tenant's own", t.MaxRecordsPerSecond)
	}
}

// checkKeyOrder checks recordOrder, keyColumns and maxRecordsInFlight. Their messages name the
// other fields they mention as Fields, which each front end names its own way.
func (t Tenant) checkKeyOrder(bad func(path, format string, args ...any)) {
	order, columns, inFlight := Field("recordOrder"), Field("keyColumns"), Field("maxRecordsInFlight")
	switch t.RecordOrder {
	case "", RecordOrderFile:
		if len(t.KeyColumns) > 0 {
			bad("keyColumns", "%q is set, but %s is %q: only %s %q reads a record's key; set %s to %q, or leave %s out",
				t.KeyColumns, order, or(t.RecordOrder, RecordOrderFile), order, RecordOrderKey, order, RecordOrderKey, columns)
		}
		if t.MaxRecordsInFlight != 0 {
			bad("maxRecordsInFlight", "%d is set, but %s is %q, which sends one record at a time; set %s to %q, or leave %s out",
				t.MaxRecordsInFlight, order, or(t.RecordOrder, RecordOrderFile), order, RecordOrderKey, inFlight)
		}
		return
	case RecordOrderKey:
	default:
		bad("recordOrder", "%q is invalid: use %q (one record at a time, in file order: the default) or %q (a key's records in file order, several keys at once, with %s)",
			t.RecordOrder, RecordOrderFile, RecordOrderKey, columns)
		return
	}
	if t.RegisterMode == RegisterModeBatch {
		bad("recordOrder", "%q is set with %s %q: batch mode sends a chunk's records in one request, in file order, so it has no key order; use %s %q, or leave %s out",
			t.RecordOrder, Field("registerMode"), t.RegisterMode, Field("registerMode"), RegisterModeRecord, order)
	}
	if t.DynamoDB != nil {
		bad("recordOrder", "%q is set with %s: the DynamoDB sink orders its writes by its own key; remove %s or %s",
			t.RecordOrder, Field("dynamodb"), order, Field("dynamodb"))
	}
	if len(t.KeyColumns) == 0 {
		bad("keyColumns", "is missing: %s %q needs the columns whose values make a record's key (CSV header names, or JSON Lines fields), e.g. [\"customerId\"]",
			order, RecordOrderKey)
	}
	for i, c := range t.KeyColumns {
		switch {
		case strings.TrimSpace(c) == "":
			bad("keyColumns", "column %d is empty: name a CSV header column or a JSON Lines field", i+1)
		case strings.ContainsRune(c, 0):
			bad("keyColumns", "column %d holds a NUL character, which no header name has", i+1)
		case slices.Index(t.KeyColumns, c) < i:
			bad("keyColumns", "%q appears twice: list each column once", c)
		}
	}
	if n := t.MaxRecordsInFlight; n < MinMaxRecordsInFlight || n > MaxMaxRecordsInFlight {
		bad("maxRecordsInFlight", "%d is out of range: use %d to %d requests in flight per file, or leave it out for %d",
			n, MinMaxRecordsInFlight, MaxMaxRecordsInFlight, DefaultMaxRecordsInFlight)
	}
}

// CheckRejectStatuses checks a tenant's rejectStatuses: each a 4xx that Register does not retry
// (408 and 429 are retried, and a 429 is waited on), no duplicates, and only with onInvalidRecord
// skipRecord. Each problem is one sentence.
func CheckRejectStatuses(statuses []int, onInvalidRecord string) []string {
	if len(statuses) == 0 {
		return nil
	}
	var bad []string
	if onInvalidRecord != OnInvalidSkipRecord {
		bad = append(bad, fmt.Sprintf("%v is set, but it only has effect with \"onInvalidRecord\": %q; set that, or leave rejectStatuses out", statuses, OnInvalidSkipRecord))
	}
	seen := map[int]bool{}
	for _, s := range statuses {
		switch {
		case s == 408 || s == 429:
			bad = append(bad, fmt.Sprintf("%d is retried by Register (a 408 is transient, a 429 asks it to wait), so it cannot reject a record; leave it out", s))
		case s < 400 || s > 499:
			bad = append(bad, fmt.Sprintf("%d is not a 4xx status: use 400-499 except 408 and 429", s))
		case seen[s]:
			bad = append(bad, fmt.Sprintf("%d is listed twice; list each status once", s))
		}
		seen[s] = true
	}
	return bad
}

// ExplicitZeros are the problems of the fields present (as a tenants file tells) but 0: chunkSize,
// weight, maxRecordsPerSecond and maxRecordsInFlight, where 0 in Go means "the default", so that
// reading alone cannot tell an explicit 0 from an absent field. A negative value is Check's.
func (t Tenant) ExplicitZeros(present func(path string) bool) []Problem {
	var ps []Problem
	for _, z := range []struct {
		path string
		zero bool
		fix  string
	}{
		{"chunkSize", t.ChunkSize == 0, fmt.Sprintf("use %d to %d records, or leave it out for %d", MinChunkSize, MaxChunkSize, DefaultChunkSize)},
		{"weight", t.Weight == 0, fmt.Sprintf("use %d to %d, or leave it out for %d", MinWeight, MaxWeight, DefaultWeight)},
		{"maxRecordsPerSecond", t.MaxRecordsPerSecond == 0, "use a rate above 0, or leave it out for no limit of the tenant's own"},
		{"maxRecordsInFlight", t.MaxRecordsInFlight == 0, fmt.Sprintf("use %d to %d requests in flight per file, or leave it out for %d",
			MinMaxRecordsInFlight, MaxMaxRecordsInFlight, DefaultMaxRecordsInFlight)},
	} {
		if z.zero && present(z.path) {
			ps = append(ps, Problemf(z.path, "0 is out of range: %s", z.fix))
		}
	}
	return ps
}
