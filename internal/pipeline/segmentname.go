package pipeline

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
)

// SegmentExecutionName is the name of the segment execution that registers segment index of the
// file execution fileExecution, started while the file execution's redrive count was redriveCount
// ($$.Execution.RedriveCount). The workflow computes the same name with intrinsic functions
// (the RegisterSegment task's Name):
//
//	States.Format('{}-s{}-r{}', States.Hash($$.Execution.Name, 'SHA-1'), $.segment.index, $$.Execution.RedriveCount)
//
// A name makes the child's start idempotent: StartExecution with the name and input of a running
// execution returns that execution instead of starting a second one, so a Retry after a start whose
// answer was lost finds the child it started; and the controller can find a file's child by name
// even when no history event records it
// (https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html).
//
// The file's name is always hashed: execution names are at most 80 characters, a file's name may
// itself be 80, and the states language has no function that measures or cuts a string, so the
// workflow cannot hash only the names that would be too long. SHA-1's 40 hex digits leave room for
// any segment index and redrive count, and every character is one AWS allows in a name.
func SegmentExecutionName(fileExecution string, index, redriveCount int) string {
	sum := sha1.Sum([]byte(fileExecution))
	return hex.EncodeToString(sum[:]) + "-s" + strconv.Itoa(index) + "-r" + strconv.Itoa(redriveCount)
}
