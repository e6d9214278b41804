package queue

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Renew sets instance's lease on channel to expire ttl (at most MaxLeaseTTL)
// from now. Renew on a
// timer of its own, well inside ttl, never from the send path: a lease that
// runs out hands the instance's processing list to Reap.
func (q *Queue) Renew(ctx context.Context, channel, instance string, ttl time.Duration) error {
	if err := check(channel, instance); err != nil {
		return fmt.Errorf("queue: renew lease: %w", err)
	}
	if ttl <= 0 || ttl > MaxLeaseTTL {
		return fmt.Errorf("queue: renew lease of %s on %s: ttl must be positive and at most %s, got %s", instance, channel, MaxLeaseTTL, ttl)
	}
	expiry := float64(unixMs(time.Now().Add(ttl)))
	if err := q.c.ZAdd(ctx, q.keys(channel).instances(), redis.Z{Score: expiry, Member: instance}).Err(); err != nil {
		return fmt.Errorf("queue: renew lease of %s on %s: %w", instance, channel, err)
	}
	return nil
}

// Release is a graceful goodbye: instance's whole processing list goes back
// to ready at once and its lease is dropped. Ack, Retry or Dead what is
// finished first; anything the instance does for these ids afterwards is
// ignored.
func (q *Queue) Release(ctx context.Context, channel, instance string) error {
	if err := check(channel, instance); err != nil {
		return fmt.Errorf("queue: release: %w", err)
	}
	if _, err := q.reapOne(ctx, channel, instance, time.Now(), true); err != nil {
		return fmt.Errorf("queue: release %s on %s: %w", instance, channel, err)
	}
	return nil
}

// Reap hands the processing list of every instance whose lease on channel
// expired at or before now back to ready and drops the lease. A lease that
// expires further ahead than any Renew can have written (MaxLeaseTTL, read
// with an hour's slack for clocks: +inf, a restore, an operator's ZADD)
// counts as expired, or its instance's list would wait for it for good. It
// returns how many ids went back. Any number of instances may reap at once:
// each move is one script that checks the lease again, and moves at most
// maxPerCall ids (a list of millions is moved in many short steps, not one
// that stalls Redis); the lease is dropped with the last.
func (q *Queue) Reap(ctx context.Context, channel string, now time.Time) (int, error) {
	if err := checkChannel(channel); err != nil {
		return 0, fmt.Errorf("queue: reap: %w", err)
	}
	// The processing key depends on the instance id inside the ZSET, so the
	// expired instances are listed first and each script names its key.
	key := q.keys(channel).instances()
	pipe := q.c.Pipeline()
	past := pipe.ZRangeByScore(ctx, key, &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(unixMs(now), 10)})
	beyond := pipe.ZRangeByScore(ctx, key, &redis.ZRangeBy{Min: "(" + strconv.FormatInt(leaseHorizon(now), 10), Max: "+inf"})
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("queue: reap on %s: list expired leases: %w", channel, err)
	}
	expired := append(past.Val(), beyond.Val()...)
	total := 0
	for _, instance := range expired {
		n, err := q.reapOne(ctx, channel, instance, now, false)
		if err != nil {
			return total, fmt.Errorf("queue: reap %s on %s: %w", instance, channel, err)
		}
		total += max(n, 0)
	}
	return total, nil
}

func (q *Queue) reapOne(ctx context.Context, channel, instance string, now time.Time, force bool) (int, error) {
	k := q.keys(channel)
	f := "0"
	if force {
		f = "1"
	}
	keys := []string{k.instances(), k.processing(instance), k.ready()}
	total := 0
	for {
		n, err := q.reapChunk(ctx, keys, instance, now, f)
		if err != nil {
			return total, err
		}
		if n < 0 { // a live lease: -1 if it was so from the start
			if total == 0 {
				return -1, nil
			}
			return total, nil
		}
		total += n
		if n < maxPerCall {
			return total, nil
		}
	}
}

// reapChunk runs scriptReap once: at most maxPerCall ids move, -1 when the
// lease is live.
func (q *Queue) reapChunk(ctx context.Context, keys []string, instance string, now time.Time, force string) (int, error) {
	return q.eval(ctx, scriptReap, keys, instance, unixMs(now), force, leaseHorizon(now), maxPerCall).Int()
}
