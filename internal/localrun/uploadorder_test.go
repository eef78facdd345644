package localrun

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// inbox is a tenant-major, lexically sorted list of "<tenant>/<name>", as cmd/local lists an inbox.
func inbox(tenants map[string]int) []string {
	var out []string
	for _, t := range []string{"acme", "globex", "hooli"} {
		for i := 1; i <= tenants[t]; i++ {
			out = append(out, fmt.Sprintf("%s/orders-%02d.csv", t, i))
		}
	}
	return out
}

func tenantOfPath(p string) string { t, _, _ := strings.Cut(p, "/"); return t }

func ordered(t *testing.T, files []string, order string, seed uint64) []string {
	t.Helper()
	out := slices.Clone(files)
	if err := OrderUploads(out, tenantOfPath, order, seed); err != nil {
		t.Fatalf("OrderUploads(%s): %v", order, err)
	}
	return out
}

func TestOrderUploads(t *testing.T) {
	files := inbox(map[string]int{"acme": 12, "globex": 1, "hooli": 9})
	for _, tc := range []struct {
		name  string
		order string
		seed  uint64
		check func(t *testing.T, got []string)
	}{
		{"lexical keeps the listing", UploadLexical, 0, func(t *testing.T, got []string) {
			if !slices.Equal(got, files) {
				t.Errorf("got %v, want %v", got, files)
			}
		}},
		{"reverse reverses each tenant", UploadReverse, 0, func(t *testing.T, got []string) {
			want := []string{}
			for _, tenant := range []string{"acme", "globex", "hooli"} {
				var own []string
				for _, f := range files {
					if tenantOfPath(f) == tenant {
						own = append(own, f)
					}
				}
				slices.Reverse(own)
				want = append(want, own...)
			}
			if !slices.Equal(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		}},
		{"shuffle scrambles each tenant's files", UploadShuffle, 42, func(t *testing.T, got []string) {
			for _, tenant := range []string{"acme", "hooli"} {
				var own []string
				for _, f := range got {
					if tenantOfPath(f) == tenant {
						own = append(own, f)
					}
				}
				if slices.IsSorted(own) {
					t.Errorf("%s: got %v, want an order other than the names'", tenant, own)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ordered(t, files, tc.order, tc.seed)
			tc.check(t, got)
			// Every order is a permutation inside each tenant, and the tenants keep their order.
			if s := slices.Sorted(slices.Values(got)); !slices.Equal(s, files) {
				t.Errorf("got the files %v, want a permutation of %v", s, files)
			}
			var tenants []string
			for _, f := range got {
				if len(tenants) == 0 || tenants[len(tenants)-1] != tenantOfPath(f) {
					tenants = append(tenants, tenantOfPath(f))
				}
			}
			if want := []string{"acme", "globex", "hooli"}; !slices.Equal(tenants, want) {
				t.Errorf("got tenants in the order %v, want %v, each tenant's files together", tenants, want)
			}
		})
	}
}

func TestOrderUploadsShuffleSeed(t *testing.T) {
	files := inbox(map[string]int{"acme": 20, "hooli": 20})
	a, b := ordered(t, files, UploadShuffle, 7), ordered(t, files, UploadShuffle, 7)
	if !slices.Equal(a, b) {
		t.Errorf("seed 7 twice: got %v then %v, want the same order", a, b)
	}
	if c := ordered(t, files, UploadShuffle, 8); slices.Equal(a, c) {
		t.Errorf("seeds 7 and 8: got the same order %v, want another", a)
	}
	// A tenant's order depends on the seed and its own files, not on the other tenants.
	alone := ordered(t, inbox(map[string]int{"hooli": 20}), UploadShuffle, 7)
	if got := slices.DeleteFunc(slices.Clone(a), func(f string) bool { return tenantOfPath(f) != "hooli" }); !slices.Equal(got, alone) {
		t.Errorf("hooli beside acme: got %v, alone %v; want the same order", got, alone)
	}
}

func TestOrderUploadsRejectsUnknownOrder(t *testing.T) {
	err := OrderUploads([]string{"acme/a.csv"}, tenantOfPath, "random", 1)
	if err == nil || !strings.Contains(err.Error(), `"random"`) || !strings.Contains(err.Error(), "lexical, shuffle or reverse") {
		t.Errorf("got %v, want an error naming the order and the known ones", err)
	}
}
