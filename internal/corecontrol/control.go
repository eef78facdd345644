// Package corecontrol is how operators steer a core system at run time, without a deploy: a pause
// (running files finish, nothing new is admitted) and a limit override (a running-file limit in
// place of maxRunningFiles until a time, never above maxRequestsInFlight). Both live in one item
// of the core system's admission table (pk schema.CoreGate, sk schema.ControlSK), which a deploy
// never writes, so they outlast a redeploy until they end or are lifted. Each change is audited
// by an item of its own beside it (sk schema.AuditSK). Effective tells admission the limit they
// leave, with the core system's maintenance windows (spec.Maintenance).
package corecontrol

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/schema"
)

// API is the part of the DynamoDB client the control item needs.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// Control is a core system's control item as read.
type Control struct {
	// Paused: nothing new of the core system is admitted until Resume.
	Paused      bool
	PausedAt    time.Time
	PausedBy    string
	PauseReason string
	// Override is the limit override as stored, also an expired one (Active tells).
	Override *Override
	// version is the item's version, 0 when absent: every write is conditional on it.
	version int64
}

// Override is a running-file limit set by an operator until a time.
type Override struct {
	Limit  int       `json:"limit"`
	Until  time.Time `json:"until"`
	SetAt  time.Time `json:"setAt"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
}

// Active is the override in force at now: nil when there is none or it has expired.
func (c Control) Active(now time.Time) *Override {
	if c.Override == nil || !now.Before(c.Override.Until) {
		return nil
	}
	return c.Override
}

// Attributes of the control and audit items.
const (
	attrVersion     = "version"
	attrPaused      = "paused"
	attrPausedAt    = "pausedAt"
	attrPausedBy    = "pausedBy"
	attrPauseReason = "pauseReason"
	attrLimit       = "override"
	attrUntil       = "overrideUntil"
	attrSetAt       = "overrideSetAt"
	attrSetBy       = "overrideBy"
	attrSetReason   = "overrideReason"

	attrAction = "action"
	attrBy     = "by"
	attrAt     = "at"
	attrReason = "reason"
)

// AuditRetention is how long an audit item is kept (the table's TTL attribute, schema.AttrExpiresAt).
const AuditRetention = 400 * 24 * time.Hour

// Store reads and writes the control items of core systems' admission tables.
type Store struct {
	DB  API
	Now func() time.Time // Default: time.Now.
}

func (s *Store) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

func key(name, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{schema.AttrPK: str(schema.CoreGate(name)), schema.AttrSK: str(sk)}
}

// Read returns the core system's control item, strongly consistent so that a change made just
// before is seen; an absent item is the zero Control (not paused, no override). An item that does
// not decode is an error: a caller fails closed.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.ReadConsistency.html
func (s *Store) Read(ctx context.Context, table, name string) (Control, error) {
	out, err := s.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(name, schema.ControlSK), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Control{}, fmt.Errorf("read the control item of core system %s: %w", name, err)
	}
	c, err := decode(out.Item)
	if err != nil {
		return Control{}, fmt.Errorf("control item of core system %s: %w", name, err)
	}
	return c, nil
}

func decode(it map[string]types.AttributeValue) (Control, error) {
	var c Control
	if it == nil {
		return c, nil
	}
	var bad []error
	num := func(name string) int64 {
		v, ok := it[name]
		if !ok {
			return 0
		}
		n, isN := v.(*types.AttributeValueMemberN)
		if !isN {
			bad = append(bad, fmt.Errorf("%s is not a number", name))
			return 0
		}
		x, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			bad = append(bad, fmt.Errorf("%s %q is not an integer", name, n.Value))
		}
		return x
	}
	c.version = num(attrVersion)
	if v, ok := it[attrPaused]; ok {
		b, isB := v.(*types.AttributeValueMemberBOOL)
		if !isB {
			bad = append(bad, fmt.Errorf("%s is not a boolean", attrPaused))
		} else {
			c.Paused = b.Value
		}
	}
	if c.Paused {
		c.PausedAt, c.PausedBy, c.PauseReason = time.UnixMilli(num(attrPausedAt)).UTC(), sOf(it, attrPausedBy), sOf(it, attrPauseReason)
	}
	if _, ok := it[attrLimit]; ok {
		o := &Override{Limit: int(num(attrLimit)), Until: time.UnixMilli(num(attrUntil)).UTC(), SetAt: time.UnixMilli(num(attrSetAt)).UTC(),
			By: sOf(it, attrSetBy), Reason: sOf(it, attrSetReason)}
		if o.Limit < 1 {
			bad = append(bad, fmt.Errorf("%s %d is below 1", attrLimit, o.Limit))
		}
		c.Override = o
	}
	return c, errors.Join(bad...)
}

func encode(name string, c Control) map[string]types.AttributeValue {
	it := key(name, schema.ControlSK)
	it[attrVersion] = num(c.version)
	it[attrPaused] = &types.AttributeValueMemberBOOL{Value: c.Paused}
	if c.Paused {
		it[attrPausedAt], it[attrPausedBy], it[attrPauseReason] = num(c.PausedAt.UnixMilli()), str(c.PausedBy), str(c.PauseReason)
	}
	if o := c.Override; o != nil {
		it[attrLimit], it[attrUntil], it[attrSetAt] = num(int64(o.Limit)), num(o.Until.UnixMilli()), num(o.SetAt.UnixMilli())
		it[attrSetBy], it[attrSetReason] = str(o.By), str(o.Reason)
	}
	return it
}

// Action is one operator's change of a core system, as its audit item records it.
type Action struct {
	Name   string    // "pause", "resume", "limit", "limit-clear"
	By     string    // who (the caller's ARN)
	At     time.Time // when
	Reason string
	// Limit and Until are the override set, for "limit".
	Limit int
	Until time.Time
}

// Change is the outcome of one write.
type Change struct {
	Control Control
	// Changed: the item was written (false: it already said so, e.g. a pause of a paused core
	// system); only a change is audited.
	Changed bool
	// AuditSK is the sort key of the audit item written.
	AuditSK string
}

// ErrAudit wraps a failure to write the audit item after the change was made.
var ErrAudit = errors.New("the change is made, but its audit item was not written")

// maxAttempts bounds the read-and-write rounds lost to a concurrent writer.
const maxAttempts = 5

// update applies f to the current control item and writes it, conditional on the version it read
// (a concurrent change is read again and f applied anew), then writes the audit item. f reports
// false when nothing changes.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html
func (s *Store) update(ctx context.Context, table, name string, a Action, f func(*Control) bool) (Change, error) {
	for try := 0; try < maxAttempts; try++ {
		cur, err := s.Read(ctx, table, name)
		if err != nil {
			return Change{}, err
		}
		next := cur
		if !f(&next) {
			return Change{Control: cur}, nil
		}
		next.version = cur.version + 1
		in := &dynamodb.PutItemInput{TableName: aws.String(table), Item: encode(name, next),
			ConditionExpression:       aws.String("attribute_not_exists(#v) OR #v = :v"),
			ExpressionAttributeNames:  map[string]string{"#v": attrVersion},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(cur.version)}}
		_, err = s.DB.PutItem(ctx, in)
		var cf *types.ConditionalCheckFailedException
		if errors.As(err, &cf) {
			continue
		}
		if err != nil {
			return Change{}, fmt.Errorf("write the control item of core system %s: %w", name, err)
		}
		sk, err := s.audit(ctx, table, name, a)
		if err != nil {
			return Change{Control: next, Changed: true}, fmt.Errorf("core system %s: %w: %w", name, ErrAudit, err)
		}
		return Change{Control: next, Changed: true, AuditSK: sk}, nil
	}
	return Change{}, fmt.Errorf("core system %s: the control item changed under %d attempts in a row; try again", name, maxAttempts)
}

func (s *Store) audit(ctx context.Context, table, name string, a Action) (string, error) {
	sk := schema.AuditSK(a.At.UTC().Format(time.RFC3339Nano), a.Name)
	it := key(name, sk)
	it[attrAction], it[attrBy], it[attrAt], it[attrReason] = str(a.Name), str(a.By), str(a.At.UTC().Format(time.RFC3339Nano)), str(a.Reason)
	it[schema.AttrExpiresAt] = num(a.At.Add(AuditRetention).Unix())
	if a.Name == ActionLimit {
		it[attrLimit], it[attrUntil] = num(int64(a.Limit)), str(a.Until.UTC().Format(time.RFC3339))
	}
	_, err := s.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it,
		ConditionExpression: aws.String("attribute_not_exists(#sk)"), ExpressionAttributeNames: map[string]string{"#sk": schema.AttrSK}})
	if err != nil {
		return "", fmt.Errorf("write the audit item %s: %w", sk, err)
	}
	return sk, nil
}

// Names of the audited actions.
const (
	ActionPause      = "pause"
	ActionResume     = "resume"
	ActionLimit      = "limit"
	ActionLimitClear = "limit-clear"
)

// Pause pauses the core system: admission admits nothing of it until Resume. Pausing a paused
// core system changes nothing (its first pause's who, when and why stay).
func (s *Store) Pause(ctx context.Context, table, name, by, reason string) (Change, error) {
	now := s.now().UTC()
	return s.update(ctx, table, name, Action{Name: ActionPause, By: by, At: now, Reason: reason}, func(c *Control) bool {
		if c.Paused {
			return false
		}
		c.Paused, c.PausedAt, c.PausedBy, c.PauseReason = true, now, by, reason
		return true
	})
}

// Resume lifts the core system's pause; resuming one that is not paused changes nothing.
func (s *Store) Resume(ctx context.Context, table, name, by, reason string) (Change, error) {
	now := s.now().UTC()
	return s.update(ctx, table, name, Action{Name: ActionResume, By: by, At: now, Reason: reason}, func(c *Control) bool {
		if !c.Paused {
			return false
		}
		c.Paused, c.PausedAt, c.PausedBy, c.PauseReason = false, time.Time{}, "", ""
		return true
	})
}

// SetLimit overrides the core system's running-file limit with limit until until. The caller
// bounds limit (Bound); until must be after now.
func (s *Store) SetLimit(ctx context.Context, table, name string, limit int, until time.Time, by, reason string) (Change, error) {
	now := s.now().UTC()
	if limit < 1 {
		return Change{}, fmt.Errorf("core system %s: a limit override of %d is below 1", name, limit)
	}
	if !until.After(now) {
		return Change{}, fmt.Errorf("core system %s: the override's end %s is not after now (%s)", name, until.UTC().Format(time.RFC3339), now.Format(time.RFC3339))
	}
	a := Action{Name: ActionLimit, By: by, At: now, Reason: reason, Limit: limit, Until: until.UTC()}
	return s.update(ctx, table, name, a, func(c *Control) bool {
		c.Override = &Override{Limit: limit, Until: until.UTC(), SetAt: now, By: by, Reason: reason}
		return true
	})
}

// ClearLimit removes the core system's limit override; clearing none changes nothing (an
// expired one is removed).
func (s *Store) ClearLimit(ctx context.Context, table, name, by, reason string) (Change, error) {
	now := s.now().UTC()
	return s.update(ctx, table, name, Action{Name: ActionLimitClear, By: by, At: now, Reason: reason}, func(c *Control) bool {
		if c.Override == nil {
			return false
		}
		c.Override = nil
		return true
	})
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func sOf(it map[string]types.AttributeValue, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}
