package localrun

// Files arriving in the ingest bucket, and EventBridge: every PutObject becomes an "Object Created"
// event routed by the synthesized rules' patterns.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// Upload puts one file under the tenant's prefix, as the sending system would; the PutObject
// becomes an "Object Created" event.
func (r *Run) Upload(ctx context.Context, tenantID, rel string, body []byte) (*Upload, error) {
	t := r.Tenant(tenantID)
	if t == nil {
		return nil, fmt.Errorf("unknown tenant %q", tenantID)
	}
	key := t.Prefix + rel
	out, err := r.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
	if err != nil {
		return nil, fmt.Errorf("upload %s: %w", key, err)
	}
	vid, etag := aws.ToString(out.VersionId), strings.Trim(aws.ToString(out.ETag), `"`)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.uploads) - 1; i >= 0; i-- {
		if u := r.uploads[i]; u.Key == key && u.VersionID == vid && u.ETag == etag {
			return u, nil
		}
	}
	return nil, fmt.Errorf("upload %s: the ingest bucket saw no such PutObject", key)
}

// arrived records a PutObject under a tenant's prefix as a file of the run, whoever wrote it (the
// harness, the aws CLI, pipectl), before its event is routed, so that the report lists it.
func (r *Run) arrived(bucket, key, versionID, etag string) {
	if bucket != r.Bucket {
		return
	}
	var t *Tenant
	for _, c := range r.Tenants {
		if strings.HasPrefix(key, c.Prefix) && (t == nil || len(c.Prefix) > len(t.Prefix)) {
			t = c
		}
	}
	if t == nil {
		return // control markers, work objects, keys of no tenant
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.uploads) == 0 {
		r.started = time.Now() // wall time and throughput are measured from the first upload
	}
	r.drainedAt = time.Time{}
	r.uploads = append(r.uploads, &Upload{Tenant: t.ID, Key: key, VersionID: versionID, ETag: etag, At: time.Now()})
}

// objectCreated turns a PutObject into the EventBridge event S3 sends
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html) and routes it.
func (c *Cloud) objectCreated(bucket, key, versionID, etag string, size int64) {
	if c.watch != nil {
		c.watch.arrived(bucket, key, versionID, etag)
	}
	detail := map[string]any{
		"version":           "0",
		"bucket":            map[string]any{"name": bucket},
		"object":            map[string]any{"key": c.eventKey(key), "size": size, "etag": etag, "sequencer": c.S3.Sequencer(bucket, key)},
		"request-id":        emulate.NewID()[:16],
		"requester":         emulate.Account,
		"source-ip-address": "127.0.0.1",
		"reason":            "PutObject",
	}
	if versionID != "" {
		detail["object"].(map[string]any)["version-id"] = versionID
	}
	ev := map[string]any{
		"version":     "0",
		"id":          uuid(),
		"detail-type": "Object Created",
		"source":      "aws.s3",
		"account":     emulate.Account,
		"time":        time.Now().UTC().Format(time.RFC3339),
		"region":      emulate.Region,
		"resources":   []any{"arn:aws:s3:::" + bucket},
		"detail":      detail,
	}
	c.PutEvent(context.Background(), ev)
	if c.opts.events.DuplicateEvents {
		c.putEvent(context.Background(), ev, c.opts.events.DuplicateAfterDedupWindow)
	}
}

// eventKey is the object key as the events carry it (S3Options.EventKeyForm).
func (c *Cloud) eventKey(key string) string {
	if c.opts.s3.EventKeyForm != EventKeyForm {
		return key
	}
	return FormEncodeKey(key)
}

// FormEncodeKey form-encodes an object key as S3 event notifications do: each path segment as
// application/x-www-form-urlencoded (space as "+", "+" as "%2B", "%" as "%25", UTF-8 bytes as %XX),
// the "/" between segments kept, so that key prefixes still match
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html).
func FormEncodeKey(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.QueryEscape(s)
	}
	return strings.Join(segs, "/")
}

// PutEvent routes one event to every matching rule's target queue, as EventBridge does: the body is
// the event, the message group is the target's fixed MessageGroupId, and deduplication is left to
// the queue's content-based deduplication (EventBridge sends no deduplication id).
func (c *Cloud) PutEvent(ctx context.Context, ev map[string]any) { c.putEvent(ctx, ev, false) }

// putEvent routes one event; late sends it with its own deduplication id, as a copy that arrives
// after the queue's deduplication interval is no longer deduplicated.
func (c *Cloud) putEvent(ctx context.Context, ev map[string]any, late bool) {
	body, _ := json.Marshal(ev)
	// Route on the decoded event, as EventBridge matches JSON values.
	var decoded map[string]any
	json.Unmarshal(body, &decoded)
	for _, rl := range c.rules {
		if !rl.pattern.Match(decoded) {
			continue
		}
		if rl.fn != nil {
			c.invokeAsync(rl.fn, body)
			continue
		}
		if rl.api != nil {
			c.deliverToAPI(ctx, rl, body, late)
			continue
		}
		q := c.queues[rl.queueARN]
		if ok, why := c.auth.eventBridgeMaySend(rl.arn, q.ARN); !ok {
			c.auth.refuse()
			c.auth.say("EventBridge rule %s to %s: AccessDenied: %s; the event is not delivered", rl.arn, q.Name, why)
			continue
		}
		in := &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(string(body))}
		if rl.groupID != "" {
			in.MessageGroupId = aws.String(rl.groupID)
		}
		if late && strings.HasSuffix(q.Name, ".fifo") {
			in.MessageDeduplicationId = aws.String(emulate.NewID())
		}
		// EventBridge retries delivery for up to 24 hours; locally a few attempts suffice.
		for attempt := 0; attempt < 5; attempt++ {
			if _, err := c.sqs.SendMessage(ctx, in); err == nil {
				break
			} else {
				fmt.Fprintf(c.logs, "eventbridge: deliver to %s: %v\n", q.Name, err)
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
}
