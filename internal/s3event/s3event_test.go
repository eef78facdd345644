package s3event

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParse(t *testing.T) {
	tests := []struct {
		fixture   string
		wantKey   string
		wantVer   string
		wantETag  string
		wantSize  int64
		wantError string // substring; empty means success
	}{
		{fixture: "object-created.json", wantKey: "inbox/acme/example-key.csv", wantVer: "IYV3p45BhZA1Cg8ra5c6SvyYmrUOkrCP", wantETag: "b1946ac92492d2347c6235b4d2611184", wantSize: 5},
		// Keys are raw: a space stays a space, "+" stays "+", "%25" stays "%25".
		{fixture: "key-space.json", wantKey: "inbox/acme/red flower.csv", wantVer: "IYV3p45BhZA1Cg8ra5c6SvyYmrUOkrCP", wantETag: "b1946ac92492d2347c6235b4d2611184", wantSize: 5},
		{fixture: "key-plus.json", wantKey: "inbox/acme/a+b.csv", wantVer: "IYV3p45BhZA1Cg8ra5c6SvyYmrUOkrCP", wantETag: "b1946ac92492d2347c6235b4d2611184", wantSize: 5},
		{fixture: "key-percent.json", wantKey: "inbox/acme/100%25 done%.csv", wantVer: "IYV3p45BhZA1Cg8ra5c6SvyYmrUOkrCP", wantETag: "b1946ac92492d2347c6235b4d2611184", wantSize: 5},
		{fixture: "key-japanese.json", wantKey: "inbox/acme/請求書 ①～㎡.csv", wantVer: "IYV3p45BhZA1Cg8ra5c6SvyYmrUOkrCP", wantETag: "b1946ac92492d2347c6235b4d2611184", wantSize: 5},
		{fixture: "key-escaped-unicode.json", wantKey: "inbox/acme/日本.csv", wantVer: "IYV3p45BhZA1Cg8ra5c6SvyYmrUOkrCP", wantETag: "b1946ac92492d2347c6235b4d2611184", wantSize: 5},
		{fixture: "unversioned.json", wantKey: "inbox/acme/example-key.csv", wantETag: `"not-versioned"`, wantSize: 5},
		{fixture: "object-deleted.json", wantError: `detail-type is "Object Deleted"`},
		{fixture: "wrong-source.json", wantError: `source is "custom.app"`},
		{fixture: "empty-key.json", wantError: "detail.object.key is empty"},
		{fixture: "size-string.json", wantError: `field "detail.object.size"`},
		{fixture: "classic-notification.json", wantError: "source is"},
		{fixture: "not-json.txt", wantError: "not a JSON event"},
		{fixture: "trailing-data.json", wantError: "data after the event"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			body := readFixture(t, tt.fixture)
			ev, err := Parse(body)
			if tt.wantError != "" {
				if err == nil {
					t.Fatalf("got no error, want one containing %q", tt.wantError)
				}
				if !errors.Is(err, ErrNotObjectCreated) {
					t.Errorf("got error %v, want it to wrap ErrNotObjectCreated", err)
				}
				if !strings.Contains(err.Error(), tt.wantError) {
					t.Errorf("got error %q, want it to contain %q", err, tt.wantError)
				}
				if strings.Contains(err.Error(), "secret customer data") {
					t.Errorf("got error %q, want no body contents in it", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if got := ev.Detail.Object.Key; got != tt.wantKey {
				t.Errorf("got key %q, want %q", got, tt.wantKey)
			}
			if got := ev.Detail.Object.VersionID; got != tt.wantVer {
				t.Errorf("got version id %q, want %q", got, tt.wantVer)
			}
			if got := ev.Detail.Object.ETag; got != tt.wantETag {
				t.Errorf("got etag %q, want %q", got, tt.wantETag)
			}
			if got := ev.Detail.Object.Size; got != tt.wantSize {
				t.Errorf("got size %d, want %d", got, tt.wantSize)
			}
			if got, want := ev.ID, "17793124-05d4-b198-2fde-7ededc63b103"; got != want {
				t.Errorf("got id %q, want %q", got, want)
			}
			if got, want := ev.Detail.Bucket.Name, "example-bucket"; got != want {
				t.Errorf("got bucket %q, want %q", got, want)
			}
			if got, want := ev.Time, time.Date(2021, 11, 12, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
				t.Errorf("got time %v, want %v", got, want)
			}
		})
	}
}

func TestParseFullDetail(t *testing.T) {
	ev, err := Parse(readFixture(t, "object-created.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := Object{Key: "inbox/acme/example-key.csv", Size: 5, ETag: "b1946ac92492d2347c6235b4d2611184", VersionID: "IYV3p45BhZA1Cg8ra5c6SvyYmrUOkrCP", Sequencer: "00617F08299329D189"}
	if ev.Detail.Object != want {
		t.Errorf("got object %+v, want %+v", ev.Detail.Object, want)
	}
	if got, want := ev.Source+"|"+ev.DetailType, "aws.s3|Object Created"; got != want {
		t.Errorf("got source|detail-type %q, want %q", got, want)
	}
}

// The harness builds events with ObjectCreated; what it marshals must parse back unchanged.
func TestObjectCreatedRoundTrip(t *testing.T) {
	keys := []string{"inbox/t/red flower.csv", "inbox/t/a+b.csv", "inbox/t/100%25.csv", "inbox/t/請求書.csv"}
	for _, key := range keys {
		t.Run(key, func(t *testing.T) {
			at := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
			obj := Object{Key: key, Size: 42, ETag: "abc", Sequencer: "0055"}
			b, err := json.Marshal(ObjectCreated("id-1", at, "bkt", obj))
			if err != nil {
				t.Fatal(err)
			}
			ev, err := Parse(b)
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if ev.Detail.Object != obj {
				t.Errorf("got object %+v, want %+v", ev.Detail.Object, obj)
			}
			if !ev.Time.Equal(at) || ev.ID != "id-1" || ev.Detail.Bucket.Name != "bkt" {
				t.Errorf("got id %q time %v bucket %q, want id-1 %v bkt", ev.ID, ev.Time, ev.Detail.Bucket.Name, at)
			}
		})
	}
}
