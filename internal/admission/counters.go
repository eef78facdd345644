package admission

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/schema"
)

// counter is one weight's tickets: issued so far, and served (taken off the queue).
type counter struct{ issued, served int64 }

// meta is a gate's queue counters and reconcile mark, as one Query read them.
type meta struct {
	counters     map[int]counter
	reconciledAt int64
	overflow     int64
	// mark is the files served in all weights at reconciledAt; pace the files served per minute
	// between the two reconciles before it (0: unknown).
	mark, pace int64
}

// served is the files served in all weights.
func (m meta) served() int64 {
	var n int64
	for _, c := range m.counters {
		n += c.served
	}
	return n
}

// expectedWait is how long a file with ahead files ahead of it may wait at the gate's pace.
func (m meta) expectedWait(ahead int) time.Duration {
	if m.pace <= 0 {
		return 0
	}
	return time.Duration(float64(ahead+1) / float64(m.pace) * float64(time.Minute))
}

func (m meta) waiting() int64 {
	var n int64
	for _, c := range m.counters {
		n += max(0, c.issued-c.served)
	}
	return n
}

// ahead is how many files of the weight hold a smaller ticket and still wait.
func (m meta) ahead(weight int, ticket int64) int {
	return int(max(0, ticket-m.counters[weight].served-1))
}

func (s *Store) readMeta(ctx context.Context, g Gate) (meta, error) {
	out, err := s.DB.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(g.Table),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :c)"),
		ExpressionAttributeNames:  map[string]string{"#pk": schema.AttrPK, "#sk": schema.AttrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(g.queue()), ":c": str(schema.CounterPrefix)},
	})
	if err != nil {
		return meta{}, fmt.Errorf("read the queue's counters: %w", err)
	}
	m := meta{counters: map[int]counter{}}
	for _, it := range out.Items {
		sk := sOf(it, schema.AttrSK)
		if sk == schema.MetaSK {
			m.reconciledAt, m.overflow = nOf(it, attrReconcile), nOf(it, attrOverflow)
			m.mark, m.pace = nOf(it, attrMark), nOf(it, attrPace)
			continue
		}
		w, err := strconv.Atoi(strings.TrimPrefix(sk, schema.CounterPrefix))
		if err != nil {
			continue
		}
		m.counters[w] = counter{issued: nOf(it, attrIssued), served: nOf(it, attrServed)}
	}
	return m, nil
}

func (s *Store) addServed(ctx context.Context, g Gate, weight int, n int64) error {
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(g.Table),
		Key:                       key(g.queue(), schema.CounterSK(weight)),
		UpdateExpression:          aws.String("ADD #s :n"),
		ExpressionAttributeNames:  map[string]string{"#s": attrServed},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": num(n)},
	})
	if err != nil {
		return fmt.Errorf("count the queue served: %w", err)
	}
	return nil
}

// settleGrace is how long a ticket stays counted as waiting before its entry exists: a caller
// takes its ticket, then writes its entry, so an empty queue under a ticket younger than this may
// be an entry on its way. Settling it then would count the coming waiter as served, and no release
// would ever hand it a slot. A minute is far longer than two DynamoDB writes with the SDK's
// retries; a caller that stopped between them leaves a ticket that is settled after it.
const settleGrace = time.Minute

// settleCounter sets served to issued when the weight's queue is empty, if nobody changed the
// counter since it was read and its last ticket is older than settleGrace.
func (s *Store) settleCounter(ctx context.Context, g Gate, w int, c counter, now time.Time) error {
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(g.Table),
		Key:                       key(g.queue(), schema.CounterSK(w)),
		UpdateExpression:          aws.String("SET #s = :i"),
		ConditionExpression:       aws.String("#i = :i AND (attribute_not_exists(#at) OR #at < :cut)"),
		ExpressionAttributeNames:  map[string]string{"#s": attrServed, "#i": attrIssued, "#at": attrIssuedAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{":i": num(c.issued), ":cut": num(now.Add(-settleGrace).UnixMilli())},
	})
	if err != nil && !conditionFailed(err) {
		return fmt.Errorf("settle the queue's counter: %w", err)
	}
	return nil
}
