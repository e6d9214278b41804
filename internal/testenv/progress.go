package testenv

import (
	"fmt"
	"time"
)

// Progress tells a wait on work that stopped from one that is only slow. A
// loaded CI machine runs the pipeline many times slower than a quiet one,
// and fixed deadlines failed tests whose rows were still moving
// (TestEngine_RedisFlushAll at 100 a second, the fault suite's daily runs:
// docs/reliability.md, "Found (stop 41)"); speed is the benchmarks' to
// measure, while work that stops moving is what a test must catch. So a
// wait's bound runs from the last progress: Stalled reports true once the
// measure given to Observe has not grown for d, or after ceiling × d in all.
type Progress struct {
	start, moved time.Time
	best         int64
	measured     bool // best holds a measure
}

// Observe records the measure now (higher is further along).
func (p *Progress) Observe(v int64) {
	now := time.Now()
	if p.start.IsZero() {
		p.start = now
	}
	if !p.measured || v > p.best {
		p.best, p.moved, p.measured = v, now, true
	}
}

// Stalled says whether nothing has moved for d, or the wait has run
// ceiling × d in all.
func (p *Progress) Stalled(d time.Duration, ceiling int) bool {
	if p.start.IsZero() {
		p.start, p.moved = time.Now(), time.Now()
		return false
	}
	return time.Since(p.moved) > d || time.Since(p.start) > time.Duration(ceiling)*d
}

func (p *Progress) String() string {
	return fmt.Sprintf("no progress for %s, %s in all", time.Since(p.moved).Round(time.Second), time.Since(p.start).Round(time.Second))
}
