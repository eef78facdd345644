package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// JSONProblem describes an encoding/json decoding error without echoing the input: syntax and type
// errors name offsets, fields and types, never values, so a message body that carries record data
// cannot leak into a log through its error. timeField names the document's one time field, for a
// time that is not RFC 3339.
func JSONProblem(err error, timeField string) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Sprintf("syntax error at byte %d", syn.Offset)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		return fmt.Sprintf("field %q has JSON type %s, want %s", typ.Field, typ.Value, typ.Type)
	}
	var tm *time.ParseError
	if errors.As(err, &tm) {
		return timeField + " is not RFC 3339"
	}
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		return "unknown field " + strings.TrimPrefix(msg, "json: unknown field ")
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "body is empty or cut short"
	}
	return "undecodable JSON"
}
