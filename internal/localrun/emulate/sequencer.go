package emulate

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"time"
)

// S3 event sequencers (Faults.Sequencers). AWS documents the sequencer as a way "to determine the
// sequence of events" for the same object key only: a later PUT or DELETE of one key has a larger
// sequencer (compared as hexadecimal strings after left-padding the shorter with zeros), and
// sequencers of different keys are not comparable
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html).
// The local run gives them that way by default, so that nothing can come to rely on more.
const (
	// SequencersPerKey: each key starts from its own random value and grows from there; two keys'
	// sequencers are in no particular order. The default.
	SequencersPerKey = "per-key"
	// SequencersGlobal: one counter for every key, growing with the wall clock, so that sequencers
	// happen to follow the order of the writes across keys (the local run's behaviour before).
	SequencersGlobal = "global"
)

// sequencers gives each event its sequencer, per Faults.Sequencers.
type sequencers struct {
	mu     sync.Mutex
	global bool
	seed   uint64
	rnd    *rand.Rand
	last   map[string]uint64 // by bucket + "/" + key
	count  uint64
}

// NewSequencers makes the generator of a mode. A key's first sequencer depends only on the seed
// and the key, not on what was written before, so a seed fixes it (0: a random seed).
func NewSequencers(mode string, seed uint64) *sequencers {
	if seed == 0 {
		seed = rand.Uint64()
	}
	return &sequencers{global: mode == SequencersGlobal, seed: seed, rnd: rand.New(rand.NewPCG(seed, ^seed)), last: map[string]uint64{}}
}

// next is the sequencer of a new event of bucket/key: 18 hexadecimal digits, like S3's.
func (s *sequencers) next(bucket, key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.global {
		s.count++
		return fmt.Sprintf("%018X", uint64(time.Now().UnixNano())<<8|s.count&0xff)
	}
	k := bucket + "/" + key
	v, seen := s.last[k]
	if seen {
		v += 1 + s.rnd.Uint64N(1<<16) // grows by a random step: only its direction means anything
	} else {
		h := fnv.New64a()
		binary.Write(h, binary.LittleEndian, s.seed)
		h.Write([]byte(k))
		v = h.Sum64() >> 2 // room for 2^62 more events of the key
	}
	s.last[k] = v
	return fmt.Sprintf("%018X", v)
}
