package emulate

import "time"

// SetLatency makes the sink take d to answer every request, a record POST and a batch POST alike
// (a core system whose round trip is d); zero leaves Delay as it is. Faults.SinkLatency sets it,
// and adds the same d to every DynamoDB request (the local run's dynamodb.go), so the figures compare the sinks at
// one latency.
func (s *Sink) SetLatency(d time.Duration) {
	if d <= 0 {
		return
	}
	s.SetDelay(func(string, string, int64) time.Duration { return d })
}
