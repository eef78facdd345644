package backlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/example/tenantpipeline/internal/backlog/backlogtest"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/schema"
)

// The tests run against dynalite (the local run's DynamoDB emulator, make setup) and gofakes3 (the
// local run's S3; backlogtest), so conditional writes, map paths, size() and S3's If-None-Match behave as the
// emulators the local run uses; the queue is a recorder of what was sent, in order.

var dynamoURL string

func TestMain(m *testing.M) {
	var err error
	dynamoURL, err = backlogtest.Dynalite("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, "backlog tests need dynalite (make setup):", err)
		os.Exit(1)
	}
	code := m.Run()
	backlogtest.Stop()
	os.Exit(code)
}

func newTable(t *testing.T) (*dynamodb.Client, string) { return backlogtest.Table(t, dynamoURL) }

func newS3(t *testing.T) *s3.Client { return backlogtest.S3(t, "ingest") }

// queue records the messages sent, in order, as the pool queue would hold them (one copy per
// deduplication id, as SQS keeps within its interval), and says which are still in it.
type queue struct {
	mu      sync.Mutex
	sent    []sqs.SendMessageInput
	inQueue map[string]bool
	fail    int // the next fail sends fail
	maxSeen map[string]int
}

func newQueue() *queue { return &queue{inQueue: map[string]bool{}, maxSeen: map[string]int{}} }

func (q *queue) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fail > 0 {
		q.fail--
		return nil, errors.New("send failed")
	}
	id := aws.ToString(in.MessageDeduplicationId)
	if slices.ContainsFunc(q.sent, func(s sqs.SendMessageInput) bool { return aws.ToString(s.MessageDeduplicationId) == id }) {
		return &sqs.SendMessageOutput{MessageId: aws.String("dup")}, nil
	}
	if aws.ToString(in.MessageAttributes[AttrMessageID].StringValue) != id {
		return nil, fmt.Errorf("message %s sent without its %s attribute", id, AttrMessageID)
	}
	q.sent = append(q.sent, *in)
	q.inQueue[id] = true
	g := aws.ToString(in.MessageGroupId)
	n := 0
	for _, s := range q.sent {
		if aws.ToString(s.MessageGroupId) == g && q.inQueue[aws.ToString(s.MessageDeduplicationId)] {
			n++
		}
	}
	q.maxSeen[g] = max(q.maxSeen[g], n)
	return &sqs.SendMessageOutput{MessageId: aws.String(id)}, nil
}

// order is the bodies sent for tenant, in order.
func (q *queue) order(tenant string) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, s := range q.sent {
		if aws.ToString(s.MessageGroupId) == tenant {
			out = append(out, aws.ToString(s.MessageBody))
		}
	}
	return out
}

// head is the oldest message of tenant still in the queue.
func (q *queue) head(tenant string) (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, s := range q.sent {
		id := aws.ToString(s.MessageDeduplicationId)
		if aws.ToString(s.MessageGroupId) == tenant && q.inQueue[id] {
			return id, true
		}
	}
	return "", false
}

func (q *queue) delete(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.inQueue, id)
}

type rig struct {
	b   *Backlog
	q   *queue
	s3  *s3.Client
	now time.Time
}

func newRig(t *testing.T, max int) *rig { return newRigOn(t, max, newS3(t)) }

// newRigOn is newRig on the S3 client s.
func newRigOn(t *testing.T, max int, s *s3.Client) *rig {
	db, table := newTable(t)
	r := &rig{q: newQueue(), s3: s, now: time.UnixMilli(1_800_000_000_000)}
	r.b = &Backlog{DB: db, Pool: "default", Table: table, S3: r.s3, Bucket: "ingest", SQS: r.q, QueueURL: "https://sqs.local/pool.fifo",
		Max: max, Retention: 14 * 24 * time.Hour, Now: func() time.Time { return r.now }}
	return r
}

func msg(tenant string, i int) Message {
	return Message{Tenant: tenant, ID: fmt.Sprintf("%s-ev-%02d", tenant, i), Body: fmt.Sprintf(`{"file":"%s/%02d"}`, tenant, i)}
}

// route routes m as the router does: admitted messages are sent by the caller.
func (r *rig) route(t *testing.T, m Message) {
	t.Helper()
	send, err := r.b.Route(context.Background(), m)
	if err != nil {
		t.Fatalf("route %s: %v", m.ID, err)
	}
	if send {
		if err := r.b.Send(context.Background(), m); err != nil {
			t.Fatalf("send %s: %v", m.ID, err)
		}
		return
	}
	if _, err := r.b.Drain(context.Background(), m.Tenant); err != nil && !errors.Is(err, ErrMissingParkedFile) {
		t.Fatalf("drain after parking %s: %v", m.ID, err)
	}
}

// release deletes the tenant's head message as the pool controller does: uncount, delete, drain.
func (r *rig) release(t *testing.T, tenant string) {
	t.Helper()
	id, ok := r.q.head(tenant)
	if !ok {
		t.Fatalf("release %s: the tenant has no message in the queue", tenant)
	}
	ctx := context.Background()
	if err := r.b.Released(ctx, tenant, id); err != nil {
		t.Fatalf("released %s: %v", id, err)
	}
	r.q.delete(id)
	if _, err := r.b.Drain(ctx, tenant); err != nil {
		t.Fatalf("drain %s: %v", tenant, err)
	}
}

func (r *rig) state(t *testing.T, tenant string) State {
	t.Helper()
	st, err := r.b.State(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func wantBodies(tenant string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, msg(tenant, i).Body)
	}
	return out
}

func TestParkingKeepsArrivalOrderUnderTheBound(t *testing.T) {
	// Steps: "a" routes the tenant's next file, "r" releases its head message, "A" routes the
	// next file twice (a retried intake delivery), "R" releases the head twice (a retried
	// release).
	for _, tc := range []struct {
		name  string
		max   int
		steps string
	}{
		{"arrivals below the bound", 3, "aarar"},
		{"a burst past the bound, then releases", 3, "aaaaaaaarrrrrrrr"},
		{"park and unpark interleaved", 2, "aaaraaararraarrrr"},
		{"a bound of one", 1, "aaaarararar"},
		{"retried arrivals count once", 2, "AaAAaArrrrr"},
		{"retried releases uncount once", 2, "aaaaaRrRr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.max)
			arrived, inQueue := 0, 0
			for _, s := range tc.steps {
				switch s {
				case 'a', 'A':
					m := msg("acme", arrived)
					r.route(t, m)
					if s == 'A' {
						r.route(t, m)
					}
					arrived++
				case 'r', 'R':
					if _, ok := r.q.head("acme"); !ok {
						continue
					}
					id, _ := r.q.head("acme")
					r.release(t, "acme")
					if s == 'R' {
						if err := r.b.Released(context.Background(), "acme", id); err != nil {
							t.Fatal(err)
						}
					}
				}
				st := r.state(t, "acme")
				inQueue = 0
				for _, ok := range r.q.inQueue {
					if ok {
						inQueue++
					}
				}
				if st.Queued != inQueue {
					t.Fatalf("after %q: got %d counted, want %d, the messages in the queue", s, st.Queued, inQueue)
				}
				if int64(arrived) != int64(len(r.q.order("acme")))+st.Parked {
					t.Fatalf("after %q: got %d sent + %d parked, want the %d arrived", s, len(r.q.order("acme")), st.Parked, arrived)
				}
			}
			for range arrived {
				if _, ok := r.q.head("acme"); ok {
					r.release(t, "acme")
				}
			}
			if got, want := r.q.order("acme"), wantBodies("acme", arrived); !slices.Equal(got, want) {
				t.Errorf("got sent order %v, want %v", got, want)
			}
			if got := r.q.maxSeen["acme"]; got > tc.max {
				t.Errorf("got %d of the tenant's messages in the queue at once, want at most %d", got, tc.max)
			}
			if st := r.state(t, "acme"); st.Queued != 0 || st.Parked != 0 {
				t.Errorf("got %d queued, %d parked at the end, want 0, 0", st.Queued, st.Parked)
			}
		})
	}
}

func TestTenantsHaveTheirOwnBound(t *testing.T) {
	r := newRig(t, 2)
	for i := range 5 {
		r.route(t, msg("acme", i))
	}
	r.route(t, msg("beta", 0))
	if got := r.q.order("beta"); len(got) != 1 {
		t.Errorf("got %d of beta's files sent while acme is full, want 1", len(got))
	}
	if st := r.state(t, "acme"); st.Queued != 2 || st.Parked != 3 {
		t.Errorf("got acme %d queued, %d parked, want 2, 3", st.Queued, st.Parked)
	}
}

// A parked file lies under its tenant's control keys, which carry the pool: the keys the pool's
// functions, and no other pool's, may write.
func TestParkedFileIsInS3UnderTheTenantsControlPrefix(t *testing.T) {
	r := newRig(t, 1)
	r.route(t, msg("acme", 0))
	r.route(t, msg("acme", 1))
	out, err := r.s3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("ingest"), Key: aws.String("control/pool.default/acme/parked/00000000000000000000.json")})
	if err != nil {
		t.Fatalf("got %v reading the parked file, want it under control/pool.default/acme/parked/", err)
	}
	var f parkedFile
	if err := json.NewDecoder(out.Body).Decode(&f); err != nil || f.ID != msg("acme", 1).ID || f.Body != msg("acme", 1).Body {
		t.Errorf("got parked %+v (%v), want %+v", f, err, msg("acme", 1))
	}
	r.release(t, "acme")
	if _, err := r.s3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("ingest"), Key: aws.String(ParkedKey(pipeline.PoolOwner("default", "acme"), 0))}); err == nil {
		t.Errorf("got the parked file still there after it was unparked, want it deleted")
	}
}

func TestParkAdoptsAnObjectAnotherWriterLeftInItsSlot(t *testing.T) {
	// A writer that crashed after writing slot 0 but before claiming it: the next Park claims the
	// slot for that file, and parks its own file behind it.
	r := newRig(t, 1)
	r.route(t, msg("acme", 0))
	left, _ := json.Marshal(parkedFile{ID: "crashed", Body: "crashed-body"})
	if _, err := r.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("ingest"), Key: aws.String(ParkedKey(pipeline.PoolOwner("default", "acme"), 0)), Body: bytes.NewReader(left)}); err != nil {
		t.Fatal(err)
	}
	slot, err := r.b.Park(context.Background(), msg("acme", 1))
	if err != nil {
		t.Fatal(err)
	}
	if slot != 1 {
		t.Errorf("got slot %d, want 1, behind the adopted file", slot)
	}
	r.release(t, "acme")
	r.release(t, "acme")
	if got, want := r.q.order("acme"), []string{msg("acme", 0).Body, "crashed-body", msg("acme", 1).Body}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// S3 may answer a conditional write with 409 ConditionalRequestConflict instead of 412 when
// another write of the key is in progress: Park looks again, a bounded number of rounds, and the
// file is parked once.
func TestParkLooksAgainAfterAWriteConflict(t *testing.T) {
	for _, tt := range []struct {
		name      string
		conflicts int
		wantErr   bool
	}{
		{name: "one 409: parked on the next round", conflicts: 1},
		{name: "409 on every round: an error after the bound, nothing claimed", conflicts: maxParkRounds, wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &backlogtest.Conflict{Part: "/parked/", N: tt.conflicts}
			r := newRigOn(t, 1, backlogtest.S3Through(t, "ingest", c.Wrap))
			r.route(t, msg("acme", 0))
			send, err := r.b.Route(context.Background(), msg("acme", 1))
			if got := c.Answered(); got != tt.conflicts {
				t.Fatalf("got %d conflicts answered, want %d: the test did not exercise them", got, tt.conflicts)
			}
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got no error after %d conflicts, want one", tt.conflicts)
				}
				if st := r.state(t, "acme"); st.Parked != 0 {
					t.Errorf("got %d parked, want 0", st.Parked)
				}
				return
			}
			if err != nil || send {
				t.Fatalf("got send %v, %v, want parked", send, err)
			}
			if st := r.state(t, "acme"); st.Parked != 1 || st.NextPark != 1 {
				t.Errorf("got %d parked, next slot %d, want 1, 1", st.Parked, st.NextPark)
			}
			r.release(t, "acme")
			if got, want := r.q.order("acme"), wantBodies("acme", 2); !slices.Equal(got, want) {
				t.Errorf("got sent %v, want %v", got, want)
			}
		})
	}
}

func TestSendFailureLeavesTheFileToTheNextDrain(t *testing.T) {
	r := newRig(t, 1)
	r.route(t, msg("acme", 0))
	r.route(t, msg("acme", 1))
	id, _ := r.q.head("acme")
	ctx := context.Background()
	if err := r.b.Released(ctx, "acme", id); err != nil {
		t.Fatal(err)
	}
	r.q.delete(id)
	r.q.fail = 1
	if _, err := r.b.Drain(ctx, "acme"); err == nil {
		t.Fatal("got no error from a drain whose send failed, want one")
	}
	if n, err := r.b.Drain(ctx, "acme"); err != nil || n != 1 {
		t.Fatalf("got %d sent, %v from the next drain, want 1, nil", n, err)
	}
	if st := r.state(t, "acme"); st.Queued != 1 || st.Parked != 0 {
		t.Errorf("got %d queued, %d parked, want 1, 0: the failed send was counted once", st.Queued, st.Parked)
	}
}

func TestEntriesOlderThanTheRetentionAreDropped(t *testing.T) {
	// A message deleted by hand leaves its entry: after the queue's retention it cannot be in
	// the queue, and the tenant's parked files flow again.
	r := newRig(t, 1)
	r.route(t, msg("acme", 0))
	r.route(t, msg("acme", 1))
	id, _ := r.q.head("acme")
	r.q.delete(id) // by hand: nobody uncounts it
	if n, _ := r.b.Drain(context.Background(), "acme"); n != 0 {
		t.Fatalf("got %d sent before the retention passed, want 0", n)
	}
	r.now = r.now.Add(14*24*time.Hour + time.Minute)
	if n, err := r.b.Drain(context.Background(), "acme"); err != nil || n != 1 {
		t.Errorf("got %d sent, %v after the retention, want 1, nil", n, err)
	}
}

func TestMissingParkedFileHoldsTheTenant(t *testing.T) {
	r := newRig(t, 1)
	r.route(t, msg("acme", 0))
	r.route(t, msg("acme", 1))
	if _, err := r.s3.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String("ingest"), Key: aws.String(ParkedKey(pipeline.PoolOwner("default", "acme"), 0))}); err != nil {
		t.Fatal(err)
	}
	id, _ := r.q.head("acme")
	if err := r.b.Released(context.Background(), "acme", id); err != nil {
		t.Fatal(err)
	}
	r.q.delete(id)
	if _, err := r.b.Drain(context.Background(), "acme"); !errors.Is(err, ErrMissingParkedFile) {
		t.Errorf("got %v, want ErrMissingParkedFile", err)
	}
	r.route(t, msg("acme", 2))
	if got := r.q.order("acme"); len(got) != 1 {
		t.Errorf("got %d sent, want 1: a newer file never overtakes a missing parked one", len(got))
	}
}

func TestIndexListsTenantsWithParkedFiles(t *testing.T) {
	r := newRig(t, 1)
	ctx := context.Background()
	for _, tn := range []string{"acme", "beta", "gamma"} {
		r.route(t, msg(tn, 0))
	}
	// Files of a tenant the router does not know yet are parked, never admitted.
	if _, err := r.b.Park(ctx, msg("newco", 0)); err != nil {
		t.Fatal(err)
	}
	r.route(t, msg("beta", 1))
	got, _, err := r.b.Indexed(ctx, Cursor{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"beta", "newco"}; !slices.Equal(got, want) {
		t.Errorf("got indexed %v, want %v", got, want)
	}
	if n, err := r.b.Drain(ctx, "newco"); err != nil || n != 1 {
		t.Fatalf("got %d, %v draining newco, want 1, nil", n, err)
	}
	if _, err := r.b.Drain(ctx, "newco"); err != nil {
		t.Fatal(err)
	}
	got, _, _ = r.b.Indexed(ctx, Cursor{}, 10)
	if want := []string{"beta"}; !slices.Equal(got, want) {
		t.Errorf("got indexed %v after newco drained, want %v", got, want)
	}
	// An entry a crashed drain left (newco's slot 0, unparked) is dropped by Forget, never while
	// files are parked (beta).
	if err := r.b.index(ctx, "newco", 0); err != nil {
		t.Fatal(err)
	}
	for _, tn := range []string{"newco", "beta"} {
		if err := r.b.Forget(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	got, _, _ = r.b.Indexed(ctx, Cursor{}, 10)
	if want := []string{"beta"}; !slices.Equal(got, want) {
		t.Errorf("got indexed %v after Forget, want %v (beta still has a parked file)", got, want)
	}
	if got := strings.Join(r.q.order("newco"), ","); got != msg("newco", 0).Body {
		t.Errorf("got newco sent %q, want its parked file", got)
	}
}

// TestIndexIsSpreadOverShards: the tenants with parked files are indexed under schema.IndexShards
// partition keys, not one, and a sweep page by page still lists each of them once.
func TestIndexIsSpreadOverShards(t *testing.T) {
	r := newRig(t, 1)
	ctx := context.Background()
	const tenants = 64
	var want []string
	for i := range tenants {
		tn := fmt.Sprintf("tenant-%02d", i)
		want = append(want, tn)
		if _, err := r.b.Park(ctx, msg(tn, 0)); err != nil {
			t.Fatal(err)
		}
	}
	out, err := r.b.DB.(*dynamodb.Client).Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(r.b.Table)})
	if err != nil {
		t.Fatal(err)
	}
	perKey := map[string]int{}
	for _, it := range out.Items {
		if sk := it["sk"].(*types.AttributeValueMemberS).Value; strings.HasPrefix(sk, "parked#") {
			perKey[it["pk"].(*types.AttributeValueMemberS).Value]++
		}
	}
	if len(perKey) != schema.IndexShards {
		t.Errorf("got the index under %d partition keys %v, want %d", len(perKey), perKey, schema.IndexShards)
	}
	for pk, n := range perKey {
		// 64 tenants over 16 shards: 4 each on average; a hash that piles them up fails here.
		if n > 3*tenants/schema.IndexShards {
			t.Errorf("got %d tenants under %s, want at most %d", n, pk, 3*tenants/schema.IndexShards)
		}
	}
	// Pages of 5, going on where the last stopped, list every tenant once before starting over
	// (the last page may go on from the start).
	var got []string
	var c Cursor
	for range 2 * tenants {
		page, next, err := r.b.Indexed(ctx, c, 5)
		if err != nil {
			t.Fatal(err)
		}
		got, c = append(got, page...), next
		if len(got) >= tenants {
			break
		}
	}
	got = got[:min(len(got), tenants)]
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("got listed %v, want each of the %d tenants once", got, tenants)
	}
}

// TestLegacyIndexIsSweptAndForgotten: an entry under the index's partition key from before it
// was sharded is still listed, and forgotten once its tenant has nothing parked.
func TestLegacyIndexIsSweptAndForgotten(t *testing.T) {
	r := newRig(t, 1)
	ctx := context.Background()
	if _, err := r.b.Park(ctx, msg("oldco", 0)); err != nil {
		t.Fatal(err)
	}
	db := r.b.DB.(*dynamodb.Client)
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.b.Table), Item: map[string]types.AttributeValue{
		"pk": str(schema.LegacyIndexKey), "sk": str("parked#oldco"), "tenant": str("oldco"), "slot": num(0),
	}}); err != nil {
		t.Fatal(err)
	}
	got, _, err := r.b.Indexed(ctx, Cursor{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"oldco", "oldco"}; !slices.Equal(got, want) {
		t.Errorf("got listed %v, want oldco from its shard and from the legacy index", got)
	}
	if n, err := r.b.Drain(ctx, "oldco"); err != nil || n != 1 {
		t.Fatalf("got %d, %v draining oldco, want 1, nil", n, err)
	}
	if err := r.b.Forget(ctx, "oldco"); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := r.b.Indexed(ctx, Cursor{}, 10); len(got) != 0 {
		t.Errorf("got listed %v after Forget, want none", got)
	}
}

// fill counts n messages of tenant with ids of MaxIDBytes each, as many admissions would.
func fill(t *testing.T, r *rig, tenant string, n int) {
	t.Helper()
	queued := map[string]types.AttributeValue{}
	for i := range n {
		id := fmt.Sprintf("%0*d", MaxIDBytes, i)
		queued[id] = num(r.now.UnixMilli())
	}
	_, err := r.b.DB.(*dynamodb.Client).PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(r.b.Table), Item: map[string]types.AttributeValue{
		"pk": str(schema.BacklogKey(tenant)), "sk": str(schema.BacklogSK), attrQueued: &types.AttributeValueMemberM{Value: queued},
		attrNextPark: num(1 << 40), attrNextUnpark: num(1 << 40), attrLastParked: str(strings.Repeat("x", MaxIDBytes)),
	}})
	if err != nil {
		t.Fatalf("write a backlog item of %d entries of %d bytes: %v", n, MaxIDBytes, err)
	}
}

// TestFullBacklogItemFitsDynamoDB: a tenant item at the map's bound, every id at its longest, is
// one DynamoDB accepts (dynalite enforces the 400 KB item size), so a full tenant can still be
// written.
func TestFullBacklogItemFitsDynamoDB(t *testing.T) {
	r := newRig(t, MaxEntries)
	fill(t, r, "acme", MaxEntries)
	if err := r.b.Released(context.Background(), "acme", fmt.Sprintf("%0*d", MaxIDBytes, 0)); err != nil {
		t.Fatalf("got %v updating the full item, want it written", err)
	}
	// The bound has room: twice as many entries would still fit, so a write at the bound never
	// fails for its size.
	fill(t, r, "beta", 2*MaxEntries)
}

// TestMapIsCappedAndNothingIsLostPastIt: a bound above MaxEntries (a Backlog built by hand or from
// an environment that says more) still counts at most MaxEntries messages; the next file is
// parked, not sent and not dropped, and goes in when one of the counted messages is released.
func TestMapIsCappedAndNothingIsLostPastIt(t *testing.T) {
	r := newRig(t, 5*MaxEntries)
	ctx := context.Background()
	fill(t, r, "acme", MaxEntries)
	m := Message{Tenant: "acme", ID: "past-the-cap", Body: "past-the-cap-body"}
	r.route(t, m)
	if got := r.q.order("acme"); len(got) != 0 {
		t.Fatalf("got %v sent with %d counted, want the file parked", got, MaxEntries)
	}
	st := r.state(t, "acme")
	if st.Queued != MaxEntries || st.Parked != 1 {
		t.Fatalf("got %d queued, %d parked, want %d, 1", st.Queued, st.Parked, MaxEntries)
	}
	if err := r.b.Released(ctx, "acme", fmt.Sprintf("%0*d", MaxIDBytes, 7)); err != nil {
		t.Fatal(err)
	}
	if n, err := r.b.Drain(ctx, "acme"); err != nil || n != 1 {
		t.Fatalf("got %d, %v draining after a release, want 1, nil", n, err)
	}
	if got := r.q.order("acme"); !slices.Equal(got, []string{m.Body}) {
		t.Errorf("got sent %v, want the parked file", got)
	}
	if st := r.state(t, "acme"); st.Queued != MaxEntries || st.Parked != 0 {
		t.Errorf("got %d queued, %d parked, want %d, 0", st.Queued, st.Parked, MaxEntries)
	}
}

// TestLongIDIsRefusedBeforeAnythingIsWritten: an id longer than MaxIDBytes is neither counted nor
// parked; the caller keeps the message.
func TestLongIDIsRefusedBeforeAnythingIsWritten(t *testing.T) {
	r := newRig(t, 2)
	m := Message{Tenant: "acme", ID: strings.Repeat("x", MaxIDBytes+1), Body: "{}"}
	if _, err := r.b.Route(context.Background(), m); !errors.Is(err, ErrIDTooLong) {
		t.Fatalf("got %v, want ErrIDTooLong", err)
	}
	if st := r.state(t, "acme"); st.Queued != 0 || st.Parked != 0 {
		t.Errorf("got %d queued, %d parked, want nothing written", st.Queued, st.Parked)
	}
}

func TestOnboardingTenant(t *testing.T) {
	for _, tc := range []struct {
		key    string
		want   string
		wantOK bool
	}{
		{"pools/default/newco/a.csv", "newco", true},
		{"pools/default/new-co-2/in/a.csv", "new-co-2", true},
		{"pools/default/a.csv", "", false},                                 // no tenant segment
		{"pools/default/newco/", "", false},                                // no file after it
		{"pools/default/NewCo/a.csv", "", false},                           // upper case: no tenant id
		{"pools/default/-newco/a.csv", "", false},                          // must start with a letter or digit
		{"pools/default/new_co/a.csv", "", false},                          // underscore
		{"pools/default/" + strings.Repeat("a", 33) + "/a.csv", "", false}, // longer than 32
		{"pools/default/" + strings.Repeat("a", 32) + "/a.csv", strings.Repeat("a", 32), true},
		{"pools/other/newco/a.csv", "", false}, // another prefix
	} {
		got, ok := OnboardingTenant("pools/default/", tc.key)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("%s: got %q, %v, want %q, %v", tc.key, got, ok, tc.want, tc.wantOK)
		}
	}
}
