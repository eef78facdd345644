package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/example/tenantpipeline/internal/admission"
	"github.com/example/tenantpipeline/internal/schema"
)

// The reconciler's schedule (docs/controller.md, "The reconciler"). A release and a waiter's ask
// run a gate's reconciler when it is due, so a gate with a lost wake-up and nobody releasing or
// asking would keep a slot idle for a waiter's whole hold. A scheduled EventBridge rule therefore
// invokes a controller with pipeline.ReconcileInput once a minute: a pool's controller reconciles
// its pool gate and the gates of its tenants' core systems; for a core system no pool of the app
// covers, one silo tenant's controller reconciles its gate (constructs/tenantpipeline, reconcile.go).
// Each gate reconciles as on a release (admission.Store.ReconcileDue: not again within
// ReconcileEvery), and the files it hands slots to are woken as a release wakes them
// (wakeWaiters), each failed wake counted as AdmissionWakeFailures. The cost is one invocation a
// minute per pool and per core system, whatever the number of tenants, idle or waiting.

// compactJSON is payload without insignificant white space; payload itself when it is not JSON.
func compactJSON(payload []byte) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, payload); err != nil {
		return payload
	}
	return b.Bytes()
}

// reconcileGates reconciles each gate and wakes the files it handed a slot to; every gate is
// tried, and the error joins the gates that could not be reconciled.
func reconcileGates(ctx context.Context, a admitter, log *slog.Logger, gates []admission.Gate, wake func([]admission.Wake)) error {
	var errs []error
	for _, g := range gates {
		wakes, err := a.ReconcileDue(ctx, g)
		wake(wakes)
		if err != nil {
			log.Log(ctx, stateErrorLevel(err), "scheduled reconcile failed; the next one tries again", "gate", g.Key, "error", err)
			errs = append(errs, fmt.Errorf("reconcile gate %s: %w", g.Key, err))
			continue
		}
		log.InfoContext(ctx, "gate reconciled on schedule", "gate", g.Key, "handedOver", len(wakes))
	}
	return errors.Join(errs...)
}

// Reconcile is a silo controller's scheduled reconcile: the gates of its tenant (its core system's).
// A controller without admission that is scheduled is misconfigured: an error.
func (h *Handler) Reconcile(ctx context.Context) error {
	if !h.admits() {
		return h.unknownShape(ctx, errors.New("scheduled reconcile, but the tenant has no admission gate: check the reconciler's rule"))
	}
	log := h.log.With("tenant", h.cfg.Tenant.ID)
	return reconcileGates(ctx, h.admission, log, h.cfg.gates(), func(w []admission.Wake) { h.wakeWaiters(ctx, log, w) })
}

// Reconcile is a pool controller's scheduled reconcile: its pool gate and the gate of each core
// system its tenants name (coreGates).
func (p *Pool) Reconcile(ctx context.Context) error {
	sh := p.cfg.Shared
	if p.admission == nil || sh.PoolAdmissionTable == "" || sh.PoolMaxRunningFiles < 1 {
		return p.unknownShape(ctx, errors.New("scheduled reconcile, but the pool has no admission gate: check the reconciler's rule"))
	}
	gates := []admission.Gate{{Table: sh.PoolAdmissionTable, Key: schema.PoolGate(sh.Pool), Limit: sh.PoolMaxRunningFiles}}
	core := map[string]string{}
	for _, g := range p.coreGates(ctx) {
		gates = append(gates, g.gate)
		core[g.gate.Key] = g.name
	}
	return reconcileGates(ctx, p.admission, p.log, gates, func(w []admission.Wake) {
		wakeAll(ctx, p.sqs, p.log, p.metrics, core, p.coreMetrics, w)
	})
}

type coreGate struct {
	name string
	gate admission.Gate
}

// coreGates are the gates of the core systems in the pool's CORE_SYSTEM_TABLES, each as the first
// tenant (by id) naming it configures it: every tenant of a core system carries the same
// configuration, the one its CoreSystem construct was given. They are found once per warm
// controller (the settings file changes only with a deploy, which starts new ones); the search
// reads rows until every core system is found, and a row that cannot be read is skipped. A core
// system no valid row names is logged and left to the releases and asks of its files.
func (p *Pool) coreGates(ctx context.Context) []coreGate {
	p.mu.Lock()
	found := p.scheduledGates
	p.mu.Unlock()
	if found != nil {
		return found
	}
	want := len(p.cfg.coreTables)
	byName := map[string]coreGate{}
	if want > 0 && p.cfg.Settings != nil {
		for e := range p.cfg.Settings.All() {
			cfg, err := p.cfg.tenantConfig(e.ID)
			if err != nil {
				continue
			}
			if cs := cfg.Tenant.CoreSystem; cs != nil && cs.Table != "" {
				if _, ok := byName[cs.Name]; !ok {
					byName[cs.Name] = coreGate{name: cs.Name, gate: cfg.gates()[0]}
				}
			}
			if len(byName) == want {
				break
			}
		}
	}
	found = []coreGate{}
	for _, name := range slices.Sorted(maps.Keys(p.cfg.coreTables)) {
		g, ok := byName[name]
		if !ok {
			p.log.WarnContext(ctx, "no tenant of the pool names the core system with valid settings; its gate is not reconciled on schedule", "coreSystem", name)
			continue
		}
		found = append(found, g)
	}
	p.mu.Lock()
	p.scheduledGates = found
	p.mu.Unlock()
	return found
}
