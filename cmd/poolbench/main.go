// Command poolbench measures how a pool function loads its settings file and finds a key's
// tenant, at a pool of many generated tenants (default 100,000), beside a reference measured in
// the same run on the same tenants: the version 1 settings file (one JSON document, read whole)
// and its linear scan, kept here only. Each load runs in a child process of its own, so that its
// CPU time and peak RSS are its own. It prints one line for scripts/bench.sh:
//
//	pool-settings: <n> tenants, <MB> MB; start-up <ms> ms CPU, peak <MB> MB; lookup <µs> µs/key; reference (JSON, linear scan): start-up …; ratio start-up <x>x, lookup <x>x
//
// The controller and the router load the file alike (poolsettings.Open at start); start-up
// is the larger of the two, each measured in its own child. Goals: start-up ≤ 100 ms CPU and
// ≤ 48 MB peak, lookup ≤ 10 µs per key; -strict makes a missed goal exit 3.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/example/tenantpipeline/spec"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
)

const (
	benchPool   = "bench"
	benchPrefix = "pools/bench/"
	// Goals of a 128 MB function with 10 s of init (docs: README, "Pool settings at scale").
	goalStartupMS = 100
	goalPeakMB    = 48
	goalLookupUS  = 10
)

func main() {
	n := flag.Int("tenants", 100_000, "tenants of the generated pool")
	dir := flag.String("dir", "bench/out", "directory of the generated settings files (reused)")
	strict := flag.Bool("strict", false, "exit 3 when a goal is missed")
	distinct := flag.Bool("distinct-rows", false, "give every tenant a row of its own (a register endpoint and secret each): the largest file")
	child := flag.String("child", "", "internal: generate the files (gen), or measure one load (controller, router or reference) of the file given as argument")
	flag.Parse()
	switch *child {
	case "":
	case "gen":
		if err := generate(*n, *distinct, flag.Arg(0), flag.Arg(1)); err != nil {
			fmt.Fprintln(os.Stderr, "poolbench:", err)
			os.Exit(1)
		}
		return
	default:
		if err := measure(*child, flag.Arg(0), *n); err != nil {
			fmt.Fprintln(os.Stderr, "poolbench:", err)
			os.Exit(1)
		}
		return
	}
	line, missed, err := run(*n, *distinct, *dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "poolbench:", err)
		os.Exit(1)
	}
	fmt.Println(line)
	for _, m := range missed {
		fmt.Fprintln(os.Stderr, "bench: below goal:", m)
	}
	if *strict && len(missed) > 0 {
		os.Exit(3)
	}
}

// figures are what a child reports: k=v on one line.
type figures struct {
	startupMS, peakMB, lookupUS float64
}

// run generates the files and measures each load in a child. The parent stays small: a child's
// peak RSS starts from its parent's at the fork, so the generation runs in a child too.
func run(n int, distinct bool, dir string) (string, []string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("pool-settings-%d", n)
	if distinct {
		name += "-distinct"
	}
	v2, v1 := filepath.Join(dir, name+".v2"), filepath.Join(dir, name+".v1.json")
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	gen := exec.Command(self, "-child", "gen", "-tenants", strconv.Itoa(n), "-distinct-rows="+strconv.FormatBool(distinct), v1, v2)
	gen.Stderr = os.Stderr
	if err := gen.Run(); err != nil {
		return "", nil, fmt.Errorf("generate: %w", err)
	}
	got := map[string]figures{}
	for _, c := range []struct{ kind, file string }{{"controller", v2}, {"router", v2}, {"reference", v1}} {
		out, err := exec.Command(self, "-child", c.kind, "-tenants", strconv.Itoa(n), c.file).Output()
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", c.kind, err)
		}
		f, err := parseFigures(string(out))
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", c.kind, err)
		}
		got[c.kind] = f
	}
	ours := got["controller"]
	if r := got["router"]; r.startupMS > ours.startupMS {
		ours.startupMS = r.startupMS
	}
	ours.peakMB = max(ours.peakMB, got["router"].peakMB)
	ours.lookupUS = got["router"].lookupUS
	ref := got["reference"]
	st, err := os.Stat(v2)
	if err != nil {
		return "", nil, err
	}
	line := fmt.Sprintf("pool-settings: %d tenants, %.1f MB; start-up %.0f ms CPU, peak %.0f MB; lookup %.2f µs/key; "+
		"reference (JSON, linear scan): start-up %.0f ms CPU, peak %.0f MB, lookup %.0f µs/key; ratio start-up %.0fx, lookup %.0fx",
		n, float64(st.Size())/1e6, ours.startupMS, ours.peakMB, ours.lookupUS,
		ref.startupMS, ref.peakMB, ref.lookupUS, ref.startupMS/max(ours.startupMS, 1), ref.lookupUS/max(ours.lookupUS, 0.001))
	var missed []string
	if ours.startupMS > goalStartupMS {
		missed = append(missed, fmt.Sprintf("pool settings start-up %.0f ms CPU > %d ms", ours.startupMS, goalStartupMS))
	}
	if ours.peakMB > goalPeakMB {
		missed = append(missed, fmt.Sprintf("pool settings peak %.0f MB > %d MB", ours.peakMB, goalPeakMB))
	}
	if ours.lookupUS > goalLookupUS {
		missed = append(missed, fmt.Sprintf("pool settings lookup %.2f µs/key > %d µs", ours.lookupUS, goalLookupUS))
	}
	return line, missed, nil
}

func parseFigures(line string) (figures, error) {
	var f figures
	seen := 0
	for _, kv := range strings.Fields(line) {
		k, v, _ := strings.Cut(kv, "=")
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return f, fmt.Errorf("%q: %w", kv, err)
		}
		switch k {
		case "startup_ms":
			f.startupMS = x
		case "maxrss_MB":
			f.peakMB = x
		case "lookup_us":
			f.lookupUS = x
		default:
			continue
		}
		seen++
	}
	if seen != 3 {
		return f, fmt.Errorf("got %q, want startup_ms, maxrss_MB and lookup_us", line)
	}
	return f, nil
}

// tenantID is the generated pool's tenant i.
func tenantID(i int) string { return fmt.Sprintf("tenant-%06d", i) }

// tenants generates n pooled tenants of 30 plans (chunk size, policy, weight, core system); with
// distinct, each has its own register endpoint and secret, so its own row: the largest file.
func tenants(n int, distinct bool) *pipeline.PoolSettings {
	s := &pipeline.PoolSettings{Version: pipeline.PoolSettingsVersion, Pool: benchPool, Prefix: benchPrefix, Tenants: make([]pipeline.PoolTenant, 0, n)}
	for i := range n {
		id := tenantID(i)
		url, secret := "https://core.example.com/ledger/records", "arn:aws:secretsmanager:eu-west-1:123456789012:secret:tenantpipeline/ledger-AbCdEf"
		if distinct {
			url = "https://core.example.com/tenants/" + id + "/records"
			secret = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:tenantpipeline/" + id + "/register-AbCdEf"
		}
		t := pipeline.PoolTenant{
			Settings: pipeline.Tenant{Tenant: spec.Tenant{ID: id, Format: pipeline.FormatCSV, Encoding: pipeline.EncodingUTF8, ChunkSize: 100 + i%5*100, MaxFieldBytes: 65536, RegisterURL: url, RegisterAuthSecretARN: secret, RegisterMode: pipeline.RegisterModeBatch, MaxBatchBytes: 262144, Weight: 1 + i%3}},
			Prefix:   benchPrefix + id + "/", OnFailure: []string{pipeline.OnFailureContinue, pipeline.OnFailureHalt}[i%2],
			IdempotencyKey: pipeline.IdempotencyEventID,
		}
		if i%10 == 0 {
			t.Settings.CoreSystem = &pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 20, MaxRecordsPerSecond: 500}
		}
		s.Tenants = append(s.Tenants, t)
	}
	return s
}

// generate writes both files of the same tenants, unless they are there already.
func generate(n int, distinct bool, v1, v2 string) error {
	if _, err := os.Stat(v2); err == nil {
		if _, err := os.Stat(v1); err == nil {
			return nil
		}
	}
	s := tenants(n, distinct)
	b, err := poolsettings.Encode(s)
	if err != nil {
		return err
	}
	if err := os.WriteFile(v2, b, 0o644); err != nil {
		return err
	}
	old := *s
	old.Version = 1
	if b, err = json.Marshal(old); err != nil {
		return err
	}
	return os.WriteFile(v1, b, 0o644)
}

// measure is a child: it loads the file as kind does, times the loading in CPU (user+sys) and
// then the lookups, and prints its figures with its peak RSS.
func measure(kind, path string, n int) error {
	keys := lookupKeys(n)
	before := cpu()
	var lookup func(key string) (string, bool)
	switch kind {
	case "controller", "router":
		x, err := poolsettings.Open(path)
		if err != nil {
			return err
		}
		if kind == "controller" {
			// A controller's first message decodes its tenant's row.
			if _, err := x.Tenant(tenantID(n / 2)); err != nil {
				return err
			}
		}
		// The router's work for each event: the key's tenant, and its row (cached) checked.
		lookup = func(key string) (string, bool) {
			e, ok := x.TenantOf(key)
			if ok {
				if _, err := x.Tenant(e.ID); err != nil {
					return "", false
				}
			}
			return e.ID, ok
		}
	case "reference":
		s, err := loadV1(path)
		if err != nil {
			return err
		}
		lookup = func(key string) (string, bool) {
			t, ok := s.tenantOf(key)
			return t.ID(), ok
		}
	default:
		return fmt.Errorf("-child %q: want controller, router or reference", kind)
	}
	startup := cpu() - before

	// Lookups: as many as fit about a second of CPU, at least len(keys) of them, of tenants in
	// random order; each answer is checked. CPU time, not wall time: the machine may be shared.
	rounds, start := 0, cpu()
	for rounds == 0 || cpu()-start < time.Second {
		for _, k := range keys {
			id, ok := lookup(k.key)
			if !ok || id != k.id {
				return fmt.Errorf("lookup %q: got %q, %v, want %s", k.key, id, ok, k.id)
			}
		}
		rounds++
	}
	perKey := (cpu() - start).Seconds() * 1e6 / float64(rounds*len(keys))
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return err
	}
	// Linux reports ru_maxrss in KiB.
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(w, "startup_ms=%.1f maxrss_MB=%.1f lookup_us=%.3f\n", startup.Seconds()*1000, float64(ru.Maxrss)/1024, perKey)
	return w.Flush()
}

type lookupKey struct{ key, id string }

// lookupKeys are 1,000 keys of random tenants (fewer for a small pool), the same in every run.
func lookupKeys(n int) []lookupKey {
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]lookupKey, min(n, 1000))
	for i := range keys {
		id := tenantID(r.IntN(n))
		keys[i] = lookupKey{benchPrefix + id + "/2026-12-01 orders.csv", id}
	}
	return keys
}

func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// v1Settings is the version 1 file and its reader, as the functions read it before the index:
// the whole file decoded and checked at start, and a linear scan for a key's tenant.
type v1Settings struct {
	Version int                   `json:"version"`
	Pool    string                `json:"pool"`
	Prefix  string                `json:"prefix"`
	Tenants []pipeline.PoolTenant `json:"tenants"`
}

func loadV1(path string) (*v1Settings, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s v1Settings
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	var errs []error
	if s.Version != 1 {
		errs = append(errs, fmt.Errorf("version %d, want 1", s.Version))
	}
	seen := map[string]bool{}
	for i, t := range s.Tenants {
		switch {
		case t.ID() == "":
			errs = append(errs, fmt.Errorf("tenant %d has no id", i))
		case seen[t.ID()]:
			errs = append(errs, fmt.Errorf("tenant %q appears twice", t.ID()))
		case !strings.HasPrefix(t.Prefix, s.Prefix) || !strings.HasSuffix(t.Prefix, "/"):
			errs = append(errs, fmt.Errorf("tenant %q: prefix %q is not a folder under the pool prefix %q", t.ID(), t.Prefix, s.Prefix))
		}
		seen[t.ID()] = true
	}
	return &s, errors.Join(errs...)
}

func (s *v1Settings) tenantOf(key string) (pipeline.PoolTenant, bool) {
	best, found := pipeline.PoolTenant{}, false
	for _, t := range s.Tenants {
		if strings.HasPrefix(key, t.Prefix) && (!found || len(t.Prefix) > len(best.Prefix)) {
			best, found = t, true
		}
	}
	return best, found
}
