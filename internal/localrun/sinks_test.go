//go:build e2e || figures

package localrun

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dyntypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// The sink scenarios: the DynamoDB sink (dynalite, tables from the synthesized
// templates) and batch mode, end to end. The DynamoDB tenants are checked by reading the table back
// with the SDK against the rule the sink must keep: every key holds the value of its last
// occurrence in file order, whatever was retried, redriven or replayed.

// sinkTenants: "dyn" and "dynh" (halt) write to DynamoDB, 10 records per chunk so a file has many
// chunks; dyn's table is the one the construct creates (AWS::DynamoDB::Table in the template), dynh
// names a table ("existing" on AWS, created by the local run). "bat" posts one batch per chunk of
// 1,000.
const sinkTenants = `{"tenants": [
  {"id": "dyn", "chunkSize": 10, "dynamodb": {"key": ["id"]}},
  {"id": "dynh", "onFailure": "halt", "chunkSize": 10, "dynamodb": {"key": ["id"], "table": "dynh-items"}},
  {"id": "bat", "registerMode": "batch", "chunkSize": 1000, "registerUrl": "https://core.example.com/records"}
]}`

// keyedFile is a CSV file "id,name" whose record n has the key keys(n) and the value
// "<tag> r<n>".
type keyedFile struct {
	rel     string
	records int
	keys    func(n int) string
}

func (f keyedFile) body() []byte {
	var b strings.Builder
	b.WriteString("id,name\n")
	for n := 1; n <= f.records; n++ {
		fmt.Fprintf(&b, "%s,%s r%d\n", f.keys(n), f.rel, n)
	}
	return []byte(b.String())
}

// lastOccurrence is the known answer: for each key, the value and record number of its last
// occurrence, going through the files in upload order and each file in record order.
func lastOccurrence(files ...keyedFile) map[string]stored {
	want := map[string]stored{}
	for _, f := range files {
		for n := 1; n <= f.records; n++ {
			want[f.keys(n)] = stored{name: fmt.Sprintf("%s r%d", f.rel, n), record: n}
		}
	}
	return want
}

// stored is what the table holds for one key.
type stored struct {
	name      string
	record    int
	execution string
	seq       string
}

// tableOf is the table a tenant's DynamoDB sink writes to, as synthesized.
func tableOf(t *testing.T, r *Run, tenant string) string {
	t.Helper()
	name := r.Tenant(tenant).DynamoDBTable()
	if name == "" {
		t.Fatalf("tenant %s: no dynamodb.table in its TENANT variable", tenant)
	}
	return name
}

// readTable scans a table with the SDK.
func readTable(t *testing.T, ctx context.Context, r *Run, table string) map[string]stored {
	t.Helper()
	got := map[string]stored{}
	p := dynamodb.NewScanPaginator(r.DynamoDB(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		for _, it := range page.Items {
			s := func(v dyntypes.AttributeValue) string {
				if sv, ok := v.(*dyntypes.AttributeValueMemberS); ok {
					return sv.Value
				}
				return fmt.Sprintf("<%T>", v)
			}
			var st stored
			st.name, st.seq = s(it["name"]), s(it[pipeline.SeqAttribute])
			if m, ok := it[pipeline.MetaAttribute].(*dyntypes.AttributeValueMemberM); ok {
				st.execution = s(m.Value["executionName"])
				if n, ok := m.Value["recordNumber"].(*dyntypes.AttributeValueMemberN); ok {
					st.record, _ = strconv.Atoi(n.Value)
				}
			}
			got[s(it["id"])] = st
		}
	}
	return got
}

// assertTable checks every key against the known answer (value and record number) and that the
// table holds no other key.
func assertTable(t *testing.T, got, want map[string]stored) {
	t.Helper()
	for _, k := range sortedKeys(want) {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("key %s: not in the table, want %q", k, want[k].name)
		case g.name != want[k].name || g.record != want[k].record:
			t.Errorf("key %s: got %q (record %d), want %q (record %d), its last occurrence in file order", k, g.name, g.record, want[k].name, want[k].record)
		case len(g.seq) != pipeline.SeqLen:
			t.Errorf("key %s: _seq %q has %d characters, want %d", k, g.seq, len(g.seq), pipeline.SeqLen)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("key %s: in the table, but in no file", k)
		}
	}
}

func keyMod(prefix string, m int) func(int) string {
	return func(n int) string { return fmt.Sprintf("%s%02d", prefix, n%m) }
}

// DynamoDB (a): files that repeat keys within and across files, uploaded at once. After
// the run every key holds the value of its last occurrence in file order (the queue's order),
// although the records of one chunk are written 16 at a time.
func TestScenarioDynamoDBLastWins(t *testing.T) {
	t.Parallel()
	r := startScenario(t, sinkTenants, Config{Core: CoreOptions{Latency: 5 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	files := []keyedFile{
		{"a.csv", 45, keyMod("k", 15)},                                               // k00..k14, three times each
		{"b.csv", 25, func(n int) string { return fmt.Sprintf("k%02d", (n*7)%20) }},  // k00..k19, new keys k15..k19
		{"c.csv", 12, keyMod("k", 4)},                                                // k00..k03, three times each
		{"d.csv", 30, func(n int) string { return fmt.Sprintf("k%02d", 19-(n%10)) }}, // k10..k19
	}
	for _, f := range files {
		uploadAll(t, ctx, r, []upload{{"dyn", f.rel, f.body()}})
	}
	rep := drain(t, ctx, r)
	assertInvariants(t, r, rep, nil, false)
	wantStatuses(t, rep, "dyn", "SUCCEEDED", "SUCCEEDED", "SUCCEEDED", "SUCCEEDED")
	assertTable(t, readTable(t, ctx, r, tableOf(t, r, "dyn")), lastOccurrence(files...))
	for _, f := range files {
		if got := fileOf(t, rep, "dyn", f.rel).Records; got != int64(f.records) {
			t.Errorf("%s: got %d records written, want %d", f.rel, got, f.records)
		}
	}
	if got, want := rep.APICalls["dynamodb"]["PutItem"], int64(45+25+12+30); got != want {
		t.Errorf("PutItem calls: got %d, want %d (one per record, nothing retried)", got, want)
	}
}

// DynamoDB, pooled: two tenants of a pool, each naming its table under the pool's tablePrefix
// (which exists in AWS before the deploy; the local run creates it, as for a silo tenant). Each
// file lands in its own tenant's table, every key with its last occurrence, written through the
// pool's tenant-scoped sessions with nothing refused.
func TestScenarioDynamoDBPooled(t *testing.T) {
	t.Parallel()
	r := startScenario(t, `{"pools": {"default": {"tablePrefix": "ord-"}}, "tenants": [
  {"id": "pa", "tier": "pool", "chunkSize": 10, "dynamodb": {"key": ["id"], "table": "ord-pa"}},
  {"id": "pb", "tier": "pool", "chunkSize": 10, "dynamodb": {"key": ["id"], "table": "ord-pb"}}]}`, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	refused := r.auth.Refused()
	a := keyedFile{"a.csv", 25, keyMod("k", 7)}
	b := keyedFile{"b.csv", 12, keyMod("j", 5)}
	uploadAll(t, ctx, r, []upload{{"pa", a.rel, a.body()}, {"pb", b.rel, b.body()}})
	rep := drain(t, ctx, r)
	wantStatuses(t, rep, "pa", "SUCCEEDED")
	wantStatuses(t, rep, "pb", "SUCCEEDED")
	assertTable(t, readTable(t, ctx, r, tableOf(t, r, "pa")), lastOccurrence(a))
	assertTable(t, readTable(t, ctx, r, tableOf(t, r, "pb")), lastOccurrence(b))
	if n := r.auth.Refused() - refused; n != 0 {
		t.Errorf("got %d requests refused, want none", n)
	}
}

// DynamoDB (b): the Register invocation of a.csv is killed mid-chunk (the DynamoDB
// endpoint holds records 29 and 30 and the process dies) on every attempt
// until its retries are spent, so a.csv fails and halts the tenant with some of the chunk written;
// it is redriven, b.csv (newer, some of a.csv's keys) follows, and then a.csv is replayed with a
// control message naming a.csv's execution as the original, as pipectl sends it: the replay takes
// a.csv's order. No key regresses: every key keeps the value of its last occurrence in file order.
func TestScenarioDynamoDBCrashRedriveReplay(t *testing.T) {
	t.Parallel()
	r := startScenario(t, sinkTenants, Config{
		EnvFor: map[string][]string{controllerPkg: {"HALT_WAIT_SECONDS=1"}},
		Core: CoreOptions{
			Latency: 20 * time.Millisecond,
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a := keyedFile{"a.csv", 60, keyMod("k", 8)} // k00..k07; chunk 3 (records 21-30) writes k05 (21, 29) and k06 (22, 30) twice
	b := keyedFile{"b.csv", 20, keyMod("k", 4)} // k00..k03, newer
	table := tableOf(t, r, "dynh")
	var crash atomic.Bool
	crash.Store(true)
	var kills atomic.Int64
	var mu sync.Mutex
	puts := map[string]int{} // execution name -> PutItem calls
	r.OnPutItem(func(c PutItemCall) bool {
		mu.Lock()
		puts[c.ExecutionName]++
		mu.Unlock()
		// Records 29 and 30 are the second writes of k05 and k06 in chunk 3 (records 21-30): each
		// is held and the process killed, so records 21-28 are written and 29-30 are not.
		if c.Table != table || (c.RecordNumber != 29 && c.RecordNumber != 30) || !crash.Load() || strings.HasPrefix(c.ExecutionName, pipeline.ReplayExecutionPrefix) {
			return false
		}
		// Records 23-28 (other keys) are written concurrently with 29 and 30: wait until 21-28 are
		// all written, so that the kill falls after them whatever the machine's load.
		waitWritten(t, r, c.ExecutionName, 21, 28)
		for _, f := range functionsOf(r, registerPkg) { // only dynh's is busy
			kills.Add(int64(f.KillRunning()))
		}
		return true
	})
	ua, err := r.Upload(ctx, "dynh", a.rel, a.body())
	if err != nil {
		t.Fatal(err)
	}
	uploadAll(t, ctx, r, []upload{{"dynh", b.rel, b.body()}})

	rep := waitFor(t, ctx, r, "a.csv failed", func(rep *report.Report) bool { return fileOf(t, rep, "dynh", "a.csv").Status == "FAILED" })
	fa := fileOf(t, rep, "dynh", "a.csv")
	if got, want := strings.Join(taskErrors(t, ctx, r, "dynh", fa), " "), "Lambda.Unknown Lambda.Unknown Lambda.Unknown Lambda.Unknown"; got != want {
		t.Errorf("a.csv: Register task failures: got %q, want %q (killed on every attempt)", got, want)
	}
	if got := fileOf(t, rep, "dynh", "b.csv").Status; got != "WAITING" {
		t.Errorf("b.csv while a.csv is failed: got %s, want WAITING (halt)", got)
	}
	if fa.Records != 28 {
		t.Errorf("a.csv after the crashes: got %d records written, want 28 (chunks 1-2, and records 21-28 of chunk 3 once)", fa.Records)
	}
	mid := readTable(t, ctx, r, tableOf(t, r, "dynh"))
	if a, b := mid["k05"].record, mid["k06"].record; a != 21 || b != 22 {
		t.Errorf("k05 and k06 after the crashes: got records %d and %d, want 21 and 22 (written before the kill; 29 and 30 not)", a, b)
	}

	crash.Store(false)
	if _, err := r.StepFunctions().RedriveExecution(ctx, &sfn.RedriveExecutionInput{ExecutionArn: aws.String(executionARN(t, r, "dynh", fa.ExecutionName))}); err != nil {
		t.Fatalf("redrive a.csv: %v", err)
	}
	rep = drain(t, ctx, r)
	assertInvariants(t, r, rep, nil, false)
	wantStatuses(t, rep, "dynh", "SUCCEEDED", "SUCCEEDED")
	if fr := fileOf(t, rep, "dynh", "a.csv"); fr.RedriveCount != 1 || fr.Records != 60 {
		t.Errorf("a.csv: got redriveCount %d, %d records written; want 1, 60", fr.RedriveCount, fr.Records)
	}
	want := lastOccurrence(a, b)
	assertTable(t, readTable(t, ctx, r, tableOf(t, r, "dynh")), want)

	// The replay of a.csv: k07 (only in a.csv) is deleted first, so the replay has one key to write.
	if _, err := r.DynamoDB().DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: map[string]dyntypes.AttributeValue{"id": &dyntypes.AttributeValueMemberS{Value: "k07"}}}); err != nil {
		t.Fatal(err)
	}
	head, err := r.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(ua.Key), VersionId: aws.String(ua.VersionID)})
	if err != nil {
		t.Fatal(err)
	}
	const requestID = "replay-a-1"
	msg, err := pipeline.EncodeControl(pipeline.ControlMessage{
		Type: pipeline.ControlType, Version: pipeline.ControlVersion, Action: pipeline.ControlReplay, Tenant: "dynh",
		Source: &pipeline.ControlSource{Bucket: r.Bucket, Key: ua.Key, VersionID: ua.VersionID, ETag: ua.ETag,
			Size: aws.ToInt64(head.ContentLength), LastModified: aws.ToTime(head.LastModified).UTC().Format(time.RFC3339),
			OriginalExecution: fa.ExecutionName},
		RequestedBy: "arn:aws:iam::000000000000:user/operator", Reason: "scenario: replay an older file",
		RequestedAt: time.Now().UTC(), RequestID: requestID,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The operator's control record, as pipectl writes it before the message.
	if _, err := r.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(pipeline.ControlRequestKey(r.Tenant("dynh").Owner(), requestID)),
		Body: strings.NewReader(string(msg)), IfNoneMatch: aws.String("*")}); err != nil {
		t.Fatal(err)
	}
	q := r.Tenant("dynh").Queue
	if _, err := r.sqsAdmin.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(string(msg)),
		MessageGroupId: aws.String("dynh"), MessageDeduplicationId: aws.String(requestID)}); err != nil {
		t.Fatal(err)
	}
	replay := pipeline.ReplayExecutionPrefix + requestID
	for {
		st, err := r.sfnStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		status := ""
		for _, e := range st.Executions {
			if e.Name == replay && e.ParentArn == "" {
				status = e.Status
			}
		}
		if status != "" && status != "RUNNING" {
			if status != "SUCCEEDED" {
				t.Fatalf("replay %s: got %s, want SUCCEEDED", replay, status)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("replay %s: not finished (%q): %v", replay, status, ctx.Err())
		case <-time.After(300 * time.Millisecond):
		}
	}
	order := func(name string) int64 {
		out, err := r.StepFunctions().DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(executionARN(t, r, "dynh", name))})
		if err != nil {
			t.Fatal(err)
		}
		var in pipeline.WorkflowInput
		if err := json.Unmarshal([]byte(aws.ToString(out.Input)), &in); err != nil {
			t.Fatal(err)
		}
		return in.Source.Order
	}
	if ra, rb, rr := order(fa.ExecutionName), order(fileOf(t, rep, "dynh", "b.csv").ExecutionName), order(replay); rr != ra || !(ra < rb) {
		t.Errorf("orders: got a.csv %d, b.csv %d, the replay %d; want the replay's a.csv's, below b.csv's", ra, rb, rr)
	}
	got := readTable(t, ctx, r, tableOf(t, r, "dynh"))
	assertTable(t, got, want)
	if got["k07"].execution != replay {
		t.Errorf("k07 after the replay: written by %q, want the replay %q", got["k07"].execution, replay)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := puts[replay]; got != a.records {
		t.Errorf("PutItem calls of the replay: got %d, want %d (every record tried, the newer ones kept by the condition)", got, a.records)
	}
	if kills.Load() < 4 {
		t.Errorf("Register processes killed: got %d, want at least 4 (one per attempt; records 29 and 30 may both find it)", kills.Load())
	}
}

// TestScenarioDynamoDBSameSecondKeys: ten pairs of files under different keys, each pair written
// within one second (EventBridge's "time" has whole seconds) and sharing item keys. Every item must
// end with the value of the file the queue ran later. S3's sequencers are per key, in no order
// across keys (the local default, as AWS documents them), so ranking by event time and then
// sequencer gets about half of the pairs backwards; ranking by the queue gets every one right.
func TestScenarioDynamoDBSameSecondKeys(t *testing.T) {
	t.Parallel()
	// A fixed seed, so that the same pairs disagree with the queue on every run.
	r := startScenario(t, sinkTenants, Config{S3: S3Options{Sequencers: emulate.SequencersPerKey, SequencerSeed: 7}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	type pair struct{ first, second keyedFile }
	var pairs []pair
	var files []keyedFile
	for i := range 10 {
		if ns := time.Now().Nanosecond(); ns > 700_000_000 {
			time.Sleep(time.Duration(1_000_000_000-ns) * time.Nanosecond) // both files in one second
		}
		keys := keyMod(fmt.Sprintf("p%d-", i), 3) // p<i>-00..02, twice in each file
		p := pair{keyedFile{fmt.Sprintf("p%d-first.csv", i), 6, keys}, keyedFile{fmt.Sprintf("p%d-second.csv", i), 6, keys}}
		uploadAll(t, ctx, r, []upload{{"dyn", p.first.rel, p.first.body()}, {"dyn", p.second.rel, p.second.body()}})
		pairs = append(pairs, p)
		files = append(files, p.first, p.second)
	}
	rep := drain(t, ctx, r)
	assertInvariants(t, r, rep, nil, false)
	want := make([]string, len(files))
	for i := range want {
		want[i] = "SUCCEEDED"
	}
	wantStatuses(t, rep, "dyn", want...)
	assertTable(t, readTable(t, ctx, r, tableOf(t, r, "dyn")), lastOccurrence(files...))

	// The scenario tests the order only if S3's sequencers disagree with the queue for some pair
	// written in one second; and the orders must grow in queue order.
	source := func(f keyedFile) pipeline.Source {
		out, err := r.StepFunctions().DescribeExecution(ctx, &sfn.DescribeExecutionInput{
			ExecutionArn: aws.String(executionARN(t, r, "dyn", fileOf(t, rep, "dyn", f.rel).ExecutionName))})
		if err != nil {
			t.Fatal(err)
		}
		var in pipeline.WorkflowInput
		if err := json.Unmarshal([]byte(aws.ToString(out.Input)), &in); err != nil {
			t.Fatal(err)
		}
		return in.Source
	}
	backwards := 0
	var last int64
	for _, p := range pairs {
		a, b := source(p.first), source(p.second)
		if a.EventTime == b.EventTime && fmt.Sprintf("%040s", b.Sequencer) < fmt.Sprintf("%040s", a.Sequencer) {
			backwards++
		}
		if !(last < a.Order && a.Order < b.Order) {
			t.Errorf("%s, %s: got orders %d, %d after %d, want them growing in queue order", p.first.rel, p.second.rel, a.Order, b.Order, last)
		}
		last = b.Order
	}
	t.Logf("pairs in one second whose S3 sequencers rank the later file first: %d of %d", backwards, len(pairs))
	if backwards == 0 {
		t.Errorf("got no pair whose sequencers disagree with the queue, want some: the scenario would prove nothing")
	}
}

// Batch mode end to end: one POST per chunk of 1,000 with Idempotency-Key
// <execution name>-c<chunk index>; the first attempt of the second chunk is answered 503 and
// retried under the same key. Every record is registered once, in order.
func TestScenarioBatchMode(t *testing.T) {
	t.Parallel()
	r := startScenario(t, sinkTenants, Config{})
	r.Sink.SetFault(func(tenant, source string, first int64, attempt int) int {
		if tenant == "bat" && strings.HasSuffix(source, "/big.csv") && first == 1001 && attempt == 1 {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	uploadAll(t, ctx, r, []upload{{"bat", "big.csv", csvOf(2500)}, {"bat", "small.csv", csvOf(300)}})
	rep := drain(t, ctx, r)
	assertInvariants(t, r, rep, nil, false)
	wantStatuses(t, rep, "bat", "SUCCEEDED", "SUCCEEDED")
	for _, f := range []struct {
		rel     string
		records int64
		posts   []int64 // first record of each POST, in arrival order
	}{
		{"big.csv", 2500, []int64{1, 1001, 1001, 2001}},
		{"small.csv", 300, []int64{1}},
	} {
		fr := fileOf(t, rep, "bat", f.rel)
		if fr.Records != f.records {
			t.Errorf("%s: got %d records registered, want %d", f.rel, fr.Records, f.records)
		}
		var posts []int64
		for _, q := range r.Sink.Requests("bat") {
			if strings.HasSuffix(q.Source, "/"+f.rel) {
				posts = append(posts, q.RecordNumber)
			}
		}
		if fmt.Sprint(posts) != fmt.Sprint(f.posts) {
			t.Errorf("%s: POSTs by first record: got %v, want %v (one per chunk of 1,000, the 503 retried)", f.rel, posts, f.posts)
		}
		for _, rec := range r.Sink.Registered("bat") {
			if !strings.HasSuffix(rec.Source, "/"+f.rel) {
				continue
			}
			if want := fmt.Sprintf("%s-c%d", fr.ExecutionName, (rec.RecordNumber-1)/1000); rec.Key != want {
				t.Errorf("%s record %d: Idempotency-Key %q, want %q", f.rel, rec.RecordNumber, rec.Key, want)
				break
			}
		}
	}
	if _, dup, _, _ := r.Sink.Stats(); dup != 0 {
		t.Errorf("duplicate batch POSTs: got %d, want 0", dup)
	}
}

// waitWritten waits, up to 30 s, until records from..to of the execution have been written to
// DynamoDB (answered by the table).
func waitWritten(t *testing.T, r *Run, execution string, from, to int64) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r.dynamo.mu.Lock()
		done := true
		for n := from; n <= to; n++ {
			done = done && r.dynamo.written[execution][n]
		}
		r.dynamo.mu.Unlock()
		if done {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("records %d-%d of %s were not all written within 30 s", from, to, execution)
}
