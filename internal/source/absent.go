package source

import (
	"net/http"
)

// Absent reports whether a failed GetObject or HeadObject of one exact key means "no such object"
// for the pipeline's purposes: 404 (NoSuchKey, NoSuchVersion, or HeadObject's bare NotFound), or
// 403 AccessDenied (HeadObject: Forbidden).
//
// S3 answers a read of a missing key with 404 only to a caller that may s3:ListBucket the bucket;
// to any other caller it answers 403
// (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, "Permissions"). Whether a
// ListBucket grant narrowed by an s3:prefix condition, which is what the construct gives each
// function, counts for that rule is documented nowhere. So a 403 on a key the caller is granted
// s3:GetObject on is treated as a missing object. Callers use this only for reads where "absent"
// is a safe answer: the other form of an event's key (the form that does hold the object is then
// read), and the controller's own control objects (wake-up state and record, skip markers), where
// absent means "look the execution up" or "stay blocked".
//
// Every other failure (412, 5xx, throttling, a transport error) is not absence.
func Absent(err error) bool {
	if err == nil {
		return false
	}
	switch HTTPStatus(err) {
	case http.StatusNotFound, http.StatusForbidden:
		return true
	case 0:
		// An error without an HTTP response (the SDK's modelled errors built by hand, in tests
		// and fakes): judge by the code alone.
	default:
		return false
	}
	switch ErrorCode(err) {
	case "NoSuchKey", "NoSuchVersion", "NotFound", "AccessDenied", "Forbidden":
		return true
	}
	return false
}

// NotFound reports whether a failed GetObject or HeadObject of one exact key is S3's documented
// "no such key or version": 404 (NoSuchKey, NoSuchVersion, HeadObject's bare NotFound). Unlike
// Absent it never counts a 403: a control marker whose absence lets work go on (a pause) is read
// with it, so that a mis-scoped grant holds the tenant instead of turning the marker off.
func NotFound(err error) bool {
	switch HTTPStatus(err) {
	case http.StatusNotFound:
		return true
	case 0:
		// A modelled error built without a response (tests and fakes): judge by the code alone.
		switch ErrorCode(err) {
		case "NoSuchKey", "NoSuchVersion", "NotFound":
			return true
		}
	}
	return false
}
