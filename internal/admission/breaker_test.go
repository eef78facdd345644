package admission

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/breaker"
	"github.com/example/tenantpipeline/internal/schema"
)

// putBreaker stores the core system's breaker item as Register writes it.
func putBreaker(t *testing.T, s *Store, table, status string, nextProbe time.Time) {
	t.Helper()
	_, err := s.DB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		schema.AttrPK:           str(schema.CoreGate("ledger")),
		schema.AttrSK:           str(breaker.SK),
		breaker.AttrStatus:      str(status),
		breaker.AttrNextProbe:   num(nextProbe.UnixMilli()),
		breaker.AttrVersion:     num(3),
		breaker.AttrOpenedAt:    num(nextProbe.Add(-time.Second).UnixMilli()),
		breaker.AttrReason:      str("the core system did not answer: connection refused"),
		breaker.AttrProber:      str(""),
		breaker.AttrProbeUntil:  num(0),
		breaker.AttrFailures:    num(5),
		breaker.AttrWindowStart: num(0),
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBreakerGate: while the core system's breaker is open admission admits none of its files,
// even with slots free; half-open, one file, and only when none runs (it carries the probe); a
// disabled breaker, or a closed one, does not limit.
func TestBreakerGate(t *testing.T) {
	tests := []struct {
		name         string
		status       string        // "" no item
		probeIn      time.Duration // from now to the probe time
		breakerGate  bool          // Gate.Breaker
		running      int           // files of the core system admitted before the breaker item is written
		wantAdmitted int           // of 3 new files
	}{
		{"no item", "", 0, true, 0, 3},
		{"closed", "closed", 0, true, 0, 3},
		{"open: none", "open", time.Hour, true, 0, 0},
		{"open, a file running: none", "open", time.Hour, true, 1, 0},
		{"open past its probe time, none running: one", "open", -time.Second, true, 0, 1},
		{"half-open, none running: one", "half-open", -time.Second, true, 0, 1},
		{"half-open, a file running: none", "half-open", -time.Second, true, 1, 0},
		{"open but the breaker disabled: as without", "open", time.Hour, false, 0, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, clock, table := newStore(t)
			g := Gate{Table: table, Key: schema.CoreGate("ledger"), Limit: 4, Breaker: tc.breakerGate}
			for i := range tc.running {
				if d := mustAdmit(t, s, req(fmt.Sprintf("r%d", i), fmt.Sprintf("r%d-f1", i), 1, g)); !d.Admitted {
					t.Fatalf("running file %d not admitted", i)
				}
			}
			if tc.status != "" {
				putBreaker(t, s, table, tc.status, clock.Now().Add(tc.probeIn))
			}
			admitted := 0
			for i := range 3 {
				tenant := fmt.Sprintf("t%d", i)
				if d := mustAdmit(t, s, req(tenant, tenant+"-f1", 1, g)); d.Admitted {
					admitted++
				}
			}
			if admitted != tc.wantAdmitted {
				t.Errorf("got %d of 3 admitted, want %d", admitted, tc.wantAdmitted)
			}
		})
	}
}
