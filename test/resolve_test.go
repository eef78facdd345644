package test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// flatten renders a template value that CloudFormation completes at deploy time (Fn::Join of
// strings and intrinsics) as one string, each intrinsic as a readable placeholder:
// <Ref:ID>, <GetAtt:ID.Attr>, <Import:...>. A JSON document built with Stack.ToJsonString then
// parses with its placeholders in place of the deploy-time values.
func flatten(t *testing.T, v any) string {
	t.Helper()
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		if len(x) != 1 {
			t.Fatalf("got %s, want a string or one intrinsic function", asJSON(x))
		}
		for fn, arg := range x {
			switch fn {
			case "Ref":
				return "<Ref:" + arg.(string) + ">"
			case "Fn::GetAtt":
				a := arg.([]any)
				return fmt.Sprintf("<GetAtt:%s.%s>", a[0], a[1])
			case "Fn::ImportValue":
				return "<Import:" + flatten(t, arg) + ">"
			case "Fn::Join":
				a := arg.([]any)
				var parts []string
				for _, p := range a[1].([]any) {
					parts = append(parts, flatten(t, p))
				}
				return strings.Join(parts, a[0].(string))
			case "Fn::Select":
				// As JSON: a part of a value known at deploy time (an ARN's name, say).
				return "<Select:" + asJSON(arg) + ">"
			}
			t.Fatalf("got intrinsic %s, which flatten does not know", fn)
		}
	}
	t.Fatalf("got %T %v, want a string or an intrinsic function", v, v)
	return ""
}

// flattenJSON flattens v and parses it as JSON into out.
func flattenJSON(t *testing.T, v any, out any) string {
	t.Helper()
	s := flatten(t, v)
	if err := json.Unmarshal([]byte(s), out); err != nil {
		t.Fatalf("got %q, which is not JSON: %v", s, err)
	}
	return s
}

// logicalIDOf returns the logical id of the tenant's single resource of a type whose id contains part.
func logicalIDOf(t *testing.T, tpl map[string]any, typ, tenant, part string) string {
	t.Helper()
	var found []string
	for id := range tenantResources(t, tpl, typ, tenant) {
		if strings.Contains(id, part) {
			found = append(found, id)
		}
	}
	if len(found) != 1 {
		t.Fatalf("tenant %s: got %v %s resources with %q in the id, want 1", tenant, found, typ, part)
	}
	return found[0]
}

// controllerID and friends name the tenant's resources by logical id.
func controllerID(t *testing.T, tpl map[string]any, tenant string) string {
	t.Helper()
	for id, fn := range tenantResources(t, tpl, "AWS::Lambda::Function", tenant) {
		if src, _ := get(t, fn, "Metadata").(map[string]any)["tenantpipeline:source"].(string); src == "lambdas/controller" {
			return id
		}
	}
	t.Fatalf("tenant %s: no controller function", tenant)
	return ""
}

func registerID(t *testing.T, tpl map[string]any, tenant string) string {
	t.Helper()
	for id, fn := range tenantResources(t, tpl, "AWS::Lambda::Function", tenant) {
		if src, _ := get(t, fn, "Metadata").(map[string]any)["tenantpipeline:source"].(string); src == "lambdas/register" {
			return id
		}
	}
	t.Fatalf("tenant %s: no register function", tenant)
	return ""
}

// statementsOf returns the statements of the policies whose logical id contains part.
func statementsOf(t *testing.T, tpl map[string]any, tenant, part string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for id, pol := range tenantResources(t, tpl, "AWS::IAM::Policy", tenant) {
		if !strings.Contains(id, part) {
			continue
		}
		for _, s := range get(t, props(pol), "PolicyDocument", "Statement").([]any) {
			out = append(out, s.(map[string]any))
		}
	}
	return out
}
