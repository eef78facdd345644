package pipeline

import (
	"encoding/json"
	"errors"
	"strings"
)

// Columns is an ordered list of column (or JSONL field) names, as a JSON array of strings. It is a
// comparable value, like the rest of Tenant, so that equal pool rows are found by value
// (PoolSettings.Encode). A name holding a NUL character cannot be kept.
type Columns struct {
	joined string // the names joined by NUL; "" for none
	n      int
}

// NewColumns returns the names as Columns; a name holding a NUL character is an error.
func NewColumns(names ...string) (Columns, error) {
	for _, n := range names {
		if strings.ContainsRune(n, 0) {
			return Columns{}, errors.New("a column name holds a NUL character")
		}
	}
	return Columns{joined: strings.Join(names, "\x00"), n: len(names)}, nil
}

// MustColumns is NewColumns for names known to hold no NUL (tests, literals).
func MustColumns(names ...string) Columns {
	c, err := NewColumns(names...)
	if err != nil {
		panic(err)
	}
	return c
}

// Names returns a new slice of the names, nil for none.
func (c Columns) Names() []string {
	if c.n == 0 {
		return nil
	}
	return strings.Split(c.joined, "\x00")
}

// Len is the number of names.
func (c Columns) Len() int { return c.n }

// IsZero reports whether there are no names (for omitzero).
func (c Columns) IsZero() bool { return c.n == 0 }

// MarshalJSON renders the names as a JSON array.
func (c Columns) MarshalJSON() ([]byte, error) {
	names := c.Names()
	if names == nil {
		names = []string{}
	}
	return json.Marshal(names)
}

// UnmarshalJSON reads a JSON array of strings (null: none).
func (c *Columns) UnmarshalJSON(b []byte) error {
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return err
	}
	v, err := NewColumns(names...)
	if err != nil {
		return err
	}
	*c = v
	return nil
}
