package tenantpipeline

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"
)

// The Deny's ids stay within their share of a role's inline policies: 171 silo tenants of the
// longest id (32 characters) fit, 172 do not; the default event bus's rules allow 150.
func TestSiloDenyBound(t *testing.T) {
	ids := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%03d", i)+strings.Repeat("x", 29))
		}
		return out
	}
	for _, tc := range []struct {
		n    int
		fits bool
	}{{150, true}, {171, true}, {172, false}} {
		if got := siloDenyChars(ids(tc.n)) <= maxSiloDenyChars; got != tc.fits {
			t.Errorf("%d ids of 32 characters: %d characters, fits %v, want %v", tc.n, siloDenyChars(ids(tc.n)), got, tc.fits)
		}
	}
}

// Past the bound the synth fails (an error annotation, which the CDK CLI refuses to deploy),
// naming the pool, the count and what to do, and the roles get no Deny; within it, they get one.
func TestSiloDenyPastTheBoundFailsSynth(t *testing.T) {
	for _, tc := range []struct {
		bound  int
		denies bool
		err    string
	}{
		{maxSiloDenyChars, true, ""},
		{5, false, `pool shared: the ids of the app's 2 silo tenants take 10 characters in the tenant roles' NoSiloTenantSessions Deny, more than the 5`},
	} {
		t.Run(fmt.Sprint(tc.bound), func(t *testing.T) {
			defer func(b int) { maxSiloDenyChars = b }(maxSiloDenyChars)
			maxSiloDenyChars = tc.bound
			app := awscdk.NewApp(nil)
			stack := awscdk.NewStack(app, jsii.String("S"), nil)
			bucket := awss3.NewBucket(stack, jsii.String("Bucket"), &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true), Versioned: jsii.Bool(true)})
			NewPool(stack, "Pool", &PoolProps{Name: "shared", Bucket: bucket, Tenants: []Tenant{{ID: "p1", RegisterURL: "https://core.example.com/p1"}}})
			for _, id := range []string{"s1", "s2"} {
				New(stack, "Tenant-"+id, &Props{Tenant: Tenant{ID: id, RegisterURL: "https://core.example.com/" + id}, Bucket: bucket})
			}
			errs := assertions.Annotations_FromStack(stack).FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String(".*")))
			var msgs []string
			for _, e := range *errs {
				msgs = append(msgs, fmt.Sprint(e.Entry.Data))
			}
			all := strings.Join(msgs, "\n")
			if tc.err == "" && len(msgs) != 0 || tc.err != "" && !strings.Contains(all, tc.err) {
				t.Errorf("got errors %q, want %q", msgs, tc.err)
			}
			got := strings.Contains(fmt.Sprint(assertions.Template_FromStack(stack, nil).ToJSON()), SidNoSiloTenantSessions)
			if got != tc.denies {
				t.Errorf("the template holds %s: %v, want %v", SidNoSiloTenantSessions, got, tc.denies)
			}
		})
	}
}
