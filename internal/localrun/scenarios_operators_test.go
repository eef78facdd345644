//go:build e2e || figures

package localrun

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/stacks"
)

// An operator configured by ARN (operatorArns) acts with a session of that role, and the bucket's
// Denies let it, by its ARN, do what they refuse to anyone else in the account: write a skip
// marker and a control record, and read a tenant's results. The outsider, allowed as much by its
// own policy, is refused the same requests, so the exemption of the operator's ARN is what lets it
// through. In both tiers.
func TestScenarioOperatorActsByItsARN(t *testing.T) {
	t.Parallel()
	const alice = "arn:aws:iam::000000000000:role/ops-alice"
	forEachTier(t, scenarioTenants, func(t *testing.T, tenants string) {
		r := startScenarioWith(t, tenants, map[string]string{stacks.CtxOperatorArns: alice}, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		uploadAll(t, ctx, r, []upload{{"cont", "x.csv", csvOf(3)}})
		drain(t, ctx, r)
		results, err := r.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(r.Bucket), Prefix: aws.String(pipeline.ResultsDir(r.Tenant("cont").Owner()))})
		if err != nil || len(results.Contents) == 0 {
			t.Fatalf("cont's results: %v; want some", err)
		}
		result := aws.ToString(results.Contents[0].Key)

		operator := sessionClient(t, ctx, r, alice, nil)
		outsider := sessionClient(t, ctx, r, r.OutsiderRoleARN(), nil)
		for _, tc := range []struct {
			name string
			do   func(c *s3.Client) error
		}{
			{"reads cont's results", func(c *s3.Client) error {
				out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(result)})
				if err == nil {
					out.Body.Close()
				}
				return err
			}},
			{"writes a skip marker", func(c *s3.Client) error {
				_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(pipeline.ControlDir(r.Tenant("cont").Owner()) + "skip/none"),
					Body: strings.NewReader("not blocked: nothing to skip")})
				return err
			}},
			{"writes a control record", func(c *s3.Client) error {
				_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(pipeline.ControlRequestKey(r.Tenant("cont").Owner(), "operator-check")),
					Body: strings.NewReader("{}"), IfNoneMatch: aws.String("*")})
				return err
			}},
		} {
			if err := tc.do(operator); err != nil {
				t.Errorf("the operator %s: %v, want it allowed by its ARN's exemption", tc.name, err)
			}
			if err := tc.do(outsider); errorCode(err) != "AccessDenied" {
				t.Errorf("the outsider %s: got %q (%v), want AccessDenied", tc.name, errorCode(err), err)
			}
		}

		// pipectl run with the operator's session: its replay's control record is written under
		// the Deny and names the operator, and the controller performs it.
		creds, err := sessionConfig(t, ctx, r, alice, nil).Credentials.Retrieve(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(pipectlBinary(t, moduleRoot(t)), "replay", "cont", r.Tenant("cont").Prefix+"x.csv", "--reason", "alice replays", "--stack-prefix", opsPrefix)
		cmd.Env = append(operatorEnv(t, r), "AWS_ACCESS_KEY_ID="+creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+creds.SecretAccessKey, "AWS_SESSION_TOKEN="+creds.SessionToken)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("pipectl replay as the operator: %v\n%s", err, out)
		}
		waitFor(t, ctx, r, "the operator's replay registered", func(*report.Report) bool { return len(r.Sink.Registered("cont")) >= 6 })
		records, err := r.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(r.Bucket), Prefix: aws.String(pipeline.ControlRequestsPrefix(r.Tenant("cont").Owner()))})
		if err != nil {
			t.Fatal(err)
		}
		by := ""
		for _, o := range records.Contents {
			if k := aws.ToString(o.Key); strings.HasSuffix(k, "operator-check.json") {
				continue
			} else if out, err := r.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(k)}); err == nil {
				var m struct{ RequestedBy string }
				json.NewDecoder(out.Body).Decode(&m)
				out.Body.Close()
				by = m.RequestedBy
			}
		}
		if !strings.Contains(by, ":assumed-role/ops-alice/") {
			t.Errorf("the replay's control record names %q, want the operator's session", by)
		}
	})
}
