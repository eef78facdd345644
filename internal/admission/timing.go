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

// MaxHold is the longest a waiting file's message is held: SQS extends a receive's visibility to
// 12 hours at most
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-visibility-timeout.html);
// a minute is kept in hand.
const MaxHold = 12*time.Hour - time.Minute

// WaitHold is how long a waiting file's message is held before it looks again by itself: the
// safety net for a file next in line, and one safety net more for each round of the gate's limit
// ahead of it, at most MaxHold. A release wakes the file when its turn comes whatever the hold; the
// hold only bounds what a lost wake-up costs, and a file far back in line would otherwise ask
// again many times before its turn, for nothing.
func WaitHold(safetyNet time.Duration, ahead, limit int) time.Duration {
	rounds := 1 + max(0, ahead)/max(1, limit)
	if time.Duration(rounds) > MaxHold/max(safetyNet, time.Second) {
		return MaxHold
	}
	return min(MaxHold, time.Duration(rounds)*safetyNet)
}
