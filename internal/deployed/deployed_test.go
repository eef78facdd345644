package deployed

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
	"github.com/example/tenantpipeline/spec"
)

func deployedTenant(id string, edit func(*pipeline.Tenant)) pipeline.Tenant {
	t := pipeline.Tenant{Tenant: spec.Tenant{ID: id, RegisterURL: "https://core.example.com/" + id,
		RegisterAuthSecretARN: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:p/" + id + "-AbCdEf"}}
	if edit != nil {
		edit(&t)
	}
	return t
}

// TestCheck: a request is refused as a PermanentError naming the field when its tenant is
// not deployed, or its registerUrl, lookupUrl, completeUrl, secret or DynamoDB sink differ from the deployed settings';
// the same settings pass, and so does any request without deployed settings to check.
func TestCheck(t *testing.T) {
	deployed := Settings(func(id string) (pipeline.Tenant, error) {
		switch id {
		case "acme":
			return deployedTenant("acme", nil), nil
		case "globex":
			return deployedTenant("globex", func(t *pipeline.Tenant) {
				t.RegisterURL, t.RegisterAuthSecretARN = "", ""
				t.DynamoDB = &spec.DynamoDB{Table: "globex-records", Key: []string{"id"}}
			}), nil
		}
		return pipeline.Tenant{}, errors.New("not a tenant of pool p")
	})
	for _, tc := range []struct {
		name     string
		deployed Settings
		tenant   pipeline.Tenant
		want     string // "" for accepted
	}{
		{"the deployed settings", deployed, deployedTenant("acme", nil), ""},
		{"no deployed settings", nil, deployedTenant("acme", func(t *pipeline.Tenant) { t.RegisterURL = "https://evil.example.net/" }), ""},
		{"another URL", deployed, deployedTenant("acme", func(t *pipeline.Tenant) { t.RegisterURL = "https://evil.example.net/" }),
			`tenant "acme": the request's registerUrl "https://evil.example.net/" is not the deployed "https://core.example.com/acme"`},
		{"another secret", deployed, deployedTenant("acme", func(t *pipeline.Tenant) {
			t.RegisterAuthSecretARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:p/globex-XyZabc"
		}), `the request's registerAuthSecretArn`},
		{"no secret", deployed, deployedTenant("acme", func(t *pipeline.Tenant) { t.RegisterAuthSecretARN = "" }), `the request's registerAuthSecretArn ""`},
		{"a tenant not deployed", deployed, deployedTenant("hooli", nil), `the request's tenant "hooli": not a tenant of pool p`},
		{"the deployed table", deployed, deployedTenant("globex", func(t *pipeline.Tenant) {
			t.RegisterURL, t.RegisterAuthSecretARN = "", ""
			t.DynamoDB = &spec.DynamoDB{Table: "globex-records", Key: []string{"id"}}
		}), ""},
		{"another table", deployed, deployedTenant("globex", func(t *pipeline.Tenant) {
			t.RegisterURL, t.RegisterAuthSecretARN = "", ""
			t.DynamoDB = &spec.DynamoDB{Table: "acme-records", Key: []string{"id"}}
		}), `the request's dynamodb.table "acme-records" is not the deployed "globex-records"`},
		{"another key", deployed, deployedTenant("globex", func(t *pipeline.Tenant) {
			t.RegisterURL, t.RegisterAuthSecretARN = "", ""
			t.DynamoDB = &spec.DynamoDB{Table: "globex-records", Key: []string{"sk"}}
		}), `the request's dynamodb.key`},
		{"a URL in place of the table", deployed, deployedTenant("globex", nil), `the request's registerUrl`},
		{"a lookup URL not deployed", deployed, deployedTenant("acme", func(t *pipeline.Tenant) {
			t.CoreSystem = &pipeline.CoreSystem{Name: "core", LookupURL: "https://evil.example.net/{key}"}
		}), `the request's coreSystem.lookupUrl "https://evil.example.net/{key}" is not the deployed ""`},
		{"a completion URL not deployed", deployed, deployedTenant("acme", func(t *pipeline.Tenant) {
			t.CoreSystem = &pipeline.CoreSystem{Name: "core", CompleteURL: "https://evil.example.net/done"}
		}), `the request's coreSystem.completeUrl`},
		{"a core system's other settings", deployed, deployedTenant("acme", func(t *pipeline.Tenant) {
			t.CoreSystem = &pipeline.CoreSystem{Name: "core", MaxRunningFiles: 3}
		}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.deployed, tc.tenant, pipeline.Source{Bucket: "b", Key: "k"})
			if tc.want == "" {
				if err != nil {
					t.Errorf("got %v, want none", err)
				}
				return
			}
			var pe *pipeline.PermanentError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want a PermanentError containing %q", err, tc.want)
			}
		})
	}
}

// TestFromEnv: a silo Register's settings come from DEPLOYED_TENANT, a pool's from its
// settings file; neither is no check; a variable that is not a tenant's JSON fails start-up.
func TestFromEnv(t *testing.T) {
	acme := deployedTenant("acme", nil)
	silo, _ := json.Marshal(acme)
	file, err := poolsettings.Encode(&pipeline.PoolSettings{Version: pipeline.PoolSettingsVersion, Pool: "p", Prefix: "pools/p/",
		Tenants: []pipeline.PoolTenant{{Settings: acme, Prefix: "pools/p/acme/", OnFailure: "continue", IdempotencyKey: "event-id"}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), pipeline.PoolSettingsFile)
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantNil bool
		wantErr string
	}{
		{"silo", map[string]string{pipeline.EnvDeployedTenant: string(silo)}, false, ""},
		{"pool", map[string]string{pipeline.EnvPoolSettings: path}, false, ""},
		{"neither", map[string]string{}, true, ""},
		{"not JSON", map[string]string{pipeline.EnvDeployedTenant: "{"}, true, "DEPLOYED_TENANT is not the JSON of a tenant's settings"},
		{"no such file", map[string]string{pipeline.EnvPoolSettings: path + ".gone"}, true, "POOL_SETTINGS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := FromEnv(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || (d == nil) != tc.wantNil {
				t.Fatalf("got %v (nil %v), want nil %v", err, d == nil, tc.wantNil)
			}
			if d == nil {
				return
			}
			got, err := d("acme")
			if err != nil || got.RegisterURL != acme.RegisterURL || got.RegisterAuthSecretARN != acme.RegisterAuthSecretARN {
				t.Errorf("acme: got %+v, %v, want the deployed settings", got.Tenant, err)
			}
			if _, err := d("hooli"); err == nil {
				t.Error("hooli: got settings, want an error: not deployed")
			}
		})
	}
}

// TestResolve: a request whose input left out the URLs and the secret (pipeline.Tenant.WithoutURLs)
// gets the deployed ones, the core system's included; one that carries them is checked as before;
// a request of a tenant not deployed is refused; no deployed settings leave the request as it is.
func TestResolve(t *testing.T) {
	full := deployedTenant("acme", func(t *pipeline.Tenant) {
		t.CoreSystem = &pipeline.CoreSystem{Name: "core", LookupURL: "https://core.example.com/acme/{key}", CompleteURL: "https://core.example.com/done", Table: "t"}
	})
	settings := Settings(func(id string) (pipeline.Tenant, error) {
		if id != "acme" {
			return pipeline.Tenant{}, errors.New("not a tenant of pool p")
		}
		return full, nil
	})
	src := pipeline.Source{Bucket: "b", Key: "k"}

	got := full.WithoutURLs()
	if got.RegisterURL != "" || got.RegisterAuthSecretARN != "" || got.CoreSystem.LookupURL != "" || got.CoreSystem.CompleteURL != "" || full.CoreSystem.LookupURL == "" {
		t.Fatalf("WithoutURLs: got %+v (core %+v), and the original's core %+v; want no URL or secret in the copy, the original untouched", got, got.CoreSystem, full.CoreSystem)
	}
	if err := Resolve(settings, &got, src); err != nil {
		t.Fatal(err)
	}
	if got.RegisterURL != full.RegisterURL || got.RegisterAuthSecretARN != full.RegisterAuthSecretARN ||
		got.CoreSystem.LookupURL != full.CoreSystem.LookupURL || got.CoreSystem.CompleteURL != full.CoreSystem.CompleteURL || got.CoreSystem.Table != "t" {
		t.Errorf("got %+v (core %+v), want the deployed URLs and secret filled in", got, got.CoreSystem)
	}

	other := full
	other.RegisterURL = "https://evil.example.net/"
	if err := Resolve(settings, &other, src); err == nil || !strings.Contains(err.Error(), "the request's registerUrl") {
		t.Errorf("got %v, want the request's own registerUrl refused", err)
	}
	stranger := full.WithoutURLs()
	stranger.ID = "hooli"
	if err := Resolve(settings, &stranger, src); err == nil || stranger.RegisterURL != "" {
		t.Errorf("got %v and URL %q, want a tenant not deployed refused and given nothing", err, stranger.RegisterURL)
	}
	bare := full.WithoutURLs()
	if err := Resolve(nil, &bare, src); err != nil || bare.RegisterURL != "" {
		t.Errorf("got %v and URL %q, want no deployed settings to leave the request as it is", err, bare.RegisterURL)
	}
}
