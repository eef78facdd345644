package emulate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Pattern is an EventBridge event pattern
// (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns.html and
// eb-create-pattern-operators.html). No Go library for patterns is available to this project, so
// this implements the part of the language the synthesized rules can use: exact values, prefix,
// suffix, equals-ignore-case, anything-but and exists. Any other operator is rejected when the
// pattern is parsed, so a rule the harness cannot evaluate fails the run instead of misrouting.
type Pattern struct {
	fields map[string]*patternNode
}

type patternNode struct {
	nested  *Pattern
	matches []matcher
}

type matcher func(v any, present bool) bool

// ParsePattern parses an event pattern.
func ParsePattern(b []byte) (*Pattern, error) {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("event pattern: %w", err)
	}
	return parsePatternObject(m)
}

func parsePatternObject(m map[string]any) (*Pattern, error) {
	p := &Pattern{fields: map[string]*patternNode{}}
	for k, v := range m {
		switch t := v.(type) {
		case map[string]any:
			sub, err := parsePatternObject(t)
			if err != nil {
				return nil, fmt.Errorf("%s.%w", k, err)
			}
			p.fields[k] = &patternNode{nested: sub}
		case []any:
			n := &patternNode{}
			for _, e := range t {
				mt, err := parseMatcher(e)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", k, err)
				}
				n.matches = append(n.matches, mt)
			}
			p.fields[k] = n
		default:
			return nil, fmt.Errorf("%s: a pattern value must be an array or an object, got %T", k, v)
		}
	}
	return p, nil
}

func parseMatcher(e any) (matcher, error) {
	op, ok := e.(map[string]any)
	if !ok {
		return func(v any, present bool) bool { return present && jsonEqual(v, e) }, nil
	}
	if len(op) != 1 {
		return nil, fmt.Errorf("operator object must have one key: %v", op)
	}
	for name, arg := range op {
		switch name {
		case "prefix", "suffix":
			s, ok := arg.(string)
			if !ok {
				return nil, fmt.Errorf("%s takes a string", name)
			}
			return func(v any, present bool) bool {
				str, ok := v.(string)
				if !present || !ok {
					return false
				}
				if name == "prefix" {
					return strings.HasPrefix(str, s)
				}
				return strings.HasSuffix(str, s)
			}, nil
		case "equals-ignore-case":
			s, ok := arg.(string)
			if !ok {
				return nil, fmt.Errorf("equals-ignore-case takes a string")
			}
			return func(v any, present bool) bool {
				str, ok := v.(string)
				return present && ok && strings.EqualFold(str, s)
			}, nil
		case "exists":
			want, ok := arg.(bool)
			if !ok {
				return nil, fmt.Errorf("exists takes a boolean")
			}
			return func(_ any, present bool) bool { return present == want }, nil
		case "anything-but":
			var inner []matcher
			switch a := arg.(type) {
			case []any:
				for _, x := range a {
					inner = append(inner, func(v any, present bool) bool { return present && jsonEqual(v, x) })
				}
			case map[string]any:
				m, err := parseMatcher(a)
				if err != nil {
					return nil, err
				}
				inner = append(inner, m)
			default:
				inner = append(inner, func(v any, present bool) bool { return present && jsonEqual(v, a) })
			}
			return func(v any, present bool) bool {
				if !present {
					return false
				}
				for _, m := range inner {
					if m(v, true) {
						return false
					}
				}
				return true
			}, nil
		}
		return nil, fmt.Errorf("unsupported pattern operator %q", name)
	}
	panic("unreachable")
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// Match reports whether an event (decoded JSON) matches the pattern.
func (p *Pattern) Match(event map[string]any) bool {
	for k, n := range p.fields {
		v, present := event[k]
		if n.nested != nil {
			obj, ok := v.(map[string]any)
			if !ok || !n.nested.Match(obj) {
				return false
			}
			continue
		}
		if !n.matchValue(v, present) {
			return false
		}
	}
	return true
}

func (n *patternNode) matchValue(v any, present bool) bool {
	// An array in the event matches if any of its elements matches.
	if arr, ok := v.([]any); ok {
		for _, e := range arr {
			if n.matchValue(e, true) {
				return true
			}
		}
		return false
	}
	for _, m := range n.matches {
		if m(v, present) {
			return true
		}
	}
	return false
}
