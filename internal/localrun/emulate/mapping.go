package emulate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
)

// MappingRenderer renders API Gateway REST mapping templates with the local renderer
// (local/apigateway: Velocity with API Gateway's $input, $util and $context), as API Gateway
// renders an integration's request template
// (https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-mapping-template-reference.html).
type MappingRenderer struct {
	URL string
}

// MappingRequest is the method request a template reads.
type MappingRequest struct {
	Body           string            `json:"body"`
	Path           map[string]string `json:"path,omitempty"`
	Querystring    map[string]string `json:"querystring,omitempty"`
	Header         map[string]string `json:"header,omitempty"`
	Context        map[string]any    `json:"context,omitempty"`
	StageVariables map[string]string `json:"stageVariables,omitempty"`
}

// StartMappingRenderer starts the renderer's server under node; stop it with the returned func.
func StartMappingRenderer(ctx context.Context, node, moduleRoot string, logs io.Writer) (*MappingRenderer, func(), error) {
	p, err := StartNode(ctx, node, filepath.Join(moduleRoot, "local/apigateway/server.mjs"), nil, logs)
	if err != nil {
		return nil, nil, err
	}
	return &MappingRenderer{URL: p.URL}, p.Close, nil
}

// Render renders template for req. A template the renderer cannot answer as API Gateway would (a
// Java method it does not model, a body that is not JSON) is an error naming what it lacks.
func (m *MappingRenderer) Render(ctx context.Context, template string, req MappingRequest) (string, error) {
	in, err := json.Marshal(map[string]any{"template": template, "request": req})
	if err != nil {
		return "", err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, m.URL, bytes.NewReader(in))
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return "", fmt.Errorf("mapping template: %w", err)
	}
	defer resp.Body.Close()
	var out struct {
		Output, Message string
		Type            string `json:"__type"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", fmt.Errorf("mapping template: %s: %w", resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("mapping template: %s", out.Message)
	}
	return out.Output, nil
}
