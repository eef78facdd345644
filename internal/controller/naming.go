package controller

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"regexp"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/s3event"
)

// Execution names are 1–80 characters. AWS forbids whitespace, brackets, wildcards, most
// punctuation and control characters, and CloudWatch logging wants only A–Z, a–z, 0–9, '-' and
// '_', so the controller only ever produces names from that last set.
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html#StepFunctions-StartExecution-request-name
const maxExecutionName = 80

var plainName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

// Prefixes of hashed names: "ev-" for an event id that is not itself a usable name, "ov-" for
// the object-version key. Both are followed by 64 hex digits, 67 characters in all.
const (
	hashedEventIDPrefix     = "ev-"
	objectVersionNamePrefix = "ov-"
)

// executionName derives the file's execution name from the tenant's idempotency key. The same
// event always gives the same name, so a redelivered or duplicated message finds its execution.
func executionName(idempotencyKey string, ev s3event.Event) string {
	if idempotencyKey == pipeline.IdempotencyObjectVersion {
		o := ev.Detail.Object
		// The version id pins the object on a versioned bucket; the ETag (content) otherwise. The
		// sequencer separates two writes of the same content to an unversioned key.
		pin := "etag\x00" + o.ETag
		if o.VersionID != "" {
			pin = "version\x00" + o.VersionID
		}
		return objectVersionNamePrefix + hashFields(ev.Detail.Bucket.Name, o.Key, pin, o.Sequencer)
	}
	// EventBridge event ids are UUIDs, which are valid names and easy to find in logs.
	if plainName.MatchString(ev.ID) {
		return ev.ID
	}
	return hashedEventIDPrefix + hashFields(ev.ID)
}

// hashFields hashes length-prefixed fields, so that ("ab", "c") and ("a", "bc") differ.
func hashFields(fields ...string) string {
	h := sha256.New()
	for _, f := range fields {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// validExecutionName reports whether s is a name this controller may use.
func validExecutionName(s string) bool {
	return len(s) <= maxExecutionName && plainName.MatchString(s)
}
