//go:build figures

package localrun

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// burstAdmission is one local burst into one core system, as its figures measure it.
type burstAdmission struct {
	tenants, files, slots int
	utilization           float64 // busy slot-seconds over slots × the run, upload to last end
	waitingUtilization    float64 // the same while files waited: upload to the last start
	controllerPerFile     float64
	dynamoPerFile         float64
	visibilityPerFile     float64
	wall                  float64
}

// runBurstAdmission drops files small files of each of tenants pooled tenants at once into one
// core system of slots running files, and measures it.
func runBurstAdmission(t *testing.T, tenants, files, slots int) burstAdmission {
	t.Helper()
	r := startScenario(t, burstTenantsJSON(tenants, 0, map[string]any{"maxRunningFiles": slots}), Config{Core: CoreOptions{MaxInFlight: slots}})
	defer r.Close()
	r.Sink.SetDelay(func(string, string, int64) time.Duration { return 20 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	burst := burstFiles(r, files, 5)
	uploadAll(t, ctx, r, burst)
	rep := drain(t, ctx, r)
	assertInvariants(t, r, rep, nil, true)
	assertAllSucceeded(t, rep, burst)
	first, lastStart, lastStop := burstWindow(rep)
	var controller int64
	for _, f := range r.functions {
		if f.Source == controllerPkg && f.Role != pipeline.FunctionRoleRouter {
			controller += f.Invocations()
		}
	}
	var dynamo int64
	for _, n := range rep.APICalls["dynamodb"] {
		dynamo += n
	}
	n := float64(len(burst))
	return burstAdmission{tenants: tenants, files: len(burst), slots: slots,
		utilization: slotUtilization(rep, slots, first, lastStop), waitingUtilization: slotUtilization(rep, slots, first, lastStart),
		controllerPerFile: float64(controller) / n, dynamoPerFile: float64(dynamo) / n,
		visibilityPerFile: float64(rep.APICalls["sqs"]["ChangeMessageVisibility"]) / n, wall: rep.WallSeconds}
}

func (b burstAdmission) String() string {
	return fmt.Sprintf("%d tenants x %d files into %d slots: slots busy %.0f %% of the run, %.0f %% while files waited; per file %.1f controller invocations, %.1f DynamoDB calls, %.1f ChangeMessageVisibility; %.0f s",
		b.tenants, b.files/b.tenants, b.slots, 100*b.utilization, 100*b.waitingUtilization, b.controllerPerFile, b.dynamoPerFile, b.visibilityPerFile, b.wall)
}

// TestFiguresAdmissionBurst is make figures' "burst-admission:" line: a local burst of pooled
// tenants into one core system of 4 slots, at 40 and at 200 tenants (2 small files each), with the
// core system's slot utilization and what each file cost; the per-file counts side by side.
func TestFiguresAdmissionBurst(t *testing.T) {
	small := runBurstAdmission(t, 40, 2, 4)
	large := runBurstAdmission(t, 200, 2, 4)
	fmt.Printf("burst-admission: %s\n", small)
	fmt.Printf("burst-admission: %s\n", large)
	fmt.Printf("burst-admission: 200 against 40 tenants, per file: controller invocations %.2fx, DynamoDB calls %.2fx, ChangeMessageVisibility %.2fx (goal ≤ 1.5x)\n",
		large.controllerPerFile/small.controllerPerFile, large.dynamoPerFile/small.dynamoPerFile, large.visibilityPerFile/small.visibilityPerFile)
}
