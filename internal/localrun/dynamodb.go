package localrun

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dyntypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// The DynamoDB sink locally: dynalite (npm dynalite 4.0.0, in memory) on 127.0.0.1, started only
// when the synthesized app needs it (a silo tenant whose TENANT variable, or a pooled tenant whose
// pool settings, name a "dynamodb" table, or an AWS::DynamoDB::Table in a template). The Lambdas reach it through a counting proxy
// (AWS_ENDPOINT_URL_DYNAMODB, the SDK's service-specific endpoint variable:
// https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html) that adds
// CoreOptions.Latency to every request, so a DynamoDB table and an HTTP core system answer equally
// slowly in the figures, and Run.SetAWSCallLatency's (awslatency.go).

// dynamoLocal is the run's DynamoDB emulator.
type dynamoLocal struct {
	url    string           // the pipeline's endpoint (counted, delayed)
	admin  *dynamodb.Client // direct, uncounted (harness: tables, read-back)
	tables []string
	meter  *emulate.DynamoMeter // request units by table (dynamometer.go)
	mu     sync.Mutex
	onPut  func(PutItemCall) bool
	// written holds, per execution name, the record numbers whose PutItem succeeded (a write the
	// condition refused, an equal or newer item already stored, is not one).
	written map[string]map[int64]bool
}

// PutItemCall is one PutItem of the pipeline as the DynamoDB endpoint receives it, before it is
// forwarded: the item's table and its _meta (docs/data-path.md), never its values.
type PutItemCall struct {
	Table         string
	ExecutionName string
	RecordNumber  int64
}

// proxy forwards the pipeline's DynamoDB calls to dynalite, counts them and their request units,
// answers each latency later (the same per-request latency the embedded sink adds), and shows every PutItem to OnPutItem,
// which may hold it: it is then never forwarded, and the client gets no answer. It remembers which
// records each execution wrote (dynamoWritten).
func (d *dynamoLocal) proxy(target string, c *emulate.APICounter, latency time.Duration) http.Handler {
	next := d.meter.Wrap(emulate.CountingProxy(target, "dynamodb", c))
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if latency > 0 {
			time.Sleep(latency)
		}
		d.mu.Lock()
		onPut := d.onPut
		d.mu.Unlock()
		if !strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".PutItem") {
			next.ServeHTTP(w, req)
			return
		}
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		var in struct {
			TableName string
			Item      struct {
				Meta struct {
					M struct {
						ExecutionName struct{ S string } `json:"executionName"`
						RecordNumber  struct{ N string } `json:"recordNumber"`
					}
				} `json:"_meta"`
			}
		}
		json.Unmarshal(body, &in)
		n, _ := strconv.ParseInt(in.Item.Meta.M.RecordNumber.N, 10, 64)
		call := PutItemCall{Table: in.TableName, ExecutionName: in.Item.Meta.M.ExecutionName.S, RecordNumber: n}
		if onPut != nil && onPut(call) {
			select {
			case <-req.Context().Done():
			case <-time.After(2 * time.Minute):
			}
			return
		}
		rec := &emulate.StatusRecorder{ResponseWriter: w, Status: http.StatusOK}
		next.ServeHTTP(rec, req)
		if rec.Status == http.StatusOK && call.ExecutionName != "" {
			d.mu.Lock()
			if d.written == nil {
				d.written = map[string]map[int64]bool{}
			}
			if d.written[call.ExecutionName] == nil {
				d.written[call.ExecutionName] = map[int64]bool{}
			}
			d.written[call.ExecutionName][call.RecordNumber] = true
			d.mu.Unlock()
		}
	})
}

// OnPutItem sets a function that sees every PutItem of the pipeline before it is forwarded;
// returning true holds the call (a scenario's crash mid-chunk: the write never reaches the table).
// nil removes it. It does nothing without a DynamoDB sink.
func (c *Cloud) OnPutItem(f func(PutItemCall) bool) {
	if c.dynamo == nil {
		return
	}
	c.dynamo.mu.Lock()
	c.dynamo.onPut = f
	c.dynamo.mu.Unlock()
}

// tenantTable is the table a tenant's settings (a TENANT or DEPLOYED_TENANT variable) name for its
// DynamoDB sink, keyed by its dynamodb.key as strings; nil when the tenant has no DynamoDB sink.
// Such a table exists before the deploy in AWS when no template creates it; the local run creates
// it.
func tenantTable(settings string) (*emulate.DynamoTable, error) {
	var cfg struct {
		ID       string `json:"id"`
		DynamoDB *struct {
			Key   []string `json:"key"`
			Table string   `json:"table"`
		} `json:"dynamodb"`
	}
	if err := json.Unmarshal([]byte(settings), &cfg); err != nil {
		return nil, fmt.Errorf("tenant settings are not JSON: %w", err)
	}
	d := cfg.DynamoDB
	switch {
	case d == nil:
		return nil, nil
	case d.Table == "":
		return nil, fmt.Errorf("tenant %s: dynamodb.table is empty in the synthesized settings: the construct fills in the name of the table it creates", cfg.ID)
	case len(d.Key) < 1 || len(d.Key) > 2:
		return nil, fmt.Errorf("tenant %s: dynamodb.key has %d fields, want 1 or 2", cfg.ID, len(d.Key))
	}
	t := &emulate.DynamoTable{Name: d.Table, From: "tenant " + cfg.ID}
	for i, k := range d.Key {
		typ := dyntypes.KeyTypeHash
		if i == 1 {
			typ = dyntypes.KeyTypeRange
		}
		t.KeySchema = append(t.KeySchema, dyntypes.KeySchemaElement{AttributeName: aws.String(k), KeyType: typ})
		t.AttributeDefinitions = append(t.AttributeDefinitions, dyntypes.AttributeDefinition{AttributeName: aws.String(k), AttributeType: dyntypes.ScalarAttributeTypeS})
	}
	return t, nil
}

// CreateTable creates a template's table (deploy.Account).
func (c *Cloud) CreateTable(ctx context.Context, tr *deploy.Resource, t deploy.Table) error {
	table := emulate.DynamoTable{Name: t.Name, From: tr.LogicalID}
	for _, k := range t.KeySchema {
		table.KeySchema = append(table.KeySchema, dyntypes.KeySchemaElement{AttributeName: aws.String(k.AttributeName), KeyType: dyntypes.KeyType(k.KeyType)})
	}
	for _, a := range t.AttributeDefinitions {
		table.AttributeDefinitions = append(table.AttributeDefinitions, dyntypes.AttributeDefinition{AttributeName: aws.String(a.AttributeName), AttributeType: dyntypes.ScalarAttributeType(a.AttributeType)})
	}
	return c.createTable(ctx, table)
}

// createTable creates a table in dynalite, once, starting dynalite at the first table: the app
// needs DynamoDB only when a template creates a table or a tenant names one.
func (c *Cloud) createTable(ctx context.Context, t emulate.DynamoTable) error {
	if err := c.startDynamoDB(ctx); err != nil {
		return err
	}
	d := c.dynamo
	if slices.Contains(d.tables, t.Name) {
		return nil
	}
	_, err := d.admin.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(t.Name),
		KeySchema:            t.KeySchema,
		AttributeDefinitions: t.AttributeDefinitions,
		BillingMode:          dyntypes.BillingModePayPerRequest,
	})
	if err != nil {
		return fmt.Errorf("create DynamoDB table %s (%s): %w", t.Name, t.From, err)
	}
	d.meter.AddTable(t)
	d.tables = append(d.tables, t.Name)
	fmt.Fprintf(c.logs, "localrun: DynamoDB table %s created (%s)\n", t.Name, t.From)
	return nil
}

// startDynamoDB starts dynalite, once, behind the pipeline's endpoint; every request takes
// DynamoDBLatency longer (CoreOptions.Latency: a table is the core system of its tenants). The
// functions created after it reach it by AWS_ENDPOINT_URL_DYNAMODB (dynamoEnv).
func (c *Cloud) startDynamoDB(ctx context.Context) error {
	if c.dynamo != nil {
		return nil
	}
	p, err := emulate.StartNode(ctx, c.node, filepath.Join(c.moduleRoot, "local/dynalite/server.mjs"), nil, c.logs)
	if err != nil {
		return fmt.Errorf("DynamoDB emulator (npm dynalite, installed by make setup): %w", err)
	}
	c.stops = append(c.stops, p.Close)
	d := &dynamoLocal{meter: emulate.NewDynamoMeter(p.URL, nil)}
	u, stop, err := emulate.Serve(c.awsLatency.Wrap(c.auth.guardDynamoDB(d.proxy(p.URL, c.Counter, c.opts.dynamoLatency))))
	if err != nil {
		return err
	}
	c.stops = append(c.stops, stop)
	d.url, d.admin = u, dynamodb.NewFromConfig(aws.Config{Region: emulate.Region, Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")}, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(p.URL)
	})
	c.dynamo = d
	c.dynamoEnv = []string{"AWS_ENDPOINT_URL_DYNAMODB=" + u}
	return nil
}

// dynamoWritten is how many records of an execution the DynamoDB sink wrote (each once, whatever
// was retried): the report's "records" of a DynamoDB tenant's file.
func (c *Cloud) dynamoWritten(execution string) int64 {
	if c.dynamo == nil || execution == "" {
		return 0
	}
	c.dynamo.mu.Lock()
	defer c.dynamo.mu.Unlock()
	return int64(len(c.dynamo.written[execution]))
}

// DynamoDB is a client of the run's DynamoDB emulator (uncounted, without the sink latency), or
// nil when the app has no DynamoDB sink.
func (c *Cloud) DynamoDB() *dynamodb.Client {
	if c.dynamo == nil {
		return nil
	}
	return c.dynamo.admin
}

// DynamoDBEndpoint is the DynamoDB endpoint the Lambdas use (counted, with the sink and AWS call
// latencies), or "" when the app has no DynamoDB sink.
func (c *Cloud) DynamoDBEndpoint() string {
	if c.dynamo == nil {
		return ""
	}
	return c.dynamo.url
}

// DynamoDBTables lists the tables the run created, by name.
func (c *Cloud) DynamoDBTables() []string {
	if c.dynamo == nil {
		return nil
	}
	return append([]string(nil), c.dynamo.tables...)
}

// DynamoDBTable is the table a tenant's DynamoDB sink writes to (its synthesized dynamodb.table),
// or "" for a tenant with an HTTP sink.
func (t *Tenant) DynamoDBTable() string {
	d, _ := t.Config["dynamodb"].(map[string]any)
	name, _ := d["table"].(string)
	return name
}

// KeyColumns are the tenant's key columns when its records are in order per key (recordOrder
// "key" in record mode, pipeline.Tenant.KeyedOrder), else nil.
func (t *Tenant) KeyColumns() []string {
	if order, _ := t.Config["recordOrder"].(string); order != pipeline.RecordOrderKey || t.DynamoDBTable() != "" {
		return nil
	}
	if mode, _ := t.Config["registerMode"].(string); mode == pipeline.RegisterModeBatch {
		return nil
	}
	raw, _ := t.Config["keyColumns"].([]any)
	var cols []string
	for _, c := range raw {
		if s, ok := c.(string); ok {
			cols = append(cols, s)
		}
	}
	return cols
}

// Keyed reports whether the tenant's records are in order per key (KeyColumns).
func (t *Tenant) Keyed() bool { return len(t.KeyColumns()) > 0 }
