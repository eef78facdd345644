package admission

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/schema"
)

// Summary is one gate as an operator sees it.
type Summary struct {
	Gate string `json:"gate"`
	// Running are the executions holding a live lease (overflow leases included), sorted.
	Running []string `json:"running"`
	// Reserved counts slots handed to a woken file that has not claimed them yet.
	Reserved int `json:"reserved"`
	// Limit is the effective limit (adaptive or configured), MaxRunningFiles the configured one.
	Limit           int `json:"limit"`
	MaxRunningFiles int `json:"maxRunningFiles"`
	// Waiting is the number of files waiting (live entries); OldestWaitSeconds the longest wait.
	Waiting           int     `json:"waitingTenants"`
	OldestWaitSeconds float64 `json:"oldestAdmissionWaitSeconds"`
}

// Summarize reads the gate whole: its leases and every waiting entry (a paginated Query; for
// operators, not for the controllers' path).
func (s *Store) Summarize(ctx context.Context, g Gate) (Summary, error) {
	now := s.now()
	st, err := s.readSlots(ctx, g, now)
	if err != nil {
		return Summary{}, err
	}
	sum := Summary{Gate: g.Key, Limit: st.limit, MaxRunningFiles: g.Limit, Running: []string{}}
	for _, l := range st.leases {
		if l.reservedUntil > 0 {
			sum.Reserved++
			continue
		}
		sum.Running = append(sum.Running, l.execution)
	}
	slices.Sort(sum.Running)
	var start map[string]types.AttributeValue
	for {
		out, err := s.DB.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(g.Table),
			ConsistentRead:            aws.Bool(true),
			KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :w)"),
			ExpressionAttributeNames:  map[string]string{"#pk": schema.AttrPK, "#sk": schema.AttrSK, "#r": attrRenewedAt, "#s": attrSince, "#a": attrAlive},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(g.queue()), ":w": str(schema.EntryPrefix)},
			ProjectionExpression:      aws.String("#sk, #r, #s, #a"),
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return Summary{}, fmt.Errorf("read the waiting files: %w", err)
		}
		for _, it := range out.Items {
			if entryOf(it).stale(now, s.WaiterTTL) {
				continue
			}
			sum.Waiting++
			sum.OldestWaitSeconds = max(sum.OldestWaitSeconds, now.Sub(time.UnixMilli(nOf(it, attrSince))).Seconds())
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	return sum, nil
}

// Holders lists the executions holding a live lease in the gate, for operators.
func (s *Store) Holders(ctx context.Context, g Gate) ([]string, int, error) {
	st, err := s.readSlots(ctx, g, s.now())
	if err != nil {
		return nil, 0, err
	}
	var names []string
	for _, l := range st.leases {
		names = append(names, l.execution)
	}
	slices.Sort(names)
	return names, st.limit, nil
}
