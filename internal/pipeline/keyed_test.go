package pipeline

import (
	"github.com/example/tenantpipeline/spec"
	"slices"
	"testing"
)

func TestRecordsInFlight(t *testing.T) {
	core := func(files, requests int) *CoreSystem {
		return &CoreSystem{Name: "erp", MaxRunningFiles: files, MaxRequestsInFlight: requests}
	}
	for _, c := range []struct {
		name string
		t    Tenant
		want int
	}{
		{"file order", Tenant{Tenant: spec.Tenant{MaxRecordsInFlight: 16}}, 1},
		{"key order, default", Tenant{Tenant: spec.Tenant{RecordOrder: RecordOrderKey}}, DefaultMaxRecordsInFlight},
		{"key order, set", Tenant{Tenant: spec.Tenant{RecordOrder: RecordOrderKey, MaxRecordsInFlight: 32}}, 32},
		{"batch mode is never keyed", Tenant{Tenant: spec.Tenant{RecordOrder: RecordOrderKey, RegisterMode: RegisterModeBatch}}, 1},
		{"the DynamoDB sink is never keyed", Tenant{Tenant: spec.Tenant{RecordOrder: RecordOrderKey, DynamoDB: &DynamoDBSink{}}}, 1},
		// A core system's share bounds what a file keeps in flight at a time, not what it can use.
		{"core system of one request per running file: not capped", Tenant{Tenant: spec.Tenant{RecordOrder: RecordOrderKey}, CoreSystem: core(10, 0)}, DefaultMaxRecordsInFlight},
		{"core system: not capped at the static share", Tenant{Tenant: spec.Tenant{RecordOrder: RecordOrderKey, MaxRecordsInFlight: 32}, CoreSystem: core(10, 40)}, 32},
	} {
		if got := c.t.RecordsInFlight(); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}
}

func TestFileShare(t *testing.T) {
	for _, c := range []struct {
		name string
		c    CoreSystem
		want int
	}{
		{"one request per running file", CoreSystem{MaxRunningFiles: 10}, 1},
		{"even split", CoreSystem{MaxRunningFiles: 10, MaxRequestsInFlight: 40}, 4},
		{"rounds down", CoreSystem{MaxRunningFiles: 3, MaxRequestsInFlight: 10}, 3},
		{"no running-file bound: the whole", CoreSystem{MaxRequestsInFlight: 7}, 7},
	} {
		if got := c.c.FileShare(); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}
}

func TestKeyedProgress(t *testing.T) {
	rs := RangesOf([]int64{12, 10, 11, 15, 20, 21, 15})
	want := []RecordRange{{10, 12}, {15, 15}, {20, 21}}
	if !slices.Equal(rs, want) {
		t.Fatalf("RangesOf: got %v, want %v", rs, want)
	}
	for n, in := range map[int64]bool{9: false, 10: true, 12: true, 13: false, 15: true, 16: false, 21: true, 22: false} {
		if Contains(rs, n) != in {
			t.Errorf("Contains(%d): got %v", n, !in)
		}
	}
	p, err := DecodeProgress(EncodeKeyedProgress(3, 7, rs))
	if err != nil || p.Next != 3 || p.Record != 7 || !slices.Equal(p.Registered, rs) {
		t.Fatalf("round trip: got %+v, %v", p, err)
	}
	for name, body := range map[string]string{
		"a range at the mark":      `{"version":1,"next":1,"record":10,"registered":[{"first":10,"last":11}]}`,
		"ranges touching":          `{"version":1,"next":1,"record":5,"registered":[{"first":10,"last":11},{"first":12,"last":13}]}`,
		"ranges out of order":      `{"version":1,"next":1,"record":5,"registered":[{"first":20,"last":21},{"first":10,"last":11}]}`,
		"a range ending before it": `{"version":1,"next":1,"record":5,"registered":[{"first":10,"last":9}]}`,
	} {
		if _, err := DecodeProgress([]byte(body)); err == nil {
			t.Errorf("%s: got no error", name)
		}
	}
	many := make([]int64, 0, 2*MaxKeyedLead)
	for i := range int64(MaxKeyedLead) {
		many = append(many, 1e14+2*i) // the longest numbers a file has, none touching
	}
	if b := EncodeKeyedProgress(1<<20, 1e14-1, RangesOf(many)); len(b) > MaxProgressBytes {
		t.Errorf("the largest keyed progress is %d bytes, over MaxProgressBytes %d", len(b), MaxProgressBytes)
	}
}
