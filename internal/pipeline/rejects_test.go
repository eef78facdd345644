package pipeline

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestStatusSetJSON(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{in: `[422,400,409]`, want: `[400,409,422]`},
		{in: `[499]`, want: `[499]`},
		{in: `[]`, want: `[]`},
		{in: `[500]`, err: true},
		{in: `[399]`, err: true},
	} {
		var s StatusSet
		err := json.Unmarshal([]byte(tc.in), &s)
		if tc.err {
			if err == nil {
				t.Errorf("%s: got no error, want one", tc.in)
			}
			continue
		}
		b, _ := json.Marshal(s)
		if err != nil || string(b) != tc.want {
			t.Errorf("%s: got %s (%v), want %s", tc.in, b, err, tc.want)
		}
	}
	// A tenant without statuses carries none, and stays comparable.
	b, _ := json.Marshal(Tenant{ID: "a"})
	var back Tenant
	if err := json.Unmarshal(b, &back); err != nil || back != (Tenant{ID: "a"}) {
		t.Errorf("got %+v (%v), want the tenant back", back, err)
	}
	if strings.Contains(string(b), "rejectStatuses") {
		t.Errorf("got %s, want no rejectStatuses", b)
	}
}

func TestRejectsStatus(t *testing.T) {
	set, _ := NewStatusSet(422)
	for _, tc := range []struct {
		policy string
		status int
		want   bool
	}{
		{OnInvalidSkipRecord, 422, true},
		{OnInvalidSkipRecord, 400, false},
		{OnInvalidSkipRecord, 0, false},
		{OnInvalidFailFile, 422, false},
		{"", 422, false},
	} {
		if got := (Tenant{OnInvalidRecord: tc.policy, RejectStatuses: set}).RejectsStatus(tc.status); got != tc.want {
			t.Errorf("%q %d: got %v, want %v", tc.policy, tc.status, got, tc.want)
		}
	}
}

func TestCanReject(t *testing.T) {
	set, _ := NewStatusSet(422)
	for _, tc := range []struct {
		name string
		t    Tenant
		want bool
	}{
		{"rejectStatuses under skipRecord", Tenant{OnInvalidRecord: OnInvalidSkipRecord, RejectStatuses: set}, true},
		{"DynamoDB under skipRecord", Tenant{OnInvalidRecord: OnInvalidSkipRecord, DynamoDB: &DynamoDBSink{}}, true},
		{"skipRecord alone", Tenant{OnInvalidRecord: OnInvalidSkipRecord}, false},
		{"rejectStatuses under failFile", Tenant{OnInvalidRecord: OnInvalidFailFile, RejectStatuses: set}, false},
		{"DynamoDB under failFile", Tenant{DynamoDB: &DynamoDBSink{}}, false},
	} {
		if got := tc.t.CanReject(); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
