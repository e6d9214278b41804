package delivery

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/core/backoff"
	"github.com/notifyd/notifyd/core/config"
	"github.com/notifyd/notifyd/core/outbox"
	"github.com/notifyd/notifyd/core/queue"
	"github.com/notifyd/notifyd/sdk"
)

// channel runs one configured channel on this instance.
type channel struct {
	e      *Engine
	name   string
	cfg    config.Channel
	policy backoff.Policy
	plugin Provider
	log    hclog.Logger
	// slots bounds the messages this instance has in flight on the channel.
	slots chan struct{}
	// queues are the channel's Redis queues: its name, or name#k for each of
	// its partitions; a notification lives in queues[id mod K].
	queues []string
	flow   flow

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
	c.mu.Lock()
	c.plugin, c.ok, c.inflight = p, true, map[int64]struct{}{}
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
	br, _ := c.breakerState(ctx)
	reason, _ := c.flow.pauseReason.Load().(string)
	c.mu.Lock()
	defer c.mu.Unlock()
	st := ChannelState{
		Name: c.name, Plugin: c.cfg.Plugin, Running: c.ok, Error: c.err,
		Paused: c.flow.paused.Load(), Reason: reason, Breaker: string(br), Partitions: len(c.queues),
	}
	if r, ok := c.plugin.(restarter); ok {
		st.Restarts = r.Restarts()
	}
	return st
}

// staleAfter is when a PROCESSING row's claimer is presumed dead and the row
// may be claimed again: its send has hit its deadline, and a live claimer
// would have settled within a lease period after that.
func (c *channel) staleAfter() time.Duration { return c.cfg.Timeout + c.e.cfg.Delivery.LeaseTTL }

// fetchers is how many fetch loops keep the channel's slots busy: one per
// batch of concurrency (at most four), and at least one per partition.
func (c *channel) fetchers() int {
	return max(len(c.queues), min(4, max(1, c.cfg.Concurrency/c.cfg.BatchSize)))
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
	for len(ids) > 0 && ctx.Err() == nil {
		n := min(len(ids), c.cfg.BatchSize)
		c.acquire(ctx, n)
		c.handle(ctx, ids[:n])
		ids = ids[n:]
	}
}

// acquire takes n slots, blocking until they are free.
func (c *channel) acquire(ctx context.Context, n int) int {
	for i := range n {
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			c.release(i)
			return 0
		}
	}
	return n
}

// acquireUpTo blocks for one slot, then takes up to max-1 more that are free.
func (c *channel) acquireUpTo(ctx context.Context, max int) int {
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	return 1 + c.tryAcquire(max-1)
}

// tryAcquire takes up to max slots that are free now, without blocking.
func (c *channel) tryAcquire(max int) int {
	n := 0
	for n < max {
		select {
		case c.slots <- struct{}{}:
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

func (c *channel) fetchLoop(ctx context.Context, q string) {
	var failures int
	for ctx.Err() == nil {
		// Paused, breaker open, or out of rate tokens: wait here, in the
		// fetcher; the messages stay queued and no sender is held.
		allowed, wait := c.admit(ctx, c.cfg.BatchSize)
		if allowed == 0 {
			sleepCtx(ctx, wait)
			continue
		}
		n := c.acquireUpTo(ctx, allowed)
		if n == 0 {
			c.refund(allowed)
			return
		}
		ids, held, err := c.fetch(ctx, q, n, allowed)
		c.release(held - len(ids))
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

// fetch takes up to n ids that are ready now, holding n send slots. When
// there are none it waits for a push (up to a second) holding a single slot,
// so a fetcher idling on an empty queue - one of a channel's partitions -
// never sits on the slots the others need; once an id arrives it takes as
// many more as there are free slots, up to max. It returns the ids and the
// slots it holds (at least one per id).
func (c *channel) fetch(ctx context.Context, q string, n, max int) (ids []int64, held int, err error) {
	ids, err = c.e.queue.Fetch(ctx, q, c.e.instance, n, 0)
	if err != nil || len(ids) > 0 {
		return ids, n, err
	}
	c.release(n - 1)
	ids, err = c.e.queue.Fetch(ctx, q, c.e.instance, 1, time.Second)
	if err != nil || len(ids) == 0 || max <= 1 {
		return ids, 1, err
	}
	more := c.tryAcquire(max - 1)
	if more == 0 {
		return ids, 1, nil
	}
	rest, err := c.e.queue.Fetch(ctx, q, c.e.instance, more, 0)
	if err != nil {
		// The id in hand is in the backup list and gets handled; the next
		// fetch meets this error again and reports it.
		c.log.Debug("fetch after wake-up", "error", err)
	}
	c.release(more - len(rest))
	return append(ids, rest...), 1 + len(rest), nil
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
	c.release(len(ids))
}

// handle claims ids that sit in this instance's backup list and sends the
// claimed ones; it owns one slot per id.
func (c *channel) handle(ctx context.Context, ids []int64) {
	e := c.e
	c.track(ids)
	if hookCrashed(e.hooks.AfterFetch, c.name, ids) {
		c.release(len(ids))
		return
	}
	claimed, err := c.claim(ctx, ids)
	if err != nil {
		// Postgres is unreachable: push the ids back into the delayed set so
		// they are tried again; if Redis fails too, the orphan check does it.
		e.claimStall.failing(e.now())
		c.log.Warn("claim failed; retrying later", "ids", len(ids), "error", err)
		due := e.now().Add(time.Second)
		items := make([]queue.Item, len(ids))
		for i, id := range ids {
			items[i] = queue.Item{ID: id, Due: due}
		}
		for q, its := range c.itemsByQueue(items) {
			if err := e.queue.Retry(context.WithoutCancel(ctx), q, e.instance, its); err != nil {
				c.log.Warn("requeue after failed claim", "error", err)
			}
		}
		c.untrack(ids)
		c.release(len(ids))
		return
	}
	e.claimStall.ok()
	var send []outbox.Claimed
	var skip, failed []int64
	var deferred []queue.Item
	for _, cl := range claimed {
		switch {
		case cl.Kind == outbox.ClaimSend:
			send = append(send, cl)
		case cl.Kind == outbox.ClaimDefer:
			deferred = append(deferred, queue.Item{ID: cl.ID, Due: cl.NotBefore})
		case cl.Status == outbox.StatusFailed:
			failed = append(failed, cl.ID)
		default:
			skip = append(skip, cl.ID)
		}
	}
	rctx := context.WithoutCancel(ctx)
	// Already SENT/CANCELLED (or gone): the claim is the idempotency check,
	// so the row is only acked, never sent again. A FAILED one is
	// dead-lettered: it may be here because the dead-letter step after its
	// commit was lost (a crash, a Redis error), and acking it would keep it
	// out of the dead list for good; or because it was pushed again after
	// it failed (a relay or resync racing its settle), when it is on the
	// dead list already and must not be listed twice.
	for q, ids := range c.byQueue(skip) {
		if err := e.queue.Ack(rctx, q, e.instance, ids); err != nil {
			c.log.Warn("ack skipped", "error", err)
		}
	}
	for q, ids := range c.byQueue(failed) {
		if err := e.queue.DeadOnce(rctx, q, e.instance, ids); err != nil {
			c.log.Warn("dead-letter skipped FAILED", "error", err)
		}
	}
	skip = append(skip, failed...)
	for q, items := range c.itemsByQueue(deferred) {
		if err := e.queue.Retry(rctx, q, e.instance, items); err != nil {
			c.log.Warn("defer not-yet-claimable", "error", err)
		}
	}
	if n := len(skip) + len(deferred); n > 0 {
		c.untrack(append(skip, itemIDs(deferred)...))
		c.release(n)
	}
	send, over := c.overClaimed(send)
	if len(over) > 0 {
		c.release(len(over))
		e.settler.add(over)
	}
	send = c.capRecipients(ctx, send)
	if len(send) == 0 {
		return
	}
	sendIDs := claimedIDs(send)
	if hookCrashed(e.hooks.AfterClaim, c.name, sendIDs) {
		c.release(len(send))
		return
	}
	e.sendWG.Add(1)
	go func() {
		defer e.sendWG.Done()
		c.send(e.runCtx, send)
	}()
}

// send delivers one claimed batch through the plugin and hands the verdicts
// to the settler.
func (c *channel) send(ctx context.Context, batch []outbox.Claimed) {
	e := c.e
	started := e.now()
	deadline := started.Add(c.cfg.Timeout)
	msgs := make([]sdk.Message, len(batch))
	for i, cl := range batch {
		key := cl.IdempotencyKey
		if key == "" {
			key = fmt.Sprintf("notifyd-%d", cl.ID)
		}
		msgs[i] = sdk.Message{
			ID: cl.ID, Channel: c.name, Recipient: cl.Recipient, Payload: cl.Payload,
			Attempt: cl.Attempt, IdempotencyKey: key, CreatedAt: cl.CreatedAt, Deadline: deadline,
		}
	}
	sctx, cancel := context.WithDeadline(ctx, deadline)
	verdicts := c.plugin.Send(sctx, msgs)
	cancel()
	finished := e.now()
	e.metrics.SendDuration(c.name, finished.Sub(started))
	c.observe(ctx, verdicts)
	ids := claimedIDs(batch)
	if hookCrashed(e.hooks.AfterSend, c.name, ids) {
		c.release(len(batch))
		return
	}
	items := make([]settleItem, len(batch))
	for i, cl := range batch {
		items[i] = settleItem{ch: c, s: c.settlement(cl, verdicts[i], started, finished)}
	}
	c.release(len(batch))
	e.settler.add(items)
}

// settlement turns a verdict into the outbox transition: SENT, back to
// QUEUED after a backoff, or FAILED once permanent or out of attempts.
func (c *channel) settlement(cl outbox.Claimed, v sdk.Verdict, started, finished time.Time) outbox.Settlement {
	s := outbox.Settlement{
		ID: cl.ID, Attempt: cl.Attempt, ProviderCode: v.ProviderCode,
		StartedAt: started, FinishedAt: finished, Output: v.Result,
	}
	// A status is an HTTP-like code; anything else from a plugin (negative,
	// huge) is not stored as one, so it cannot fail the settle's batch.
	if v.ProviderStatus > 0 && v.ProviderStatus < 1000 {
		s.ProviderStatus = v.ProviderStatus
	}
	switch v.Outcome {
	case sdk.OutcomeSuccess, sdk.OutcomeTransient, sdk.OutcomePermanent:
		s.Outcome = v.Outcome.String()
	default:
		s.Outcome = outbox.OutcomeTransient
	}
	switch v.Outcome {
	case sdk.OutcomeSuccess:
		s.Result = outbox.ResultSent
	case sdk.OutcomePermanent:
		s.Result, s.Error = outbox.ResultFailed, describe(v)
	default: // transient, and anything unrecognised: retried, never dropped
		if c.policy.Exhausted(cl.Attempt) {
			s.Result = outbox.ResultFailed
			s.Error = fmt.Sprintf("gave up after %d attempts: %s", cl.Attempt, describe(v))
		} else {
			s.Result, s.Error = outbox.ResultRetry, describe(v)
			s.NextAttemptAt = finished.Add(c.policy.Delay(cl.Attempt, v.RetryAfter))
		}
	}
	return s
}

// describe is the last_error an operator reads.
func describe(v sdk.Verdict) string {
	msg := v.Detail
	if msg == "" {
		msg = v.Outcome.String()
	}
	// The status and code have their own columns in the attempt log; add
	// them to the message only when the plugin's detail does not say them.
	var extra []string
	if v.ProviderStatus != 0 && !strings.Contains(msg, strconv.Itoa(v.ProviderStatus)) {
		extra = append(extra, fmt.Sprintf("HTTP %d", v.ProviderStatus))
	}
	if v.ProviderCode != "" && !strings.Contains(msg, v.ProviderCode) {
		extra = append(extra, "code "+v.ProviderCode)
	}
	if len(extra) > 0 {
		msg += " (" + strings.Join(extra, ", ") + ")"
	}
	return printable(msg)
}

// printable keeps a provider's error text storable and readable: Postgres
// text refuses NUL, and control bytes from an error page help nobody.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return ' '
		case r < 0x20 || r == 0x7f || r == utf8.RuneError:
			return -1
		}
		return r
	}, s)
}

func (c *channel) track(ids []int64) {
	c.mu.Lock()
	for _, id := range ids {
		c.inflight[id] = struct{}{}
	}
	c.mu.Unlock()
}

func (c *channel) untrack(ids []int64) {
	c.mu.Lock()
	for _, id := range ids {
		delete(c.inflight, id)
	}
	c.mu.Unlock()
}

// checkOrphans re-handles ids that sit in this instance's backup list with
// nothing in this process working on them — left by a Redis or Postgres
// error between two steps. An id must be idle in two consecutive checks, so
// one just fetched and not yet tracked is never taken for an orphan.
func (c *channel) checkOrphans(ctx context.Context) {
	var ids []int64
	for _, q := range c.queues {
		got, err := c.e.queue.Pending(ctx, q, c.e.instance)
		if err != nil {
			return
		}
		ids = append(ids, got...)
	}
	c.mu.Lock()
	next := map[int64]struct{}{}
	var orphans []int64
	for _, id := range ids {
		if _, busy := c.inflight[id]; busy {
			continue
		}
		if _, seen := c.suspects[id]; seen {
			orphans = append(orphans, id)
		} else {
			next[id] = struct{}{}
		}
	}
	c.suspects = next
	c.mu.Unlock()
	if len(orphans) > 0 {
		c.log.Info("re-handling orphaned backup-list ids", "ids", len(orphans))
	}
	for len(orphans) > 0 && ctx.Err() == nil {
		n := min(len(orphans), c.cfg.BatchSize)
		c.acquire(ctx, n)
		c.handle(ctx, orphans[:n])
		orphans = orphans[n:]
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
