package pipeline

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// The DynamoDB sink's order (docs/data-path.md, "DynamoDB sink"). Every item stores SeqOf its
// record in SeqAttribute, and a write only replaces an item whose stored value is smaller, so a
// retry, a redrive or a replay of an older file can never put an older record over a newer one.
//
// A _seq is three fixed-width fields, so that comparing two as strings (DynamoDB compares strings
// by their UTF-8 bytes:
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.OperatorsAndFunctions.html#Expressions.OperatorsAndFunctions.Comparators)
// compares them field by field:
//
//	20261130T124749.000000000Z.00000000000000000000000055AED6DCD90281E5.000000000042
//	event time (UTC, 26)       S3 sequencer (hex, left-padded to 40)     record (12)
//
// The event time orders files of different keys; the sequencer orders two events of one key in
// the same second. AWS documents the sequencer for ordering events of one key only, comparing the
// hex strings after left-padding the shorter with zeros
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html);
// EventBridge's "time" has whole seconds. An absent field is all zeros.
const (
	seqTimeLayout   = "20060102T150405.000000000Z"
	seqSequencerLen = 40
	seqRecordDigits = 12
	// SeqLen is the length of every _seq.
	SeqLen = len(seqTimeLayout) + 1 + seqSequencerLen + 1 + seqRecordDigits
)

// SeqOf is the _seq of one record of a file. It fails for a source with neither an event time nor
// a sequencer, whose records could not be ordered against any other file's.
func SeqOf(src Source, record int64) (string, error) {
	if src.EventTime == "" && src.Sequencer == "" {
		return "", errors.New("the source has neither an event time nor an S3 sequencer, so its records cannot be ordered")
	}
	if record < 1 || record > 999_999_999_999 {
		return "", fmt.Errorf("record number %d is outside 1..999999999999", record)
	}
	ts := strings.Repeat("0", 8) + "T" + strings.Repeat("0", 6) + "." + strings.Repeat("0", 9) + "Z"
	if src.EventTime != "" {
		t, err := time.Parse(time.RFC3339Nano, src.EventTime)
		if err != nil {
			return "", fmt.Errorf("event time %q is not RFC 3339", src.EventTime)
		}
		if t.UTC().Year() < 1000 || t.UTC().Year() > 9999 {
			return "", fmt.Errorf("event time %q is outside years 1000..9999", src.EventTime)
		}
		ts = t.UTC().Format(seqTimeLayout)
	}
	seq := strings.ToUpper(src.Sequencer)
	if len(seq) > seqSequencerLen || strings.Trim(seq, "0123456789ABCDEF") != "" {
		return "", fmt.Errorf("S3 sequencer %q is not a hexadecimal string of at most %d digits", src.Sequencer, seqSequencerLen)
	}
	return fmt.Sprintf("%s.%0*s.%0*d", ts, seqSequencerLen, seq, seqRecordDigits, record), nil
}

// CompareSequencers orders two S3 sequencers of one key as AWS says to: as hexadecimal strings,
// after left-padding the shorter with zeros
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html).
// It returns -1, 0 or +1 like strings.Compare. Padding both to a common length and comparing is
// the same as padding every sequencer to one longest length, so this is a total preorder: sorts
// may rely on it.
func CompareSequencers(a, b string) int {
	a, b = strings.ToUpper(a), strings.ToUpper(b)
	n := max(len(a), len(b))
	return strings.Compare(strings.Repeat("0", n-len(a))+a, strings.Repeat("0", n-len(b))+b)
}
