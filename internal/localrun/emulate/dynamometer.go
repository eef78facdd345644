package emulate

// DynamoDB's request units, counted at the harness. The pipeline's code never asks for
// ConsumedCapacity, and it should not have to: the meter sits between the pipeline's DynamoDB
// endpoint and dynalite, and counts the units of each call by table.
//
//   - GetItem, Query, Scan, BatchGetItem, PutItem, UpdateItem, DeleteItem, BatchWriteItem: the
//     meter adds ReturnConsumedCapacity TOTAL to the request, reads the units dynalite computes
//     from the stored items (the sizes by DynamoDB's rules, the larger of the item before and
//     after a write, the whole item whatever the projection, a Query's items before its filter,
//     rounded per 4 KB and 1 KB: TestDynamoMeter checks it against internal/cost's known answers)
//     and takes the ConsumedCapacity out of the answer again if the caller did not ask for it. A
//     Query or Scan that read nothing is counted one minimum read (cost.QueryReadUnits), which
//     dynalite counts as zero.
//   - a conditional write refused with ConditionalCheckFailedException: the units of the item
//     as it is stored (at least one), which dynalite does not count.
//   - TransactWriteItems and TransactGetItems, which dynalite 4.0.0 does not implement: the meter
//     computes them itself from the stored items (read directly from dynalite before and after
//     the call) with cost.TransactionalWriteUnits and cost.TransactionalReadUnits, when the call
//     succeeded or was cancelled (a cancelled transaction is counted as if it had run: DynamoDB's
//     pages do not say what it bills, so the higher count). A ConditionCheck action is counted as
//     a transactional write of its item, the higher of the two possibilities.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	dyntypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/example/tenantpipeline/internal/cost"
)

// DynamoMeter counts DynamoDB request units by table.
type DynamoMeter struct {
	target string              // dynalite, for the stored items
	keys   map[string][]string // each table's key attribute names

	mu    sync.Mutex
	read  map[string]float64
	write map[string]float64
}

func NewDynamoMeter(target string, tables []DynamoTable) *DynamoMeter {
	m := &DynamoMeter{target: target, keys: map[string][]string{}, read: map[string]float64{}, write: map[string]float64{}}
	for _, t := range tables {
		m.AddTable(t)
	}
	return m
}

// AddTable meters a table created after the meter.
func (m *DynamoMeter) AddTable(t DynamoTable) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys[t.Name] = nil
	for _, k := range t.KeySchema {
		m.keys[t.Name] = append(m.keys[t.Name], *k.AttributeName)
	}
}

func (m *DynamoMeter) add(table string, read, write float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.read[table] += read
	m.write[table] += write
}

// Units are the read and write request units counted on the tables for which in is true.
func (m *DynamoMeter) Units(in func(table string) bool) (read, write float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for t, v := range m.read {
		if in(t) {
			read += v
		}
	}
	for t, v := range m.write {
		if in(t) {
			write += v
		}
	}
	return read, write
}

// capacityOps are the operations dynalite returns ConsumedCapacity for, and whether they read.
var capacityOps = map[string]bool{
	"GetItem": true, "Query": true, "Scan": true, "BatchGetItem": true,
	"PutItem": false, "UpdateItem": false, "DeleteItem": false, "BatchWriteItem": false,
}

// Wrap counts the units of every call that passes to next (a proxy to dynalite).
func (m *DynamoMeter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		op := req.Header.Get("X-Amz-Target")
		op = op[strings.LastIndex(op, ".")+1:]
		body, _ := io.ReadAll(req.Body)
		var in dynamoRequest
		json.Unmarshal(body, &in)
		switch {
		case op == "TransactWriteItems":
			m.transactWrite(w, req, body, in, next)
			return
		case op == "TransactGetItems":
			m.transactGet(w, req, body, in, next)
			return
		}
		isRead, metered := capacityOps[op]
		asked := in.ReturnConsumedCapacity == "TOTAL" || in.ReturnConsumedCapacity == "INDEXES"
		if metered && !asked {
			body = withField(body, "ReturnConsumedCapacity", "TOTAL")
		}
		res := forward(next, req, body)
		switch {
		case metered && res.status == http.StatusOK:
			var out struct{ ConsumedCapacity json.RawMessage }
			json.Unmarshal(res.body.Bytes(), &out)
			for _, c := range consumed(out.ConsumedCapacity) {
				units := c.CapacityUnits
				if op == "Query" || op == "Scan" {
					units = max(units, cost.QueryReadUnits(nil, in.ConsistentRead))
				}
				if isRead {
					m.add(c.TableName, units, 0)
				} else {
					m.add(c.TableName, 0, units)
				}
			}
			if !asked {
				res.setBody(withoutField(res.body.Bytes(), "ConsumedCapacity"))
			}
		case res.status == http.StatusBadRequest && strings.HasSuffix(res.errorType(), "ConditionalCheckFailedException"):
			key := in.Key
			if op == "PutItem" {
				key = m.keyOf(in.TableName, in.Item)
			}
			m.add(in.TableName, 0, cost.WriteUnits(m.storedSize(in.TableName, key)))
		}
		res.writeTo(w)
	})
}

// dynamoRequest holds the fields of a request the meter reads.
type dynamoRequest struct {
	TableName              string
	ReturnConsumedCapacity string
	ConsistentRead         bool
	Key                    map[string]json.RawMessage
	Item                   map[string]json.RawMessage
	TransactItems          []struct {
		Get, Put, Update, Delete, ConditionCheck *struct {
			TableName string
			Key       map[string]json.RawMessage
			Item      map[string]json.RawMessage
		}
	}
}

type consumedCapacity struct {
	TableName     string
	CapacityUnits float64
}

// consumed reads a ConsumedCapacity that is one object (single-item calls, Query, Scan) or a
// list of them (the batch calls).
func consumed(raw json.RawMessage) []consumedCapacity {
	var one consumedCapacity
	if json.Unmarshal(raw, &one) == nil && one.TableName != "" {
		return []consumedCapacity{one}
	}
	var many []consumedCapacity
	json.Unmarshal(raw, &many)
	return many
}

// transactWrite counts a TransactWriteItems: each action twice the write units of the larger of
// its item before and after.
func (m *DynamoMeter) transactWrite(w http.ResponseWriter, req *http.Request, body []byte, in dynamoRequest, next http.Handler) {
	type action struct {
		table       string
		key         map[string]json.RawMessage
		before, put int
	}
	var actions []action
	for _, ti := range in.TransactItems {
		for _, a := range []*struct {
			TableName string
			Key       map[string]json.RawMessage
			Item      map[string]json.RawMessage
		}{ti.Put, ti.Update, ti.Delete, ti.ConditionCheck} {
			if a == nil {
				continue
			}
			key, put := a.Key, 0
			if a.Item != nil {
				key = m.keyOf(a.TableName, a.Item)
				put, _ = cost.ItemSize(a.Item)
			}
			actions = append(actions, action{table: a.TableName, key: key, before: m.storedSize(a.TableName, key), put: put})
		}
	}
	res := forward(next, req, body)
	if res.status == http.StatusOK || strings.HasSuffix(res.errorType(), "TransactionCanceledException") {
		for _, a := range actions {
			after := m.storedSize(a.table, a.key)
			m.add(a.table, 0, cost.TransactionalWriteUnits(max(a.before, a.put, after)))
		}
	}
	res.writeTo(w)
}

// transactGet counts a TransactGetItems: each item twice a strongly consistent read of it.
func (m *DynamoMeter) transactGet(w http.ResponseWriter, req *http.Request, body []byte, in dynamoRequest, next http.Handler) {
	res := forward(next, req, body)
	if res.status == http.StatusOK || strings.HasSuffix(res.errorType(), "TransactionCanceledException") {
		for _, ti := range in.TransactItems {
			if g := ti.Get; g != nil {
				m.add(g.TableName, cost.TransactionalReadUnits(m.storedSize(g.TableName, g.Key)), 0)
			}
		}
	}
	res.writeTo(w)
}

// keyOf is the primary key of an item of the table.
func (m *DynamoMeter) keyOf(table string, item map[string]json.RawMessage) map[string]json.RawMessage {
	key := map[string]json.RawMessage{}
	m.mu.Lock()
	names := m.keys[table]
	m.mu.Unlock()
	for _, k := range names {
		if v, ok := item[k]; ok {
			key[k] = v
		}
	}
	return key
}

// storedSize is the size of the item stored under key (0 when absent or unreadable), read from
// dynalite directly, uncounted.
func (m *DynamoMeter) storedSize(table string, key map[string]json.RawMessage) int {
	if len(key) == 0 {
		return 0
	}
	body, _ := json.Marshal(map[string]any{"TableName": table, "Key": key, "ConsistentRead": true})
	req, err := http.NewRequest(http.MethodPost, m.target, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	// dynalite checks that a request is signed, not the signature.
	now := time.Now().UTC()
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.GetItem")
	req.Header.Set("X-Amz-Date", now.Format("20060102T150405Z"))
	req.Header.Set("Authorization", fmt.Sprintf("AWS4-HMAC-SHA256 Credential=local/%s/%s/dynamodb/aws4_request, SignedHeaders=host;x-amz-date, Signature=0", now.Format("20060102"), Region))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var out struct{ Item map[string]json.RawMessage }
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
		return 0
	}
	n, _ := cost.ItemSize(out.Item)
	return n
}

// bufferedResponse is an answer held back so that the meter can read and amend it.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bufferedResponse) WriteHeader(code int)        { b.status = code }

// forward sends the request with body to next and holds its answer.
func forward(next http.Handler, req *http.Request, body []byte) *bufferedResponse {
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Length", strconv.Itoa(len(body)))
	res := &bufferedResponse{header: http.Header{}, status: http.StatusOK}
	next.ServeHTTP(res, req)
	return res
}

// errorType is the __type of an error answer.
func (b *bufferedResponse) errorType() string {
	var e struct {
		Type string `json:"__type"`
	}
	json.Unmarshal(b.body.Bytes(), &e)
	return e.Type
}

// setBody replaces the body, and its CRC32 checksum in X-Amz-Crc32, which the Go SDK's DynamoDB
// client verifies unless told not to
// (https://pkg.go.dev/github.com/aws/aws-sdk-go-v2/service/dynamodb#Options, DisableValidateResponseChecksum).
func (b *bufferedResponse) setBody(p []byte) {
	b.body.Reset()
	b.body.Write(p)
	b.header.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(p)), 10))
}

func (b *bufferedResponse) writeTo(w http.ResponseWriter) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(b.body.Len()))
	w.WriteHeader(b.status)
	w.Write(b.body.Bytes())
}

// withField sets a top-level string field of a JSON object; the body is unchanged if it is not one.
func withField(body []byte, name, value string) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return body
	}
	m[name], _ = json.Marshal(value)
	out, _ := json.Marshal(m)
	return out
}

// withoutField removes a top-level field of a JSON object.
func withoutField(body []byte, name string) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return body
	}
	if _, ok := m[name]; !ok {
		return body
	}
	delete(m, name)
	out, _ := json.Marshal(m)
	return out
}

// DynamoTable is one table the run creates: from an AWS::DynamoDB::Table of the templates, or from
// a tenant's dynamodb.table naming a table that is not in the templates (an existing table on AWS;
// locally it is created too, with the tenant's key fields as string keys, for convenience).
type DynamoTable struct {
	Name                 string
	KeySchema            []dyntypes.KeySchemaElement
	AttributeDefinitions []dyntypes.AttributeDefinition
	From                 string // the logical id, or "tenant <id>"
}
