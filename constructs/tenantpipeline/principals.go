package tenantpipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/constructs-go/constructs/v10"

	"github.com/example/tenantpipeline/spec"
)

// checkUploaders refuses the uploaders a tenants file would refuse (spec.CheckUploader): each
// must be IAM roles or users, never "*", an account (its root, which trusts every principal the
// account's own policies allow), a service, a federated or a canonical user. A literal ARN is
// checked as the file checks it; a role or user created in the app (its ARN a token) is one by
// construction, and a token that ends in ":root" is an account. field names the prop
// ("Uploaders", "PoolProps.Uploaders").
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_principal.html
func checkUploaders(scope constructs.Construct, field string, uploaders []awsiam.IPrincipal) error {
	var errs []error
	for i, u := range uploaders {
		if u == nil {
			continue // reported by validate
		}
		for _, err := range uploaderProblems(scope, u) {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", field, i, err))
		}
	}
	return errors.Join(errs...)
}

// uploaderProblems are the reasons u cannot be an uploader, from the principal as a policy's
// Principal element renders it.
func uploaderProblems(scope constructs.Construct, u awsiam.IPrincipal) []error {
	rendered := awscdk.Stack_Of(scope).Resolve(u.PolicyFragment().PrincipalJson())
	m, _ := rendered.(map[string]any)
	var errs []error
	for _, kind := range sortedKeys(m) {
		// A StarPrincipal or an AnyPrincipal renders as "*" (LiteralString).
		if kind != "AWS" && kind != "LiteralString" {
			errs = append(errs, fmt.Errorf("%s is a %s principal: an uploader is an IAM role or user (awsiam.NewArnPrincipal(<role ARN>), or a role of the app)", principalString(rendered), kind))
			continue
		}
		for _, v := range asList(m[kind]) {
			if s, literal := v.(string); literal {
				if err := spec.CheckUploader(s); err != nil {
					errs = append(errs, err)
				}
				continue
			}
			if text := literalText(v); strings.HasSuffix(text, ":root") || strings.ContainsAny(text, "*?") {
				errs = append(errs, fmt.Errorf("%s is a whole account or a wildcard: an uploader is an IAM role or user (a trust policy that names an account trusts every principal its own policies allow)", principalString(rendered)))
			}
		}
	}
	if len(m) == 0 {
		errs = append(errs, fmt.Errorf("%s names no IAM principal: an uploader is an IAM role or user", principalString(rendered)))
	}
	return errs
}

// asList is a Principal element's value as a list (one value or several).
func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

// literalText is the text of a resolved CloudFormation value without its references: the
// literal parts of an Fn::Join, in order ("arn:" + ":iam::123456789012:root" for an account).
func literalText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var b strings.Builder
		for _, e := range x {
			b.WriteString(literalText(e))
		}
		return b.String()
	case map[string]any:
		if j, ok := x["Fn::Join"].([]any); ok && len(j) == 2 {
			return literalText(j[1])
		}
	}
	return ""
}

// principalString is a principal's rendering for a message.
func principalString(rendered any) string {
	b, err := json.Marshal(rendered)
	if err != nil {
		return fmt.Sprint(rendered)
	}
	return string(b)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
