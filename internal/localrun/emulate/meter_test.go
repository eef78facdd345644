package emulate

import "testing"

// TestBilledRequestClasses checks the classes and counts against the pricing pages: S3 PUT, COPY,
// POST and LIST are one class, GET and the rest another, DELETE is free
// (https://aws.amazon.com/s3/pricing/); SQS bills each 64 KB chunk of a payload as one request
// (https://aws.amazon.com/sqs/pricing/: a 256 KB payload is billed as four requests).
func TestBilledRequestClasses(t *testing.T) {
	for op, want := range map[string]string{
		"PutObject": ClassS3Tier1, "CopyObject": ClassS3Tier1, "ListObjects": ClassS3Tier1, "MultipartPOST": ClassS3Tier1,
		"GetObject": ClassS3Tier2, "HeadObject": ClassS3Tier2,
		"DeleteObject": "",
	} {
		if got := s3Class(op); got != want {
			t.Errorf("s3Class(%s): got %q, want %q", op, got, want)
		}
	}
	for _, tc := range []struct {
		req, resp, want int64
	}{
		{0, 0, 1},
		{200, 40, 1},
		{64 * 1024, 0, 1},
		{64*1024 + 1, 0, 2},
		{100, 256 * 1024, 4},
	} {
		if got := sqsBilledRequests(tc.req, tc.resp); got != tc.want {
			t.Errorf("sqsBilledRequests(%d, %d): got %d, want %d", tc.req, tc.resp, got, tc.want)
		}
	}
	var m RequestMeter
	m.Add(ClassSQS, "q1", 2)
	m.Add(ClassSQS, "q2", 3)
	m.Add(ClassSQS, "q1", 0)
	if got := m.Sum(ClassSQS, func(s string) bool { return s == "q1" }); got != 2 {
		t.Errorf("q1: got %d, want 2", got)
	}
}
