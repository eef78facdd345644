package localrun

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// DescribeStacks shows a template's tenant output with its tokens resolved to the local identities,
// and builds the same descriptor for a tenant whose stack has none.
func TestDescribeStacksOutputs(t *testing.T) {
	stack := &deploy.Stack{Name: "TenantPipeline-Tenants-1", Resources: map[string]*deploy.Resource{}, Outputs: map[string]deploy.Output{}}
	q := &deploy.Resource{Stack: stack, LogicalID: "AcmeQueue", Type: "AWS::SQS::Queue"}
	stack.Resources["AcmeQueue"] = q
	// Stack.ToJsonString renders tokens as an Fn::Join of JSON pieces.
	stack.Outputs[pipeline.TenantOutputKey("acme")] = deploy.Output{Value: json.RawMessage(`{"Fn::Join":["",[
		"{\"version\":1,\"id\":\"acme\",\"policy\":\"halt\",\"idempotencyKey\":\"event-id\",\"bucket\":\"ingest\",\"prefix\":\"inbox/acme/\",\"queueUrl\":\"",
		{"Ref":"AcmeQueue"},"\",\"queueArn\":\"",{"Fn::GetAtt":["AcmeQueue","Arn"]},
		"\",\"stateMachineArn\":\"arn:aws:states:us-east-1:000000000000:stateMachine:acme\",\"controllerFunction\":\"acme-controller\"}"]]}`)}
	asm := &deploy.Assembly{Stacks: []*deploy.Stack{stack}}
	res, err := deploy.NewResolver(asm, emulate.Region, emulate.Account)
	if err != nil {
		t.Fatal(err)
	}
	res.Set(q, deploy.Identity{Ref: "http://127.0.0.1:9/000000000000/acme.fifo", Attrs: map[string]string{"Arn": "arn:aws:sqs:us-east-1:000000000000:acme.fifo"}})
	ctrl := &emulate.Function{Name: "globex-controller", Env: []string{"ON_FAILURE=halt", "IDEMPOTENCY_KEY=object-version", "SEGMENT_STATE_MACHINE_ARN=arn:seg"}}
	r := &Run{Cloud: &Cloud{asm: asm, res: res, logs: io.Discard, Lambda: &emulate.LambdaService{}}, Bucket: "ingest", cfg: Config{Logs: io.Discard}, Tenants: []*Tenant{
		{ID: "acme", Stack: stack.Name},
		{ID: "globex", Stack: stack.Name, Prefix: "inbox/globex/", Queue: &Queue{URL: "http://q/globex.fifo", ARN: "arn:aws:sqs:us-east-1:000000000000:globex.fifo"},
			FileMachine: "arn:aws:states:us-east-1:000000000000:stateMachine:globex", Controller: ctrl, Config: map[string]any{"id": "globex"}},
	}}
	srv := httptest.NewServer(r.controlPlane())
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/x-www-form-urlencoded", strings.NewReader(url.Values{"Action": {"DescribeStacks"}, "Version": {"2010-05-15"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Stacks []struct {
			StackName string
			Outputs   []struct{ OutputKey, OutputValue string } `xml:"Outputs>member"`
		} `xml:"DescribeStacksResult>Stacks>member"`
	}
	if err := xml.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if len(out.Stacks) != 1 || out.Stacks[0].StackName != stack.Name {
		t.Fatalf("got %+v, want one stack %s", out.Stacks, stack.Name)
	}
	got := map[string]pipeline.TenantOutput{}
	for _, o := range out.Stacks[0].Outputs {
		d, err := pipeline.DecodeTenantOutput(o.OutputValue)
		if err != nil {
			t.Fatalf("%s: %v", o.OutputKey, err)
		}
		if o.OutputKey != pipeline.TenantOutputKey(d.ID) {
			t.Errorf("got key %s for %s, want %s", o.OutputKey, d.ID, pipeline.TenantOutputKey(d.ID))
		}
		got[d.ID] = d
	}
	if a := got["acme"]; a.QueueURL != "http://127.0.0.1:9/000000000000/acme.fifo" || a.QueueARN != "arn:aws:sqs:us-east-1:000000000000:acme.fifo" || a.Policy != "halt" {
		t.Errorf("acme (template output): got %+v, want the local queue URL and ARN, halt", a)
	}
	if g := got["globex"]; g.Policy != "halt" || g.IdempotencyKey != "object-version" || g.SegmentStateMachineARN != "arn:seg" || g.ControllerFunction != "globex-controller" {
		t.Errorf("globex (built): got %+v, want halt, object-version, arn:seg, globex-controller", g)
	}
}
