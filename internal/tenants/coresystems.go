package tenants

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/spec"
)

// Core systems and admission: the top-level "coreSystems" object, a tenant's "coreSystem",
// "weight" and "maxRecordsPerSecond", and a pool's "maxRunningFiles". Their defaults,
// validation and the settings they put into each tenant's executions live here.

// Running-file limits of a core system and of a pool.
const (
	// MinRunningFiles and MaxRunningFiles bound a core system's and a pool's maxRunningFiles. Each
	// running file holds at most one Split or Register invocation at a time, and an account's
	// default Lambda concurrency is 1,000 for all its functions together, so more files than that
	// could not run at once on a default account anyway.
	// https://docs.aws.amazon.com/lambda/latest/dg/lambda-concurrency.html
	// https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html
	MinRunningFiles = 1
	MaxRunningFiles = 1000
	// DefaultPoolMaxRunningFiles is a pool's maxRunningFiles when it sets none. A pool at its
	// defaults takes at most 200 (its running files' Split or Register invocations) + 10 (the
	// controller mapping's maximumConcurrency) + 16 (the routers: one per intake group) = 226 of
	// the default 1,000 concurrent executions, so four default pools fit with 96 left for silo
	// tenants (each at most its controller and one Split or Register) and other functions.
	DefaultPoolMaxRunningFiles = 200
)

// CoreSystemConfig is one entry of the file's "coreSystems" object: a destination tenants register
// into, protected by admission (internal/admission). Its fields are declared once, in spec.
type CoreSystemConfig = spec.CoreSystem

// Check reports every problem of c. field names a field in messages: "coreSystems.<name>.<field>"
// in a tenants file, "CoreSystemProps.<Field>" for the construct's props: one set of rules for
// both. skip, if not nil, tells the fields whose value could not be read (their problem is
// already reported).
func CheckCoreSystem(c CoreSystemConfig, field func(jsonName string) string, skip func(jsonName string) bool) []error {
	if skip == nil {
		skip = func(string) bool { return false }
	}
	var errs []error
	if !skip("maxRunningFiles") && (c.MaxRunningFiles < MinRunningFiles || c.MaxRunningFiles > MaxRunningFiles) {
		errs = append(errs, fmt.Errorf("%s %d must be %d to %d (it is required): how many files of the core system's tenants may run at once, in both tiers together",
			field("maxRunningFiles"), c.MaxRunningFiles, MinRunningFiles, MaxRunningFiles))
	}
	if !skip("maxRecordsPerSecond") && c.MaxRecordsPerSecond < 0 {
		errs = append(errs, fmt.Errorf("%s %v must be above 0, or left out for no rate limit", field("maxRecordsPerSecond"), c.MaxRecordsPerSecond))
	}
	if !skip("maxRequestsInFlight") {
		running := c.MaxRunningFiles
		if skip("maxRunningFiles") || running < MinRunningFiles || running > MaxRunningFiles {
			running = 0 // its own problem, told above
		}
		if err := checkRequestsInFlight(field, c.MaxRequestsInFlight, running); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range c.CheckHealth() {
		if !skip(rootField(p.Path)) {
			errs = append(errs, fmt.Errorf("%s %s", field(p.Path), p.Message(func(path string) string { return path })))
		}
	}
	return errs
}

// rootField is the top-level JSON name of a path inside a core system: "breaker" of
// "breaker.window", "maintenance" of "maintenance[0].cron".
func rootField(path string) string {
	if i := strings.IndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return path
}

// CheckCoreSystemName checks a core system's name: the pool name rule, since it names a
// construct and a DynamoDB partition key (schema.CoreGate).
func CheckCoreSystemName(where, name string) error {
	if !idPattern.MatchString(name) {
		return fmt.Errorf("%s: core system name %q is invalid: use 1-32 lower-case letters, digits and hyphens, starting with a letter or digit", where, name)
	}
	return nil
}

// CoreSystemNames are the core systems tenants name, sorted.
func (f *File) CoreSystemNames() []string {
	set := map[string]bool{}
	for _, t := range f.Tenants {
		if t.CoreSystem != "" {
			set[t.CoreSystem] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// CoreSystemSettings is the core system called name as it travels in every execution of its
// tenants (pipeline.CoreSystem), without its table, which the construct that creates it knows.
func (f *File) CoreSystemSettings(name string) *pipeline.CoreSystem {
	c := f.CoreSystems[name]
	if c == nil {
		return nil
	}
	return pipeline.CoreSystemOf(name, *c)
}

// parseCoreSystems decodes the "coreSystems" object, each core system field by field, so that
// every problem is reported. An explicit zero rate is refused here, where it can be told from an
// absent one.
func (f *File) parseCoreSystems(raw json.RawMessage) []error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		return []error{fmt.Errorf(`"coreSystems": %s`, typeProblem(err))}
	}
	var errs []error
	f.CoreSystems = map[string]*CoreSystemConfig{}
	f.coreUnread = map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(all)) {
		where := "coreSystems." + name
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(all[name], &fields); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s", where, typeProblem(err)))
			f.coreUnread[name] = true
			f.CoreSystems[name] = &CoreSystemConfig{}
			continue
		}
		if fields == nil {
			f.CoreSystems[name] = nil // null: validate says so
			continue
		}
		c := &CoreSystemConfig{}
		u := map[string]bool{}
		errs = append(errs, decodeFields(where, "", fields, reflect.ValueOf(c).Elem(), u)...)
		if _, ok := fields["maxRecordsPerSecond"]; ok && !u["maxRecordsPerSecond"] && c.MaxRecordsPerSecond == 0 {
			errs = append(errs, fmt.Errorf("%s.maxRecordsPerSecond 0 must be above 0, or left out for no rate limit", where))
			u["maxRecordsPerSecond"] = true
		}
		if _, ok := fields["maxRequestsInFlight"]; ok && !u["maxRequestsInFlight"] && c.MaxRequestsInFlight == 0 {
			errs = append(errs, fmt.Errorf("%s.maxRequestsInFlight 0 must be at least maxRunningFiles, or left out for maxRunningFiles (one request per running file)", where))
			u["maxRequestsInFlight"] = true
		}
		for field := range u {
			f.coreUnread[name+"."+field] = true
		}
		f.CoreSystems[name] = c
	}
	return errs
}

// validateCoreSystems checks the core systems and what tenants say about them. The checks of one
// tenant's own weight and rate are Tenant.check's.
func (f *File) validateCoreSystems(report func(int, spec.Problem)) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(f.CoreSystems)) {
		where := "coreSystems." + name
		if err := CheckCoreSystemName(where, name); err != nil {
			errs = append(errs, err)
		}
		c := f.CoreSystems[name]
		switch {
		case f.coreUnread[name]:
		case c == nil:
			errs = append(errs, fmt.Errorf(`%s: is null: give it {"maxRunningFiles": N}`, where))
		default:
			errs = append(errs, CheckCoreSystem(*c, func(field string) string { return where + "." + field },
				func(field string) bool { return f.coreUnread[name+"."+field] })...)
		}
	}
	for i, t := range f.Tenants {
		if t.CoreSystem == "" {
			continue
		}
		if _, ok := f.CoreSystems[t.CoreSystem]; ok {
			continue
		}
		hint := ""
		for _, name := range slices.Sorted(maps.Keys(f.CoreSystems)) {
			if editDistance(name, t.CoreSystem) <= 2 {
				hint = fmt.Sprintf(" (did you mean %q?)", name)
				break
			}
		}
		report(i, spec.Problemf("coreSystem", `%q is not in coreSystems%s: add "coreSystems": {%q: {"maxRunningFiles": N}}, or correct the name`,
			t.CoreSystem, hint, t.CoreSystem))
	}
	used := f.CoreSystemNames()
	for _, name := range slices.Sorted(maps.Keys(f.CoreSystems)) {
		if !slices.Contains(used, name) {
			errs = append(errs, fmt.Errorf("coreSystems.%s: no tenant names this core system: remove it, or set \"coreSystem\": %q on its tenants", name, name))
		}
	}
	return errs
}

// validRunningFiles is the rule of a pool's maxRunningFiles, with its message.
func validRunningFiles(where, field string, n int) error {
	if n < MinRunningFiles || n > MaxRunningFiles {
		return fmt.Errorf("%s: %s %d is out of range: use %d to %d (default %d): the pool's files running at once, each holding up to one Lambda invocation of the account's concurrency",
			where, field, n, MinRunningFiles, MaxRunningFiles, DefaultPoolMaxRunningFiles)
	}
	return nil
}
