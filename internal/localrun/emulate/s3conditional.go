package emulate

import (
	"encoding/xml"
	"net/http"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// serveConditionalWrite answers a write's If-None-Match as S3 does where gofakes3 does not.
// S3 takes If-None-Match on PutObject and CompleteMultipartUpload with the value * only: the write
// happens only if no object has the key, else 412 PreconditionFailed ("At least one of the
// pre-conditions you specified did not hold").
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-requests.html
// https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html ("Expects the '*' (asterisk)
// character"). Another value is a conditional write S3 does not implement: 501 NotImplemented, its
// answer to "a header you provided implies functionality that is not implemented".
// https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html#ErrorCodeList
// gofakes3 checks * on PutObject itself, atomically, with a message of its own, ignores
// If-None-Match on CompleteMultipartUpload, and ignores any other value. This check runs first:
// a PutObject that passes it still meets gofakes3's atomic one (two PUTs racing for a key), and a
// CompleteMultipartUpload is checked here only, which is enough for one local run's uploads.
// It reports false, having written nothing, for a request it leaves to gofakes3.
func serveConditionalWrite(b *s3mem.Backend, w http.ResponseWriter, r *http.Request, op string) bool {
	complete := op == "MultipartPOST" && r.URL.Query().Has("uploadId")
	v, ok := r.Header["If-None-Match"]
	if !ok || op != "PutObject" && !complete {
		return false
	}
	if len(v) != 1 || v[0] != "*" {
		writeS3Error(w, http.StatusNotImplemented, &gofakes3.ErrorResponse{Code: gofakes3.ErrNotImplemented,
			Message: "A header you provided implies functionality that is not implemented"})
		return true
	}
	bucket, key := SplitPath(r.URL.Path)
	if _, err := b.HeadObject(bucket, key); err != nil {
		return false // no such key (or bucket): gofakes3 writes, or answers NoSuchBucket
	}
	writeS3Error(w, http.StatusPreconditionFailed, &gofakes3.ErrorResponse{Code: gofakes3.ErrPreconditionFailed,
		Message: "At least one of the pre-conditions you specified did not hold"})
	return true
}

// writeS3Error writes an S3 error response.
func writeS3Error(w http.ResponseWriter, status int, e *gofakes3.ErrorResponse) {
	e.RequestID, e.HostID = "LOCAL", "LOCAL"
	b, _ := xml.Marshal(e)
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	w.Write(append([]byte(xml.Header), b...))
}

// serveBucketEncryption answers GetBucketEncryption, which gofakes3 would answer as a listing:
// SSE-S3, the default encryption S3 applies to every bucket, since the local run encrypts nothing
// (a tenants file's "encryption" is accepted but not emulated).
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/default-encryption-faq.html
// https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetBucketEncryption.html
func serveBucketEncryption(b *s3mem.Backend, w http.ResponseWriter, r *http.Request, op string) bool {
	if op != "ListObjects" || !r.URL.Query().Has("encryption") { // S3Operation names every GET of a bucket so
		return false
	}
	bucket, _ := SplitPath(r.URL.Path)
	if ok, err := b.BucketExists(bucket); err != nil || !ok {
		writeS3Error(w, http.StatusNotFound, &gofakes3.ErrorResponse{Code: gofakes3.ErrNoSuchBucket, Message: "The specified bucket does not exist"})
		return true
	}
	w.Header().Set("Content-Type", "application/xml")
	w.Write([]byte(xml.Header + `<ServerSideEncryptionConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">` +
		`<Rule><ApplyServerSideEncryptionByDefault><SSEAlgorithm>AES256</SSEAlgorithm></ApplyServerSideEncryptionByDefault>` +
		`<BucketKeyEnabled>false</BucketKeyEnabled></Rule></ServerSideEncryptionConfiguration>`))
	return true
}
