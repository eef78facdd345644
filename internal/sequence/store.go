package sequence

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/spec"
)

// Objects is the slice of the S3 client the store uses.
type Objects interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

var _ Objects = (*s3.Client)(nil)

// ErrConflict is a conditional write of the state that lost to another writer: read again.
var ErrConflict = errors.New("the sequence state changed since it was read")

// maxObjectBytes bounds the objects the store reads: a state with MaxSkips skips and a held file's
// message (an S3 event, a few KB) are far below it.
const maxObjectBytes = 256 * 1024

// Store reads and writes one tenant's sequence objects in its bucket.
type Store struct {
	S3     Objects
	Bucket string
	// Pool is the tenant's pool, "" for a silo tenant: with Tenant, the owner of the keys.
	Pool   string
	Tenant string
	Kind   string
}

// owner is whose keys the store reads and writes.
func (s Store) owner() pipeline.Owner { return pipeline.PoolOwner(s.Pool, s.Tenant) }

// Load reads the state and its ETag; a tenant without one gets fresh (New), with etag "".
func (s Store) Load(ctx context.Context, fresh State) (State, string, error) {
	key := StateKey(s.owner())
	b, etag, found, err := s.get(ctx, key)
	if err != nil || !found {
		return fresh, "", err
	}
	var st State
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil || st.Version != StateVersion {
		// Never quoted: the pipeline did not write it.
		return State{}, "", fmt.Errorf("s3://%s/%s is not a sequence state of version %d (%d bytes)", s.Bucket, key, StateVersion, len(b))
	}
	if st.Kind != s.Kind {
		// The tenant's kind changed: its place in the old sequence means nothing in the new one. It
		// starts afresh (a number sequence at its start: pipectl sequence set moves it), and the
		// first write replaces the old state (the ETag read).
		return fresh, etag, nil
	}
	return st, etag, nil
}

// Save writes st if the state is still the one read with etag ("" for none); otherwise it returns
// ErrConflict. It returns the new ETag.
func (s Store) Save(ctx context.Context, st State, etag string) (string, error) {
	body, err := json.Marshal(st)
	if err != nil {
		return "", err
	}
	in := &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(StateKey(s.owner())), Body: bytes.NewReader(body),
		ContentType: aws.String("application/json")}
	if etag == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(etag)
	}
	out, err := s.S3.PutObject(ctx, in)
	if conditionFailed(err) {
		return "", ErrConflict
	}
	if err != nil {
		return "", fmt.Errorf("put s3://%s/%s: %w", s.Bucket, StateKey(s.owner()), err)
	}
	return aws.ToString(out.ETag), nil
}

// Held reads the file held under v; nil when none is.
func (s Store) Held(ctx context.Context, v spec.SequenceValue) (*Held, error) {
	return s.heldAt(ctx, HeldKey(s.owner(), s.Kind, v))
}

func (s Store) heldAt(ctx context.Context, key string) (*Held, error) {
	b, _, found, err := s.get(ctx, key)
	if err != nil || !found {
		return nil, err
	}
	var h Held
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("s3://%s/%s is not a held file (%d bytes)", s.Bucket, key, len(b))
	}
	return &h, nil
}

// Hold writes h unless a file is held under its value already; exists reports that one was.
func (s Store) Hold(ctx context.Context, h Held) (exists bool, err error) {
	body, err := json.Marshal(h)
	if err != nil {
		return false, err
	}
	key := HeldKey(s.owner(), s.Kind, spec.SequenceValue{Num: h.Num, Text: h.Value})
	_, err = s.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key), Body: bytes.NewReader(body),
		ContentType: aws.String("application/json"), IfNoneMatch: aws.String("*")})
	if conditionFailed(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("put s3://%s/%s: %w", s.Bucket, key, err)
	}
	return false, nil
}

// Release deletes the file held under v (nothing when none is).
func (s Store) Release(ctx context.Context, v spec.SequenceValue) error {
	key := HeldKey(s.owner(), s.Kind, v)
	if _, err := s.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key)}); err != nil {
		return fmt.Errorf("delete s3://%s/%s: %w", s.Bucket, key, err)
	}
	return nil
}

// Lowest reads the lowest held file; nil when none is held. One LIST of one key and one GET.
func (s Store) Lowest(ctx context.Context) (*Held, error) {
	out, err := s.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(s.Bucket), Prefix: aws.String(HeldPrefix(s.owner())), MaxKeys: aws.Int32(1)})
	if err != nil {
		return nil, fmt.Errorf("list s3://%s/%s: %w", s.Bucket, HeldPrefix(s.owner()), err)
	}
	if len(out.Contents) == 0 {
		return nil, nil
	}
	return s.heldAt(ctx, aws.ToString(out.Contents[0].Key))
}

// Listed is the held files as a listing tells them: their values, oldest first (at most limit),
// and how many there are in all.
type Listed struct {
	Values []string
	Count  int
}

// List lists the held files' values from their keys alone (no GET), a page of 1,000 keys a call.
func (s Store) List(ctx context.Context, limit int) (Listed, error) {
	var l Listed
	p := s3.NewListObjectsV2Paginator(s.S3, &s3.ListObjectsV2Input{Bucket: aws.String(s.Bucket), Prefix: aws.String(HeldPrefix(s.owner()))})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return Listed{}, fmt.Errorf("list s3://%s/%s: %w", s.Bucket, HeldPrefix(s.owner()), err)
		}
		for _, o := range out.Contents {
			l.Count++
			if len(l.Values) < limit {
				l.Values = append(l.Values, ValueOfKey(strings.TrimPrefix(aws.ToString(o.Key), HeldPrefix(s.owner()))))
			}
		}
	}
	return l, nil
}

// ValueOfKey is the value a held file's key name (without the prefix) stands for, as operators
// see it; the name itself when it is not one this package wrote.
func ValueOfKey(name string) string {
	base := strings.TrimSuffix(name, ".json")
	if strings.HasPrefix(base, "n") {
		if b, err := hex.DecodeString(base[1:]); err == nil {
			return string(b)
		}
	}
	if n, err := strconv.ParseInt(base, 10, 64); err == nil {
		return strconv.FormatInt(n, 10)
	}
	return name
}

// get reads key; found is false for a missing key (404). A 403 is an error, never "absent": S3
// answers 403 for a missing key to a caller without s3:ListBucket
// (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, "Permissions"), and the
// controller and the operators list control/<tenant>/, so a 403 means the state could not be read,
// and a fresh state must not stand in for it.
func (s Store) get(ctx context.Context, key string) (b []byte, etag string, found bool, err error) {
	out, err := s.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key)})
	var noKey *s3types.NoSuchKey
	var api smithy.APIError
	if errors.As(err, &noKey) || (errors.As(err, &api) && api.ErrorCode() == "NoSuchKey") {
		return nil, "", false, nil
	}
	if err != nil {
		return nil, "", false, fmt.Errorf("get s3://%s/%s: %w", s.Bucket, key, err)
	}
	defer out.Body.Close()
	b, err = io.ReadAll(io.LimitReader(out.Body, maxObjectBytes+1))
	if err != nil {
		return nil, "", false, fmt.Errorf("read s3://%s/%s: %w", s.Bucket, key, err)
	}
	if len(b) > maxObjectBytes {
		return nil, "", false, fmt.Errorf("s3://%s/%s is over %d bytes: not an object the pipeline wrote", s.Bucket, key, maxObjectBytes)
	}
	return b, aws.ToString(out.ETag), true, nil
}

// conditionFailed reports a conditional write that lost: 412 PreconditionFailed, or 409
// ConditionalRequestConflict under concurrency
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).
func conditionFailed(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && (api.ErrorCode() == "PreconditionFailed" || api.ErrorCode() == "ConditionalRequestConflict")
}

// Gap is how long the tenant has waited for a missing number at now; 0 without a gap.
func (st State) Gap(now time.Time) time.Duration {
	if st.GapSince == nil {
		return 0
	}
	return max(now.Sub(*st.GapSince), 0)
}

// Refused is one refused file, as the index of refusals keeps it.
type Refused struct {
	Key       string    `json:"key"`
	Sequence  string    `json:"sequence,omitempty"`
	Refusal   string    `json:"refusal"`
	Execution string    `json:"execution"`
	At        time.Time `json:"at"`
}

// RefusedPrefix is control/<tenant>/sequence/refused/: the index of the tenant's refused files,
// newest first. A refused file starts no execution, so no listing of executions finds it.
func RefusedPrefix(o pipeline.Owner) string { return Prefix(o) + "refused/" }

// maxInvertedMillis is above every Unix millisecond time until the year 33658, so that its
// difference with the time, zero-padded, sorts the newest first.
const maxInvertedMillis = 999_999_999_999_999

// RefusedKey is the index entry of a refusal at at: control/<tenant>/sequence/refused/<newest
// first>-<execution>.json.
func RefusedKey(o pipeline.Owner, at time.Time, execution string) string {
	return fmt.Sprintf("%s%015d-%s.json", RefusedPrefix(o), maxInvertedMillis-at.UnixMilli(), execution)
}

// Refuse adds r to the index of refusals.
func (s Store) Refuse(ctx context.Context, r Refused) error {
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	key := RefusedKey(s.owner(), r.At, r.Execution)
	if _, err := s.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key), Body: bytes.NewReader(body),
		ContentType: aws.String("application/json")}); err != nil {
		return fmt.Errorf("put s3://%s/%s: %w", s.Bucket, key, err)
	}
	return nil
}

// Refusals reads the newest limit refusals, newest first: one LIST and a GET each.
func (s Store) Refusals(ctx context.Context, limit int) ([]Refused, error) {
	out, err := s.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(s.Bucket), Prefix: aws.String(RefusedPrefix(s.owner())),
		MaxKeys: aws.Int32(int32(min(max(limit, 1), 1000)))})
	if err != nil {
		return nil, fmt.Errorf("list s3://%s/%s: %w", s.Bucket, RefusedPrefix(s.owner()), err)
	}
	var rs []Refused
	for _, o := range out.Contents {
		b, _, found, err := s.get(ctx, aws.ToString(o.Key))
		if err != nil {
			return nil, err
		}
		var r Refused
		if !found || json.Unmarshal(b, &r) != nil {
			continue // deleted since the listing, or not an entry this package wrote
		}
		rs = append(rs, r)
	}
	return rs, nil
}
