//go:build e2e

package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/tenants"
)

// CloudFormation's limits per stack: 500 resources, and 1 MB for a template body read from S3
// (how the CDK CLI deploys large templates).
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html
const (
	maxStackResources = 500
	maxTemplateBytes  = 1 << 20
)

// TestScale synthesizes SCALE_TENANTS tenants of the tier SCALE_TIER (silo, the default, or pool;
// default 100 tenants; `make scale` runs 1,000 silo or 10,000 pooled) with the app binary, as
// `cdk synth` does, and checks every stack against CloudFormation's limits, that no two log groups
// share a name and no two state machines log to the same group, the rule-quota warning, and for
// the pooled tier the constant-size bounds. It prints one line: tenants, stacks, resources, IAM
// roles, alarms and rules counted from the templates, the synth's wall time and the peak memory
// of the app and its jsii runtime.
func TestScale(t *testing.T) {
	t.Parallel() // child processes only, never this binary's jsii runtime
	n := 100
	if v := os.Getenv("SCALE_TENANTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("SCALE_TENANTS=%q: want a positive whole number", v)
		}
	}
	tier := os.Getenv("SCALE_TIER")
	switch tier {
	case "":
		tier = "silo"
	case "silo", "pool":
	default:
		t.Fatalf("SCALE_TIER=%q: want silo or pool", tier)
	}
	scale(t, n, tier)
}

// TestScalePool: 100 pooled tenants fit the pooled tier's constant bounds (the same bounds hold at
// 10,000: make scale SCALE_TIER=pool).
func TestScalePool(t *testing.T) {
	t.Parallel() // child processes only, never this binary's jsii runtime
	if os.Getenv("SCALE_TENANTS") != "" {
		t.Skip("make scale runs TestScale alone")
	}
	scale(t, 100, "pool")
}

// poolReferenceTenants is the pooled tenant count whose resources every other count must have.
const poolReferenceTenants = 100

// Pooled-tier bounds for the whole app, whatever the tenant count.
const (
	poolMaxRoles     = 20
	poolMaxAlarms    = 40
	poolMaxRules     = 10 + tenants.DefaultPoolIntakeGroups // the default intake's rules, one per group
	poolMaxResources = 300
)

func scale(t *testing.T, n int, tier string) {
	outdir, wall, peakRSS := synthTenants(t, n, tier)
	templates, _ := filepath.Glob(filepath.Join(outdir, "*.template.json"))
	want := 1 + (n+9)/10
	if tier == "pool" {
		want = 2 // the ingest stack and the default pool
	}
	if len(templates) != want {
		t.Errorf("got %d templates, want %d", len(templates), want)
	}
	counts := map[string]int{}
	resources := 0
	logGroupNames := map[string]string{}
	destinations := map[string]string{}
	queues := 0
	largest, most := 0, 0
	for _, p := range templates {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		stack := strings.TrimSuffix(filepath.Base(p), ".template.json")
		largest = max(largest, len(b))
		if len(b) > maxTemplateBytes {
			t.Errorf("%s: template of %d bytes, over CloudFormation's %d", stack, len(b), maxTemplateBytes)
		}
		var tpl struct {
			Resources map[string]struct {
				Type       string
				Properties map[string]any
			}
		}
		if err := json.Unmarshal(b, &tpl); err != nil {
			t.Fatalf("%s: %v", stack, err)
		}
		most = max(most, len(tpl.Resources))
		resources += len(tpl.Resources)
		for _, r := range tpl.Resources {
			counts[r.Type]++
		}
		if len(tpl.Resources) > maxStackResources {
			t.Errorf("%s: %d resources, over CloudFormation's %d", stack, len(tpl.Resources), maxStackResources)
		}
		// A log group's identity: its name when set (the same in every stack), else its logical id
		// within its stack.
		groupKey := func(id string) string {
			if name, ok := tpl.Resources[id].Properties["LogGroupName"]; ok {
				return asJSON(name)
			}
			return stack + "/" + id
		}
		for id, r := range tpl.Resources {
			switch r.Type {
			case "AWS::SQS::Queue":
				queues++
			case "AWS::Logs::LogGroup":
				if name, ok := r.Properties["LogGroupName"]; ok {
					k := asJSON(name)
					if other, dup := logGroupNames[k]; dup {
						t.Errorf("log group name %s: %s/%s and %s", k, stack, id, other)
					}
					logGroupNames[k] = stack + "/" + id
				}
			case "AWS::StepFunctions::StateMachine":
				var lc struct {
					Destinations []struct {
						CloudWatchLogsLogGroup struct{ LogGroupArn any }
					}
				}
				b, _ := json.Marshal(r.Properties["LoggingConfiguration"])
				json.Unmarshal(b, &lc)
				if len(lc.Destinations) == 0 {
					t.Errorf("%s/%s: state machine without a log destination", stack, id)
				}
				for _, d := range lc.Destinations {
					k := asJSON(d.CloudWatchLogsLogGroup.LogGroupArn)
					var ga struct {
						GetAtt []string `json:"Fn::GetAtt"`
					}
					if json.Unmarshal([]byte(k), &ga) == nil && len(ga.GetAtt) == 2 {
						k = groupKey(ga.GetAtt[0])
					}
					// A tenant's file and segment state machines may share its group; two tenants never.
					tenant := stack + "/" + tenantOfID.FindString(id)
					if other, dup := destinations[k]; dup && other != tenant {
						t.Errorf("state machines of %s and %s log to the same group %s", tenant, other, k)
					}
					destinations[k] = tenant
				}
			}
		}
	}
	t.Logf("largest template %d KB, most resources in a stack %d, %d named log groups, %d state machine log destinations",
		largest>>10, most, len(logGroupNames), len(destinations))
	roles, alarms, rules := counts["AWS::IAM::Role"], counts["AWS::CloudWatch::Alarm"], counts["AWS::Events::Rule"]
	pooled := 0
	if tier == "pool" {
		pooled = n
	}
	// The one line make scale prints.
	fmt.Printf("scale: %d tenants (%d pool, %d silo): %d stacks, %d resources, %d IAM roles, %d alarms, %d rules; synth %.1f s, peak %d MB\n",
		n, pooled, n-pooled, len(templates), resources, roles, alarms, rules, wall.Seconds(), peakRSS>>20)
	if tier == "pool" {
		for _, b := range []struct {
			what       string
			got, limit int
		}{{"IAM roles", roles, poolMaxRoles}, {"alarms", alarms, poolMaxAlarms}, {"EventBridge rules", rules, poolMaxRules}, {"resources", resources, poolMaxResources}} {
			if b.got > b.limit {
				t.Errorf("%d pooled tenants: %d %s in the app, want at most %d whatever the tenant count", n, b.got, b.what, b.limit)
			}
		}
		// Constant size means the same resources, stack by stack and type by type, as the
		// reference count of tenants has; bounds alone would let a pool grow below them.
		if n != poolReferenceTenants {
			ref, _, _ := synthTenants(t, poolReferenceTenants, tier)
			got, want := resourcesByStack(t, outdir), resourcesByStack(t, ref)
			for _, stack := range slices.Sorted(maps.Keys(want)) {
				if !maps.Equal(got[stack], want[stack]) {
					t.Errorf("%s: %d pooled tenants give resources %v, want those of %d tenants %v", stack, n, got[stack], poolReferenceTenants, want[stack])
				}
			}
			if len(got) != len(want) {
				t.Errorf("%d pooled tenants give %d stacks, want those of %d tenants, %d", n, len(got), poolReferenceTenants, len(want))
			}
		}
	} else {
		if queues < n {
			t.Errorf("got %d queues, want at least one per tenant (%d)", queues, n)
		}
		if len(destinations) < n {
			t.Errorf("got %d distinct state machine log destinations, want at least one per tenant (%d)", len(destinations), n)
		}
	}

	// Annotations land in the stacks' metadata, written beside the manifest.
	metadata, _ := filepath.Glob(filepath.Join(outdir, "*.json"))
	warned := false
	for _, p := range metadata {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		warned = warned || bytes.Contains(b, []byte("EventBridge rules on the default event bus"))
	}
	// Two rules per tenant (per pool, pooled) on the default bus: the files' rule and the wake-up status rule.
	if want := rules > 300; warned != want {
		t.Errorf("%d rules on the default event bus: got the quota warning %v, want %v", rules, warned, want)
	}
}

// synthTenants synthesizes n tenants of tier with the app binary into a temporary folder, and
// returns it with the synth's wall time and peak memory.
func synthTenants(t *testing.T, n int, tier string) (outdir string, wall time.Duration, peakRSS int64) {
	t.Helper()
	var entries []string
	for i := range n {
		if tier == "pool" {
			entries = append(entries, fmt.Sprintf(`{"id": "tenant-%04d", "tier": "pool"}`, i))
		} else {
			entries = append(entries, fmt.Sprintf(`{"id": "tenant-%04d"}`, i))
		}
	}
	tenantsFile := writeFile(t, "tenants.json", `{"tenants": [`+strings.Join(entries, ",\n")+`]}`)
	bin, err := appBinary()
	if err != nil {
		t.Fatalf("building the app: %v", err)
	}
	outdir = t.TempDir()
	ctx, _ := json.Marshal(map[string]any{"tenantsFile": tenantsFile, "registerUrl": "https://core.example.com/records"})
	cmd := exec.Command(bin)
	cmd.Dir = ".."
	// CI= : under CI=true synth refuses to write the stack assignment this temp tenants file lacks.
	cmd.Env = append(os.Environ(), "CDK_CONTEXT_JSON="+string(ctx), "CDK_OUTDIR="+outdir, "CI=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	peak := make(chan int64)
	stop := make(chan struct{})
	go func() { peak <- watchTreeRSS(cmd.Process.Pid, stop) }()
	err = cmd.Wait()
	wall = time.Since(start)
	close(stop)
	peakRSS = <-peak
	if err != nil {
		t.Fatalf("synth of %d tenants: %v\n%s", n, err, out.String())
	}
	// CPU time counts the app and the children it waited for (the jsii runtime, go build), so it
	// says what the synth costs on a machine shared with other work.
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	t.Logf("synth of %d %s tenants: %.1f s wall, %.1f s CPU, peak RSS %d MB (app, jsii runtime and bundling builds together)",
		n, tier, wall.Seconds(), cpu.Seconds(), peakRSS>>20)

	return outdir, wall, peakRSS
}

// resourcesByStack counts the resources of each template in outdir by stack and type.
func resourcesByStack(t *testing.T, outdir string) map[string]map[string]int {
	t.Helper()
	templates, _ := filepath.Glob(filepath.Join(outdir, "*.template.json"))
	out := map[string]map[string]int{}
	for _, p := range templates {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var tpl struct {
			Resources map[string]struct{ Type string }
		}
		if err := json.Unmarshal(b, &tpl); err != nil {
			t.Fatal(err)
		}
		counts := map[string]int{}
		for _, r := range tpl.Resources {
			counts[r.Type]++
		}
		out[strings.TrimSuffix(filepath.Base(p), ".template.json")] = counts
	}
	return out
}

// tenantOfID finds the tenant in a logical id: the construct "Tenant-tenant-0042" gives ids
// starting with "Tenanttenant0042".
var tenantOfID = regexp.MustCompile(`^Tenanttenant[0-9]{4}`)

// watchTreeRSS samples the resident memory of pid and all its descendants until stop closes, and
// returns the largest sum seen, in bytes.
func watchTreeRSS(pid int, stop <-chan struct{}) int64 {
	var peak int64
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		peak = max(peak, treeRSS(pid))
		select {
		case <-stop:
			return peak
		case <-tick.C:
		}
	}
}

func treeRSS(root int) int64 {
	parent := map[int]int{}
	rss := map[int]int64{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... ; comm may hold spaces, so split after the last ')'.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 22 {
			continue
		}
		parent[pid], _ = strconv.Atoi(f[1])
		pages, _ := strconv.ParseInt(f[21], 10, 64) // rss, field 24 of stat
		rss[pid] = pages * int64(os.Getpagesize())
	}
	var total int64
	for pid, r := range rss {
		for p := pid; p > 1; p = parent[p] {
			if p == root {
				total += r
				break
			}
		}
	}
	return total
}
