//go:build e2e || figures

package localrun

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/tenants"
)

// intakeFlooder floods a pool beside intakeNeighbours: three whose ids begin with its character,
// three whose first character shares its group of the sharded intake's 16 ("f" is 0x66, as "6"
// 0x36 and "v" 0x76, modulo 16), and four others.
const intakeFlooder = "f00"

var intakeNeighbours = []string{"f01", "f02", "f03", "v01", "v02", "601", "a01", "b01", "c01", "d01"}

// intakeTenantsJSON is a pool of the flooder and its neighbours with the intake given.
func intakeTenantsJSON(intake string) string {
	rows := []string{fmt.Sprintf(`{"id": %q, "tier": "pool", "registerUrl": "https://core.example.com/records"}`, intakeFlooder)}
	for _, id := range intakeNeighbours {
		rows = append(rows, fmt.Sprintf(`{"id": %q, "tier": "pool", "registerUrl": "https://core.example.com/records"}`, id))
	}
	return fmt.Sprintf(`{"pools": {"default": {"intake": %q}}, "tenants": [%s]}`, intake, strings.Join(rows, ",\n"))
}

// One pooled tenant uploads a burst of files, then ten others one file each, through each of the
// pool's intakes. With the per-tenant intake (the default) the router receives every event in its
// own tenant's message group of the intake queue, so no tenant's events wait behind another's:
// the groups it sees are exactly the tenants, each with that tenant's files. With the sharded
// intake they are the rules' static groups, the flooder's shared with six of its neighbours. In
// both, every file is registered once and in order.
func TestScenarioIntakeGroups(t *testing.T) {
	t.Parallel()
	const flood = 120
	for _, intake := range []string{tenants.IntakeTenant, tenants.IntakeSharded} {
		t.Run(intake, func(t *testing.T) {
			t.Parallel()
			r := startScenario(t, intakeTenantsJSON(intake), Config{})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			var files []upload
			for n := range flood {
				files = append(files, upload{intakeFlooder, fmt.Sprintf("%04d.csv", n), []byte(fmt.Sprintf("id,name\n%d,file %d\n", n, n))})
			}
			for _, id := range intakeNeighbours {
				files = append(files, upload{id, "after.csv", csvOf(3)})
			}
			uploadAll(t, ctx, r, files)
			rep := drain(t, ctx, r)
			assertInvariants(t, r, rep, nil, true)

			groups := r.intakeGroups(t)
			want := map[string]int{}
			switch intake {
			case tenants.IntakeTenant:
				want[intakeFlooder] = flood
				for _, id := range intakeNeighbours {
					want[id] = 1
				}
			case tenants.IntakeSharded:
				for _, f := range files {
					g, _ := tenantpipeline.IntakeGroupOf(f.tenant[0], tenants.DefaultPoolIntakeGroups)
					want[tenantpipeline.IntakeMessageGroupOf(g)]++
				}
			}
			if !maps.Equal(groups, want) {
				t.Errorf("intake %s: the router received the message groups %v, want %v", intake, groups, want)
			}
		})
	}
}

// intakeGroups is how many messages of each message group of the pool's intake queue the router
// received (each message once, however often it was delivered).
func (r *Run) intakeGroups(t *testing.T) map[string]int {
	t.Helper()
	var intake []string
	for arn, q := range r.queues {
		if strings.Contains(strings.ToLower(q.Name), "intake") {
			intake = append(intake, arn)
		}
	}
	if len(intake) != 1 {
		t.Fatalf("found intake queues %v, want one", slices.Sorted(slices.Values(intake)))
	}
	r.Cloud.mu.Lock()
	defer r.Cloud.mu.Unlock()
	out := map[string]int{}
	for _, g := range r.delivered[intake[0]] {
		out[g]++
	}
	return out
}

// The per-tenant intake's two judged steps: EventBridge's request to the intake API, signed with
// the rule's role, and the API's SendMessage with its integration's role. A file goes through
// with the templates' policies; without the API's Allow for the rule's role and the role's own
// grant, or without the integration role's sqs:SendMessage, the next file's event is refused and
// never reaches the intake; given back, the file after it goes through.
func TestScenarioIntakeAPIJudged(t *testing.T) {
	t.Parallel()
	r := startScenario(t, `{"tenants": [{"id": "hooli", "tier": "pool", "registerUrl": "https://core.example.com/records"}]}`, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var api *apiTarget
	for _, rl := range r.rules {
		if rl.api != nil {
			api = rl.api
		}
	}
	if api == nil {
		t.Fatal("no rule posts to the intake API")
	}
	apiPolicy, err := r.auth.resourceStatements(api.arn)
	if err != nil || len(apiPolicy) != 2 {
		t.Fatalf("the intake API's policy: %v, %d statements; want the Allow and the Deny", err, len(apiPolicy))
	}
	eventRole, _ := r.auth.roleStatements(api.role)
	apiRole, _ := r.auth.roleStatements(api.method.Credentials)
	set := func(apiStatements, eventStatements, apiRoleStatements []statement) {
		r.auth.mu.Lock()
		r.auth.resourcePolicies["execute-api:"+api.method.APIID] = apiStatements
		r.auth.policies[api.role] = eventStatements
		r.auth.policies[api.method.Credentials] = apiRoleStatements
		r.auth.mu.Unlock()
	}
	var onlyDeny, noSend []statement
	for _, st := range apiPolicy {
		if st.Effect == "Deny" {
			onlyDeny = append(onlyDeny, st)
		}
	}
	for _, st := range apiRole {
		if !slices.Contains(st.Action, "sqs:SendMessage") {
			noSend = append(noSend, st)
		}
	}
	files := 0
	for _, tc := range []struct {
		name          string
		api, ev, role []statement
		delivered     bool
	}{
		{"as deployed", apiPolicy, eventRole, apiRole, true},
		{"without the rule role's Allow", onlyDeny, nil, apiRole, false},
		{"without the integration role's SendMessage", apiPolicy, eventRole, noSend, false},
		{"given back", apiPolicy, eventRole, apiRole, true},
	} {
		set(tc.api, tc.ev, tc.role)
		refused := r.auth.Refused()
		name := fmt.Sprintf("%d.csv", files)
		files++
		if _, err := r.Upload(ctx, "hooli", name, csvOf(2)); err != nil {
			t.Fatal(err)
		}
		if got := r.auth.Refused() > refused; got == tc.delivered {
			t.Errorf("%s: refused %v, want %v", tc.name, got, !tc.delivered)
		}
		if tc.delivered {
			waitFor(t, ctx, r, name+" registered", func(*report.Report) bool {
				for _, q := range r.Sink.Requests("hooli") {
					if strings.HasSuffix(q.Source, "/"+name) {
						return true
					}
				}
				return false
			})
		}
	}
	if got := r.intakeGroups(t)["hooli"]; got != 2 {
		t.Errorf("the intake received %d of hooli's events, want the 2 delivered", got)
	}
	// Each request past its authorization is counted as one API call; the one refused at
	// authorization is not, the one refused by SQS is (retried: EventBridge retries a 500).
	rep, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.APICalls["apigateway"]["POST /events"]; got < 3 {
		t.Errorf("got %d API Gateway calls, want one per delivered event and at least one for the refused send", got)
	}

	// Another principal of the account, allowed everything by its own policy (the outsider), posts
	// a forged event: the API's Deny refuses it, and only the Deny (API Gateway allows a caller of
	// the same account whose identity policy allows it when the resource policy is silent:
	// https://docs.aws.amazon.com/apigateway/latest/developerguide/apigateway-authorization-flow.html).
	// The forged key names no tenant of the pool, so the request let through without the Deny is
	// left unrouted by the router.
	forged := fmt.Sprintf(`{"version":"0","id":"%s","detail-type":"Object Created","source":"aws.s3","account":"%s","detail":{"bucket":{"name":"%s"},"object":{"key":"%snobody/forged.csv","size":10}}}`,
		emulate.NewID(), r.res.Account, r.Bucket, strings.TrimSuffix(r.Tenant("hooli").Prefix, "hooli/"))
	outsider := *api
	outsider.role = r.auth.outsiderRole()
	for _, tc := range []struct {
		name   string
		policy []statement
		want   int
	}{
		{"the outsider, as deployed", apiPolicy, http.StatusForbidden},
		{"the outsider, without the API's Deny", withoutDeny(apiPolicy), http.StatusOK},
	} {
		set(tc.policy, eventRole, apiRole)
		if got, why := r.invokeAPI(ctx, &outsider, []byte(forged), false); got != tc.want {
			t.Errorf("%s: got %d (%s), want %d", tc.name, got, why, tc.want)
		}
	}
	set(apiPolicy, eventRole, apiRole)
}

// withoutDeny is a policy's statements but its Deny.
func withoutDeny(policy []statement) []statement {
	var out []statement
	for _, st := range policy {
		if st.Effect != "Deny" {
			out = append(out, st)
		}
	}
	return out
}
