// Stage 2 of docs/design.md §4: send slots, the fetch loops that move ids
// from a queue into this instance's backup list, and handing back.

package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/queue"
)

// slotsFor is how many send slots n fetched messages hold. It counts what a
// slot stands for:
//   - a plain plugin (the SDK calls its Sender once per message): one slot
//     per message; the slots are concurrency + Prefetch, and concurrency is
//     messages in flight (send's permits), so up to Prefetch messages are
//     fetched and claimed ahead of the sends;
//   - a batching plugin (an sdk.BatchSender, which takes a channel's whole
//     batch in one call): one slot per batch, however many messages it
//     carries, and concurrency is plugin calls in flight — so a fetch takes
//     up to batch_size messages whatever the concurrency. A lone suspect
//     (sendAlone) is a call of its own, with a slot of its own.
func (c *channel) slotsFor(n int) int {
	if c.batching {
		return min(n, 1)
	}
	return n
}

// Prefetch is the most messages a plain plugin's channel claims ahead of
// what it has in flight: batch_size. The next batches' fetches and claims
// then overlap the sends instead of leaving the provider idle while they run,
// and claims carry more rows each. How many it claims ahead at a
// given moment is ahead's: a message claimed ahead waits for the parts before
// it, and its send must start within the channel's timeout of its claim
// (send), so the channel claims no further ahead than its recent calls could
// send in half the timeout.
func Prefetch(c config.Channel) int { return c.BatchSize }

// ahead is how many messages a plain plugin's channel may hold claimed ahead
// of its sends now: concurrency for every half timeout its last call would
// fit in, between min(batch_size, concurrency) (before any call has returned,
// or when a call takes half the timeout or more) and Prefetch.
func (c *channel) ahead() int {
	least := min(c.cfg.BatchSize, c.cfg.Concurrency)
	last := c.lastCall.Load()
	if last <= 0 {
		return least
	}
	k := int64(c.cfg.Timeout/2) / last
	return int(min(int64(Prefetch(c.cfg)), max(int64(least), k*int64(c.cfg.Concurrency))))
}

// room is how many more slots the fetcher may take now, and whether that is
// fewer than the slots' capacity allows: a plain plugin's channel claiming
// less than Prefetch ahead (its calls are slow) holds up to concurrency in
// flight and ahead claimed ahead of them. Otherwise (full depth, or a
// batching plugin) the slots' capacity is the bound, and a fetcher blocks on
// it as slots come back. Not exact (the slots move while it reads them): a
// fetch may overshoot by the messages of one call.
func (c *channel) room() (n int, limited bool) {
	if c.batching {
		return cap(c.slots), false
	}
	ahead := c.ahead()
	return c.cfg.Concurrency + ahead - c.holding(), ahead < Prefetch(c.cfg)
}

// acquire takes n slots, blocking until they are free.
func (c *channel) acquire(ctx context.Context, n int) int { return takeAll(ctx, c.slots, n) }

// takeAll takes n tokens of sem (a counting semaphore: a token is a value
// sent into it), blocking until they are free; when ctx ends first it gives
// back what it took and returns 0.
func takeAll(ctx context.Context, sem chan struct{}, n int) int {
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			for range i {
				<-sem
			}
			return 0
		}
	}
	return n
}

// takeUpTo blocks for one token of sem (a counting semaphore: a token is a
// value sent into it), then takes up to max-1 more that are free now; 0 when
// ctx ends first.
func takeUpTo(ctx context.Context, sem chan struct{}, max int) int {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	return 1 + tryTake(sem, max-1)
}

// tryTake takes up to max tokens of sem that are free now, without blocking.
func tryTake(sem chan struct{}, max int) int {
	n := 0
	for n < max {
		select {
		case sem <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

func (c *channel) release(n int) {
	for range n {
		<-c.slots
	}
}

// gathering says whether the fetcher may wait to claim twice concurrency at
// once: a plain plugin's channel claiming at full depth (ahead is Prefetch,
// at least twice concurrency) with a whole part (concurrency messages)
// already claimed and waiting for its permits, so no send waits on this
// fetch. Otherwise the fetcher takes the slots free now: a returning call
// gives its slots back one by one, and taking whatever was free at that
// instant claimed 64 to 90 rows a statement in the burst, each paying the
// statement's fixed cost (docs/performance.md). limited is room's: the
// channel claims less than Prefetch ahead.
func (c *channel) gathering(limited bool) bool {
	if c.batching || limited || Prefetch(c.cfg) < 2*c.cfg.Concurrency {
		return false
	}
	return c.holding()-len(c.sending) >= c.cfg.Concurrency
}

// holding is how many of a plain plugin's slots hold messages in flight or
// claimed ahead: the slots taken but for the verdicts waiting for their
// commit (settling).
func (c *channel) holding() int { return len(c.slots) - int(c.settling.Load()) }

// gather takes n slots, waiting until they are free; 0 when ctx ends first.
// One fetcher gathers at a time (gatherMu): two each holding part of what
// they wait for could otherwise wait on each other for good. The slots come
// back as the parts already claimed are sent, which never wait on a fetcher.
func (c *channel) gather(ctx context.Context, n int) int {
	c.gatherMu.Lock()
	defer c.gatherMu.Unlock()
	return c.acquire(ctx, n)
}

// aheadPause is how long a fetcher that may claim no further ahead waits
// before it looks again: only when calls take a good part of the timeout.
const aheadPause = 10 * time.Millisecond

func (c *channel) fetchLoop(ctx context.Context, q string) {
	var failures int
	for ctx.Err() == nil {
		room, limited := c.room()
		if limited && room <= 0 {
			// As far ahead as the channel's slow calls allow: wait for
			// one to return.
			sleepCtx(ctx, aheadPause)
			continue
		}
		// Paused, breaker open, or out of rate tokens: wait here, in the
		// fetcher; the messages stay queued and no sender is held.
		allowed, wait := c.admit(ctx, c.cfg.BatchSize)
		if allowed == 0 {
			sleepCtx(ctx, wait)
			continue
		}
		most := allowed
		if limited {
			most = min(allowed, room)
		}
		var n int
		if c.gathering(limited) {
			n = c.gather(ctx, min(allowed, 2*c.cfg.Concurrency))
			if n > 0 {
				n += tryTake(c.slots, allowed-n)
			}
		} else {
			n = takeUpTo(ctx, c.slots, c.slotsFor(most))
		}
		if n == 0 {
			c.refund(allowed)
			return
		}
		ids, held, err := c.fetch(ctx, q, n, most)
		c.release(held - c.slotsFor(len(ids)))
		c.refund(allowed - len(ids))
		if errors.Is(err, queue.ErrNoLease) {
			// Redis lost the lease (a wipe, or we were presumed dead):
			// take it again at once instead of waiting for the renew timer.
			if err = c.e.queue.Renew(ctx, q, c.e.instance, c.e.cfg.Delivery.LeaseTTL); err == nil {
				continue
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			c.log.Warn("fetch", "error", err)
			sleepCtx(ctx, retryPause(failures))
			continue
		}
		failures = 0
		if len(ids) > 0 && c.flow.paused.Load() {
			// Paused while this fetch was blocked: hand the ids back.
			c.handBack(ctx, q, ids)
			continue
		}
		if len(ids) > 0 {
			c.handle(ctx, ids)
		}
	}
}

// fetch takes up to max ids that are ready now, holding n send slots (n ids
// for a plain plugin, one batch of up to max for a batching one: slotsFor).
// When there are none it waits for a push (up to Options.FetchWait) holding
// a single slot, so a fetcher idling on an empty queue - one of a channel's
// partitions - never sits on the slots the others need; once an id arrives
// it takes as many more as there are free slots (a batching plugin's batch
// needs no more), up to max. It returns the ids and the slots it holds (at
// least slotsFor(len(ids))).
func (c *channel) fetch(ctx context.Context, q string, n, max int) (ids []int64, held int, err error) {
	want := n
	if c.batching {
		want = max
	}
	ids, err = c.e.queue.Fetch(ctx, q, c.e.instance, want, 0)
	if err != nil || len(ids) > 0 {
		return ids, n, err
	}
	c.release(n - 1)
	ids, err = c.e.queue.Fetch(ctx, q, c.e.instance, 1, c.e.fetchWait)
	if err != nil || len(ids) == 0 || max <= 1 {
		return ids, 1, err
	}
	more := max - 1
	if !c.batching {
		if more = tryTake(c.slots, max-1); more == 0 {
			return ids, 1, nil
		}
	}
	rest, err := c.e.queue.Fetch(ctx, q, c.e.instance, more, 0)
	if err != nil {
		// The id in hand is in the backup list and gets handled; the next
		// fetch meets this error again and reports it.
		c.log.Debug("fetch after wake-up", "error", err)
	}
	ids = append(ids, rest...)
	if c.batching {
		return ids, 1, nil
	}
	c.release(more - len(rest))
	return ids, len(ids), nil
}

// handBack returns fetched, unclaimed ids to the front of the ready list.
func (c *channel) handBack(ctx context.Context, q string, ids []int64) {
	items := make([]queue.Item, len(ids))
	for i, id := range ids {
		items[i] = queue.Item{ID: id}
	}
	if err := c.e.queue.Retry(context.WithoutCancel(ctx), q, c.e.instance, items); err != nil {
		c.log.Warn("hand back fetched ids; the orphan check will", "error", err)
	}
	c.release(c.slotsFor(len(ids)))
}

// batchSlots are the send slots one fetched batch holds (slotsFor), freed
// as its messages leave it: each message's own for a plain plugin, the
// batch's one with its last message for a batching plugin.
type batchSlots struct {
	c    *channel
	left int // messages still in the batch
}

// leave frees the slots of n messages that leave the batch.
func (b *batchSlots) leave(n int) {
	before := b.left
	b.left -= n
	b.c.release(b.c.slotsFor(before) - b.c.slotsFor(b.left))
}
