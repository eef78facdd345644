package register

import (
	"context"
	"fmt"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/spec"
)

// holdForMaintenance holds a send while one of the core system's maintenance windows is open
// (docs/operations.md, "Steering a core system"), exactly as a long Retry-After does: it waits as
// much of the window as fits the invocation and, when the rest does not, ends the invocation
// successfully with the cursor at the unsent record (errSlowDown). A chunk that reaches a
// window's start mid-way stops there, since every send asks first. Admission admits no new file
// of the core system meanwhile (corecontrol).
func (p *pace) holdForMaintenance(ctx context.Context, b budget, what string, need time.Duration) error {
	if p.core == nil || len(p.core.Maintenance) == 0 {
		return nil
	}
	now := b.now()
	p.mu.Lock()
	quiet := now.Before(p.noWindowUntil)
	p.mu.Unlock()
	if quiet {
		return nil
	}
	open, end, next := spec.Maintenance(p.core.Maintenance, now)
	if !open {
		if next.IsZero() {
			next = now.Add(24 * time.Hour) // no window ever starts: look again tomorrow
		}
		p.mu.Lock()
		p.noWindowUntil = next
		p.mu.Unlock()
		return nil
	}
	d := end.Sub(now)
	p.log.Info("a maintenance window of the core system is open; holding at the cursor", append(p.attrs,
		"chunk", b.chunk, "what", what, "coreSystem", p.core.Name, "windowEnds", end.Format(time.RFC3339), "waitMs", d.Milliseconds())...)
	if err := p.wait(ctx, b, what, d, need); err != nil {
		return &pipeline.RetryableError{Message: fmt.Sprintf(
			"%s: stopped before %s of chunk %d: a maintenance window of core system %s is open until %s; the next invocation sends it with the same idempotency key",
			b.file, what, b.chunk, p.core.Name, end.Format(time.RFC3339)), Err: errSlowDown}
	}
	return nil
}
