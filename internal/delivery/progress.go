package delivery

import (
	"cmp"
	"sync/atomic"
	"time"

	"github.com/notifyd/notifyd/config"
)

// Stages whose progress the engine watches: a stage that keeps failing (a
// batch Postgres will not take, Postgres gone) holds up every notification
// behind it while the process looks alive, so readiness must say so.
const (
	StageRelay  = "relay"  // PENDING → QUEUED, then the push to Redis
	StageClaim  = "claim"  // QUEUED → PROCESSING before a send
	StageSettle = "settle" // a verdict committed to Postgres
)

// stallClock is when one stage started failing (unix nanoseconds), 0 while it
// makes progress.
type stallClock struct{ since atomic.Int64 }

// failing records a failure; the first one since the last success starts
// the clock.
func (c *stallClock) failing(now time.Time) { c.since.CompareAndSwap(0, now.UnixNano()) }

// ok records progress.
func (c *stallClock) ok() { c.since.Store(0) }

func (c *stallClock) age(now time.Time) time.Duration {
	if s := c.since.Load(); s != 0 {
		return now.Sub(time.Unix(0, s))
	}
	return 0
}

// Stalled is, per stage, how long it has gone without progress while work
// waited (0 for a stage that is fine): for settle, the age of the oldest
// batch of verdicts still not committed; for relay and claim, how long their
// every try has failed. The metric notifyd_stage_stalled_seconds reports it.
func (e *Engine) Stalled() map[string]time.Duration {
	now := e.now()
	return map[string]time.Duration{
		StageRelay:  e.relayStall.age(now),
		StageClaim:  e.claimStall.age(now),
		StageSettle: e.settler.oldest(now),
	}
}

// Stalls names the stages stalled for longer than delivery.stall_after:
// /readyz answers 503 while any is.
func (e *Engine) Stalls() []string {
	after := cmp.Or(e.cfg.Delivery.StallAfter, config.DefaultStallAfter)
	var out []string
	for _, stage := range []string{StageRelay, StageClaim, StageSettle} {
		if e.Stalled()[stage] > after {
			out = append(out, stage)
		}
	}
	return out
}
