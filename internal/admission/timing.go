// Package admission decides when a file may start: each file takes a running-file lease in every
// gate it passes (its core system, its pool) before StartExecution, and waiting tenants are admitted
// fairly by how long they have waited, scaled by their weight. The state lives in DynamoDB, whose
// conditional writes and strongly consistent reads make a lease exact and crash-proof.
package admission

import "time"

// LeaseTTLFor is the time to live of a lease whose file's deliveries come back at least every
// safetyNet (with wake-up events) or maxWait (without), each renewing it: twice the longer, plus two
// minutes, rides out one lost visibility change and a slow invocation.
func LeaseTTLFor(safetyNet, maxWait time.Duration) time.Duration {
	return 2*max(safetyNet, maxWait) + 2*time.Minute
}

// WaiterTTLFor is how long a waiting entry whose file was held for hold, and has not come back,
// still counts: three holds, plus a margin for a slow or throttled invocation.
func WaiterTTLFor(hold time.Duration) time.Duration { return 3*hold + time.Minute }

// MaxVisibility is the longest a received message stays invisible: SQS counts 12 hours from the
// receive, not from the ChangeMessageVisibility call, and rejects a change past it
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-visibility-timeout.html,
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ChangeMessageVisibility.html).
const MaxVisibility = 12 * time.Hour

// receiveMargin is kept in hand between the receive the controller knows of (its invocation's
// start, or the first receive's timestamp) and the poller's own: the poller's delay before it
// invokes, and a whole second of rounding.
const receiveMargin = time.Minute

// MaxHold is the longest a waiting file's message is held, from its receive.
const MaxHold = MaxVisibility - receiveMargin

// HoldLeft is the longest hold a message received at received may still be given at now: a hold
// set later in the invocation is shorter by the time since the receive, so that it never asks SQS
// for more than 12 hours from the receive (a change SQS would reject, leaving the message to come
// back after the queue's visibility timeout).
func HoldLeft(received, now time.Time) time.Duration {
	return max(0, MaxHold-max(0, now.Sub(received)))
}

// WaitHold is how long a waiting file's message is held before it looks again by itself: the
// safety net for a file next in line, and one safety net more for each round of the gate's limit
// ahead of it, at most MaxHold. A release wakes the file when its turn comes whatever the hold; the
// hold only bounds what a lost wake-up costs, and a file far back in line would otherwise ask
// again many times before its turn, for nothing.
func WaitHold(safetyNet time.Duration, ahead, limit int) time.Duration {
	return waitRounds(safetyNet, ahead, limit)
}

// Hold is how long the waiting file of d is held: WaitHold, or, when the gate's recent pace gives
// an expected wait (Decision.ExpectedWait), twice that wait if shorter, and at least the safety
// net. Twice: a release normally wakes the file first (an ask before its turn costs an
// invocation), and a file whose wake-up was lost still comes back about when its turn came, its
// look reconciling the gate, instead of after rounds of safety nets.
func (d Decision) Hold(safetyNet time.Duration, limit int) time.Duration {
	hold := waitRounds(safetyNet, d.Ahead, limit)
	if d.ExpectedWait > 0 {
		hold = min(hold, max(safetyNet, 2*d.ExpectedWait))
	}
	return hold
}

func waitRounds(safetyNet time.Duration, ahead, limit int) time.Duration {
	rounds := 1 + max(0, ahead)/max(1, limit)
	if time.Duration(rounds) > MaxHold/max(safetyNet, time.Second) {
		return MaxHold
	}
	return min(MaxHold, time.Duration(rounds)*safetyNet)
}
