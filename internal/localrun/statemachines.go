package localrun

// The Step Functions server's execution table that the report reads (the state machines are
// created by CreateStateMachine, account.go).

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
)

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
