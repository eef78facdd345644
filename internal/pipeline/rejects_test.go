package pipeline

import (
	"github.com/example/tenantpipeline/spec"
	"testing"
)

func TestRejectsStatus(t *testing.T) {
	set := []int{422}
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
		if got := (Tenant{Tenant: spec.Tenant{OnInvalidRecord: tc.policy, RejectStatuses: set}}).RejectsStatus(tc.status); got != tc.want {
			t.Errorf("%q %d: got %v, want %v", tc.policy, tc.status, got, tc.want)
		}
	}
}

func TestCanReject(t *testing.T) {
	set := []int{422}
	for _, tc := range []struct {
		name string
		t    Tenant
		want bool
	}{
		{"rejectStatuses under skipRecord", Tenant{Tenant: spec.Tenant{OnInvalidRecord: OnInvalidSkipRecord, RejectStatuses: set}}, true},
		{"DynamoDB under skipRecord", Tenant{Tenant: spec.Tenant{OnInvalidRecord: OnInvalidSkipRecord, DynamoDB: &DynamoDBSink{}}}, true},
		{"skipRecord alone", Tenant{Tenant: spec.Tenant{OnInvalidRecord: OnInvalidSkipRecord}}, false},
		{"rejectStatuses under failFile", Tenant{Tenant: spec.Tenant{OnInvalidRecord: OnInvalidFailFile, RejectStatuses: set}}, false},
		{"DynamoDB under failFile", Tenant{Tenant: spec.Tenant{DynamoDB: &DynamoDBSink{}}}, false},
	} {
		if got := tc.t.CanReject(); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
