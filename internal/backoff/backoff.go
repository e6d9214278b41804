// Package backoff computes when a failed notification is tried again: random
// exponential backoff per channel (docs/design.md §5). Waiting is never done here —
// the delay becomes a due time in the queue's delayed set.
package backoff

import (
	"math/rand/v2"
	"time"

	"github.com/notifyd/notifyd/config"
)

// Policy is one channel's retry policy.
type Policy struct {
	Base        time.Duration
	Max         time.Duration
	MaxAttempts int
	// Window selects the seed's bounded windows [base·2^(n-2), base·2^(n-1)]
	// (0–1 s, 1–2 s, 2–4 s, …) instead of full jitter [0, base·2^(n-1)].
	Window bool
	// Fixed draws nothing: the delay after attempt n is exactly
	// min(Max, Base·2^(n-1)) (jitter: none).
	Fixed bool
	// MaxRetryAfter caps a provider's hint (0 = config.DefaultMaxRetryAfter).
	MaxRetryAfter time.Duration
	// rand returns a float in [0, 1); tests pin it.
	rand func() float64
}

// FromConfig builds the policy of a channel's retry block.
func FromConfig(r config.Retry) Policy {
	return Policy{Base: r.Base, Max: r.Max, MaxAttempts: r.MaxAttempts, Window: r.Jitter == config.JitterWindow,
		Fixed: r.Jitter == config.JitterNone, MaxRetryAfter: r.MaxRetryAfter}
}

// WithRand returns p drawing from r (for deterministic tests).
func (p Policy) WithRand(r func() float64) Policy { p.rand = r; return p }

// Exhausted reports whether attempt (counted from 1, the attempt that just
// failed) was the last one allowed.
func (p Policy) Exhausted(attempt int) bool { return attempt >= p.MaxAttempts }

// Delay is how long to wait after failed attempt n (n ≥ 1) before the next
// one. A provider's retryAfter raises the delay, never lowers it; it is not
// capped by Max, since sending before the provider allows only fails again,
// but by MaxRetryAfter: a hint of years (a garbage Retry-After) must not
// park a message for good. A negative hint is none.
func (p Policy) Delay(n int, retryAfter time.Duration) time.Duration {
	lo, hi := p.Bounds(n)
	r := p.rand
	if r == nil {
		r = rand.Float64
	}
	d := lo + time.Duration(r()*float64(hi-lo))
	ceiling := p.MaxRetryAfter
	if ceiling <= 0 {
		ceiling = config.DefaultMaxRetryAfter
	}
	return max(d, min(retryAfter, ceiling))
}

// Bounds is the interval the delay after failed attempt n is drawn from.
func (p Policy) Bounds(n int) (lo, hi time.Duration) {
	n = max(n, 1)
	hi = p.capped(n - 1)
	if p.Fixed {
		return hi, hi
	}
	if p.Window && n > 1 {
		lo = p.capped(n - 2)
	}
	if lo >= hi { // both hit Max: keep a window so retries still spread
		lo = hi / 2
	}
	return lo, hi
}

// capped is min(Max, Base·2^k) without overflow.
func (p Policy) capped(k int) time.Duration {
	d := p.Base
	for range k {
		if d >= p.Max/2 {
			return p.Max
		}
		d *= 2
	}
	return min(d, p.Max)
}
