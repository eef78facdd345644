// Package deployed holds the settings a function was deployed with, by tenant, and checks a
// request against them: where a tenant's records go and with which credentials (its core system's
// URLs, its secret, its DynamoDB sink) is the deployed settings', never a request's alone, so that
// whoever may invoke Register or Split, or start their state machine, cannot point a tenant's
// records, secret or file facts anywhere else, nor act for a tenant the function does not serve.
package deployed

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
	"github.com/example/tenantpipeline/internal/source"
)

// Settings gives the settings a function was deployed with, by tenant id; an error for a tenant
// it was not deployed for.
type Settings func(tenant string) (pipeline.Tenant, error)

// FromEnv reads the deployed settings from the function's environment: a silo tenant's
// EnvDeployedTenant, or the pool's settings file (EnvPoolSettings). Neither set: nil, and
// requests are not checked (a function deployed without them).
func FromEnv(getenv func(string) string) (Settings, error) {
	if v := getenv(pipeline.EnvDeployedTenant); v != "" {
		var t pipeline.Tenant
		if err := json.Unmarshal([]byte(v), &t); err != nil {
			return nil, fmt.Errorf("%s is not the JSON of a tenant's settings: %w", pipeline.EnvDeployedTenant, err)
		}
		return func(id string) (pipeline.Tenant, error) {
			if id != t.ID {
				return pipeline.Tenant{}, fmt.Errorf("this function was deployed for tenant %q", t.ID)
			}
			return t, nil
		}, nil
	}
	if getenv(pipeline.EnvPoolSettings) == "" {
		return nil, nil
	}
	path := pipeline.PoolSettingsPath(getenv)
	x, err := poolsettings.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", pipeline.EnvPoolSettings, path, err)
	}
	return func(id string) (pipeline.Tenant, error) {
		t, err := x.Tenant(id)
		if errors.Is(err, poolsettings.ErrUnknownTenant) {
			return pipeline.Tenant{}, fmt.Errorf("tenant %q is not a tenant of pool %s", id, x.Pool)
		}
		return t.Settings, err
	}, nil
}

// Resolve completes a request's tenant t with what an execution's input leaves out (the core
// system's URLs and the secret's ARN: pipeline.Tenant.WithoutURLs) from the deployed settings,
// then checks it (Check). Nil d: t is left as it is and not checked.
func Resolve(d Settings, t *pipeline.Tenant, src pipeline.Source) error {
	if d == nil {
		return nil
	}
	if dt, err := d(t.ID); err == nil {
		t.RegisterURL = cmp.Or(t.RegisterURL, dt.RegisterURL)
		t.RegisterAuthSecretARN = cmp.Or(t.RegisterAuthSecretARN, dt.RegisterAuthSecretARN)
		if t.CoreSystem != nil && dt.CoreSystem != nil {
			cs := *t.CoreSystem
			cs.LookupURL = cmp.Or(cs.LookupURL, dt.CoreSystem.LookupURL)
			cs.CompleteURL = cmp.Or(cs.CompleteURL, dt.CoreSystem.CompleteURL)
			t.CoreSystem = &cs
		}
	}
	return Check(d, *t, src)
}

// Check refuses a request whose tenant is not one the function was deployed for, or whose core
// system URLs (registerUrl, lookupUrl, completeUrl), secret or DynamoDB sink differ from the
// deployed settings', as a PermanentError naming the field. An execution whose input carries a
// value a later deploy changed (its DynamoDB sink, or a URL an earlier controller put there) fails
// here, and a replay of the file starts with the new ones.
func Check(d Settings, t pipeline.Tenant, src pipeline.Source) error {
	if d == nil {
		return nil
	}
	permanent := func(format string, a ...any) error {
		return &pipeline.PermanentError{Message: source.Name(src) + ": " + fmt.Sprintf(format, a...)}
	}
	dt, err := d(t.ID)
	if err != nil {
		return permanent("the request's tenant %q: %v", t.ID, err)
	}
	differs := func(field, got, want string) error {
		return permanent("tenant %q: the request's %s %q is not the deployed %q: the function takes it from its deployed settings, "+
			"never from a request alone (an execution started before a deploy changed it: replay the file)", t.ID, field, got, want)
	}
	if t.RegisterURL != dt.RegisterURL {
		return differs("registerUrl", t.RegisterURL, dt.RegisterURL)
	}
	if t.RegisterAuthSecretARN != dt.RegisterAuthSecretARN {
		return differs("registerAuthSecretArn", t.RegisterAuthSecretARN, dt.RegisterAuthSecretARN)
	}
	// A core system's lookup and completion URLs receive the same Authorization header.
	var got, want pipeline.CoreSystem
	if t.CoreSystem != nil {
		got = *t.CoreSystem
	}
	if dt.CoreSystem != nil {
		want = *dt.CoreSystem
	}
	if got.LookupURL != want.LookupURL {
		return differs("coreSystem.lookupUrl", got.LookupURL, want.LookupURL)
	}
	if got.CompleteURL != want.CompleteURL {
		return differs("coreSystem.completeUrl", got.CompleteURL, want.CompleteURL)
	}
	switch got, want := t.DynamoDB, dt.DynamoDB; {
	case (got == nil) != (want == nil):
		return differs("dynamodb", fmt.Sprint(got != nil), fmt.Sprint(want != nil))
	case got == nil:
	case got.Table != want.Table:
		return differs("dynamodb.table", got.Table, want.Table)
	case !slices.Equal(got.Key, want.Key):
		return differs("dynamodb.key", fmt.Sprint(got.Key), fmt.Sprint(want.Key))
	}
	return nil
}
