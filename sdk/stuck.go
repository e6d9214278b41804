package sdk

import (
	"sync"
	"sync/atomic"
	"time"
)

// StuckAfter is how long past its deadline a Send or SendBatch call may
// still be running before the process counts as stuck. The SDK gives the
// message its verdict at the deadline whatever the call does, so such a
// call is provider code that ignores its context — a loop, a blocking call
// made without it — and it keeps a core or memory for as long as the
// process lives, one more for every retry of the message that causes it.
// A stuck process answers the host's liveness check with
// codes.ResourceExhausted, naming how many calls; the host replaces it
// after three such answers in a row (docs/design.md §7).
const StuckAfter = 10 * time.Second

// call is one running Send or SendBatch: the deadline of the message(s)
// it is sending, 0 between calls. A worker goroutine keeps one for its life,
// so the hot path is two atomic stores a message.
type call struct{ deadline atomic.Int64 }

func (c *call) start(deadline time.Time) {
	if !deadline.IsZero() {
		c.deadline.Store(deadline.UnixNano())
	}
}

func (c *call) end() { c.deadline.Store(0) }

// calls is every call record in use.
type calls struct {
	mu  sync.Mutex
	set map[*call]struct{}
}

func (cs *calls) add() *call {
	c := &call{}
	cs.mu.Lock()
	if cs.set == nil {
		cs.set = map[*call]struct{}{}
	}
	cs.set[c] = struct{}{}
	cs.mu.Unlock()
	return c
}

func (cs *calls) remove(c *call) {
	cs.mu.Lock()
	delete(cs.set, c)
	cs.mu.Unlock()
}

// stuck counts the calls running more than StuckAfter past their deadline.
func (cs *calls) stuck(now time.Time) int {
	limit := now.Add(-StuckAfter).UnixNano()
	n := 0
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for c := range cs.set {
		if d := c.deadline.Load(); d != 0 && d < limit {
			n++
		}
	}
	return n
}
