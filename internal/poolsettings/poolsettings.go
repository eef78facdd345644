// Package poolsettings is the binary format of a pool's settings file (pipeline.PoolSettingsFile),
// which the construct writes into the pool functions' asset and each function reads through an
// Index: a small index loaded at start, a tenant's row read when the tenant is first used.
package poolsettings

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// The settings file of a pool (pipeline.PoolSettingsFile), version 2. A pool of 100,000 tenants must start
// inside a 128 MB function: Lambda gives a function's initialization 10 s
// (https://docs.aws.amazon.com/lambda/latest/dg/lambda-runtime-environment.html, "Init phase"),
// and a 128 MB function gets a small share of a vCPU, since CPU is allocated in proportion to
// memory (https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html). So a reader
// loads only a small index at start and reads a tenant's row when the tenant is first used:
//
//	header   one line of JSON (poolHeader), ending in '\n'
//	index    one line per tenant, sorted by prefix: id '\t' prefix '\t' offset '\t' length '\n'
//	id order 4 bytes (big-endian) per tenant: the index lines in the order of their ids
//	rows     each tenant's row (poolRow) as JSON, at offset and length within this section
//
// A row holds neither the id nor the prefix (the index has them), and tenants whose rows are
// equal share one: a pool whose tenants differ only in id and prefix has one row in all. The
// header gives the sizes of the sections, so a truncated file is told at start.

// poolSettingsFormat names the format in the header, so that another file is told from a
// settings file of another version.
const poolSettingsFormat = "tenantpipeline-pool-settings"

// maxPoolHeaderBytes bounds the header line a reader looks for.
const maxPoolHeaderBytes = 64 << 10

// MaxCachedRows bounds the decoded rows a Index keeps: a warm function decodes a row when
// it first serves one of its tenants, and keeps at most this many (about 1 KB each).
const MaxCachedRows = 1024

type poolHeader struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	Pool    string `json:"pool"`
	Prefix  string `json:"prefix"`
	Tenants int    `json:"tenants"`
	// IndexBytes and RowBytes are the sizes of the index and rows sections.
	IndexBytes int64 `json:"indexBytes"`
	RowBytes   int64 `json:"rowBytes"`
}

// poolRow is a tenant's row: a pipeline.PoolTenant without its id and prefix.
type poolRow struct {
	Settings       pipeline.Tenant `json:"settings"`
	OnFailure      string          `json:"onFailure,omitempty"`
	IdempotencyKey string          `json:"idempotencyKey,omitempty"`
}

// Encode writes the settings in the file format Index reads. It checks what every reader
// relies on, reporting every problem at once: a pool name, a non-empty unique id per tenant, each
// prefix a folder under the pool's prefix, no prefix holding another, and no tab or line end in
// an id or a prefix. It sorts once and marshals each distinct row once: O(n log n).
func Encode(s *pipeline.PoolSettings) ([]byte, error) {
	var errs []error
	if s.Pool == "" {
		errs = append(errs, errors.New("pool settings: no pool name"))
	}
	seen := make(map[string]bool, len(s.Tenants))
	for i, t := range s.Tenants {
		switch id := t.ID(); {
		case id == "":
			errs = append(errs, fmt.Errorf("pool settings: tenant %d has no id", i))
		case seen[id]:
			errs = append(errs, fmt.Errorf("pool settings: tenant %q appears twice", id))
		case strings.ContainsAny(id+t.Prefix, "\t\n"):
			errs = append(errs, fmt.Errorf("pool settings: tenant %q: a tab or line end in the id or the prefix %q", id, t.Prefix))
		case !strings.HasPrefix(t.Prefix, s.Prefix) || !strings.HasSuffix(t.Prefix, "/"):
			errs = append(errs, fmt.Errorf("pool settings: tenant %q: prefix %q is not a folder under the pool prefix %q", id, t.Prefix, s.Prefix))
		}
		seen[t.ID()] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	byPrefix := make([]int, len(s.Tenants))
	for i := range byPrefix {
		byPrefix[i] = i
	}
	slices.SortFunc(byPrefix, func(a, b int) int { return strings.Compare(s.Tenants[a].Prefix, s.Tenants[b].Prefix) })
	// Sorted, a prefix that holds another is followed by one it holds.
	for j := 1; j < len(byPrefix); j++ {
		a, b := s.Tenants[byPrefix[j-1]], s.Tenants[byPrefix[j]]
		if strings.HasPrefix(b.Prefix, a.Prefix) {
			errs = append(errs, fmt.Errorf("pool settings: tenant %q: prefix %q holds tenant %q's prefix %q", a.ID(), a.Prefix, b.ID(), b.Prefix))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	// Rows: each distinct one once, equal rows found by their bytes.
	type span struct{ off, n int }
	var rows bytes.Buffer
	byBytes := map[string]span{}
	spans := make([]span, len(s.Tenants))
	for i, t := range s.Tenants {
		r := poolRow{Settings: t.Settings, OnFailure: t.OnFailure, IdempotencyKey: t.IdempotencyKey}
		r.Settings.ID = ""
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("pool settings: tenant %q: %w", t.ID(), err)
		}
		sp, ok := byBytes[string(b)]
		if !ok {
			sp = span{rows.Len(), len(b)}
			rows.Write(b)
			byBytes[string(b)] = sp
		}
		spans[i] = sp
	}

	var index bytes.Buffer
	line := make([]byte, 0, 256)
	pos := make([]int, len(s.Tenants)) // tenant → its index line
	for j, i := range byPrefix {
		t := s.Tenants[i]
		line = append(line[:0], t.ID()...)
		line = append(line, '\t')
		line = append(line, t.Prefix...)
		line = append(line, '\t')
		line = strconv.AppendInt(line, int64(spans[i].off), 10)
		line = append(line, '\t')
		line = strconv.AppendInt(line, int64(spans[i].n), 10)
		line = append(line, '\n')
		index.Write(line)
		pos[i] = j
	}
	byID := make([]int, len(s.Tenants))
	for i := range byID {
		byID[i] = i
	}
	slices.SortFunc(byID, func(a, b int) int { return strings.Compare(s.Tenants[a].ID(), s.Tenants[b].ID()) })
	order := make([]byte, 4*len(byID))
	for k, i := range byID {
		binary.BigEndian.PutUint32(order[4*k:], uint32(pos[i]))
	}

	h, err := json.Marshal(poolHeader{Format: poolSettingsFormat, Version: pipeline.PoolSettingsVersion, Pool: s.Pool, Prefix: s.Prefix,
		Tenants: len(s.Tenants), IndexBytes: int64(index.Len()), RowBytes: int64(rows.Len())})
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(h)+1+index.Len()+len(order)+rows.Len())
	out = append(append(h, '\n'), index.Bytes()...)
	out = append(append(out, order...), rows.Bytes()...)
	return out, nil
}

// Entry is a tenant's line of a pool's index: enough to route its files.
type Entry struct {
	ID     string
	Prefix string
	off, n int64 // the tenant's row in the rows section
}

// ErrUnknownTenant is returned by Index.Tenant for an id that is no tenant of the pool.
var ErrUnknownTenant = errors.New("no tenant of the pool")

// RowError is a tenant whose row could not be read or decoded: only that tenant is affected.
type RowError struct {
	Tenant string
	Err    error
}

func (e *RowError) Error() string {
	return fmt.Sprintf("pool settings: tenant %q: row: %v", e.Tenant, e.Err)
}

func (e *RowError) Unwrap() error { return e.Err }

// Index is a pool's settings file opened for lookups. Opening it reads and checks the header
// and the index; a tenant's row is read (ReadAt) and decoded on its first use, and at most
// MaxCachedRows decoded rows are kept. It is safe for concurrent use.
type Index struct {
	// Pool is the pool's name; Prefix the key prefix of all its tenants (EnvPoolPrefix).
	Pool   string
	Prefix string

	entries []Entry // sorted by prefix
	byID    []int32 // entries in the order of their ids
	rows    io.ReaderAt
	rowBase int64
	closer  io.Closer

	mu    sync.Mutex
	cache map[int64]rowResult // by the row's offset: tenants of one row share it
}

type rowResult struct {
	row poolRow
	err error
}

// Open opens a settings file. The file stays open for the rows: Close closes it.
func Open(path string) (*Index, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pool settings: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("pool settings: %w", err)
	}
	x, err := NewIndex(f, st.Size())
	if err != nil {
		f.Close()
		return nil, err
	}
	x.closer = f
	return x, nil
}

// Parse opens a settings file held in memory.
func Parse(b []byte) (*Index, error) {
	return NewIndex(bytes.NewReader(b), int64(len(b)))
}

// NewIndex reads the header and index of the settings file r of size bytes, and checks them:
// the format and version, the sizes of the sections, ids unique and in order, each prefix a folder
// under the pool's prefix, no prefix holding another, and every row within the file.
func NewIndex(r io.ReaderAt, size int64) (*Index, error) {
	head := make([]byte, min(size, maxPoolHeaderBytes))
	if _, err := r.ReadAt(head, 0); err != nil && err != io.EOF {
		return nil, fmt.Errorf("pool settings: %w", err)
	}
	nl := bytes.IndexByte(head, '\n')
	if nl < 0 {
		return nil, fmt.Errorf("pool settings: no header line in the first %d bytes: not a version %d settings file", len(head), pipeline.PoolSettingsVersion)
	}
	var h poolHeader
	if err := json.Unmarshal(head[:nl], &h); err != nil {
		return nil, fmt.Errorf("pool settings: header: not a version %d settings file: %w", pipeline.PoolSettingsVersion, err)
	}
	if h.Version != pipeline.PoolSettingsVersion {
		return nil, fmt.Errorf("pool settings: version %d, want %d", h.Version, pipeline.PoolSettingsVersion)
	}
	if h.Format != poolSettingsFormat {
		return nil, fmt.Errorf("pool settings: format %q, want %q", h.Format, poolSettingsFormat)
	}
	if h.Pool == "" {
		return nil, errors.New("pool settings: no pool name")
	}
	indexAt := int64(nl) + 1
	if h.Tenants < 0 || h.IndexBytes < 0 || h.RowBytes < 0 || int64(h.Tenants) > size || h.IndexBytes > size || h.RowBytes > size {
		return nil, fmt.Errorf("pool settings: %d bytes, but the header gives %d tenants, %d bytes of index and %d of rows: the file is truncated or damaged", size, h.Tenants, h.IndexBytes, h.RowBytes)
	}
	if want := indexAt + h.IndexBytes + 4*int64(h.Tenants) + h.RowBytes; size != want {
		return nil, fmt.Errorf("pool settings: %d bytes, want %d as the header gives: the file is truncated or damaged", size, want)
	}
	// The index is read straight into the string its entries' ids and prefixes point into: one
	// copy of it in memory, never two.
	var index strings.Builder
	index.Grow(int(h.IndexBytes))
	if _, err := io.CopyN(&index, io.NewSectionReader(r, indexAt, h.IndexBytes), h.IndexBytes); err != nil {
		return nil, fmt.Errorf("pool settings: index: %w", err)
	}
	order := make([]byte, 4*int64(h.Tenants))
	if _, err := r.ReadAt(order, indexAt+h.IndexBytes); err != nil && !(err == io.EOF && len(order) == 0) {
		return nil, fmt.Errorf("pool settings: id order: %w", err)
	}
	x := &Index{Pool: h.Pool, Prefix: h.Prefix, rows: r, rowBase: indexAt + h.IndexBytes + int64(len(order)), cache: map[int64]rowResult{}}
	if err := x.parseIndex(index.String(), h.Tenants, h.RowBytes); err != nil {
		return nil, err
	}
	if err := x.parseOrder(order); err != nil {
		return nil, err
	}
	return x, nil
}

func (x *Index) parseIndex(index string, n int, rowBytes int64) error {
	x.entries = make([]Entry, 0, n)
	for len(index) > 0 {
		line, rest, ok := strings.Cut(index, "\n")
		if !ok {
			return fmt.Errorf("pool settings: index line %d has no line end", len(x.entries)+1)
		}
		index = rest
		e, err := parseEntry(line, rowBytes)
		if err != nil {
			return fmt.Errorf("pool settings: index line %d: %w", len(x.entries)+1, err)
		}
		if !strings.HasPrefix(e.Prefix, x.Prefix) || !strings.HasSuffix(e.Prefix, "/") {
			return fmt.Errorf("pool settings: tenant %q: prefix %q is not a folder under the pool prefix %q", e.ID, e.Prefix, x.Prefix)
		}
		if k := len(x.entries); k > 0 {
			prev := x.entries[k-1]
			switch {
			case e.Prefix <= prev.Prefix:
				return fmt.Errorf("pool settings: index line %d: prefix %q is not after %q: the index is not sorted", k+1, e.Prefix, prev.Prefix)
			case strings.HasPrefix(e.Prefix, prev.Prefix):
				return fmt.Errorf("pool settings: tenant %q: prefix %q holds tenant %q's prefix %q", prev.ID, prev.Prefix, e.ID, e.Prefix)
			}
		}
		x.entries = append(x.entries, e)
	}
	if len(x.entries) != n {
		return fmt.Errorf("pool settings: index has %d tenants, the header %d", len(x.entries), n)
	}
	return nil
}

func parseEntry(line string, rowBytes int64) (Entry, error) {
	var f [4]string
	rest, ok := line, true
	for i := range f {
		if i == len(f)-1 {
			f[i] = rest
			break
		}
		if f[i], rest, ok = strings.Cut(rest, "\t"); !ok {
			return Entry{}, fmt.Errorf("%d fields, want 4 (id, prefix, offset, length)", i+1)
		}
	}
	if strings.Contains(f[3], "\t") {
		return Entry{}, errors.New("more than 4 fields, want 4 (id, prefix, offset, length)")
	}
	off, err1 := strconv.ParseInt(f[2], 10, 64)
	n, err2 := strconv.ParseInt(f[3], 10, 64)
	switch {
	case f[0] == "":
		return Entry{}, errors.New("a tenant has no id")
	case err1 != nil || err2 != nil || off < 0 || n < 0 || off+n > rowBytes:
		return Entry{}, fmt.Errorf("tenant %q: row at %s length %s is not within the %d bytes of rows", f[0], f[2], f[3], rowBytes)
	}
	return Entry{ID: f[0], Prefix: f[1], off: off, n: n}, nil
}

// parseOrder reads the id order: strictly increasing ids over every entry, so unique ones.
func (x *Index) parseOrder(b []byte) error {
	x.byID = make([]int32, len(x.entries))
	for k := range x.byID {
		i := binary.BigEndian.Uint32(b[4*k:])
		if int64(i) >= int64(len(x.entries)) {
			return fmt.Errorf("pool settings: id order: entry %d of %d", i, len(x.entries))
		}
		x.byID[k] = int32(i)
		if k > 0 {
			if prev, id := x.entries[x.byID[k-1]].ID, x.entries[i].ID; id <= prev {
				if id == prev {
					return fmt.Errorf("pool settings: tenant %q appears twice", id)
				}
				return fmt.Errorf("pool settings: id order: %q is not after %q", id, prev)
			}
		}
	}
	return nil
}

// Close closes the file Open opened.
func (x *Index) Close() error {
	if x.closer == nil {
		return nil
	}
	return x.closer.Close()
}

// Len is the number of tenants.
func (x *Index) Len() int { return len(x.entries) }

// TenantOf finds the tenant whose prefix holds key, in O(log n): the last prefix sorted at or
// before key is the only one that can hold it, since no prefix holds another (every string
// between a prefix and a key it holds starts with that prefix). The prefix is then confirmed, so
// that a key is never given to a sibling ("inbox/acme2/a.csv" is not acme's). ok is false for a
// key of no tenant.
func (x *Index) TenantOf(key string) (Entry, bool) {
	i, _ := slices.BinarySearchFunc(x.entries, key, func(e Entry, k string) int {
		if e.Prefix <= k {
			return -1
		}
		return 1
	})
	if i == 0 {
		return Entry{}, false
	}
	e := x.entries[i-1]
	if !strings.HasPrefix(key, e.Prefix) {
		return Entry{}, false
	}
	return e, true
}

// Entry finds the tenant with this id, in O(log n).
func (x *Index) Entry(id string) (Entry, bool) {
	k, ok := slices.BinarySearchFunc(x.byID, id, func(i int32, id string) int { return strings.Compare(x.entries[i].ID, id) })
	if !ok {
		return Entry{}, false
	}
	return x.entries[x.byID[k]], true
}

// All yields every tenant's entry, in the order of their ids.
func (x *Index) All() iter.Seq[Entry] {
	return func(yield func(Entry) bool) {
		for _, i := range x.byID {
			if !yield(x.entries[i]) {
				return
			}
		}
	}
}

// Tenant returns the settings of the tenant with this id, its row read and decoded on first use.
// The error is ErrUnknownTenant for an id of no tenant, or a *RowError when the tenant's
// row cannot be read or decoded: only that tenant (and any sharing its row) is affected.
func (x *Index) Tenant(id string) (pipeline.PoolTenant, error) {
	e, ok := x.Entry(id)
	if !ok {
		return pipeline.PoolTenant{}, ErrUnknownTenant
	}
	r := x.row(e)
	if r.err != nil {
		return pipeline.PoolTenant{}, &RowError{Tenant: id, Err: r.err}
	}
	t := pipeline.PoolTenant{Settings: r.row.Settings, Prefix: e.Prefix, OnFailure: r.row.OnFailure, IdempotencyKey: r.row.IdempotencyKey}
	t.Settings.ID = id
	// Tenants sharing a row must not share what a caller may change.
	if cs := t.Settings.CoreSystem; cs != nil {
		c := *cs
		t.Settings.CoreSystem = &c
	}
	if d := t.Settings.DynamoDB; d != nil {
		c := *d
		c.Key = slices.Clone(d.Key)
		t.Settings.DynamoDB = &c
	}
	t.Settings.RejectStatuses = slices.Clone(t.Settings.RejectStatuses)
	t.Settings.KeyColumns = slices.Clone(t.Settings.KeyColumns)
	return t, nil
}

func (x *Index) row(e Entry) rowResult {
	x.mu.Lock()
	r, ok := x.cache[e.off]
	x.mu.Unlock()
	if ok {
		return r
	}
	r, readErr := decodeRow(x.rows, x.rowBase+e.off, e.n)
	if readErr {
		return r // not kept: the next use reads again
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.cache) >= MaxCachedRows {
		for k := range x.cache { // any one: a row is cheap to read again
			delete(x.cache, k)
			break
		}
	}
	x.cache[e.off] = r
	return r
}

// decodeRow reads a row strictly: unknown fields and trailing data are errors. readErr says the
// row could not be read at all, which may pass; a row that does not decode stays bad.
func decodeRow(r io.ReaderAt, at, n int64) (_ rowResult, readErr bool) {
	b := make([]byte, n)
	if _, err := r.ReadAt(b, at); err != nil && !(err == io.EOF && n == 0) {
		return rowResult{err: err}, true
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var row poolRow
	if err := dec.Decode(&row); err != nil {
		return rowResult{err: err}, false
	}
	if dec.More() {
		return rowResult{err: errors.New("data after the row")}, false
	}
	if row.Settings.ID != "" {
		return rowResult{err: fmt.Errorf("the row names id %q: the index gives a tenant's id", row.Settings.ID)}, false
	}
	return rowResult{row: row}, false
}

// Load reads a whole settings file and decodes every row: for tools and tests. A
// function serving the pool opens it with Open instead.
func Load(path string) (*pipeline.PoolSettings, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pool settings: %w", err)
	}
	return ParseSettings(b)
}

// ParseSettings decodes a whole settings file (Encode's output), its tenants in the order of
// their ids. Every bad row is reported.
func ParseSettings(b []byte) (*pipeline.PoolSettings, error) {
	x, err := Parse(b)
	if err != nil {
		return nil, err
	}
	s := &pipeline.PoolSettings{Version: pipeline.PoolSettingsVersion, Pool: x.Pool, Prefix: x.Prefix, Tenants: make([]pipeline.PoolTenant, 0, x.Len())}
	var errs []error
	for e := range x.All() {
		t, err := x.Tenant(e.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.Tenants = append(s.Tenants, t)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}
