// Package s3event parses the EventBridge "Object Created" events that Amazon S3 sends when a
// bucket has EventBridge notifications turned on. The controller reads them from its queue; the
// local harness builds them with the same types, so both sides agree on the wire format.
//
// Object keys are kept exactly as the event gives them: never decoded here. Classic S3
// notifications form-encode keys ("red flower.jpg" arrives as "red+flower.jpg"); AWS documents
// neither form for EventBridge events, and a literal "+" or "%" cannot be told from an encoded one
// by its characters. Split resolves the form by asking S3 for the event's pinned object under the
// key as given, then under its form-decoded form (source.Open, docs/data-path.md).
//
// Event structure: https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html
package s3event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// The values S3 puts into every "Object Created" event.
const (
	Source             = "aws.s3"
	DetailTypeCreated  = "Object Created"
	eventSchemaVersion = "0"
)

// Event is an EventBridge event whose detail is an S3 "Object Created" detail.
type Event struct {
	Version    string    `json:"version"`
	ID         string    `json:"id"`
	DetailType string    `json:"detail-type"`
	Source     string    `json:"source"`
	Account    string    `json:"account"`
	Time       time.Time `json:"time"`
	Region     string    `json:"region"`
	Resources  []string  `json:"resources"`
	Detail     Detail    `json:"detail"`
}

// Detail is the "detail" object of an "Object Created" event.
type Detail struct {
	Version         string `json:"version"`
	Bucket          Bucket `json:"bucket"`
	Object          Object `json:"object"`
	RequestID       string `json:"request-id,omitempty"`
	Requester       string `json:"requester,omitempty"`
	SourceIPAddress string `json:"source-ip-address,omitempty"`
	// Reason is the API that created the object: PutObject, POST Object, CopyObject or
	// CompleteMultipartUpload.
	Reason string `json:"reason,omitempty"`
}

// Bucket names the bucket of the event.
type Bucket struct {
	Name string `json:"name"`
}

// Object is the object version the event is about.
type Object struct {
	// Key is the object key as the event gives it, raw or form-encoded; only Split resolves which
	// (source.Open). Never decode it anywhere else.
	Key  string `json:"key"`
	Size int64  `json:"size"`
	ETag string `json:"etag,omitempty"`
	// VersionID is empty when the bucket is not versioned.
	VersionID string `json:"version-id,omitempty"`
	// Sequencer orders the events of one key; it only compares between events of the same key.
	Sequencer string `json:"sequencer,omitempty"`
}

// ErrNotObjectCreated is wrapped by every error Parse returns, so callers can tell "this message
// can never become an Object Created event" from their own faults.
var ErrNotObjectCreated = errors.New("not an S3 Object Created event")

// Parse decodes body as an EventBridge S3 "Object Created" event and checks the fields the pipeline
// relies on. The returned error never quotes the body.
func Parse(body []byte) (Event, error) {
	var ev Event
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&ev); err != nil {
		return Event{}, fmt.Errorf("%w: body is not a JSON event: %v", ErrNotObjectCreated, pipeline.JSONProblem(err, "time"))
	}
	if dec.More() {
		return Event{}, fmt.Errorf("%w: body has data after the event", ErrNotObjectCreated)
	}
	var problems []string
	if ev.Source != Source {
		problems = append(problems, fmt.Sprintf("source is %q, want %q", ev.Source, Source))
	}
	if ev.DetailType != DetailTypeCreated {
		problems = append(problems, fmt.Sprintf("detail-type is %q, want %q", ev.DetailType, DetailTypeCreated))
	}
	if ev.ID == "" {
		problems = append(problems, "id is empty")
	}
	if ev.Detail.Bucket.Name == "" {
		problems = append(problems, "detail.bucket.name is empty")
	}
	if ev.Detail.Object.Key == "" {
		problems = append(problems, "detail.object.key is empty")
	}
	if ev.Detail.Object.Size < 0 {
		problems = append(problems, fmt.Sprintf("detail.object.size is %d, want >= 0", ev.Detail.Object.Size))
	}
	if len(problems) > 0 {
		return Event{}, fmt.Errorf("%w: %s", ErrNotObjectCreated, strings.Join(problems, "; "))
	}
	return ev, nil
}

// ObjectCreated builds the event S3 would send for one new object version, for the local harness
// and tests. The caller sets the remaining fields as needed.
func ObjectCreated(id string, at time.Time, bucket string, obj Object) Event {
	return Event{
		Version:    eventSchemaVersion,
		ID:         id,
		DetailType: DetailTypeCreated,
		Source:     Source,
		Time:       at.UTC(),
		Resources:  []string{"arn:aws:s3:::" + bucket},
		Detail: Detail{
			Version: eventSchemaVersion,
			Bucket:  Bucket{Name: bucket},
			Object:  obj,
			Reason:  "PutObject",
		},
	}
}
