package register

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// keyStore is a core system that keeps the Idempotency-Keys it registered and answers lookups of
// them: POST /records registers a key (counting each registration), GET /lookup/<key> answers
// 200 when it holds the key, 404 when not, or the next of its scripted answers.
type keyStore struct {
	mu         sync.Mutex
	registered map[string]int // key → times registered
	posts      []string       // keys POSTed, in order
	lookups    []string       // keys looked up, in order
	script     []int          // the first lookups' answers, before the store's own
	fail       map[string]int // key → status of every POST of it
	onFirst    func()         // called before the first POST is answered
}

func (k *keyStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	k.mu.Lock()
	defer k.mu.Unlock()
	if r.Method == http.MethodGet {
		key := strings.TrimPrefix(r.URL.Path, "/lookup/")
		k.lookups = append(k.lookups, key)
		if len(k.script) > 0 {
			st := k.script[0]
			k.script = k.script[1:]
			w.WriteHeader(st)
			return
		}
		if k.registered[key] > 0 {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if len(k.posts) == 0 && k.onFirst != nil {
		k.onFirst()
	}
	k.posts = append(k.posts, key)
	if st, ok := k.fail[key]; ok {
		w.WriteHeader(st)
		return
	}
	// A core system past its retention has forgotten the key: it registers the record again.
	k.registered[key]++
	w.WriteHeader(http.StatusOK)
}

// TestRegisterRunIdempotencyHorizon pins the horizon: with an idempotencyRetention, the segment's
// progress records when the records from the cursor were first sent, before they are; a Retry or
// redrive whose records were first sent longer ago than the retention looks each up and sends
// only those the core system does not have, or, without a lookupUrl, is refused unless the
// operator accepted duplicates. The file has 30 records in chunks of 3; the segment is chunks 2..9
// (records 7..30). An earlier invocation sent records 14..18 before it failed.
func TestRegisterRunIdempotencyHorizon(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	stamp := func(d time.Duration) string { return now.Add(-d).Format(time.RFC3339Nano) }
	seg := &pipeline.Segment{Index: 1, FirstChunk: 2, LastChunk: 9}
	key := pipeline.ProgressKey(pipeline.SiloOwner("t1"), execName, 1)
	keys := func(from, to int64) []string {
		var ks []string
		for n := from; n <= to; n++ {
			ks = append(ks, IdempotencyKey(execName, n))
		}
		return ks
	}
	tests := []struct {
		name      string
		retention string
		noLookup  bool   // the core system has no lookupUrl
		stored    string // the progress object's body; "" for none
		accepted  bool   // the accept-duplicates marker exists
		first     int
		script    []int         // the first lookups' answers
		fail      map[int64]int // record → status of its POSTs
		putErr    error         // every PutObject fails with it
		wantErr   string        // error type; "" for success
		wantMsg   []string      // in the error's message
		wantPosts []string      // keys POSTed
		wantLook  []string      // keys looked up
		wantDup   int           // records registered twice
		wantFirst string        // the progress the first POST found written; "" for not checked
		wantPut   string        // the last progress written
		wantCount int64         // records counted registered
	}{
		{name: "without a retention nothing is recorded before sending", first: 2,
			stored:    `{"version":1,"next":4,"record":14,"sentAt":"` + stamp(48*time.Hour) + `"}`,
			wantPosts: keys(14, 30), wantDup: 5, wantPut: `{"version":1,"next":10}`, wantCount: 17},
		{name: "with a retention the first send is recorded before it", retention: "1h", first: 2,
			wantPosts: keys(7, 30), wantDup: 5, wantFirst: `{"version":1,"next":2,"sentAt":"` + stamp(0) + `"}`,
			wantPut: `{"version":1,"next":10}`, wantCount: 24},
		{name: "first sent within the retention: re-sent without lookups", retention: "1h", first: 2,
			stored:    `{"version":1,"next":4,"record":14,"sentAt":"` + stamp(30*time.Minute) + `"}`,
			wantPosts: keys(14, 30), wantDup: 5, wantPut: `{"version":1,"next":10}`, wantCount: 17},
		{name: "past the retention: registered ones skipped, the missing sent", retention: "1h", first: 2,
			stored:   `{"version":1,"next":4,"record":14,"sentAt":"` + stamp(2*time.Hour) + `"}`,
			wantLook: keys(14, 19), wantPosts: keys(19, 30), wantPut: `{"version":1,"next":10}`, wantCount: 17},
		{name: "a lookup answered otherwise holds like a 503, then goes on", retention: "1h", first: 2,
			stored: `{"version":1,"next":4,"record":14,"sentAt":"` + stamp(2*time.Hour) + `"}`, script: []int{500, 503},
			wantLook:  append(keys(14, 14), append(keys(14, 14), keys(14, 19)...)...),
			wantPosts: keys(19, 30), wantPut: `{"version":1,"next":10}`, wantCount: 17},
		{name: "past the retention, a failure after the lookups keeps this invocation's send time", retention: "1h", first: 2,
			stored:   `{"version":1,"next":4,"record":14,"sentAt":"` + stamp(2*time.Hour) + `"}`,
			fail:     map[int64]int{22: 400},
			wantLook: keys(14, 19), wantPosts: keys(19, 22), wantErr: pipeline.ErrPermanent,
			wantPut: `{"version":1,"next":7,"sentAt":"` + stamp(0) + `"}`},
		{name: "past the retention without a lookupUrl: refused, nothing sent", retention: "1h", noLookup: true, first: 2,
			stored:  `{"version":1,"next":4,"record":14,"sentAt":"` + stamp(2*time.Hour) + `"}`,
			wantErr: pipeline.ErrPermanent, wantMsg: []string{"record 14", "idempotencyRetention 1h0m0s", "lookupUrl", "pipectl redrive --accept-duplicates"}},
		{name: "past the retention without a lookupUrl, duplicates accepted: re-sent", retention: "1h", noLookup: true, accepted: true, first: 2,
			stored:    `{"version":1,"next":4,"record":14,"sentAt":"` + stamp(2*time.Hour) + `"}`,
			wantPosts: keys(14, 30), wantDup: 5, wantPut: `{"version":1,"next":10}`, wantCount: 17},
		{name: "a first send recorded for another cursor: this invocation records its own", retention: "1h", first: 5,
			stored:    `{"version":1,"next":4,"record":14,"sentAt":"` + stamp(2*time.Hour) + `"}`,
			wantPosts: keys(16, 30), wantDup: 3, wantFirst: `{"version":1,"next":5,"sentAt":"` + stamp(0) + `"}`,
			wantPut: `{"version":1,"next":10}`, wantCount: 15},
		{name: "the first send cannot be recorded: nothing is sent", retention: "1h", first: 2,
			putErr: sourcetest.APIError("PutObject", 500, "InternalError"), wantErr: pipeline.ErrRetryable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := sourcetest.NewFakeS3()
			ks := &keyStore{registered: map[string]int{}, script: tt.script, fail: map[string]int{}}
			for n, st := range tt.fail {
				ks.fail[IdempotencyKey(execName, n)] = st
			}
			for _, k := range keys(14, 18) { // the earlier invocation's
				ks.registered[k] = 1
			}
			var firstSeen string
			ks.onFirst = func() {
				out, err := fake.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(work), Key: aws.String(key)})
				if err == nil {
					b, _ := io.ReadAll(out.Body)
					firstSeen = string(b)
				}
			}
			srv := httptest.NewServer(ks)
			defer srv.Close()
			tenant := csvTenant(srv.URL + "/records")
			tenant.CoreSystem = &pipeline.CoreSystem{Name: "erp", MaxRunningFiles: 1, IdempotencyRetention: tt.retention, LookupURL: srv.URL + "/lookup/{key}"}
			if tt.noLookup {
				tenant.CoreSystem.LookupURL = ""
			}
			reqs := fixture(t, fake, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, rows(30))
			if tt.stored != "" {
				fake.Put(work, key, &sourcetest.Object{Data: []byte(tt.stored)})
			}
			if tt.accepted {
				fake.Put(work, pipeline.AcceptDuplicatesKey(pipeline.SiloOwner("t1"), execName), &sourcetest.Object{Data: []byte("accepted\n")})
			}
			fake.PutErr = tt.putErr
			h := newHandler(fake, &fakeSecrets{})
			h.Log = slog.New(slog.NewJSONHandler(io.Discard, nil))
			h.now = func() time.Time { return now }
			h.sleep = func(context.Context, time.Duration) error { return nil }
			req := run(reqs, tt.first, 9)
			req.Segment = seg

			res, err := h.Handle(context.Background(), req)
			if got := source.ErrorType(err); err != nil && got != tt.wantErr || err == nil && tt.wantErr != "" {
				t.Fatalf("got error %v (%s), want %q", err, got, tt.wantErr)
			}
			for _, m := range tt.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("got message %q, want it to contain %q", err.Error(), m)
				}
			}
			if !reflect.DeepEqual(ks.posts, tt.wantPosts) {
				t.Errorf("got POSTs %v, want %v", ks.posts, tt.wantPosts)
			}
			if !reflect.DeepEqual(ks.lookups, tt.wantLook) {
				t.Errorf("got lookups %v, want %v", ks.lookups, tt.wantLook)
			}
			dup := 0
			for _, n := range ks.registered {
				dup += n - 1
			}
			if dup != tt.wantDup {
				t.Errorf("got %d records registered twice, want %d", dup, tt.wantDup)
			}
			if tt.wantFirst != "" && firstSeen != tt.wantFirst {
				t.Errorf("got progress %q at the first POST, want %q", firstSeen, tt.wantFirst)
			}
			if put := string(fake.Puts[work+"/"+key]); tt.wantPut != "" && put != tt.wantPut {
				t.Errorf("got progress written %q, want %q", put, tt.wantPut)
			}
			if err == nil && res.Registered != tt.wantCount {
				t.Errorf("got %d registered, want %d", res.Registered, tt.wantCount)
			}
		})
	}
}

// TestHorizonCarry pins the first-send time the progress keeps for the cursor an invocation
// hands on.
func TestHorizonCarry(t *testing.T) {
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := old.Add(time.Hour)
	tests := []struct {
		name    string
		z       *horizon
		stopped bool
		want    string
	}{
		{name: "no horizon", z: nil, stopped: true, want: ""},
		{name: "between chunks, no lookups: the next invocation records its own", z: &horizon{sentAt: now, now: now}, want: ""},
		{name: "stopped inside a chunk: this invocation's send", z: &horizon{sentAt: now, now: now}, stopped: true, want: fmt.Sprint(now.Format(time.RFC3339Nano))},
		{name: "lookups not done: the earlier first send", z: &horizon{sentAt: old, now: now, lookup: true}, want: old.Format(time.RFC3339Nano)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.z.carry(tt.stopped); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
