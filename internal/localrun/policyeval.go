package localrun

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// The local IAM policy evaluation: the identity policies of a session's role and the resource
// policy of the bucket it calls, judged in AWS's order: an explicit Deny in either wins; else an
// Allow in either allows (the principal and the bucket are in one account); else the request is
// denied implicitly.
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic-cross-account.html
//
// No maintained Go library evaluates IAM policies (the module proxy has policy engines for Cedar
// and Rego, not for IAM's language), so the evaluator is small and says what it supports:
//
//   - Effect, Action, NotAction (every action but those it lists, as a key policy's account
//     statement may hold back deletion) and Resource with the "*" and "?" wildcards, and the policy variable
//     ${aws:PrincipalTag/<key>} (a missing tag makes the statement not apply);
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_resource.html
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_notaction.html
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_variables.html
//   - in a resource policy, Principal "*", {"AWS": "*"}, {"AWS": <role ARN>} and {"AWS": <account
//     id or root ARN>}, which names every principal of the account; a service, federated or
//     canonical-user principal names no session. An Allow that names the account grants nothing
//     by itself: it leaves the decision to the identity policies;
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_principal.html
//   - the condition operators String(Not)Equals, String(Not)Like, String(Not)EqualsIgnoreCase,
//     Arn(Not)Equals, Arn(Not)Like (each of an ARN's six parts matched apart), Bool and Null, each
//     with the ...IfExists suffix, on the session's tags (aws:PrincipalTag/<key>) and the keys of
//     conditionKeys (among them PutEvents'
//     events:source and events:detail-type, fileevents.go). A negated operator, and an
//     ...IfExists one, holds for a key the request lacks; any other operator does not; Null
//     "true" holds exactly when it is absent. Several values of one key are ORed (for a negated
//     operator: equal to none), several keys and operators ANDed.
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-logic-multiple-context-keys-or-values.html
//
//   - the set operators ForAllValues: and ForAnyValue: on dynamodb:LeadingKeys (leadingkeys.go)
//     and aws:TagKeys, the single-valued aws:RequestTag/<key> (sts.go), and a queue's
//     aws:ResourceTag/<key> (sqsauth.go), and kms:ViaService and kms:EncryptionContext:<key> of the
//     KMS calls S3 and SQS make for the caller (kmsauth.go).
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html
//
// Anything else fails closed: NotResource and NotPrincipal, a set operator on another
// key, another operator, another key. Such a statement is unknown,
// which an Allow takes as not applying and a Deny as applying, and unsupported names it.

// statement is one resolved policy statement.
type statement struct {
	Sid       string
	Effect    string
	Principal json.RawMessage
	Action    stringList
	NotAction stringList
	Resource  stringList
	Condition map[string]map[string]stringList

	// Present only to fail closed: the emulation does not evaluate them.
	NotPrincipal json.RawMessage
	NotResource  json.RawMessage
}

// stringList is a policy element that is one value or a list of them. A boolean or a number (a
// condition's "true" may be written unquoted) is kept as its JSON text.
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	var many []json.RawMessage
	if err := json.Unmarshal(b, &many); err != nil {
		many = []json.RawMessage{b}
	}
	out := make([]string, 0, len(many))
	for _, raw := range many {
		var one string
		if json.Unmarshal(raw, &one) != nil {
			var scalar any
			if err := json.Unmarshal(raw, &scalar); err != nil {
				return err
			}
			switch scalar.(type) {
			case bool, float64:
				one = string(raw)
			default:
				return fmt.Errorf("policy element %s: want a string or a list of strings", raw)
			}
		}
		out = append(out, one)
	}
	*l = out
	return nil
}

// applied is whether a statement applies to a request: a condition the emulation cannot evaluate
// makes it unknown, which an Allow takes as no and a Deny as yes.
type applied int

const (
	noMatch applied = iota
	match
	unknown
)

// conditionKeys are the condition keys the emulation knows, with the request's value where it has
// one. A request without one of them has no such key.
//   - aws:SecureTransport: TLS, or loopback (secureTransport);
//   - aws:PrincipalArn: for a role's session, the role's ARN
//     (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principalarn);
//   - aws:userid: for a role's session, "<the role's unique id>:<the session's name>", the id
//     the templates' role resolves to (deploy: AROALOCAL<logical id>)
//     (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_variables.html#principaltable);
//   - aws:SourceArn and aws:SourceAccount: present only for a service acting for a resource, as
//     EventBridge for its rule (eventbridgeauth.go);
//   - s3:prefix: a listing's prefix;
//   - the S3 request headers of a write (s3Request).
//     https://docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html
var conditionKeys = []string{
	"aws:SecureTransport", "aws:PrincipalArn", "aws:userid", "aws:SourceArn", "aws:SourceAccount", "s3:prefix", "kms:ViaService",
	"s3:x-amz-server-side-encryption", "s3:x-amz-server-side-encryption-aws-kms-key-id",
	"s3:x-amz-server-side-encryption-customer-algorithm", "s3:x-amz-storage-class",
	"s3:if-none-match", "s3:if-match", "s3:ObjectCreationOperation", "events:source", "events:detail-type",
}

// knownKey is whether the emulation knows a single-valued condition key: one of conditionKeys, a
// request tag of AssumeRole (aws:RequestTag/<key>), or a tag of the session
// (aws:PrincipalTag/<key>: session tags are principal tags,
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principaltag).
func knownKey(key string) bool {
	return slices.Contains(conditionKeys, key) || strings.HasPrefix(key, "aws:RequestTag/") || strings.HasPrefix(key, "aws:PrincipalTag/") ||
		strings.HasPrefix(key, "kms:EncryptionContext:")
}

// operators are the condition operators the emulation evaluates, without ...IfExists.
var operators = []string{
	"StringEquals", "StringNotEquals", "StringLike", "StringNotLike", "StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase",
	"ArnEquals", "ArnNotEquals", "ArnLike", "ArnNotLike", "Bool", "Null",
}

func (st statement) applies(tags map[string]string, action, resource string, keys map[string]string) applied {
	if st.NotResource != nil || st.NotPrincipal != nil || st.NotAction != nil && st.Action != nil {
		return unknown
	}
	actionMatches := matchesAny(st.Action, action, tags, true)
	if st.NotAction != nil {
		actionMatches = !matchesAny(st.NotAction, action, tags, true)
	}
	if !actionMatches || !matchesAny(st.Resource, resource, tags, false) {
		return noMatch
	}
	out := match
	for op, conds := range st.Condition {
		set, base, _ := strings.Cut(op, ":")
		if base == "" {
			set, base = "", op
		}
		base, ifExists := strings.CutSuffix(base, "IfExists")
		for key, values := range conds {
			multi := slices.Contains(multiValuedKeys, key)
			known := knownKey(key) || strings.HasPrefix(key, "aws:ResourceTag/") && keys[resourceTagsRead] == "true"
			if !known && !multi || !slices.Contains(operators, base) || multi != (set != "") {
				out = unknown
				continue
			}
			v, present := keys[key]
			var holds bool
			switch set {
			case "":
				holds = conditionHolds(base, ifExists, values, v, present, tags)
			case "ForAllValues", "ForAnyValue":
				if !present { // a value the emulation could not read
					out = unknown
					continue
				}
				holds = setHolds(set == "ForAllValues", base, values, v, tags)
			default:
				out = unknown
				continue
			}
			if !holds {
				return noMatch
			}
		}
	}
	return out
}

// setHolds evaluates a set operator on a multi-valued key whose values are joined by
// valueSeparator: ForAllValues holds when every value satisfies the operator (and for none),
// ForAnyValue when one does.
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html
func setHolds(all bool, op string, values []string, joined string, tags map[string]string) bool {
	var got []string
	if joined != "" {
		got = strings.Split(joined, valueSeparator)
	}
	for _, v := range got {
		holds := conditionHolds(op, false, values, v, true, tags)
		if holds != all {
			return holds // ForAnyValue: one holds; ForAllValues: one does not
		}
	}
	return all
}

// conditionHolds evaluates one operator on one key whose value is v (present: the request has it).
func conditionHolds(op string, ifExists bool, values []string, v string, present bool, tags map[string]string) bool {
	if op == "Null" {
		return slices.ContainsFunc(values, func(b string) bool { return strings.EqualFold(b, fmt.Sprint(!present)) })
	}
	negated := strings.Contains(op, "Not")
	if !present {
		return negated || ifExists
	}
	var any bool
	switch strings.Replace(op, "Not", "", 1) {
	case "StringEquals":
		any = slicesContainsSubstituted(values, v, tags, false)
	case "StringEqualsIgnoreCase":
		any = slicesContainsSubstituted(values, v, tags, true)
	case "StringLike":
		any = matchesAny(values, v, tags, false)
	case "ArnEquals", "ArnLike":
		any = slices.ContainsFunc(values, func(p string) bool { return arnMatches(p, v, tags) })
	case "Bool":
		any = slices.ContainsFunc(values, func(b string) bool { return strings.EqualFold(b, v) })
	}
	return any != negated
}

// arnMatches matches an ARN against a pattern part by part: a wildcard does not run past a colon
// into the next of the six parts, and a value that is no ARN matches nothing.
func arnMatches(pattern, v string, tags map[string]string) bool {
	pp, vp := strings.SplitN(pattern, ":", 6), strings.SplitN(v, ":", 6)
	if len(pp) != 6 || len(vp) != 6 {
		return false
	}
	for i := range pp {
		if matched, ok := wildcard(pp[i], tags, false, vp[i]); !ok || !matched {
			return false
		}
	}
	return true
}

// namesPrincipal is whether a resource policy's statement names the session of role (names), and
// whether it names it as itself, by "*" or the role's ARN (grants): only then does an Allow grant
// by itself. A statement naming the role's account names the session but leaves an Allow to the
// identity policies.
func (st statement) namesPrincipal(role string) (names, grants bool) {
	p, decided, names, grants := st.principals()
	if decided {
		return names, grants
	}
	acct := ""
	if parts := strings.SplitN(role, ":", 6); len(parts) == 6 {
		acct = parts[4]
	}
	for _, v := range p["AWS"] {
		switch {
		case v == "*" || v == role:
			return true, true
		case acct != "" && (v == acct || strings.HasSuffix(v, ":iam::"+acct+":root")):
			names = true
		}
	}
	return names, false
}

// principals reads a resource policy's statement's Principal: decided (with names and grants) for
// a NotPrincipal (not evaluated: applies returns unknown, so a Deny applies), none, "*" or one
// that does not parse; otherwise its principals by kind ("AWS", "Service").
func (st statement) principals() (p map[string]stringList, decided, names, grants bool) {
	if st.NotPrincipal != nil {
		return nil, true, true, false
	}
	if st.Principal == nil {
		return nil, true, false, false
	}
	var star string
	if json.Unmarshal(st.Principal, &star) == nil {
		return nil, true, star == "*", star == "*"
	}
	if err := json.Unmarshal(st.Principal, &p); err != nil {
		return nil, true, false, false
	}
	return p, false, false, false
}

// unsupported names what of a statement the emulation does not evaluate, for the refusal's log
// line: "" when it evaluates all of it.
func (st statement) unsupported() string {
	var out []string
	for name, raw := range map[string]json.RawMessage{"NotPrincipal": st.NotPrincipal, "NotResource": st.NotResource} {
		if raw != nil {
			out = append(out, name)
		}
	}
	if st.NotAction != nil && st.Action != nil {
		out = append(out, "both Action and NotAction")
	}
	for op, conds := range st.Condition {
		set, base, _ := strings.Cut(op, ":")
		if base == "" {
			set, base = "", op
		}
		base, _ = strings.CutSuffix(base, "IfExists")
		for key := range conds {
			multi := slices.Contains(multiValuedKeys, key)
			switch {
			case !slices.Contains(operators, base) || set != "" && set != "ForAllValues" && set != "ForAnyValue":
				out = append(out, "the condition operator "+op)
			case !knownKey(key) && !multi:
				out = append(out, "the condition key "+key)
			case multi != (set != ""):
				out = append(out, "the condition operator "+op+" on "+key)
			}
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

var policyVariable = regexp.MustCompile(`\$\{aws:PrincipalTag/([^}]+)\}`)

// substitute replaces the principal tag variables; ok is false when a tag is missing.
func substitute(pattern string, tags map[string]string) (string, bool) {
	ok := true
	out := policyVariable.ReplaceAllStringFunc(pattern, func(m string) string {
		v, found := tags[policyVariable.FindStringSubmatch(m)[1]]
		ok = ok && found
		return v
	})
	return out, ok
}

// wildcard reports whether v matches an IAM pattern: "*" any run of characters, "?" one
// character, anything else itself (compared case-insensitively with fold). A principal tag's
// value is substituted first and taken literally; ok is false when the tag is missing. It matches
// directly, with no regular expression: it runs on every request the local cloud judges, and
// compiling one each time was a fifth of a scenario's harness CPU.
func wildcard(pattern string, tags map[string]string, fold bool, v string) (matched, ok bool) {
	var toks []globToken
	for _, part := range splitKeepVariables(pattern) {
		if policyVariable.MatchString(part) {
			value, found := substitute(part, tags)
			if !found {
				return false, false
			}
			for _, r := range value {
				toks = append(toks, globToken{r: r})
			}
			continue
		}
		for _, r := range part {
			switch r {
			case '*', '?':
				toks = append(toks, globToken{wild: r})
			default:
				toks = append(toks, globToken{r: r})
			}
		}
	}
	return globMatch(toks, []rune(v), fold), true
}

// globToken is one element of a pattern: a literal rune, or the wildcard '*' or '?'.
type globToken struct {
	r    rune
	wild rune
}

// globMatch matches s against toks, backtracking to the last '*' on a mismatch (each '*' is
// retried at most once per position of s, so the cost is at most len(toks) × len(s)).
func globMatch(toks []globToken, s []rune, fold bool) bool {
	p, i, star, mark := 0, 0, -1, 0
	for i < len(s) {
		switch {
		case p < len(toks) && toks[p].wild == '*':
			star, mark = p, i
			p++
		case p < len(toks) && (toks[p].wild == '?' || toks[p].wild == 0 && sameRune(toks[p].r, s[i], fold)):
			p++
			i++
		case star >= 0:
			mark++
			p, i = star+1, mark
		default:
			return false
		}
	}
	for p < len(toks) && toks[p].wild == '*' {
		p++
	}
	return p == len(toks)
}

func sameRune(a, b rune, fold bool) bool {
	return a == b || fold && strings.EqualFold(string(a), string(b))
}

// splitKeepVariables splits a pattern into its policy variables and the text between them.
func splitKeepVariables(p string) []string {
	var out []string
	for _, loc := range policyVariable.FindAllStringIndex(p, -1) {
		out = append(out, p[:loc[0]], p[loc[0]:loc[1]])
		p = p[loc[1]:]
	}
	return append(out, p)
}

func matchesAny(patterns []string, v string, tags map[string]string, fold bool) bool {
	for _, p := range patterns {
		if matched, _ := wildcard(p, tags, fold, v); matched {
			return true
		}
	}
	return false
}

func slicesContainsSubstituted(values []string, v string, tags map[string]string, fold bool) bool {
	for _, p := range values {
		if s, ok := substitute(p, tags); ok && (s == v || fold && strings.EqualFold(s, v)) {
			return true
		}
	}
	return false
}
