// Package limit keeps a channel from overwhelming its provider, across every
// notifyd instance at once: a distributed token bucket, a per-recipient daily
// cap, and a circuit breaker, each kept in Redis under the channel's hash tag
// (so Redis Cluster accepts every script) and each changed by one Lua script.
// Scripts read the clock with Redis TIME, so instances' clocks don't matter.
package limit

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Keys of one channel; tag is the hash-tagged channel part, "{ch:<name>}".
func bucketKey(prefix, channel string) string  { return prefix + ":{ch:" + channel + "}:bucket" }
func breakerKey(prefix, channel string) string { return prefix + ":{ch:" + channel + "}:breaker" }
func probeKey(prefix, channel string) string   { return prefix + ":{ch:" + channel + "}:probe" }
func capKey(prefix, channel, day string) string {
	return prefix + ":{ch:" + channel + "}:cap:" + day
}

// nowMs is the Lua snippet every script starts with: Redis' own clock.
const nowMs = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// Bucket is a token bucket of Rate tokens per Per, holding at most Burst,
// shared by every instance.
type Bucket struct {
	rc    redis.UniversalClient
	key   string
	rate  int
	per   time.Duration
	burst int
}

// NewBucket returns the bucket of one channel.
func NewBucket(rc redis.UniversalClient, prefix, channel string, rate int, per time.Duration, burst int) *Bucket {
	return &Bucket{rc: rc, key: bucketKey(prefix, channel), rate: rate, per: per, burst: max(burst, 1)}
}

// scriptTake: KEYS bucket; ARGV rate, per ms, burst, want (negative = give
// back). Returns {granted, ms until the next token when none was granted}.
var scriptTake = redis.NewScript(nowMs + `
local rate, per, burst, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local v = redis.call('HMGET', KEYS[1], 't', 'ts')
local tokens, ts = tonumber(v[1]), tonumber(v[2])
if not tokens then tokens, ts = burst, now end
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate / per)
local got, wait = 0, 0
if want < 0 then
  tokens = math.min(burst, tokens - want)
else
  got = math.min(want, math.floor(tokens))
  tokens = tokens - got
  if got == 0 then wait = math.ceil((1 - tokens) * per / rate) end
end
redis.call('HSET', KEYS[1], 't', tostring(tokens), 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * per / rate) + 60000)
return {got, wait}
`)

// Take takes up to want tokens and returns how many it got; when it got none,
// wait says when the next one is due. It never blocks.
func (b *Bucket) Take(ctx context.Context, want int) (got int, wait time.Duration, err error) {
	if want < 1 {
		return 0, 0, nil
	}
	res, err := scriptTake.Run(ctx, b.rc, []string{b.key}, b.rate, b.per.Milliseconds(), b.burst, want).Int64Slice()
	if err != nil {
		return 0, 0, fmt.Errorf("limit: take %d tokens: %w", want, err)
	}
	return int(res[0]), time.Duration(res[1]) * time.Millisecond, nil
}

// Refund gives back tokens taken but not used (a fetch that found fewer
// messages than it had tokens for).
func (b *Bucket) Refund(ctx context.Context, n int) error {
	if n < 1 {
		return nil
	}
	if err := scriptTake.Run(ctx, b.rc, []string{b.key}, b.rate, b.per.Milliseconds(), b.burst, -n).Err(); err != nil {
		return fmt.Errorf("limit: refund %d tokens: %w", n, err)
	}
	return nil
}

// RecipientCap caps the sends to one recipient per day.
type RecipientCap struct {
	rc      redis.UniversalClient
	prefix  string
	channel string
	cap     int
	loc     *time.Location
}

// NewRecipientCap returns the cap of one channel; days start at midnight in loc.
func NewRecipientCap(rc redis.UniversalClient, prefix, channel string, cap int, loc *time.Location) *RecipientCap {
	return &RecipientCap{rc: rc, prefix: prefix, channel: channel, cap: cap, loc: loc}
}

// scriptCap: KEYS day hash; ARGV cap, ttl ms, recipient... Counts each
// recipient and returns 1 for those within the cap, 0 (uncounted) for those over.
var scriptCap = redis.NewScript(`
local cap = tonumber(ARGV[1])
local out = {}
for i = 3, #ARGV do
  local n = redis.call('HINCRBY', KEYS[1], ARGV[i], 1)
  if n > cap then
    redis.call('HINCRBY', KEYS[1], ARGV[i], -1)
    out[#out + 1] = 0
  else
    out[#out + 1] = 1
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return out
`)

// Allow counts one send to each recipient (in order; repeats count twice)
// and reports which are within today's cap, and when the day resets.
func (c *RecipientCap) Allow(ctx context.Context, now time.Time, recipients []string) ([]bool, time.Time, error) {
	local := now.In(c.loc)
	day := local.Format("2006-01-02")
	reset := time.Date(local.Year(), local.Month(), local.Day()+1, 0, 0, 0, 0, c.loc)
	if len(recipients) == 0 {
		return nil, reset, nil
	}
	args := make([]any, 0, len(recipients)+2)
	args = append(args, c.cap, (reset.Sub(now) + time.Hour).Milliseconds())
	for _, r := range recipients {
		args = append(args, r)
	}
	res, err := scriptCap.Run(ctx, c.rc, []string{capKey(c.prefix, c.channel, day)}, args...).Int64Slice()
	if err != nil {
		return nil, reset, fmt.Errorf("limit: per-recipient cap: %w", err)
	}
	ok := make([]bool, len(res))
	for i, v := range res {
		ok[i] = v == 1
	}
	return ok, reset, nil
}

// Breaker is a channel's circuit breaker state, shared by every instance:
// closed (no key), open until a time, then half-open — one instance at a
// time wins the probe.
type Breaker struct {
	rc    redis.UniversalClient
	key   string
	probe string
}

// NewBreaker returns the breaker of one channel.
func NewBreaker(rc redis.UniversalClient, prefix, channel string) *Breaker {
	return &Breaker{rc: rc, key: breakerKey(prefix, channel), probe: probeKey(prefix, channel)}
}

// BreakerState is what the breaker says now.
type BreakerState string

// States.
const (
	Closed   BreakerState = "closed"
	Open     BreakerState = "open"
	HalfOpen BreakerState = "half-open"
)

// scriptState: KEYS breaker; returns {0} closed, or {1, ms until it half-opens}.
var scriptState = redis.NewScript(nowMs + `
local until_ = tonumber(redis.call('GET', KEYS[1]))
if not until_ then return {0, 0} end
return {1, math.max(0, until_ - now)}
`)

// State reads the breaker: closed, open (with the time left), or half-open.
func (b *Breaker) State(ctx context.Context) (BreakerState, time.Duration, error) {
	res, err := scriptState.Run(ctx, b.rc, []string{b.key}).Int64Slice()
	if err != nil {
		return Closed, 0, fmt.Errorf("limit: breaker state: %w", err)
	}
	switch {
	case res[0] == 0:
		return Closed, 0, nil
	case res[1] > 0:
		return Open, time.Duration(res[1]) * time.Millisecond, nil
	}
	return HalfOpen, 0, nil
}

// scriptTrip: KEYS breaker, probe; ARGV cooldown ms. Opens until now+cooldown
// and frees the probe. The key outlives the cooldown so half-open is seen.
var scriptTrip = redis.NewScript(nowMs + `
redis.call('SET', KEYS[1], now + tonumber(ARGV[1]), 'PX', tonumber(ARGV[1]) + 3600000)
redis.call('DEL', KEYS[2])
return 1
`)

// Trip opens the breaker for cooldown.
func (b *Breaker) Trip(ctx context.Context, cooldown time.Duration) error {
	if err := scriptTrip.Run(ctx, b.rc, []string{b.key, b.probe}, cooldown.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("limit: open breaker: %w", err)
	}
	return nil
}

// TryProbe claims the half-open probe for ttl; one instance wins.
func (b *Breaker) TryProbe(ctx context.Context, ttl time.Duration) (bool, error) {
	ok, err := b.rc.SetNX(ctx, b.probe, 1, ttl).Result()
	if err != nil {
		return false, fmt.Errorf("limit: breaker probe: %w", err)
	}
	return ok, nil
}

// Close closes the breaker (a probe or any send succeeded).
func (b *Breaker) Close(ctx context.Context) error {
	if err := b.rc.Del(ctx, b.key, b.probe).Err(); err != nil {
		return fmt.Errorf("limit: close breaker: %w", err)
	}
	return nil
}
