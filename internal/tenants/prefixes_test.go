package tenants

import (
	"github.com/example/tenantpipeline/spec"

	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// A prefix keeps to S3's safe characters and "/": every other character is told, named, once per
// prefix, in tenants.json's tenants and pools alike.
func TestPrefixSafeSet(t *testing.T) {
	const tail = `which is not in the safe set (letters, digits, ! - _ . * ' ( ) /): S3 event keys are URL-encoded, so such a prefix could match another tenant's files`
	for _, tc := range []struct {
		name, json string
		want       string // "": accepted
	}{
		{"space", `{"tenants": [{"id": "spacey", "prefix": "inbox/a b/"}]}`, `prefix (tenant "spacey"): "inbox/a b/" contains " ", ` + tail},
		{"plus", `{"tenants": [{"id": "plus", "prefix": "inbox/a+b/"}]}`, `prefix (tenant "plus"): "inbox/a+b/" contains "+", ` + tail},
		{"percent", `{"tenants": [{"id": "pct", "prefix": "inbox/a%20b/"}]}`, `prefix (tenant "pct"): "inbox/a%20b/" contains "%", ` + tail},
		{"non-ASCII", `{"tenants": [{"id": "jp", "prefix": "受信/jp/"}]}`, `prefix (tenant "jp"): "受信/jp/" contains "受", "信", which are not in the safe set`},
		{"accented", `{"tenants": [{"id": "e", "prefix": "inbox/café/"}]}`, `prefix (tenant "e"): "inbox/café/" contains "é", which is not`},
		{"one message for a character used twice", `{"tenants": [{"id": "sp", "prefix": "in/a b c/"}]}`, `prefix (tenant "sp"): "in/a b c/" contains " ", which is not`},
		{"tab", `{"tenants": [{"id": "tab", "prefix": "in/a\tb/"}]}`, `prefix (tenant "tab"): "in/a\tb/" contains "\t", which is not`},
		{"replacement character", "{\"tenants\": [{\"id\": \"bad\", \"prefix\": \"in/\xff/\"}]}", "contains \"\uFFFD\""}, // encoding/json's, for the byte
		{"ampersand", `{"tenants": [{"id": "amp", "prefix": "in/a&b/"}]}`, `contains "&"`},
		{"backslash", `{"tenants": [{"id": "bs", "prefix": "in\\a/"}]}`, `contains "\\"`},
		{"empty segment", `{"tenants": [{"id": "x", "prefix": "inbox//x/"}]}`, `prefix (tenant "x"): "inbox//x/" has an empty segment ("//")`},
		{"dot segment", `{"tenants": [{"id": "x", "prefix": "inbox/./x/"}]}`, `prefix (tenant "x"): "inbox/./x/" has a "." segment`},
		{"dot-dot segment", `{"tenants": [{"id": "x", "prefix": "../x/"}]}`, `prefix (tenant "x"): "../x/" has a ".." segment`},
		{"leading slash", `{"tenants": [{"id": "x", "prefix": "/x/"}]}`, `prefix (tenant "x"): "/x/" is invalid: a prefix is a non-empty key prefix ending in "/"`},
		{"every safe character", `{"tenants": [{"id": "ok", "prefix": "In/Az09!-_.*'()/ok/"}]}`, ""},
		{"dots inside a segment", `{"tenants": [{"id": "ok", "prefix": "in/.ok../...x/"}]}`, ""},
		{"pool prefix with a space", `{"pools": {"p": {"prefix": "pools/a b/"}}, "tenants": [{"id": "a", "tier": "pool", "pool": "p"}]}`,
			`pools.p: prefix "pools/a b/" contains " ", ` + tail},
		{"pool prefix with an empty segment", `{"pools": {"p": {"prefix": "pools//p/"}}, "tenants": [{"id": "a", "tier": "pool", "pool": "p"}]}`,
			`pools.p: prefix "pools//p/" has an empty segment`},
		{"pooled tenant prefix with a plus", `{"tenants": [{"id": "a", "tier": "pool", "prefix": "pools/default/a+/"}]}`,
			`prefix (tenant "a"): "pools/default/a+/" contains "+", ` + tail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.json), Options{RegisterURL: "https://core.example.com/records"})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if n := len(messagesOf(err)); n != 1 {
				t.Errorf("got %d messages, want 1: %v", n, err)
			}
		})
	}
}

// A pool prefix with a bad character is told once, for the pool, not again for every tenant whose
// prefix is made from it.
func TestBadPoolPrefixToldOnce(t *testing.T) {
	var ts []string
	for i := range 50 {
		ts = append(ts, fmt.Sprintf(`{"id": "t%d", "tier": "pool"}`, i))
	}
	_, err := Parse([]byte(`{"pools": {"default": {"prefix": "pools/a b/"}}, "tenants": [`+strings.Join(ts, ",")+`]}`), Options{RegisterURL: "https://core.example.com/records"})
	if got := messagesOf(err); len(got) != 1 || !strings.HasPrefix(got[0], `pools.default: prefix "pools/a b/" contains " "`) {
		t.Errorf("got %q, want one message, for pools.default", got)
	}
}

// A construct user's prefix may hold bytes that are not UTF-8: each is named as a byte.
func TestCheckPrefixInvalidUTF8(t *testing.T) {
	ps := spec.Tenant{ID: "bad", Prefix: "in/\xff\xfe/"}.WithDefaults().Check()
	if want := `prefix: "in/\xff\xfe/" contains "\xff", "\xfe", which are not in the safe set`; len(ps) != 1 || !strings.Contains(ps[0].Error(), want) {
		t.Errorf("got %v, want %q", ps, want)
	}
}

func messagesOf(err error) []string {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, messagesOf(e)...)
		}
		return out
	}
	return []string{err.Error()}
}

// overlaps finds exactly the pairs that comparing every two prefixes finds, in that order.
func TestOverlaps(t *testing.T) {
	for _, tc := range []struct {
		name     string
		prefixes []string
		want     []overlapPair
	}{
		{"none", []string{"a/", "b/", "ab/"}, nil},
		{"nested, later one inside", []string{"in/", "in/x/"}, []overlapPair{{0, 1}}},
		{"nested, earlier one inside", []string{"in/x/", "in/"}, []overlapPair{{0, 1}}},
		{"same", []string{"a/", "b/", "a/"}, []overlapPair{{0, 2}}},
		{"chain", []string{"a/b/c/", "a/", "a/b/"}, []overlapPair{{0, 1}, {0, 2}, {1, 2}}},
		{"siblings under one", []string{"in/y/", "in/", "in/x/", "in/x/z/"}, []overlapPair{{0, 1}, {1, 2}, {1, 3}, {2, 3}}},
		{"a sibling sorted between", []string{"a/", "a/b/", "a/a/", "a/b/c/"}, []overlapPair{{0, 1}, {0, 2}, {0, 3}, {1, 3}}},
		{"not on a segment boundary", []string{"in/a", "in/ab/"}, []overlapPair{{0, 1}}},
		{"empty never compared", []string{"", "a/", ""}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := overlaps(tc.prefixes); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	// Against the definition, on prefixes drawn from a small alphabet so that many overlap.
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		ps := make([]string, r.IntN(30))
		for i := range ps {
			var b strings.Builder
			for range r.IntN(4) {
				b.WriteByte("ab/"[r.IntN(3)])
			}
			ps[i] = b.String()
		}
		var want []overlapPair
		for i := range ps {
			for j := i + 1; j < len(ps); j++ {
				if ps[i] != "" && ps[j] != "" && PrefixesOverlap(ps[i], ps[j]) {
					want = append(want, overlapPair{i, j})
				}
			}
		}
		if got := overlaps(ps); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d, %q: got %v, want %v", round, ps, got, want)
		}
	}
}

// 100,000 tenants are checked in one sweep; comparing every two would take about 80 s of CPU.
// The check is bounded by counting, not timing: no pair is reported where none overlaps, and the
// one overlap added is found.
func TestOverlapsAtScale(t *testing.T) {
	ts := make([]spec.Tenant, 100000)
	for i := range ts {
		ts[i] = spec.Tenant{ID: fmt.Sprintf("t%06d", i), Prefix: fmt.Sprintf("pools/default/t%06d/", i)}
	}
	overlapping := func(ts []spec.Tenant) []string {
		var msgs []string
		(&File{Tenants: ts}).overlappingPrefixes(func(i int, p spec.Problem) { msgs = append(msgs, p.Render(FileNaming.Tenant(i), ts[i].ID)) })
		return msgs
	}
	if msgs := overlapping(ts); len(msgs) != 0 {
		t.Fatalf("got %d overlaps, want none: %v", len(msgs), msgs[0])
	}
	ts = append(ts, spec.Tenant{ID: "wide", Prefix: "pools/default/t00004"})
	msgs := overlapping(ts)
	if len(msgs) != 10 { // t000040 … t000049
		t.Fatalf("got %d overlaps, want 10", len(msgs))
	}
	if want := `tenants[100000].prefix (tenant "wide"): "pools/default/t00004" overlaps tenant "t000040"'s prefix "pools/default/t000040/"`; !strings.HasPrefix(msgs[0], want) {
		t.Errorf("got %q, want it to start with %q", msgs[0], want)
	}
}
