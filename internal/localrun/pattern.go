package localrun

import "github.com/example/tenantpipeline/internal/localrun/emulate"

// Pattern is an EventBridge event pattern as the emulated EventBridge matches events with it
// (emulate.Pattern): the whole-app tests match the synthesized rules with the same code.
type Pattern = emulate.Pattern

// ParsePattern parses an event pattern (emulate.ParsePattern).
func ParsePattern(b []byte) (*Pattern, error) { return emulate.ParsePattern(b) }
