package localrun

// The state machines of the templates, created on the Step Functions server, and the server's
// execution table that the report reads.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

func (c *Cloud) createStateMachine(ctx context.Context, asm *deploy.Assembly, res *deploy.Resolver, m *deploy.Resource) error {
	id, _ := res.Identity(m)
	var def string
	if raw, ok := m.Properties["DefinitionString"]; ok {
		s, err := res.ResolveString(m.Stack, raw)
		if err != nil {
			return fmt.Errorf("%s.DefinitionString: %w", m.LogicalID, err)
		}
		def = s
	} else if raw, ok := m.Properties["Definition"]; ok {
		v, err := res.Resolve(m.Stack, raw)
		if err != nil {
			return err
		}
		b, _ := json.Marshal(v)
		def = string(b)
	}
	var subs map[string]string
	asm.Prop(res, m, "DefinitionSubstitutions", &subs)
	for k, v := range subs {
		def = strings.ReplaceAll(def, "${"+k+"}", v)
	}
	c.definitions[id.Ref] = def
	var roleArn string
	asm.Prop(res, m, "RoleArn", &roleArn)
	_, err := c.sfn.CreateStateMachine(ctx, &sfn.CreateStateMachineInput{Name: aws.String(id.Attrs["Name"]), Definition: aws.String(def), RoleArn: aws.String(cmp.Or(roleArn, "arn:aws:iam::"+emulate.Account+":role/local"))})
	if err != nil {
		return fmt.Errorf("state machine %s: %w", m.LogicalID, err)
	}
	return nil
}

// sfnStats reads the Step Functions server's execution table.
func (c *Cloud) sfnStats(ctx context.Context) (*sfnStats, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.sfnURL, strings.NewReader("{}"))
	req.Header.Set("X-Amz-Target", "LocalStepFunctions.Stats")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var s sfnStats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return nil, err
	}
	return &s, nil
}

type sfnStats struct {
	APICalls   map[string]int64 `json:"apiCalls"`
	Executions []sfnExecution   `json:"executions"`
}

type sfnExecution struct {
	ExecutionArn    string  `json:"executionArn"`
	StateMachineArn string  `json:"stateMachineArn"`
	Name            string  `json:"name"`
	Status          string  `json:"status"`
	StartDate       float64 `json:"startDate"`
	StopDate        float64 `json:"stopDate"`
	HistoryEvents   int     `json:"historyEvents"`
	// StateTransitions is what Step Functions bills for this execution alone (server.mjs).
	StateTransitions int    `json:"stateTransitions"`
	MaxPayloadBytes  int    `json:"maxPayloadBytes"`
	ParentArn        string `json:"parentArn"`
	RedriveCount     int    `json:"redriveCount"`
	Error            string `json:"error"`
	Cause            string `json:"cause"`
}
