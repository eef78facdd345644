package controller

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"testing/quick"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/s3event"
)

func ev(id, bucket, key, version, etag, sequencer string) s3event.Event {
	return s3event.ObjectCreated(id, time.Unix(0, 0), bucket, s3event.Object{Key: key, VersionID: version, ETag: etag, Sequencer: sequencer})
}

func TestExecutionName(t *testing.T) {
	long := strings.Repeat("a", 81)
	tests := []struct {
		name       string
		key        string
		ev         s3event.Event
		want       string // exact, or empty to check only the prefix
		wantPrefix string
	}{
		{"event id that is a UUID is used as is", pipeline.IdempotencyEventID, ev(evID1, "b", "k", "", "", ""), evID1, ""},
		{"event id of 80 characters is used as is", pipeline.IdempotencyEventID, ev(strings.Repeat("x", 80), "b", "k", "", "", ""), strings.Repeat("x", 80), ""},
		{"event id of 81 characters is hashed", pipeline.IdempotencyEventID, ev(long, "b", "k", "", "", ""), "", hashedEventIDPrefix},
		{"event id with a colon is hashed", pipeline.IdempotencyEventID, ev("a:b", "b", "k", "", "", ""), "", hashedEventIDPrefix},
		{"event id in Japanese is hashed", pipeline.IdempotencyEventID, ev("請求書", "b", "k", "", "", ""), "", hashedEventIDPrefix},
		{"object version is hashed", pipeline.IdempotencyObjectVersion, ev(evID1, "b", "inbox/t/請求書 a+b%.csv", "v1", "e", "s"), "", objectVersionNamePrefix},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := executionName(tt.key, tt.ev)
			if tt.want != "" && got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if tt.wantPrefix != "" && (!strings.HasPrefix(got, tt.wantPrefix) || len(got) != len(tt.wantPrefix)+64) {
				t.Errorf("got %q, want %q followed by 64 hex digits", got, tt.wantPrefix)
			}
			if !validExecutionName(got) {
				t.Errorf("got invalid name %q", got)
			}
		})
	}
}

// Under the object-version key, a duplicate S3 event (another event id) maps to the same name, and
// any change of bucket, key, version, ETag (unversioned) or sequencer maps to another one.
func TestObjectVersionName(t *testing.T) {
	base := ev(evID1, "b", "inbox/t/a.csv", "v1", "e1", "s1")
	name := func(e s3event.Event) string { return executionName(pipeline.IdempotencyObjectVersion, e) }
	if got, want := name(ev(evID2, "b", "inbox/t/a.csv", "v1", "e1", "s1")), name(base); got != want {
		t.Errorf("duplicate event: got %q, want %q", got, want)
	}
	if got, want := name(ev(evID1, "b", "inbox/t/a.csv", "v1", "other-etag", "s1")), name(base); got != want {
		t.Errorf("versioned: ETag must not matter when a version id is set: got %q, want %q", got, want)
	}
	changed := map[string]s3event.Event{
		"bucket":             ev(evID1, "c", "inbox/t/a.csv", "v1", "e1", "s1"),
		"key":                ev(evID1, "b", "inbox/t/a+.csv", "v1", "e1", "s1"),
		"version":            ev(evID1, "b", "inbox/t/a.csv", "v2", "e1", "s1"),
		"sequencer":          ev(evID1, "b", "inbox/t/a.csv", "v1", "e1", "s2"),
		"unversioned":        ev(evID1, "b", "inbox/t/a.csv", "", "e1", "s1"),
		"etag as version id": ev(evID1, "b", "inbox/t/a.csv", "", "v1", "s1"),
		"fields shifted":     ev(evID1, "b", "inbox/t/a.cs", "vv1", "e1", "s1"),
	}
	for what, e := range changed {
		if name(e) == name(base) {
			t.Errorf("changed %s: got the same name %q, want another", what, name(e))
		}
	}
	unversioned := ev(evID1, "b", "inbox/t/a.csv", "", "e1", "s1")
	if name(unversioned) == name(ev(evID1, "b", "inbox/t/a.csv", "", "e2", "s1")) {
		t.Errorf("unversioned: got the same name for two ETags, want different")
	}
}

// fields is a random event, biased towards hostile characters.
type fields struct{ ID, Bucket, Key, Version, ETag, Sequencer string }

func (fields) Generate(r *rand.Rand, size int) reflect.Value {
	alphabet := []rune("aZ09-_:/ +%*?\"#\\^|~`$&,;<>{}[]\t\n\x00\x7f\u0085請求書①～㎡🙂")
	s := func() string {
		n := r.Intn(3 * size)
		b := make([]rune, n)
		for i := range b {
			b[i] = alphabet[r.Intn(len(alphabet))]
		}
		return string(b)
	}
	return reflect.ValueOf(fields{s(), s(), s(), s(), s(), s()})
}

// Property: every event gives a valid, deterministic name under both keys.
func TestExecutionNameProperty(t *testing.T) {
	prop := func(f fields) bool {
		e := ev(f.ID, f.Bucket, f.Key, f.Version, f.ETag, f.Sequencer)
		for _, key := range []string{pipeline.IdempotencyEventID, pipeline.IdempotencyObjectVersion} {
			n := executionName(key, e)
			if !validExecutionName(n) || n != executionName(key, e) {
				t.Logf("key %s, event %+v: got name %q", key, f, n)
				return false
			}
		}
		return true
	}
	if err := quick.Check(prop, &quick.Config{MaxCount: 5000}); err != nil {
		t.Errorf("got an invalid or unstable name: %v", err)
	}
}

func TestValidExecutionName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{evID1, true},
		{strings.Repeat("a", 80), true},
		{strings.Repeat("a", 81), false},
		{"", false},
		{"a b", false},
		{"a:b", false},
		{"請求書", false},
		{"a/b", false},
	}
	for _, tt := range tests {
		if got := validExecutionName(tt.name); got != tt.want {
			t.Errorf("validExecutionName(%q): got %v, want %v", tt.name, got, tt.want)
		}
	}
}
