package chaos

import (
	"fmt"
	"time"
)

// stallCeiling bounds a stalled wait in all, in multiples of its stall bound.
const stallCeiling = 3

// stalled tells a wait on work that stopped from one that is only slow. A
// loaded CI machine runs the whole cluster many times slower than a quiet
// one, and a fixed deadline after healing failed runs whose daily runs were
// still materialising (rehearsal 32, docs/reliability.md); speed is the
// benchmarks' to measure, while work that stops moving is the fault this
// suite looks for. So the bound runs from the last progress: over reports
// true once the measure given to progress has not grown for the bound, or
// after stallCeiling times the bound in all. (The wait for the last
// notification after healing, waitQuiet, keeps its fixed allowance on
// purpose: a row stranded until the sweeper must show there.)
type stalled struct {
	start, moved time.Time
	best         int64
	measured     bool // best holds a measure
}

// progress records the measure now (higher is further along).
func (s *stalled) progress(v int64) {
	now := time.Now()
	if s.start.IsZero() {
		s.start = now
	}
	if !s.measured || v > s.best {
		s.best, s.moved, s.measured = v, now, true
	}
}

// over says whether the wait has stalled for d (or run stallCeiling × d).
func (s *stalled) over(d time.Duration) bool {
	if s.start.IsZero() {
		s.start, s.moved = time.Now(), time.Now()
		return false
	}
	return time.Since(s.moved) > d || time.Since(s.start) > stallCeiling*d
}

func (s *stalled) String() string {
	return fmt.Sprintf("no progress for %s, %s in all", time.Since(s.moved).Round(time.Second), time.Since(s.start).Round(time.Second))
}
