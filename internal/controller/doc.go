// Package controller is the tenant pipeline's controller: it reads a tenant's FIFO queue one file
// event at a time and keeps each message in flight until that file's Step Functions execution has
// finished, so the queue itself is the tenant's lock. The same handler takes the execution's
// status change events, which make the waiting message visible at once (wake.go). See
// docs/controller.md.
//
// A silo tenant's controller is a Handler (handler.go). A pool's controller is a Pool (pool.go):
// its tenants share one queue, one message group each, and it hands each message to that
// tenant's Handler, the very controller a silo tenant has, built from the pool's settings file.
// So a pooled tenant differs only in pool.go, its row of the settings file (PoolConfig,
// config.go), its bounded backlog (parking.go) and its tenant-scoped objects (tenantstore.go).
//
// Command lambdas/controller reads the configuration (ConfigFromEnv, PoolConfigFromEnv), builds
// the clients and starts New's or NewPool's Invoke.
package controller
