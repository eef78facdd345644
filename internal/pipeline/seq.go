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
// DynamoDB compares strings by their UTF-8 bytes
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.OperatorsAndFunctions.html#Expressions.OperatorsAndFunctions.Comparators),
// so every _seq is fixed-width fields, and the first byte says which of three kinds it is:
//
//	q00001764581234567890.000000000042   the file's queue order (Source.Order), 20 digits, then the record, 12
//	-00000000000000000000.000000000042   a replay whose original order is unknown (Source.Unordered)
//	20261130T124749.000000000Z.0000…55AED6DCD90281E5.000000000042   before Order: event time, S3 sequencer (40), record
//
// '-' < '0'…'9' < 'q', so an unordered replay ranks below every stored item (it only fills keys
// no item holds), and every file ordered by the queue ranks above every item written in the event
// time format, which only executions started before the controller assigned orders still write:
// the queue ran those files earlier, so they are older.
//
// The event time format is kept for those executions (a redrive, or one still running when the
// controller was updated) and for replays of their files. It was wrong across keys: AWS documents
// the sequencer for ordering events of one key only
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html), and
// EventBridge's "time" has whole seconds, so two files under different keys in the same second
// could rank against the order the queue ran them.
const (
	seqOrderedPrefix   = "q"
	seqUnorderedPrefix = "-"
	seqOrderDigits     = 20
	seqRecordDigits    = 12
	// SeqLen is the length of every _seq of an ordered or unordered source.
	SeqLen = 1 + seqOrderDigits + 1 + seqRecordDigits

	seqTimeLayout   = "20060102T150405.000000000Z"
	seqSequencerLen = 40
	// LegacySeqLen is the length of every _seq in the event time format (a source without Order).
	LegacySeqLen = len(seqTimeLayout) + 1 + seqSequencerLen + 1 + seqRecordDigits

	// MaxOrder bounds Source.Order: 2^53-1, the largest integer every JSON decoder on the way (Step
	// Functions, the local server's JavaScript) keeps exact. The controller's orders start near the
	// Unix time in microseconds (about 1.8e15 in 2027), far below it.
	MaxOrder = 1<<53 - 1
	// MaxRecord is the largest record number a _seq holds.
	MaxRecord = 999_999_999_999
)

// SeqOf is the _seq of one record of a file. It fails for a source that has no order, is not
// unordered, and has neither an event time nor a sequencer: its records could not be ordered
// against any other file's.
func SeqOf(src Source, record int64) (string, error) {
	if record < 1 || record > MaxRecord {
		return "", fmt.Errorf("record number %d is outside 1..%d", record, MaxRecord)
	}
	switch {
	case src.Order < 0 || src.Order > MaxOrder:
		return "", fmt.Errorf("order %d is outside 1..%d", src.Order, int64(MaxOrder))
	case src.Order > 0 && src.Unordered:
		return "", fmt.Errorf("the source has order %d and is marked unordered", src.Order)
	case src.Order > 0:
		return fmt.Sprintf("%s%0*d.%0*d", seqOrderedPrefix, seqOrderDigits, src.Order, seqRecordDigits, record), nil
	case src.Unordered:
		return fmt.Sprintf("%s%0*d.%0*d", seqUnorderedPrefix, seqOrderDigits, 0, seqRecordDigits, record), nil
	}
	return legacySeqOf(src, record)
}

// legacySeqOf is the event time format: event time, S3 sequencer, record.
func legacySeqOf(src Source, record int64) (string, error) {
	if src.EventTime == "" && src.Sequencer == "" {
		return "", errors.New("the source has no order, neither an event time nor an S3 sequencer, so its records cannot be ordered")
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
