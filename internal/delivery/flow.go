package delivery

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/notifyd/notifyd/internal/limit"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk"
)

// flowCacheFor bounds how stale a fetcher's view of the breaker may be.
const flowCacheFor = 200 * time.Millisecond

// flow is what may hold a channel back: an operator's pause, the circuit
// breaker, the rate limit and the per-recipient cap. All of it is shared by
// every instance (pause in Postgres, the rest in Redis).
type flow struct {
	bucket  *limit.Bucket       // nil: no rate limit
	capper  *limit.RecipientCap // nil: no per-recipient cap
	breaker *limit.Breaker      // nil: breaker disabled

	paused      atomic.Bool
	pauseReason atomic.Value // string

	// window counts this instance's verdicts over the last breaker.window.
	window failureWindow

	mu        sync.Mutex
	state     limit.BreakerState
	stateLeft time.Duration
	readAt    time.Time
}

func (c *channel) setupFlow() error {
	rc, prefix := c.e.queue.Client(), c.e.cfg.Redis.Prefix
	rl := c.cfg.RateLimit
	if rl.Rate > 0 {
		c.flow.bucket = limit.NewBucket(rc, prefix, c.name, rl.Rate, rl.Per, rl.Burst)
	}
	if rl.PerRecipientDaily > 0 {
		loc, err := time.LoadLocation(rl.Timezone)
		if err != nil {
			return fmt.Errorf("channels.%s.rate_limit.timezone: %w", c.name, err)
		}
		c.flow.capper = limit.NewRecipientCap(rc, prefix, c.name, rl.PerRecipientDaily, loc)
	}
	if c.cfg.Breaker.Failures > 0 {
		c.flow.breaker = limit.NewBreaker(rc, prefix, c.name)
	}
	c.flow.state = limit.Closed
	return nil
}

// breakerState is the breaker as this instance last read it (at most
// flowCacheFor ago).
func (c *channel) breakerState(ctx context.Context) (limit.BreakerState, time.Duration) {
	f := &c.flow
	if f.breaker == nil {
		return limit.Closed, 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.readAt) > flowCacheFor {
		st, left, err := f.breaker.State(ctx)
		if err != nil {
			// Redis unreachable: the fetch fails anyway; don't pile on.
			return f.state, f.stateLeft
		}
		f.state, f.stateLeft, f.readAt = st, left, time.Now()
	}
	return f.state, f.stateLeft
}

func (c *channel) forgetBreakerState() {
	c.flow.mu.Lock()
	c.flow.readAt = time.Time{}
	c.flow.mu.Unlock()
}

// admit says how many messages a fetcher may take now, up to want; when
// none, how long to wait before asking again.
func (c *channel) admit(ctx context.Context, want int) (int, time.Duration) {
	f := &c.flow
	if f.paused.Load() {
		return 0, 250 * time.Millisecond
	}
	switch st, left := c.breakerState(ctx); st {
	case limit.Open:
		return 0, min(max(left, 10*time.Millisecond), time.Second)
	case limit.HalfOpen:
		// One probe message, from one instance, decides.
		won, err := f.breaker.TryProbe(ctx, 2*c.cfg.Timeout)
		if err != nil || !won {
			return 0, 250 * time.Millisecond
		}
		// A few probe messages, from one instance, decide: one success
		// closes the breaker, all failing opens it again.
		want = min(want, c.cfg.Breaker.Probes)
	}
	if f.bucket == nil {
		return want, 0
	}
	got, wait, err := f.bucket.Take(ctx, want)
	if err != nil {
		return 0, time.Second
	}
	if got == 0 {
		return 0, max(wait, time.Millisecond)
	}
	return got, 0
}

// refund returns rate tokens a fetch did not use.
func (c *channel) refund(n int) {
	if c.flow.bucket != nil && n > 0 {
		if err := c.flow.bucket.Refund(c.e.runCtx, n); err != nil {
			c.log.Debug("refund rate tokens", "error", err)
		}
	}
}

// observe feeds one plugin call's verdicts to the breaker: a success while
// it is not closed closes it; when the last breaker.window's transient
// failures reach breaker.failures and breaker.ratio of its sends — or every
// probe fails — it opens for every instance. A permanent answer counts as a
// send that did not fail: the provider is up.
//
// What a send is follows what the plugin calls its provider with. A plain
// plugin's Sender is called per message: each message is a send. A batching
// plugin's (sdk.BatchSender) takes the call's messages at once: the call is
// one send, failed when something in it failed transiently and nothing
// succeeded — a request-level failure (a 503, a timeout) is every message's
// verdict, so one failed request of 50 is one failure, not 50; a request
// that got some messages through says the provider is up, whatever a few
// recipients' own verdicts.
func (c *channel) observe(ctx context.Context, vs []sdk.Verdict) {
	f := &c.flow
	if f.breaker == nil {
		return
	}
	success, transient := false, false
	failed := 0
	for _, v := range vs {
		switch v.Outcome {
		case sdk.OutcomeSuccess:
			success = true
		case sdk.OutcomePermanent:
		default:
			transient = true
			failed++
		}
	}
	sends := len(vs)
	if c.batching {
		sends, failed = 1, 0
		if transient && !success {
			failed = 1
		}
	}
	now := c.e.now()
	fails, total := f.window.add(now, c.cfg.Breaker.Window, failed, sends)
	st, _ := c.breakerState(ctx)
	trip := fails >= int64(c.cfg.Breaker.Failures) && float64(fails) >= c.cfg.Breaker.Ratio*float64(total)
	switch {
	case success && st != limit.Closed:
		if err := f.breaker.Close(ctx); err == nil {
			c.log.Info("circuit breaker closed: the provider answers again")
		}
		f.window.reset()
		c.forgetBreakerState()
	case transient && !success && (st == limit.HalfOpen || trip):
		if err := f.breaker.Trip(ctx, c.cfg.Breaker.Cooldown); err == nil {
			c.log.Warn("circuit breaker open: sending stops, messages stay queued",
				"failed", fails, "of_sends", total, "sends_are", c.sendUnit(), "window", c.cfg.Breaker.Window, "cooldown", c.cfg.Breaker.Cooldown)
		}
		f.window.reset()
		c.forgetBreakerState()
	}
}

// sendUnit is what the channel's concurrency and breaker count: "messages",
// or "plugin calls" for a batching plugin (slotsFor, observe).
func (c *channel) sendUnit() string {
	if c.batching {
		return "plugin calls"
	}
	return "messages"
}

// failureWindow counts sends and transient failures over a sliding window,
// in one-tenth-of-the-window buckets.
type failureWindow struct {
	mu      sync.Mutex
	buckets [10]struct {
		start        time.Time
		fails, sends int64
	}
}

// add records sends (fails of them transient) at now and returns the
// window's totals.
func (w *failureWindow) add(now time.Time, window time.Duration, fails, sends int) (int64, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	step := window / time.Duration(len(w.buckets))
	slot := now.Truncate(step)
	b := &w.buckets[int(slot.UnixNano()/int64(step))%len(w.buckets)]
	if !b.start.Equal(slot) {
		b.start, b.fails, b.sends = slot, 0, 0
	}
	b.fails += int64(fails)
	b.sends += int64(sends)
	var tf, ts int64
	for _, x := range w.buckets {
		if !x.start.IsZero() && now.Sub(x.start) < window {
			tf += x.fails
			ts += x.sends
		}
	}
	return tf, ts
}

func (w *failureWindow) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buckets = [10]struct {
		start        time.Time
		fails, sends int64
	}{}
}

// capRecipients applies the per-recipient daily cap to a claimed batch: the
// recipients over it are returned as settlements of a retry at the day's
// reset (never dropped) and the rest returned to send. If the cap cannot be
// read the batch is sent: the provider's own quota error is the backstop.
func (c *channel) capRecipients(ctx context.Context, batch []outbox.Claimed) (send []outbox.Claimed, over []settleItem) {
	if c.flow.capper == nil || len(batch) == 0 {
		return batch, nil
	}
	recipients := make([]string, len(batch))
	for i, cl := range batch {
		recipients[i] = cl.Recipient
	}
	now := c.e.now()
	ok, reset, err := c.flow.capper.Allow(ctx, now, recipients)
	if err != nil {
		c.log.Warn("per-recipient cap unavailable; sending", "error", err)
		return batch, nil
	}
	send = batch[:0:0]
	for i, cl := range batch {
		if ok[i] {
			send = append(send, cl)
			continue
		}
		over = append(over, settleItem{ch: c, s: outbox.Settlement{
			ID: cl.ID, Attempt: cl.Attempt, Result: outbox.ResultRetry, Outcome: sdk.OutcomeTransient.String(),
			NextAttemptAt: reset, StartedAt: now, FinishedAt: now,
			Error: fmt.Sprintf("per-recipient daily cap of %d reached; next attempt after %s",
				c.cfg.RateLimit.PerRecipientDaily, reset.Format(time.RFC3339)),
		}})
	}
	return send, over
}
