package ops

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/example/tenantpipeline/internal/admission"
	"github.com/example/tenantpipeline/internal/corecontrol"
	"github.com/example/tenantpipeline/internal/schema"
	"github.com/example/tenantpipeline/spec"
)

// Steering a core system at run time (docs/operations.md, "Steering a core system"): pipectl
// core pause, resume and limit write the core system's control item in its admission table
// (package corecontrol), with an audit item beside it, and core status reads it back. The core
// systems are found as status finds them (coresystems.go): through the controllers of the
// tenants that name them, in both tiers.

// CoreOverride is a core system's limit override as status shows it.
type CoreOverride struct {
	Limit  int       `json:"limit"`
	Until  time.Time `json:"until"`
	SetAt  time.Time `json:"setAt"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	// Expired: Until has passed; the override no longer counts (core status only: status shows
	// none).
	Expired bool `json:"expired"`
}

// CorePause is a core system's pause as status shows it.
type CorePause struct {
	At     time.Time `json:"at"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
}

// CoreMaintenance is a core system's maintenance windows at the time of the report.
type CoreMaintenance struct {
	Windows []spec.MaintenanceWindow `json:"windows"`
	// Open: a window is open now, until End; else Next is the next window's start (null when
	// none is declared).
	Open bool       `json:"open"`
	End  *time.Time `json:"end"`
	Next *time.Time `json:"next"`
}

// CoreStatus is one core system of `pipectl core status`.
type CoreStatus struct {
	Name  string `json:"name"`
	Table string `json:"table"`
	// MaxRunningFiles is the configured limit, MaxRequestsInFlight the highest an override may
	// set; Limit the effective limit now, LimitReason why (configured, paused, maintenance,
	// override); AdaptiveLimit the adaptive limit (null unless adaptive).
	MaxRunningFiles     int    `json:"maxRunningFiles"`
	MaxRequestsInFlight int    `json:"maxRequestsInFlight"`
	Limit               int    `json:"limit"`
	LimitReason         string `json:"limitReason"`
	Adaptive            bool   `json:"adaptive"`
	AdaptiveLimit       *int   `json:"adaptiveLimit"`
	RunningFiles        int    `json:"runningFiles"`
	WaitingTenants      int    `json:"waitingTenants"`
	// Paused is true while an operator's pause holds the core system; Pause says who, when and
	// why (null when not paused).
	Paused bool       `json:"paused"`
	Pause  *CorePause `json:"pause"`
	// Override is the limit override as stored, also an expired one (Expired); null when none.
	Override    *CoreOverride   `json:"override"`
	Maintenance CoreMaintenance `json:"maintenance"`
	Tenants     []string        `json:"tenants"`
}

// coreSystem is one core system, found through one of its tenants' controllers.
type coreSystem struct {
	gate    coreGate
	tenants []string
}

func (c coreSystem) settings() corecontrol.Settings { return *c.gate.gate.Core }

// allCoreSystems finds every core system the stacks' tenants name, by name.
func (o *Ops) allCoreSystems(ctx context.Context) (map[string]*coreSystem, []string, error) {
	ts, err := o.Tenants(ctx)
	if err != nil {
		return nil, nil, err
	}
	gates, err := o.coreGates(ctx, ts)
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]*coreSystem{}
	var names []string
	for _, g := range gates {
		if c, ok := byName[g.cs.Name]; ok {
			c.tenants = append(c.tenants, g.tenant)
			continue
		}
		byName[g.cs.Name] = &coreSystem{gate: g, tenants: []string{g.tenant}}
		names = append(names, g.cs.Name)
	}
	slices.Sort(names)
	for _, c := range byName {
		slices.Sort(c.tenants)
	}
	return byName, names, nil
}

// coreNamed is the core system called name.
func (o *Ops) coreNamed(ctx context.Context, name string) (*coreSystem, error) {
	byName, names, err := o.allCoreSystems(ctx)
	if err != nil {
		return nil, err
	}
	c, ok := byName[name]
	if !ok {
		if len(names) == 0 {
			return nil, refuse("core system %q not found: no tenant of the stacks names a core system", name)
		}
		return nil, refuse("core system %q not found; core systems: %s", name, strings.Join(names, ", "))
	}
	if o.DynamoDB == nil {
		return nil, fmt.Errorf("no DynamoDB client for admission table %s", c.gate.gate.Table)
	}
	return c, nil
}

func (o *Ops) control() *corecontrol.Store { return &corecontrol.Store{DB: o.DynamoDB, Now: o.Now} }

// CoreStatus reports every core system, or the one named.
func (o *Ops) CoreStatus(ctx context.Context, name string) ([]CoreStatus, error) {
	byName, names, err := o.allCoreSystems(ctx)
	if err != nil {
		return nil, err
	}
	if name != "" {
		if _, err := o.coreNamed(ctx, name); err != nil {
			return nil, err
		}
		names = []string{name}
	}
	out := []CoreStatus{}
	for _, n := range names {
		st, err := o.coreStatus(ctx, byName[n])
		if err != nil {
			return nil, fmt.Errorf("core system %s: %w", n, err)
		}
		out = append(out, st)
	}
	return out, nil
}

func (o *Ops) coreStatus(ctx context.Context, c *coreSystem) (CoreStatus, error) {
	now := o.Now()
	set, g := c.settings(), c.gate.gate
	ctl, err := o.control().Read(ctx, g.Table, set.Name)
	if err != nil {
		return CoreStatus{}, err
	}
	sum, err := o.summarize(ctx, g, c.gate.env)
	if err != nil {
		return CoreStatus{}, err
	}
	lim := corecontrol.Effective(set, ctl, now)
	st := CoreStatus{Name: set.Name, Table: g.Table, MaxRunningFiles: set.MaxRunningFiles, MaxRequestsInFlight: corecontrol.Bound(set),
		Limit: sum.Limit, LimitReason: lim.Why, Adaptive: g.Adaptive, RunningFiles: len(sum.Running), WaitingTenants: sum.Waiting,
		Paused: ctl.Paused, Override: overrideOf(ctl, now, true), Tenants: c.tenants}
	if sum.Limit < lim.Value {
		st.LimitReason = "adaptive"
	}
	if ctl.Paused {
		st.Pause = &CorePause{At: ctl.PausedAt, By: ctl.PausedBy, Reason: ctl.PauseReason}
	}
	if g.Adaptive {
		a, err := o.adaptiveLimit(ctx, g)
		if err != nil {
			return CoreStatus{}, err
		}
		st.AdaptiveLimit = &a
	}
	st.Maintenance = maintenanceOf(set.Maintenance, now)
	return st, nil
}

// adaptiveLimit reads the adaptive limit item: maxRunningFiles when absent.
func (o *Ops) adaptiveLimit(ctx context.Context, g admission.Gate) (int, error) {
	out, err := o.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(g.Table), ConsistentRead: aws.Bool(true),
		Key: itemKey(g.Key, schema.LimitSK)})
	if err != nil {
		return 0, fmt.Errorf("read the adaptive limit: %w", err)
	}
	if v, ok := numberAttr(out.Item, schema.AttrLimit); ok {
		return min(g.Limit, max(1, v)), nil
	}
	return g.Limit, nil
}

// overrideOf is the control item's override for a report: with expired, also one that ended.
func overrideOf(c corecontrol.Control, now time.Time, expired bool) *CoreOverride {
	o := c.Override
	if o == nil || (!expired && c.Active(now) == nil) {
		return nil
	}
	return &CoreOverride{Limit: o.Limit, Until: o.Until, SetAt: o.SetAt, By: o.By, Reason: o.Reason, Expired: c.Active(now) == nil}
}

func maintenanceOf(windows []spec.MaintenanceWindow, now time.Time) CoreMaintenance {
	m := CoreMaintenance{Windows: windows}
	if m.Windows == nil {
		m.Windows = []spec.MaintenanceWindow{}
	}
	open, end, next := spec.Maintenance(windows, now)
	m.Open = open
	if open {
		m.End = &end
	} else if !next.IsZero() {
		m.Next = &next
	}
	return m
}

// CoreActionResult is the outcome of pipectl core pause, resume or limit.
type CoreActionResult struct {
	CoreSystem string `json:"coreSystem"`
	Action     string `json:"action"`
	// Changed: the control item was written and the action audited (AuditSK, in Table); false
	// when it already said so.
	Changed     bool          `json:"changed"`
	Table       string        `json:"table"`
	AuditSK     string        `json:"auditSk,omitempty"`
	RequestedBy string        `json:"requestedBy"`
	Paused      bool          `json:"paused"`
	Override    *CoreOverride `json:"override"`
	// Woken counts the waiting files the gate's reconciler handed a slot to and woke, after a
	// resume or a raised limit.
	Woken int `json:"woken"`
}

// CorePause pauses a core system: nothing new of it is admitted; running files finish.
func (o *Ops) CorePause(ctx context.Context, name, reason string) (CoreActionResult, error) {
	if strings.TrimSpace(reason) == "" {
		return CoreActionResult{}, refuse("core pause needs --reason: it is the audit record")
	}
	return o.coreAction(ctx, name, corecontrol.ActionPause, func(s *corecontrol.Store, table, who string) (corecontrol.Change, error) {
		return s.Pause(ctx, table, name, who, oneLine(reason))
	})
}

// CoreResume lifts a core system's pause and wakes the files its free slots go to.
func (o *Ops) CoreResume(ctx context.Context, name, reason string) (CoreActionResult, error) {
	return o.coreAction(ctx, name, corecontrol.ActionResume, func(s *corecontrol.Store, table, who string) (corecontrol.Change, error) {
		return s.Resume(ctx, table, name, who, oneLine(reason))
	})
}

// CoreLimit overrides a core system's running-file limit with n until until: from 1 to its
// maxRequestsInFlight.
func (o *Ops) CoreLimit(ctx context.Context, name string, n int, until time.Time, reason string) (CoreActionResult, error) {
	if strings.TrimSpace(reason) == "" {
		return CoreActionResult{}, refuse("core limit needs --reason: it is the audit record")
	}
	c, err := o.coreNamed(ctx, name)
	if err != nil {
		return CoreActionResult{}, err
	}
	if bound := corecontrol.Bound(c.settings()); n < 1 || n > bound {
		return CoreActionResult{}, refuse("core limit %s %d: the limit must be from 1 to %d, the core system's maxRequestsInFlight", name, n, bound)
	}
	if !until.After(o.Now()) {
		return CoreActionResult{}, refuse("core limit %s: --until %s is not in the future", name, until.UTC().Format(time.RFC3339))
	}
	return o.coreAction(ctx, name, corecontrol.ActionLimit, func(s *corecontrol.Store, table, who string) (corecontrol.Change, error) {
		return s.SetLimit(ctx, table, name, n, until, who, oneLine(reason))
	})
}

// CoreLimitClear removes a core system's limit override.
func (o *Ops) CoreLimitClear(ctx context.Context, name, reason string) (CoreActionResult, error) {
	return o.coreAction(ctx, name, corecontrol.ActionLimitClear, func(s *corecontrol.Store, table, who string) (corecontrol.Change, error) {
		return s.ClearLimit(ctx, table, name, who, oneLine(reason))
	})
}

func (o *Ops) coreAction(ctx context.Context, name, action string, do func(s *corecontrol.Store, table, who string) (corecontrol.Change, error)) (CoreActionResult, error) {
	c, err := o.coreNamed(ctx, name)
	if err != nil {
		return CoreActionResult{}, err
	}
	who, err := o.caller(ctx)
	if err != nil {
		return CoreActionResult{}, err
	}
	g := c.gate.gate
	ch, err := do(o.control(), g.Table, who)
	res := CoreActionResult{CoreSystem: name, Action: action, Changed: ch.Changed, Table: g.Table, AuditSK: ch.AuditSK, RequestedBy: who,
		Paused: ch.Control.Paused, Override: overrideOf(ch.Control, o.Now(), false)}
	if err != nil && !errors.Is(err, corecontrol.ErrAudit) {
		return res, err
	}
	if ch.Changed && action != corecontrol.ActionPause {
		// A resume, a new or cleared override may free slots: hand them to the waiting files now,
		// rather than when a running file ends or the gate's reconciler next runs.
		n, werr := o.wakeGate(ctx, c)
		res.Woken = n
		err = errors.Join(err, werr)
	}
	return res, err
}

// maxWakeRounds bounds the reconciles one action runs (each hands over at most a few slots).
const maxWakeRounds = 100

// wakeGate runs the gate's reconciler until it hands nothing more over, making each woken file's
// message visible at once, as a release does. A wake that fails leaves the file to its hold.
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ChangeMessageVisibility.html
func (o *Ops) wakeGate(ctx context.Context, c *coreSystem) (int, error) {
	lease, waiter := ttls(c.gate.env)
	s := &admission.Store{DB: o.DynamoDB, LeaseTTL: lease, WaiterTTL: waiter, Now: o.Now}
	woken := 0
	for range maxWakeRounds {
		wakes, err := s.Reconcile(ctx, c.gate.gate)
		if err != nil {
			return woken, fmt.Errorf("hand the free slots of core system %s on (its files start when a running file ends instead): %w", c.gate.cs.Name, err)
		}
		if len(wakes) == 0 {
			return woken, nil
		}
		for _, w := range wakes {
			if w.QueueURL == "" || w.ReceiptHandle == "" || o.SQS == nil {
				continue
			}
			_, err := o.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(w.QueueURL),
				ReceiptHandle: aws.String(w.ReceiptHandle), VisibilityTimeout: 0})
			if err == nil || staleReceipt(err) {
				woken++
			}
		}
	}
	return woken, nil
}

func itemKey(pk, sk string) map[string]dbtypes.AttributeValue {
	return map[string]dbtypes.AttributeValue{schema.AttrPK: &dbtypes.AttributeValueMemberS{Value: pk}, schema.AttrSK: &dbtypes.AttributeValueMemberS{Value: sk}}
}

// numberAttr reads a number attribute, rounded down.
func numberAttr(it map[string]dbtypes.AttributeValue, name string) (int, bool) {
	v, ok := it[name].(*dbtypes.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(v.Value, 64)
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	return int(math.Floor(f)), true
}

// steering adds a core system's pause and override to its status row.
func (o *Ops) steering(ctx context.Context, g coreGate, row *CoreSystemStatus) error {
	ctl, err := o.control().Read(ctx, g.gate.Table, g.cs.Name)
	if err != nil {
		return err
	}
	row.Paused, row.Override = ctl.Paused, overrideOf(ctl, o.Now(), false)
	return nil
}
