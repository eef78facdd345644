// Package backlog bounds a pooled tenant's messages in its pool's FIFO queue. SQS looks for a
// message group it can deliver only among the first 120,000 messages of a FIFO queue ("FIFO queues
// scan the first 120,000 messages to determine available message groups",
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/avoid-backlog-with-the-same-message-group-id.html),
// so a pool queue whose backlog adds up to that hides every tenant behind it. A pool therefore keeps at most Max messages of one tenant in its queue;
// the rest wait in order outside it, "parked" in S3 under control/<tenant>/parked/, and go back in
// as the tenant's queued messages are deleted (docs/operations.md, "Parked files").
//
// The state of one tenant is one item of the pool's admission table (pk "queue#<tenant>"):
//   - queued: a map from the id of each message of the tenant in the queue (its
//     MessageDeduplicationId, also sent as the message attribute AttrMessageID) to the time it
//     went in. Admitting and deleting a message set and remove its own entry, so a retried call
//     never counts twice, and the condition size(queued) < max on the same conditional UpdateItem
//     keeps the bound exact
//     (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html).
//   - nextPark and nextUnpark: the slots of the parked files, control/<tenant>/parked/<slot>.json,
//     slots nextUnpark to nextPark-1, in arrival order. A file is parked by writing its slot's object
//     (only if absent) and then advancing nextPark conditionally; it is unparked by admitting it to
//     queued, sending it, advancing nextUnpark conditionally and deleting the object. A crash
//     between any two steps leaves a state the next call completes.
//   - lastParked: the id of the last parked message, so that a retried delivery of it is not
//     parked twice.
//
// The map queued is capped at MaxEntries entries whatever Max says, and each id at MaxIDBytes, so
// the item stays far below DynamoDB's 400 KB item size
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html): a file
// past the cap is parked, never dropped, and goes in as the tenant's queued messages go out. An id
// longer than MaxIDBytes is refused before anything is written (SQS refuses it as a deduplication
// id too), so the caller keeps its message.
//
// The items pk "backlog#<shard>", sk "parked#<tenant>" index the tenants that have parked files, so
// the router can find them without listing S3 (onboarding: a tenant's files parked before its
// settings were deployed). Every router and controller of the pool writes the index, so it is
// spread over schema.IndexShards partition keys by a hash of the tenant id: DynamoDB serves at most 1,000
// write units and 3,000 read units a second to one partition
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html,
// write sharding: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-sharding.html).
// A table written before the index was sharded has its entries under pk "backlog"
// (schema.LegacyIndexKey): the sweep still lists and forgets them, so no parked tenant is left behind.
package backlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/admission"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/schema"
)

// Bounds of the map of a tenant's queued ids. A full entry is at most MaxIDBytes of name, a
// number of 13 digits (milliseconds; DynamoDB stores about one byte per two significant digits,
// plus one) and a byte of map overhead, so MaxEntries entries are at most 1,000 × (128 + 8 + 1) ≈
// 137 KB, and with the item's other attributes (under 300 bytes) about a third of the 400 KB item
// size. TestFullBacklogItemFitsDynamoDB writes such an item to dynalite, which enforces the limit.
const (
	MaxEntries = schema.MaxMaxQueued
	MaxIDBytes = 128
)

// ErrIDTooLong refuses a message whose id would not fit the map's bound (MaxIDBytes).
var ErrIDTooLong = errors.New("backlog id longer than 128 bytes")

// AttrMessageID is the message attribute naming a counted message's entry in queued. A message
// without it (an operator's control message) is not counted.
const AttrMessageID = "BacklogId"

// Attributes of the items (their keys: package schema).
const (
	attrQueued     = "queued"
	attrNextPark   = "nextPark"
	attrNextUnpark = "nextUnpark"
	attrLastParked = "lastParked"
	attrSlot       = "slot"
	attrTenant     = "tenant"
)

// ParkedPrefix is where a tenant's parked files are.
func ParkedPrefix(o pipeline.Owner) string { return pipeline.ControlDir(o) + "parked/" }

// ParkedKey is the object of one parked file. The slot is zero-padded, so the keys list in order.
func ParkedKey(o pipeline.Owner, slot int64) string {
	return fmt.Sprintf("%s%020d.json", ParkedPrefix(o), slot)
}

// Objects is the part of the S3 client the backlog uses.
type Objects interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
}

// Sender is the part of the SQS client the backlog uses.
type Sender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

var (
	_ Objects           = (*s3.Client)(nil)
	_ Sender            = (*sqs.Client)(nil)
	_ admission.ItemAPI = (*dynamodb.Client)(nil)
)

// Backlog is the bounded backlog of one pool's tenants.
type Backlog struct {
	DB admission.ItemAPI
	// Pool is the pool whose tenants' files it parks: the owner of their keys, with the tenant.
	Pool     string
	Table    string
	S3       Objects
	Bucket   string
	SQS      Sender
	QueueURL string
	// Max is the pool's maxQueuedFilesPerTenant.
	Max int
	// Retention is the pool queue's message retention: an entry of queued older than it names a
	// message SQS has deleted by itself, and is dropped, so a counter an operator's hand (or a
	// crash) left too high frees itself.
	Retention time.Duration
	Now       func() time.Time
}

// Message is one message of a tenant bound for the pool queue.
type Message struct {
	Tenant string
	// ID is the message's MessageDeduplicationId and its entry in queued.
	ID   string
	Body string
}

// parkedFile is the object of a parked message.
type parkedFile struct {
	ID   string `json:"id"`
	Body string `json:"body"`
}

// State is a tenant's backlog as one strongly consistent read found it.
type State struct {
	// Queued is how many of the tenant's messages are counted in the pool queue.
	Queued int
	// Parked is how many of its files wait outside it.
	Parked             int64
	NextPark           int64
	NextUnpark         int64
	LastParked         string
	queued             map[string]int64
	found, initialized bool
}

// limit is how many of a tenant's messages may be counted at once: Max, capped at MaxEntries.
func (b *Backlog) limit() int64 { return int64(min(b.Max, MaxEntries)) }

func checkID(m Message) error {
	if len(m.ID) > MaxIDBytes {
		return fmt.Errorf("message of tenant %s: %w (%d bytes)", m.Tenant, ErrIDTooLong, len(m.ID))
	}
	return nil
}

func (b *Backlog) now() time.Time {
	if b.Now == nil {
		return time.Now()
	}
	return b.Now()
}

// State reads a tenant's backlog. A tenant that never had one has the zero State.
func (b *Backlog) State(ctx context.Context, tenant string) (State, error) {
	out, err := b.DB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(b.Table), Key: counterKey(tenant), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return State{}, fmt.Errorf("read the backlog of tenant %s: %w", tenant, err)
	}
	st := State{queued: map[string]int64{}}
	if out.Item == nil {
		return st, nil
	}
	st.found = true
	if m, ok := out.Item[attrQueued].(*types.AttributeValueMemberM); ok {
		st.initialized = true
		for id, v := range m.Value {
			if n, ok := v.(*types.AttributeValueMemberN); ok {
				ms, _ := strconv.ParseInt(n.Value, 10, 64)
				st.queued[id] = ms
			}
		}
	}
	st.NextPark, st.NextUnpark = nOf(out.Item, attrNextPark), nOf(out.Item, attrNextUnpark)
	if s, ok := out.Item[attrLastParked].(*types.AttributeValueMemberS); ok {
		st.LastParked = s.Value
	}
	st.Queued, st.Parked = len(st.queued), st.NextPark-st.NextUnpark
	return st, nil
}

// read reads a tenant's backlog, creating its item when missing and dropping entries older than
// Retention.
func (b *Backlog) read(ctx context.Context, tenant string) (State, error) {
	st, err := b.State(ctx, tenant)
	if err != nil {
		return st, err
	}
	if !st.initialized {
		// if_not_exists keeps what a concurrent writer set: creating twice is harmless.
		_, err := b.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:        aws.String(b.Table),
			Key:              counterKey(tenant),
			UpdateExpression: aws.String("SET #q = if_not_exists(#q, :empty), #p = if_not_exists(#p, :zero), #u = if_not_exists(#u, :zero)"),
			ExpressionAttributeNames: map[string]string{
				"#q": attrQueued, "#p": attrNextPark, "#u": attrNextUnpark,
			},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":empty": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}, ":zero": num(0),
			},
		})
		if err != nil {
			return st, fmt.Errorf("create the backlog of tenant %s: %w", tenant, err)
		}
		return b.State(ctx, tenant)
	}
	if b.Retention <= 0 {
		return st, nil
	}
	cutoff := b.now().Add(-b.Retention).UnixMilli()
	expired := false
	for id, at := range st.queued {
		if at >= cutoff {
			continue
		}
		_, err := b.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(b.Table),
			Key:                       counterKey(tenant),
			UpdateExpression:          aws.String("REMOVE #q.#id"),
			ConditionExpression:       aws.String("#q.#id = :at"),
			ExpressionAttributeNames:  map[string]string{"#q": attrQueued, "#id": id},
			ExpressionAttributeValues: map[string]types.AttributeValue{":at": num(at)},
		})
		if err != nil && !conditionFailed(err) {
			return st, fmt.Errorf("drop the expired entry %s of tenant %s: %w", id, tenant, err)
		}
		expired = true
	}
	if expired {
		return b.State(ctx, tenant)
	}
	return st, nil
}

// Admit counts m in the queue if nothing of its tenant is parked and fewer than Max of its
// messages are queued: the caller then sends it (with AttrMessageID). false: the caller parks it.
// Calling it again for a message it admitted admits it again, so a retried delivery is counted
// once.
func (b *Backlog) Admit(ctx context.Context, m Message) (bool, error) {
	if err := checkID(m); err != nil {
		return false, err
	}
	st, err := b.read(ctx, m.Tenant)
	if err != nil {
		return false, err
	}
	if st.LastParked == m.ID && st.Parked > 0 {
		return false, nil // parked by an earlier delivery: Park finds it
	}
	err = b.setQueued(ctx, m, "attribute_exists(#q.#id) OR (#p = #u AND size(#q) < :max)", nil)
	if conditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("count a message of tenant %s in the queue: %w", m.Tenant, err)
	}
	return true, nil
}

// setQueued sets m's entry in queued under condition; more adds expression values.
func (b *Backlog) setQueued(ctx context.Context, m Message, condition string, more map[string]types.AttributeValue) error {
	values := map[string]types.AttributeValue{":now": num(b.now().UnixMilli()), ":max": num(b.limit())}
	for k, v := range more {
		values[k] = v
	}
	names := map[string]string{"#q": attrQueued, "#id": m.ID}
	for name, attr := range map[string]string{"#p": attrNextPark, "#u": attrNextUnpark} {
		// DynamoDB refuses a name the expressions do not use.
		if strings.Contains(condition, name) {
			names[name] = attr
		}
	}
	_, err := b.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(b.Table),
		Key:                       counterKey(m.Tenant),
		UpdateExpression:          aws.String("SET #q.#id = :now"),
		ConditionExpression:       aws.String(condition),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	return err
}

// maxParkRounds bounds the read-write-claim rounds of one Park: each lost round means another
// writer parked a file of the tenant at that moment, or S3 answered a write of the slot with a
// conflict (writeConflict).
const maxParkRounds = 8

// Park keeps m outside the queue, behind the tenant's other parked files, and returns its slot.
// A retried Park of the last parked message finds it parked and writes nothing.
func (b *Backlog) Park(ctx context.Context, m Message) (int64, error) {
	if err := checkID(m); err != nil {
		return 0, err
	}
	body, err := json.Marshal(parkedFile{ID: m.ID, Body: m.Body})
	if err != nil {
		return 0, err
	}
	for range maxParkRounds {
		st, err := b.read(ctx, m.Tenant)
		if err != nil {
			return 0, err
		}
		if st.LastParked == m.ID && st.NextPark > 0 {
			return st.NextPark - 1, nil
		}
		n := st.NextPark
		// The index first, so that a claimed slot is always indexed (Sweep).
		if err := b.index(ctx, m.Tenant, n); err != nil {
			return 0, err
		}
		// If-None-Match: a slot's object is written once; another writer's object is adopted
		// below, never overwritten
		// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).
		_, err = b.S3.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(b.Bucket), Key: aws.String(ParkedKey(pipeline.PoolOwner(b.Pool, m.Tenant), n)), Body: bytes.NewReader(body),
			ContentType: aws.String("application/json"), IfNoneMatch: aws.String("*"),
		})
		owner := m.ID
		switch {
		case writeConflict(err):
			// Another write of the slot was in progress, and this one did not happen: look again.
			// The next round finds the slot taken (412, its object adopted), claimed, or free.
			continue
		case preconditionFailed(err):
			f, found, err := b.slot(ctx, m.Tenant, n)
			if err != nil {
				return 0, err
			}
			if found {
				owner = f.ID
			}
		case err != nil:
			return 0, fmt.Errorf("park a file of tenant %s in slot %d: %w", m.Tenant, n, err)
		}
		claimed, err := b.claim(ctx, m.Tenant, n, owner)
		if err != nil {
			return 0, err
		}
		if owner == m.ID && (claimed || b.claimedBy(ctx, m.Tenant, n)) {
			return n, nil
		}
	}
	return 0, fmt.Errorf("park a file of tenant %s: other writers parked files %d times in a row", m.Tenant, maxParkRounds)
}

// claimedBy reports whether slot n was claimed by another writer (which adopted this writer's
// object) since the read.
func (b *Backlog) claimedBy(ctx context.Context, tenant string, n int64) bool {
	st, err := b.State(ctx, tenant)
	return err == nil && st.NextPark > n
}

// claim advances nextPark past slot n, whose object holds the message owner.
func (b *Backlog) claim(ctx context.Context, tenant string, n int64, owner string) (bool, error) {
	_, err := b.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(b.Table),
		Key:                       counterKey(tenant),
		UpdateExpression:          aws.String("SET #p = :next, #l = :owner"),
		ConditionExpression:       aws.String("#p = :n"),
		ExpressionAttributeNames:  map[string]string{"#p": attrNextPark, "#l": attrLastParked},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": num(n), ":next": num(n + 1), ":owner": str(owner)},
	})
	if conditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim slot %d of tenant %s: %w", n, tenant, err)
	}
	return true, nil
}

// index records that tenant has parked files up to slot n.
func (b *Backlog) index(ctx context.Context, tenant string, n int64) error {
	_, err := b.DB.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(b.Table),
		Item: map[string]types.AttributeValue{
			schema.AttrPK: str(schema.IndexKey(tenant)), schema.AttrSK: str(schema.ParkedSK(tenant)),
			attrTenant: str(tenant), attrSlot: num(n),
		},
	})
	if err != nil {
		return fmt.Errorf("index the parked files of tenant %s: %w", tenant, err)
	}
	return nil
}

// unindex drops the tenant from the index once every slot below next is unparked; a Park that
// indexed a later slot meanwhile keeps it.
func (b *Backlog) unindex(ctx context.Context, tenant string, next int64) error {
	return b.unindexFrom(ctx, schema.IndexKey(tenant), tenant, next)
}

// unindexFrom is unindex on the index partition pk.
func (b *Backlog) unindexFrom(ctx context.Context, pk, tenant string, next int64) error {
	_, err := b.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(b.Table),
		Key:                       key(pk, schema.ParkedSK(tenant)),
		ConditionExpression:       aws.String("attribute_not_exists(#s) OR #s < :next"),
		ExpressionAttributeNames:  map[string]string{"#s": attrSlot},
		ExpressionAttributeValues: map[string]types.AttributeValue{":next": num(next)},
	})
	if err != nil && !conditionFailed(err) {
		return fmt.Errorf("drop tenant %s from the index of parked files: %w", tenant, err)
	}
	return nil
}

// slot reads the parked file in slot n. found is false when it is absent.
func (b *Backlog) slot(ctx context.Context, tenant string, n int64) (parkedFile, bool, error) {
	out, err := b.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.Bucket), Key: aws.String(ParkedKey(pipeline.PoolOwner(b.Pool, tenant), n))})
	var missing *s3types.NoSuchKey
	if errors.As(err, &missing) {
		return parkedFile{}, false, nil
	}
	if err != nil {
		return parkedFile{}, false, fmt.Errorf("read parked file %d of tenant %s: %w", n, tenant, err)
	}
	defer out.Body.Close()
	raw, err := io.ReadAll(out.Body)
	if err != nil {
		return parkedFile{}, false, fmt.Errorf("read parked file %d of tenant %s: %w", n, tenant, err)
	}
	var f parkedFile
	if err := json.Unmarshal(raw, &f); err != nil || f.ID == "" {
		return parkedFile{}, false, fmt.Errorf("parked file %d of tenant %s is not a parked message: %v", n, tenant, err)
	}
	return f, true, nil
}

// Released uncounts a deleted message of the tenant. Calling it again does nothing.
func (b *Backlog) Released(ctx context.Context, tenant, id string) error {
	_, err := b.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(b.Table),
		Key:                      counterKey(tenant),
		UpdateExpression:         aws.String("REMOVE #q.#id"),
		ConditionExpression:      aws.String("attribute_exists(#q.#id)"),
		ExpressionAttributeNames: map[string]string{"#q": attrQueued, "#id": id},
	})
	if err != nil && !conditionFailed(err) {
		return fmt.Errorf("uncount message %s of tenant %s: %w", id, tenant, err)
	}
	return nil
}

// ErrMissingParkedFile says a claimed slot has no object: someone deleted a parked file by hand.
// The tenant's parked files hold until an operator repairs the backlog (docs/operations.md).
var ErrMissingParkedFile = errors.New("parked file missing")

// Drain sends the tenant's parked files, oldest first, while fewer than Max of its messages are
// queued, and returns how many it sent. It stops at Max sends: more cannot fit.
func (b *Backlog) Drain(ctx context.Context, tenant string) (int, error) {
	sent := 0
	for range b.limit() + 1 {
		st, err := b.read(ctx, tenant)
		if err != nil {
			return sent, err
		}
		n := st.NextUnpark
		if n >= st.NextPark {
			if sent == 0 {
				return 0, nil // nothing was parked: no index write on every release
			}
			return sent, b.unindex(ctx, tenant, st.NextPark)
		}
		f, found, err := b.slot(ctx, tenant, n)
		if err != nil {
			return sent, err
		}
		if !found {
			if again, err := b.State(ctx, tenant); err == nil && again.NextUnpark > n {
				continue // another drain unparked it
			}
			return sent, fmt.Errorf("tenant %s, slot %d (%s): %w", tenant, n, ParkedKey(pipeline.PoolOwner(b.Pool, tenant), n), ErrMissingParkedFile)
		}
		if _, ok := st.queued[f.ID]; !ok && int64(st.Queued) >= b.limit() {
			return sent, nil
		}
		m := Message{Tenant: tenant, ID: f.ID, Body: f.Body}
		err = b.setQueued(ctx, m, "#u = :n AND (attribute_exists(#q.#id) OR size(#q) < :max)", map[string]types.AttributeValue{":n": num(n)})
		if conditionFailed(err) {
			continue // full, or another drain moved on: look again
		}
		if err != nil {
			return sent, fmt.Errorf("count parked file %d of tenant %s in the queue: %w", n, tenant, err)
		}
		if err := b.Send(ctx, m); err != nil {
			return sent, err
		}
		sent++
		_, err = b.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(b.Table),
			Key:                       counterKey(tenant),
			UpdateExpression:          aws.String("SET #u = :next"),
			ConditionExpression:       aws.String("#u = :n"),
			ExpressionAttributeNames:  map[string]string{"#u": attrNextUnpark},
			ExpressionAttributeValues: map[string]types.AttributeValue{":n": num(n), ":next": num(n + 1)},
		})
		if err != nil && !conditionFailed(err) {
			return sent, fmt.Errorf("advance the parked files of tenant %s past slot %d: %w", tenant, n, err)
		}
		if _, err := b.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.Bucket), Key: aws.String(ParkedKey(pipeline.PoolOwner(b.Pool, tenant), n))}); err != nil {
			return sent, fmt.Errorf("delete unparked file %d of tenant %s: %w", n, tenant, err)
		}
	}
	return sent, nil
}

// Forget drops the tenant from the index of parked files, its shard and the legacy index, when it
// has none: a drain that ended before it could (a crash, a failed delete) left it there, or the
// tenant was indexed before the index was sharded. The sweep calls it.
func (b *Backlog) Forget(ctx context.Context, tenant string) error {
	st, err := b.State(ctx, tenant)
	if err != nil || st.Parked > 0 {
		return err
	}
	if err := b.unindex(ctx, tenant, st.NextPark); err != nil {
		return err
	}
	return b.unindexFrom(ctx, schema.LegacyIndexKey, tenant, st.NextPark)
}

// Send puts a counted message on the pool queue in its tenant's message group. Its id is the
// deduplication id, so a retried send within SQS's 5-minute deduplication interval is stored once
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/using-messagededuplicationid-property.html).
func (b *Backlog) Send(ctx context.Context, m Message) error {
	_, err := b.SQS.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(b.QueueURL), MessageBody: aws.String(m.Body),
		MessageGroupId: aws.String(m.Tenant), MessageDeduplicationId: aws.String(m.ID),
		MessageAttributes: Attributes(m.ID),
	})
	if err != nil {
		return fmt.Errorf("send message %s of tenant %s to the pool queue: %w", m.ID, m.Tenant, err)
	}
	return nil
}

// Attributes are the message attributes of a counted message.
func Attributes(id string) map[string]sqstypes.MessageAttributeValue {
	return map[string]sqstypes.MessageAttributeValue{AttrMessageID: {DataType: aws.String("String"), StringValue: aws.String(id)}}
}

// Route admits m and returns true for the caller to send it, or parks it. After a park the
// caller drains the tenant (a queue that emptied meanwhile takes its parked files at once); a
// drain's failure is the tenant's alone, so it is no failure of m.
func (b *Backlog) Route(ctx context.Context, m Message) (send bool, err error) {
	ok, err := b.Admit(ctx, m)
	if err != nil || ok {
		return ok, err
	}
	_, err = b.Park(ctx, m)
	return false, err
}

// Cursor is where a listing of the index goes on: a shard (schema.IndexShards is the legacy index) and
// the last key read in it. The zero Cursor is the start of the index.
type Cursor struct {
	shard int
	start map[string]types.AttributeValue
}

// Indexed lists up to limit tenants with parked files from c, shard after shard, visiting each
// shard at most once, and returns where the next listing goes on: past the last shard it starts
// over.
func (b *Backlog) Indexed(ctx context.Context, c Cursor, limit int) ([]string, Cursor, error) {
	var ts []string
	for visited := 0; visited <= schema.IndexShards && len(ts) < limit; {
		out, err := b.DB.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(b.Table),
			KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :sk)"),
			ExpressionAttributeNames:  map[string]string{"#pk": schema.AttrPK, "#sk": schema.AttrSK},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(schema.ShardKey(c.shard)), ":sk": str(schema.ParkedSKPrefix)},
			ExclusiveStartKey:         c.start,
			Limit:                     aws.Int32(int32(limit - len(ts))),
			ConsistentRead:            aws.Bool(true),
		})
		if err != nil {
			return nil, c, fmt.Errorf("list the tenants with parked files (index %s): %w", schema.ShardKey(c.shard), err)
		}
		for _, it := range out.Items {
			if s, ok := it[attrTenant].(*types.AttributeValueMemberS); ok {
				ts = append(ts, s.Value)
			}
		}
		if c.start = out.LastEvaluatedKey; c.start == nil {
			c.shard, visited = (c.shard+1)%(schema.IndexShards+1), visited+1
		}
	}
	return ts, c, nil
}

func counterKey(tenant string) map[string]types.AttributeValue {
	return key(schema.BacklogKey(tenant), schema.BacklogSK)
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{schema.AttrPK: str(pk), schema.AttrSK: str(sk)}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func nOf(it map[string]types.AttributeValue, name string) int64 {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

func conditionFailed(err error) bool {
	var c *types.ConditionalCheckFailedException
	return errors.As(err, &c)
}

func preconditionFailed(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "PreconditionFailed"
}

// writeConflict reports S3's 409 ConditionalRequestConflict to a conditional write: "If a
// conflicting operation occurs during the upload S3 returns a 409 ConditionalRequestConflict
// response", which the caller is to retry
// (https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html,
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html). This call wrote
// nothing; whether the other operation wrote the object is not said, so the caller reads again.
func writeConflict(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "ConditionalRequestConflict"
}

// tenantID is a tenant id's pattern (the tenants file's rule for ids).
var tenantID = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// OnboardingTenant is the tenant a key under a pool's prefix belongs to by its path alone: a
// pooled tenant's prefix is "<pool prefix><id>/", so the key's first path segment after the
// pool's prefix, when it is a valid tenant id and the key goes on past it. ok is false for a key
// that cannot be a tenant's file.
func OnboardingTenant(poolPrefix, key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, poolPrefix)
	if !ok {
		return "", false
	}
	id, file, ok := strings.Cut(rest, "/")
	if !ok || file == "" || !tenantID.MatchString(id) {
		return "", false
	}
	return id, true
}
