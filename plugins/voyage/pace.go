package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// pacer keeps one channel's requests under Voyage's rate limits: requests
// per minute and tokens per minute, both counted by Voyage over a minute.
// Every sender of the channel in this process shares it (provider.pacer).
type pacer struct {
	mu       sync.Mutex
	rpm, tpm int
	requests *rate.Limiter
	tokens   *rate.Limiter
}

func newPacer(rpm, tpm int) *pacer {
	p := &pacer{}
	p.set(rpm, tpm)
	return p
}

// set changes the limits (0 = unlimited). New limits start with full
// buckets; the same limits keep what was spent, so reconfiguring a channel
// does not reset its pace.
func (p *pacer) set(rpm, tpm int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.requests != nil && p.rpm == rpm && p.tpm == tpm {
		return
	}
	p.rpm, p.tpm = rpm, tpm
	p.requests = rate.NewLimiter(perMinute(rpm))
	p.tokens = rate.NewLimiter(perMinute(tpm))
}

// limiters are the current buckets.
func (p *pacer) limiters() (requests, tokens *rate.Limiter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests, p.tokens
}

// perMinute turns a per-minute budget into a token bucket that never lets
// more than n through in any 60 s window: a burst of a tenth of n, refilled
// at the other nine tenths over the minute (burst + 60 s of refill = n).
// Steady throughput is then 90% of Voyage's limit; what is left is margin
// against Voyage counting a little differently. n < 10 keeps a burst of one
// and refills at the full rate (one request over, at most).
func perMinute(n int) (rate.Limit, int) {
	if n <= 0 {
		return rate.Inf, 0
	}
	burst := max(1, n/10)
	refill := n - burst
	if refill <= 0 || n < 10 {
		refill = n
	}
	return rate.Limit(float64(refill) / 60), burst
}

// ticket is one request's place in both buckets.
type ticket struct {
	request, tokens *rate.Reservation
	delay           time.Duration
}

// cancel gives the ticket's requests and tokens back (a request that was
// not sent).
func (t *ticket) cancel(now time.Time) {
	t.request.CancelAt(now)
	t.tokens.CancelAt(now)
}

// reserve takes one request and tokens from the buckets at now. A request
// estimated over the token bucket's burst takes the whole bucket: it waits
// until the bucket is full rather than failing (a full minute's budget is
// the most Voyage could ever have allowed at once). When the wait would end
// after deadline (zero: none), nothing is taken and ok is false; delay says
// how long the wait would have been.
func (p *pacer) reserve(now, deadline time.Time, tokens int) (t *ticket, delay time.Duration, ok bool) {
	requests, tokenBucket := p.limiters()
	if b := tokenBucket.Burst(); tokenBucket.Limit() != rate.Inf && tokens > b {
		tokens = b
	}
	t = &ticket{request: requests.ReserveN(now, 1), tokens: tokenBucket.ReserveN(now, max(tokens, 0))}
	if !t.request.OK() || !t.tokens.OK() {
		// Not with the buckets perMinute builds; kept so a bucket that can
		// never serve the request refuses instead of waiting forever.
		t.cancel(now)
		return nil, time.Minute, false
	}
	t.delay = max(t.request.DelayFrom(now), t.tokens.DelayFrom(now))
	if !deadline.IsZero() && now.Add(t.delay).After(deadline) {
		t.cancel(now)
		return nil, t.delay, false
	}
	return t, t.delay, true
}

// errPaced is a wait that would outlast the notification's deadline.
type errPaced struct{ delay time.Duration }

func (e *errPaced) Error() string {
	return fmt.Sprintf("the channel's rpm/tpm pacing would hold this request %v, past the notification's deadline",
		e.delay.Round(time.Millisecond))
}

// wait blocks until a request of tokens may go, or returns *errPaced at
// once when that is past ctx's deadline, or ctx's error when ctx ends first.
func (p *pacer) wait(ctx context.Context, tokens int) error {
	now := time.Now()
	deadline, _ := ctx.Deadline()
	t, delay, ok := p.reserve(now, deadline, tokens)
	if !ok {
		return &errPaced{delay: delay}
	}
	if t.delay <= 0 {
		return nil
	}
	timer := time.NewTimer(t.delay)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		t.cancel(time.Now())
		return ctx.Err()
	}
}

// charge takes tokens Voyage counted beyond the estimate (estimateTokens is
// low on purpose) from the bucket, so the next requests wait for them.
func (p *pacer) charge(now time.Time, extra int) {
	_, tokens := p.limiters()
	if extra <= 0 || tokens.Limit() == rate.Inf {
		return
	}
	tokens.ReserveN(now, min(extra, tokens.Burst()))
}
