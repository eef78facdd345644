package deploy

import (
	"encoding/json"
	"fmt"
	"strings"
)

// APIMethod is the REST API method a rule's API Gateway target invokes, as the templates declare
// it (AWS::ApiGateway::Method and the resources above it). The local run delivers to AWS
// integrations with SQS only (IntegrationType "AWS", Uri arn:aws:apigateway:<region>:sqs:path/
// <account>/<queue name>); ReadAPIMethod refuses any other.
// https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-apigateway-method.html
type APIMethod struct {
	APIID, Stage, HTTPMethod, Path string
	Authorization                  string // AuthorizationType: AWS_IAM, NONE, ...
	Credentials                    string // the integration's role
	QueueName                      string // the SQS queue its Uri names
	RequestTemplates               map[string]string
	RequestParameters              map[string]string
	PassthroughBehavior            string
	// Responses are the integration responses: a status code for each selection pattern, ""
	// for the default one.
	Responses map[string]string
}

// ReadAPIMethod finds the method an execute-api ARN names
// (arn:aws:execute-api:<region>:<account>:<api id>/<stage>/<HTTP method>/<path>): the RestApi
// whose Ref is the API id, a Stage of it with that name, and the method of that path.
func (a *Assembly) ReadAPIMethod(res *Resolver, arn string) (APIMethod, error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[2] != "execute-api" {
		return APIMethod{}, fmt.Errorf("%s is not an execute-api ARN", arn)
	}
	fields := strings.SplitN(parts[5], "/", 4)
	if len(fields) < 3 {
		return APIMethod{}, fmt.Errorf("%s names no stage and method", arn)
	}
	m := APIMethod{APIID: fields[0], Stage: fields[1], HTTPMethod: fields[2], Path: "/"}
	if len(fields) == 4 {
		m.Path += fields[3]
	}
	api := a.refTo(res, "AWS::ApiGateway::RestApi", m.APIID)
	if api == nil {
		return APIMethod{}, fmt.Errorf("%s: no REST API of the templates has the id %s", arn, m.APIID)
	}
	if !a.hasStage(res, api, m.Stage) {
		return APIMethod{}, fmt.Errorf("%s: REST API %s has no stage %q", arn, api.LogicalID, m.Stage)
	}
	for _, r := range api.Stack.Resources {
		if r.Type != "AWS::ApiGateway::Method" || !refersTo(r.Properties["RestApiId"], api.LogicalID) {
			continue
		}
		var verb string
		a.Prop(res, r, "HttpMethod", &verb)
		if path, err := methodPath(api, r); err != nil {
			return APIMethod{}, err
		} else if path != m.Path || (verb != m.HTTPMethod && verb != "ANY") {
			continue
		}
		return a.readIntegration(res, r, m)
	}
	return APIMethod{}, fmt.Errorf("%s: REST API %s has no %s method on %s", arn, api.LogicalID, m.HTTPMethod, m.Path)
}

// readIntegration reads method r's integration into m.
func (a *Assembly) readIntegration(res *Resolver, r *Resource, m APIMethod) (APIMethod, error) {
	var in struct {
		Type, Uri, Credentials, PassthroughBehavior string
		RequestTemplates, RequestParameters         map[string]string
		IntegrationResponses                        []struct{ SelectionPattern, StatusCode string }
	}
	if err := a.Prop(res, r, "AuthorizationType", &m.Authorization); err != nil {
		return m, err
	}
	if err := a.Prop(res, r, "Integration", &in); err != nil {
		return m, err
	}
	account, queue, ok := strings.Cut(strings.TrimPrefix(in.Uri, "arn:aws:apigateway:"+res.Region+":sqs:path/"), "/")
	if in.Type != "AWS" || !strings.HasPrefix(in.Uri, "arn:aws:apigateway:") || !ok || account != res.Account || strings.Contains(queue, "/") {
		return m, fmt.Errorf("method %s: the local run delivers to AWS integrations with SQS (arn:aws:apigateway:%s:sqs:path/%s/<queue>), not %s %s",
			r.LogicalID, res.Region, res.Account, in.Type, in.Uri)
	}
	m.Credentials, m.QueueName, m.PassthroughBehavior = in.Credentials, queue, in.PassthroughBehavior
	m.RequestTemplates, m.RequestParameters = in.RequestTemplates, in.RequestParameters
	m.Responses = map[string]string{}
	for _, ir := range in.IntegrationResponses {
		m.Responses[ir.SelectionPattern] = ir.StatusCode
	}
	return m, nil
}

// refTo is the resource of type typ whose Ref resolves to ref.
func (a *Assembly) refTo(res *Resolver, typ, ref string) *Resource {
	for _, r := range a.OfType(typ) {
		if v, err := res.ResolveString(r.Stack, json.RawMessage(fmt.Sprintf(`{"Ref":%q}`, r.LogicalID))); err == nil && v == ref {
			return r
		}
	}
	return nil
}

// hasStage says whether api has a stage called name.
func (a *Assembly) hasStage(res *Resolver, api *Resource, name string) bool {
	for _, r := range api.Stack.Resources {
		var stage string
		if r.Type == "AWS::ApiGateway::Stage" && refersTo(r.Properties["RestApiId"], api.LogicalID) && a.Prop(res, r, "StageName", &stage) == nil && stage == name {
			return true
		}
	}
	return false
}

// methodPath is the path of method r: the PathParts of the resources from its ResourceId up to
// the API's root (Fn::GetAtt <api>.RootResourceId).
func methodPath(api, r *Resource) (string, error) {
	var segs []string
	id := r.Properties["ResourceId"]
	for range 64 {
		if isRoot(id, api.LogicalID) {
			return "/" + strings.Join(segs, "/"), nil
		}
		var ref struct{ Ref string }
		if json.Unmarshal(id, &ref) != nil || api.Stack.Resources[ref.Ref] == nil || api.Stack.Resources[ref.Ref].Type != "AWS::ApiGateway::Resource" {
			return "", fmt.Errorf("method %s: the local run follows ResourceId through Refs to AWS::ApiGateway::Resource, not %s", r.LogicalID, id)
		}
		parent := api.Stack.Resources[ref.Ref]
		var part string
		json.Unmarshal(parent.Properties["PathPart"], &part)
		segs = append([]string{part}, segs...)
		id = parent.Properties["ParentId"]
	}
	return "", fmt.Errorf("method %s: its resources do not reach the API's root", r.LogicalID)
}

// isRoot says whether raw is {"Fn::GetAtt": [api, "RootResourceId"]}.
func isRoot(raw json.RawMessage, api string) bool {
	var g struct {
		GetAtt []string `json:"Fn::GetAtt"`
	}
	return json.Unmarshal(raw, &g) == nil && len(g.GetAtt) == 2 && g.GetAtt[0] == api && g.GetAtt[1] == "RootResourceId"
}

// refersTo says whether raw is {"Ref": logicalID}.
func refersTo(raw json.RawMessage, logicalID string) bool {
	var ref struct{ Ref string }
	return json.Unmarshal(raw, &ref) == nil && ref.Ref == logicalID
}
