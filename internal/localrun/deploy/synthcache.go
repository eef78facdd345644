package deploy

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/example/tenantpipeline/internal/tenants"
)

// Synths synthesizes each distinct app once per process: tenants files that hold the same JSON
// values (whatever their spacing, indentation or key order) with the same extra context share one
// cdk synth and one cloud assembly. The content key is the app's module root, the tenants file's
// values and the extra context: the module's source does not change while a process runs.
type Synths struct {
	Dir string // one folder per distinct app is made here, with its tenants.json and cdk.out
	// Synth synthesizes one app; nil is Synth (cdk synth). The tests give Batch.Synth.
	Synth func(ctx context.Context, root, tenantsFile, out string, extra map[string]string) error

	mu   sync.Mutex
	apps map[string]*synthOnce
	runs atomic.Int64
}

type synthOnce struct {
	once sync.Once
	dir  string
	err  error
}

// Assembly returns the cloud assembly of the app for tenantsJSON and extra, synthesizing it on the
// first call for its content. A failed synth fails every call for that content.
func (s *Synths) Assembly(ctx context.Context, root string, tenantsJSON []byte, extra map[string]string) (string, error) {
	key := ContentKey(root, tenantsJSON, extra)
	s.mu.Lock()
	if s.apps == nil {
		s.apps = map[string]*synthOnce{}
	}
	app := s.apps[key]
	if app == nil {
		app = &synthOnce{}
		s.apps[key] = app
	}
	s.mu.Unlock()
	app.once.Do(func() {
		dir := filepath.Join(s.Dir, "app-"+key[:12])
		if app.err = os.MkdirAll(dir, 0o755); app.err != nil {
			return
		}
		file := filepath.Join(dir, "tenants.json")
		if app.err = os.WriteFile(file, tenantsJSON, 0o644); app.err != nil {
			return
		}
		s.runs.Add(1)
		app.dir = filepath.Join(dir, "cdk.out")
		synth := s.Synth
		if synth == nil {
			synth = Synth
		}
		app.err = synth(ctx, root, file, app.dir, extra)
	})
	return app.dir, app.err
}

// Runs is how many times Assembly ran cdk synth.
func (s *Synths) Runs() int64 { return s.runs.Load() }

// ContentKey is the hex SHA-256 of an app's inputs: its module root, the tenants file as the app
// reads it (canonicalJSON) and the extra context in key order.
func ContentKey(root string, tenantsJSON []byte, extra map[string]string) string {
	h := sha256.New()
	h.Write([]byte(root + "\x00"))
	h.Write(canonicalJSON(tenantsJSON, extra))
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		h.Write([]byte("\x00" + k + "=" + extra[k]))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// canonicalJSON is the tenants file as the app reads it: parsed and defaulted by the app's own
// parser (tenants.Parse, with the context the app takes its options from), then marshalled, so
// that a field written with its default value keys as the field left out. A file the parser
// refuses keys by its JSON values, and one that is not JSON by its bytes.
func canonicalJSON(b []byte, extra map[string]string) []byte {
	o := tenants.Options{RegisterURL: cmp.Or(extra["registerUrl"], os.Getenv(tenants.EnvRegisterURL)), DefaultTier: extra["defaultTier"]}
	if f, err := tenants.Parse(b, o); err == nil {
		if out, err := json.Marshal(f); err == nil {
			return append([]byte("config\x00"), out...)
		}
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() {
		return append([]byte("raw\x00"), b...)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return append([]byte("raw\x00"), b...)
	}
	return append([]byte("json\x00"), out...)
}
