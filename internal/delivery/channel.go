package delivery

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/backoff"
	"github.com/notifyd/notifyd/internal/limit"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/queue"
)

// channel runs one configured channel on this instance.
type channel struct {
	e      *Engine
	name   string
	cfg    config.Channel
	policy backoff.Policy
	plugin Provider
	log    hclog.Logger
	// slots bounds what this instance holds of the channel, from its fetch
	// until its verdict is committed (fetch.go, slotsFor; settle.go,
	// releaseSlots): for a plain plugin messages, concurrency in flight and
	// Prefetch claimed ahead or waiting for their commit; for a batching
	// plugin plugin calls. A crash sends again at most what they hold.
	slots chan struct{}
	// sending bounds a plain plugin's messages in flight to concurrency (one
	// permit a message, taken as send starts a call: send.go); nil for a
	// batching plugin, whose slots are its calls.
	sending chan struct{}
	// permitMu: one part takes its send permits at a time (takePermits).
	permitMu sync.Mutex
	// gatherMu: one fetcher waits for a large claim's slots at a time
	// (gather).
	gatherMu sync.Mutex
	// settling is how many of a plain plugin's slots hold verdicts waiting
	// for their commit (sendPart to releaseSlots): neither in flight nor
	// claimed ahead, so room and gathering leave them out.
	settling atomic.Int64
	// lastCall is how long the channel's last plugin call took (ns; 0
	// before the first returns): how far ahead it may claim (ahead).
	lastCall atomic.Int64
	// batching: the plugin's Sender for this channel takes a batch in one
	// call (sdk.BatchSender), as it said when configured.
	batching bool
	// queues are the channel's Redis queues: its name, or name#k for each of
	// its partitions; a notification lives in queues[id mod K].
	queues []string
	flow   flow
	// refused counts the claims of one row refused alone (refused.go).
	refused refusedAlone

	mu       sync.Mutex
	ok       bool
	err      string
	inflight map[int64]struct{}
	suspects map[int64]struct{} // backup-list ids seen idle by the last orphan check
}

func (c *channel) configure(ctx context.Context) error {
	p, err := c.e.plugins.Provider(ctx, c.cfg.Plugin)
	if err != nil {
		return err
	}
	raw, err := c.cfg.ConfigJSON()
	if err != nil {
		return err
	}
	if err := p.Configure(ctx, c.name, raw); err != nil {
		return err
	}
	b, ok := p.(batcher)
	c.mu.Lock()
	c.plugin, c.ok, c.inflight = p, true, map[int64]struct{}{}
	if c.batching = ok && b.Batches(c.name); c.batching {
		// Configured before the channel starts: nothing holds a slot yet.
		c.slots, c.sending = make(chan struct{}, c.cfg.Slots(true)), nil
	}
	c.mu.Unlock()
	return nil
}

func (c *channel) setError(err error) {
	c.mu.Lock()
	c.ok, c.err = false, err.Error()
	c.mu.Unlock()
}

func (c *channel) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok
}

func (c *channel) state(ctx context.Context) ChannelState {
	br, left := c.breakerState(ctx)
	reason, _ := c.flow.pauseReason.Load().(string)
	var until time.Time
	if br == limit.Open {
		until = c.e.now().Add(left)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := ChannelState{
		Name: c.name, Plugin: c.cfg.Plugin, Running: c.ok, Error: c.err,
		Paused: c.flow.paused.Load(), Reason: reason, Breaker: string(br), BreakerUntil: until, Partitions: len(c.queues),
	}
	if r, ok := c.plugin.(restarter); ok {
		st.Restarts = r.Restarts()
	}
	return st
}

// staleAfter is when a PROCESSING row's claimer is presumed dead and the row
// may be claimed again: its send started within the timeout of the claim or
// not at all (a row claimed ahead waits for a send permit: send.go), has hit
// its own deadline a timeout later, its answer has come back within
// answerGrace, and a live claimer would have settled within a lease period
// after that.
func (c *channel) staleAfter() time.Duration {
	return 2*c.cfg.Timeout + answerGrace + c.e.cfg.Delivery.LeaseTTL
}

// fetchers is how many fetch loops keep the channel's slots busy: one per
// batch that fits in concurrency (at most four), and at least one per
// partition.
func (c *channel) fetchers() int {
	batches := c.cfg.Concurrency / c.cfg.BatchSize
	if c.batching {
		batches = cap(c.slots) // a slot is a batch
	}
	return max(len(c.queues), min(4, max(1, batches)))
}

// queueOf is the queue (partition) notification id lives in.
func (c *channel) queueOf(id int64) string {
	return c.queues[int(uint64(id)%uint64(len(c.queues)))]
}

// byQueue splits ids by the queue each lives in.
func (c *channel) byQueue(ids []int64) map[string][]int64 {
	if len(c.queues) == 1 {
		return map[string][]int64{c.queues[0]: ids}
	}
	out := map[string][]int64{}
	for _, id := range ids {
		q := c.queueOf(id)
		out[q] = append(out[q], id)
	}
	return out
}

func (c *channel) itemsByQueue(items []queue.Item) map[string][]queue.Item {
	out := map[string][]queue.Item{}
	for _, it := range items {
		q := c.queueOf(it.ID)
		out[q] = append(out[q], it)
	}
	return out
}

// requeueAt hands ids from this instance's backup list back to their
// queues, due at due, and stops tracking them; what names the step in the
// warning when Redis refuses (the ids then stay in the backup list, and the
// orphan check hands them back: orphans.go).
func (c *channel) requeueAt(ids []int64, due time.Time, what string) {
	e := c.e
	items := make([]queue.Item, len(ids))
	for i, id := range ids {
		items[i] = queue.Item{ID: id, Due: due}
	}
	for q, its := range c.itemsByQueue(items) {
		if err := e.queue.Retry(context.WithoutCancel(e.runCtx), q, e.instance, its); err != nil {
			c.log.Warn(what, "error", err)
		}
	}
	c.untrack(ids)
}

func (c *channel) start() {
	e := c.e
	e.fetchWG.Add(1)
	go func() {
		defer e.fetchWG.Done()
		// A restarted instance with a stable id first resumes its own backup
		// list, read without deleting.
		for _, q := range c.queues {
			c.resumeBackupList(e.fetchCtx, q)
		}
		var wg sync.WaitGroup
		for i := range c.fetchers() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.fetchLoop(e.fetchCtx, c.queues[i%len(c.queues)])
			}()
		}
		wg.Wait()
	}()
}

func (c *channel) resumeBackupList(ctx context.Context, q string) {
	ids, err := c.e.queue.Pending(ctx, q, c.e.instance)
	if err != nil {
		c.log.Warn("read own backup list; the orphan check will retry", "error", err)
		return
	}
	if len(ids) > 0 {
		c.log.Info("resuming own backup list", "ids", len(ids))
	}
	own := context.WithValue(ctx, resumingOwn{}, true)
	for len(ids) > 0 && ctx.Err() == nil {
		n := min(len(ids), c.cfg.BatchSize)
		if !c.batching {
			// Never more slots than there are: a list left by a process
			// with a larger concurrency must not wait for them for ever.
			n = min(n, cap(c.slots))
		}
		if c.acquire(ctx, c.slotsFor(n)) == 0 {
			return // stopping: the ids stay in the backup list
		}
		c.handle(own, ids[:n])
		ids = ids[n:]
	}
}

func hookCrashed(h func(string, []int64) error, channel string, ids []int64) bool {
	return h != nil && errors.Is(h(channel, ids), ErrCrash)
}

func claimedIDs(cs []outbox.Claimed) []int64 {
	ids := make([]int64, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	return ids
}

func itemIDs(items []queue.Item) []int64 {
	ids := make([]int64, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	return ids
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// retryPause backs off a failing loop: 100ms doubling to 5s.
func retryPause(failures int) time.Duration {
	d := 100 * time.Millisecond
	for i := 1; i < failures && d < 5*time.Second; i++ {
		d *= 2
	}
	return min(d, 5*time.Second)
}
