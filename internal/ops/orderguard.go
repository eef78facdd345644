package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
)

// The order guard. A file that runs again after later files of its tenant ran registers its
// records after theirs: a continue tenant's failed file that later files passed, a halt tenant's
// file that was skipped and then redriven, or a replay of a processed file. Every record arrives
// once, in the wrong order. pipectl refuses such a run, naming the later files, unless the
// operator says --out-of-order with a reason; the permission is then audited twice, in the control
// message (outOfOrder, reason) and in the file's results folder (results.OutOfOrderFile), where
// pipectl results shows it. A tenant with a DynamoDB sink is not guarded: its items keep the
// newest record per key whatever order they are written in (pipeline.Source.Order, the _seq
// attribute).

// MaxLaterListed bounds the later files a refusal names; the rest are counted.
const MaxLaterListed = 10

// LaterFile is a file of the tenant whose execution started after the one to run again.
type LaterFile struct {
	Key           string `json:"key"`
	ExecutionName string `json:"executionName"`
	Status        string `json:"status"`
}

// OutOfOrderError refuses a run that would register a file's records after later ones.
type OutOfOrderError struct {
	Tenant, Execution, Action string
	// Later are the later files, newest first, at most MaxLaterListed; Count is how many there are.
	Later []LaterFile
	Count int
	// Queued is how many files of the tenant wait in its queue: a control message sent now runs
	// after them.
	Queued int
}

func (e *OutOfOrderError) Error() string {
	var parts []string
	if e.Count > 0 {
		var names []string
		for _, f := range e.Later {
			names = append(names, fmt.Sprintf("%s (%s, %s)", orDashOps(f.Key), f.ExecutionName, f.Status))
		}
		list := strings.Join(names, ", ")
		if more := e.Count - len(e.Later); more > 0 {
			list += fmt.Sprintf(" and %d more", more)
		}
		parts = append(parts, fmt.Sprintf("%d later file(s) of tenant %s ran after it: %s", e.Count, e.Tenant, list))
	}
	if e.Queued > 0 {
		parts = append(parts, fmt.Sprintf("%d file(s) of tenant %s are queued and run before it", e.Queued, e.Tenant))
	}
	return fmt.Sprintf("%s of %s refused: %s; its records would be registered after theirs, "+
		"out of the tenant's order. To run it anyway, pass --out-of-order --reason TEXT (audited)",
		e.Action, e.Execution, strings.Join(parts, "; "))
}

// OutOfOrder is an operator's permission to run a file after later ones, with the reason.
type OutOfOrder struct {
	Allowed bool
	Reason  string
}

// laterFiles lists the tenant's executions that started after since, other than except, newest
// first: the first MaxLaterListed described (their keys), and the count of all among the newest
// 1,000 (a pool's: among those its scan reads).
func (o *Ops) laterFiles(ctx context.Context, t pipeline.TenantOutput, since time.Time, except string) ([]LaterFile, int, error) {
	execs, err := o.executions(ctx, t, "", 1000)
	if err != nil {
		return nil, 0, fmt.Errorf("list executions to find files later than %s: %w", except, err)
	}
	var later []LaterFile
	n := 0
	for _, e := range execs {
		if aws.ToString(e.Name) == except || e.StartDate == nil || !e.StartDate.After(since) {
			continue
		}
		n++
		if len(later) == MaxLaterListed {
			continue
		}
		d, err := o.describe(ctx, aws.ToString(e.ExecutionArn))
		if err != nil {
			return nil, 0, err
		}
		later = append(later, LaterFile{Key: inputKey(d), ExecutionName: aws.ToString(e.Name), Status: string(e.Status)})
	}
	return later, n, nil
}

// guarded reports whether the order guard applies to the tenant: every tenant but one whose
// settings say it writes to a DynamoDB sink.
func (o *Ops) guarded(ctx context.Context, t pipeline.TenantOutput) bool {
	s, err := o.TenantSettings(ctx, t.ID)
	return err != nil || s.DynamoDB == nil // unreadable settings: guarded (fail closed)
}

// queuedAhead is how many files of the tenant wait in its queue, or parked, besides the one
// running: a control message sent now runs after them. A pooled tenant's are counted only in a
// pool with a bound (maxQueuedFilesPerTenant), SQS counting no message group; elsewhere 0.
func (o *Ops) queuedAhead(ctx context.Context, t pipeline.TenantOutput, st tenantState) (int, error) {
	running := 0
	if st.running != nil {
		running = 1 // its message stays in the queue until it ends
	}
	if t.Pool == "" {
		if st.queue.Visible == nil || st.queue.InFlight == nil {
			return 0, nil
		}
		return max(int(*st.queue.Visible+*st.queue.InFlight)-running, 0), nil
	}
	var row TenantStatus
	if err := o.backlogState(ctx, t, &row); err != nil {
		return 0, err
	}
	if row.QueuedFiles == nil || row.Parked == nil {
		return 0, nil
	}
	return max(*row.QueuedFiles+int(*row.Parked)-running, 0), nil
}

// passed is what an out-of-order run runs after: the later files (at most MaxLaterListed named,
// count of all) and the files queued ahead of it.
type passed struct {
	later         []LaterFile
	count, queued int
}

func (p passed) any() bool { return p.count+p.queued > 0 }

// checkOrder refuses running execution (started at since) again, through the tenant's queue,
// when later files of the tenant ran or queued files would run before it, unless ooo allows it.
func (o *Ops) checkOrder(ctx context.Context, t pipeline.TenantOutput, st tenantState, action, execution string, since time.Time, ooo OutOfOrder) (passed, error) {
	if !o.guarded(ctx, t) {
		return passed{}, nil
	}
	later, n, err := o.laterFiles(ctx, t, since, execution)
	if err != nil {
		return passed{}, err
	}
	queued, err := o.queuedAhead(ctx, t, st)
	if err != nil {
		return passed{}, err
	}
	p := passed{later: later, count: n, queued: queued}
	switch {
	case !p.any():
		return p, nil
	case !ooo.Allowed:
		return p, &OutOfOrderError{Tenant: t.ID, Execution: execution, Action: action, Later: later, Count: n, Queued: queued}
	case strings.TrimSpace(ooo.Reason) == "":
		return p, refuse("--out-of-order needs --reason: it is the audit record")
	}
	return p, nil
}

// writeOutOfOrder writes the audit record of an out-of-order run into the file's results folder,
// before the run is asked for: a run whose record cannot be written is not asked for.
func (o *Ops) writeOutOfOrder(ctx context.Context, t pipeline.TenantOutput, rec results.OutOfOrder) error {
	body, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	key := results.Key(t.Owner(), rec.Execution, results.OutOfOrderFile)
	_, err = o.S3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(t.Bucket), Key: aws.String(key), Body: bytes.NewReader(append(body, '\n')),
		ContentType: aws.String("application/json"),
	})
	if err != nil {
		return fmt.Errorf("put the out-of-order audit record s3://%s/%s: %w", t.Bucket, key, err)
	}
	return nil
}

// outOfOrderRecord is the audit record of an out-of-order run of execution.
func (o *Ops) outOfOrderRecord(ctx context.Context, action, execution, requestID, reason string, p passed) (results.OutOfOrder, error) {
	who, err := o.caller(ctx)
	if err != nil {
		return results.OutOfOrder{}, err
	}
	rec := results.OutOfOrder{OutOfOrder: true, Action: action, Execution: execution, Reason: oneLine(reason),
		RequestedBy: who, RequestedAt: o.Now().UTC(), RequestID: requestID, LaterCount: p.count, Queued: p.queued}
	for _, f := range p.later {
		rec.Later = append(rec.Later, results.LaterFile{Key: f.Key, Execution: f.ExecutionName, Status: f.Status})
	}
	return rec, nil
}

func orDashOps(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
