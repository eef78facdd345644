package sequence

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/spec"
)

func TestDecide(t *testing.T) {
	num := func(n int64) spec.SequenceValue { return spec.SequenceValue{Num: n, Text: fmt.Sprint(n)} }
	name := func(s string) spec.SequenceValue { return spec.SequenceValue{Text: s} }
	held := func(exec string) *Held { return &Held{Execution: exec} }
	running := &Entry{Value: "5", Num: 5, Execution: "e5"}
	skipped := []Skip{{From: 2, To: 3}}
	for _, tc := range []struct {
		name    string
		st      State
		v       spec.SequenceValue
		exec    string
		held    *Held
		want    Verdict
		because string
	}{
		{"next runs", State{Kind: spec.SequenceNumber, Next: 4}, num(4), "e4", nil, Run, ""},
		{"ahead is held", State{Kind: spec.SequenceNumber, Next: 4}, num(6), "e6", nil, Hold, ""},
		{"ahead and held already, same event", State{Kind: spec.SequenceNumber, Next: 4}, num(6), "e6", held("e6"), Again, ""},
		{"ahead and held already, another file", State{Kind: spec.SequenceNumber, Next: 4}, num(6), "x6", held("e6"), Refuse, RefusedDuplicate},
		{"below next: processed", State{Kind: spec.SequenceNumber, Next: 4}, num(1), "e1", nil, Refuse, RefusedDuplicate},
		{"below next: skipped", State{Kind: spec.SequenceNumber, Next: 4, Skipped: skipped}, num(3), "e3", nil, Refuse, RefusedLate},
		{"the running file again", State{Kind: spec.SequenceNumber, Next: 5, Running: running}, num(5), "e5", nil, Run, ""},
		{"a second file of the running number", State{Kind: spec.SequenceNumber, Next: 5, Running: running}, num(5), "x5", nil, Refuse, RefusedDuplicate},
		{"the woken file", State{Kind: spec.SequenceNumber, Next: 5, Woken: running}, num(5), "e5", held("e5"), Run, ""},
		{"a name is held to settle", State{Kind: spec.SequenceName, Last: "b"}, name("c"), "ec", nil, Hold, ""},
		{"a name below the last is late", State{Kind: spec.SequenceName, Last: "b"}, name("a"), "ea", nil, Refuse, RefusedLate},
		{"the last name again", State{Kind: spec.SequenceName, Last: "b"}, name("b"), "eb", nil, Refuse, RefusedDuplicate},
		{"the first name", State{Kind: spec.SequenceName}, name("a"), "ea", nil, Hold, ""},
		{"the woken name", State{Kind: spec.SequenceName, Woken: &Entry{Value: "c", Execution: "ec"}}, name("c"), "ec", nil, Run, ""},
		{"a second file of the woken name", State{Kind: spec.SequenceName, Woken: &Entry{Value: "c", Execution: "ec"}}, name("c"), "xc", nil, Refuse, RefusedDuplicate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := Decide(tc.st, tc.v, tc.exec, tc.held)
			if got != tc.want || why != tc.because {
				t.Errorf("got %v %q, want %v %q", got, why, tc.want, tc.because)
			}
		})
	}
}

func TestDoneAndSkips(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	st := State{Kind: spec.SequenceNumber, Next: 4, Running: &Entry{Num: 4, Execution: "e4"}}
	st.AddSkip(Skip{From: 5, To: 6}) // skipped ahead by an operator
	if st.Done(Entry{Execution: "other"}, now) {
		t.Fatal("a release of another file moved the sequence")
	}
	if !st.Done(Entry{Execution: "e4"}, now) || st.Next != 7 || st.Running != nil {
		t.Fatalf("after 4 with 5-6 skipped: %+v, want next 7", st)
	}
	for i := range MaxSkips + 5 {
		st.AddSkip(Skip{From: int64(100 + i), To: int64(100 + i)})
	}
	if len(st.Skipped) != MaxSkips || st.Skipped[0].From == 5 {
		t.Errorf("kept %d skips from %d, want the newest %d", len(st.Skipped), st.Skipped[0].From, MaxSkips)
	}
}

func TestHeldKeysSortAsTheSequence(t *testing.T) {
	for _, kind := range []string{spec.SequenceNumber, spec.SequenceName} {
		var vals []spec.SequenceValue
		if kind == spec.SequenceNumber {
			for _, n := range []int64{0, 9, 10, 99, 100, 1 << 40, 1<<63 - 1} {
				vals = append(vals, spec.SequenceValue{Num: n})
			}
		} else {
			for _, s := range []string{"", "a", "ab", "abc", "b", "ä", "日本"} {
				vals = append(vals, spec.SequenceValue{Text: s})
			}
		}
		var keys []string
		for _, v := range vals {
			keys = append(keys, HeldKey(pipeline.SiloOwner("acme"), kind, v))
		}
		if !slices.IsSorted(keys) {
			t.Errorf("%s: keys %v do not sort as the values", kind, keys)
		}
		for i, k := range keys {
			want := vals[i].Text
			if kind == spec.SequenceNumber {
				want = fmt.Sprint(vals[i].Num)
			}
			if got := ValueOfKey(strings.TrimPrefix(k, HeldPrefix(pipeline.SiloOwner("acme")))); got != want && want != "" {
				t.Errorf("%s: ValueOfKey(%s) = %q, want %q", kind, k, got, want)
			}
		}
	}
}

// memS3 keeps objects and honours If-Match and If-None-Match as S3 does.
type memS3 struct {
	objects map[string]string
	getErr  error
}

func etag(b string) string { return fmt.Sprintf("%q", fmt.Sprintf("%x", md5.Sum([]byte(b)))) }

func (m *memS3) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	if m.getErr != nil {
		return nil, m.getErr
	}
	b, ok := m.objects[aws.ToString(in.Key)]
	if !ok {
		return nil, &s3types.NoSuchKey{}
	}
	return &s3.GetObjectOutput{Body: io.NopCloser(strings.NewReader(b)), ETag: aws.String(etag(b))}, nil
}

func (m *memS3) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(in.Body)
	old, exists := m.objects[aws.ToString(in.Key)]
	if (in.IfNoneMatch != nil && exists) || (in.IfMatch != nil && (!exists || etag(old) != aws.ToString(in.IfMatch))) {
		return nil, &smithy.GenericAPIError{Code: "PreconditionFailed"}
	}
	m.objects[aws.ToString(in.Key)] = buf.String()
	return &s3.PutObjectOutput{ETag: aws.String(etag(buf.String()))}, nil
}

func (m *memS3) DeleteObject(_ context.Context, in *s3.DeleteObjectInput, _ ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	delete(m.objects, aws.ToString(in.Key))
	return &s3.DeleteObjectOutput{}, nil
}

func (m *memS3) ListObjectsV2(_ context.Context, in *s3.ListObjectsV2Input, _ ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	var keys []string
	for k := range m.objects {
		if strings.HasPrefix(k, aws.ToString(in.Prefix)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if n := int(aws.ToInt32(in.MaxKeys)); n > 0 && len(keys) > n {
		keys = keys[:n]
	}
	out := &s3.ListObjectsV2Output{}
	for _, k := range keys {
		out.Contents = append(out.Contents, s3types.Object{Key: aws.String(k)})
	}
	return out, nil
}

func TestStore(t *testing.T) {
	ctx := context.Background()
	m := &memS3{objects: map[string]string{}}
	s := Store{S3: m, Bucket: "b", Tenant: "acme", Kind: spec.SequenceNumber}
	fresh := State{Version: StateVersion, Kind: spec.SequenceNumber, Next: 1}
	st, tag, err := s.Load(ctx, fresh)
	if err != nil || tag != "" || st.Next != 1 {
		t.Fatalf("first load: %+v %q %v", st, tag, err)
	}
	st.Next = 2
	tag1, err := s.Save(ctx, st, tag)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, st, ""); !errors.Is(err, ErrConflict) {
		t.Errorf("a second first write: %v, want ErrConflict", err)
	}
	st.Next = 3
	if _, err := s.Save(ctx, st, tag1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, st, tag1); !errors.Is(err, ErrConflict) {
		t.Errorf("a write on a stale ETag: %v, want ErrConflict", err)
	}
	// Held files: once per value; the lowest first; listed from the keys alone.
	for _, n := range []int64{12, 5, 100} {
		if exists, err := s.Hold(ctx, Held{Value: fmt.Sprint(n), Num: n, Execution: fmt.Sprint("e", n)}); exists || err != nil {
			t.Fatalf("hold %d: %v %v", n, exists, err)
		}
	}
	if exists, _ := s.Hold(ctx, Held{Value: "5", Num: 5, Execution: "x"}); !exists {
		t.Error("a second hold of 5 was written")
	}
	if low, err := s.Lowest(ctx); err != nil || low.Num != 5 || low.Execution != "e5" {
		t.Errorf("lowest: %+v %v", low, err)
	}
	if l, err := s.List(ctx, 2); err != nil || l.Count != 3 || !slices.Equal(l.Values, []string{"5", "12"}) {
		t.Errorf("list: %+v %v", l, err)
	}
	// A tenant whose kind changed starts afresh, and its first write replaces the old state.
	n := Store{S3: m, Bucket: "b", Tenant: "acme", Kind: spec.SequenceName}
	nst, ntag, err := n.Load(ctx, State{Version: StateVersion, Kind: spec.SequenceName})
	if err != nil || nst.Kind != spec.SequenceName || ntag == "" {
		t.Fatalf("after a kind change: %+v %q %v", nst, ntag, err)
	}
	if _, err := n.Save(ctx, nst, ntag); err != nil {
		t.Errorf("replace the old kind's state: %v", err)
	}
	// A refused read is an error, never a fresh state.
	m.getErr = &smithy.GenericAPIError{Code: "AccessDenied"}
	if _, _, err := s.Load(ctx, fresh); err == nil {
		t.Error("an AccessDenied read gave a state")
	}
}

func TestRefusalsNewestFirst(t *testing.T) {
	ctx := context.Background()
	s := Store{S3: &memS3{objects: map[string]string{}}, Bucket: "b", Tenant: "acme", Kind: spec.SequenceNumber}
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for i, r := range []string{RefusedUnmatched, RefusedDuplicate, RefusedLate} {
		if err := s.Refuse(ctx, Refused{Key: fmt.Sprint("k", i), Refusal: r, Execution: fmt.Sprint("e", i), At: at.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := s.Refusals(ctx, 2)
	if err != nil || len(rs) != 2 || rs[0].Refusal != RefusedLate || rs[1].Refusal != RefusedDuplicate {
		t.Errorf("got %+v, %v: want late then duplicate", rs, err)
	}
}
