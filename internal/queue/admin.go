package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Stats reads channel's queue sizes. The numbers come from several reads, not
// one snapshot.
func (q *Queue) Stats(ctx context.Context, channel string) (Stats, error) {
	if err := checkChannel(channel); err != nil {
		return Stats{}, fmt.Errorf("queue: stats: %w", err)
	}
	k := q.keys(channel)
	leases, err := q.c.ZRangeWithScores(ctx, k.instances(), 0, -1).Result()
	if err != nil {
		return Stats{}, fmt.Errorf("queue: stats of %s: %w", channel, err)
	}
	var (
		st      Stats
		t       = time.Now()
		now     = float64(unixMs(t))
		horizon = float64(leaseHorizon(t))
		proc    = make([]*redis.IntCmd, 0, len(leases))
	)
	pipe := q.c.Pipeline()
	ready := pipe.LLen(ctx, k.ready())
	delayed := pipe.ZCard(ctx, k.delayed())
	dead := pipe.LLen(ctx, k.dead())
	for _, l := range leases {
		instance, _ := l.Member.(string)
		proc = append(proc, pipe.LLen(ctx, k.processing(instance)))
		if l.Score > now && l.Score <= horizon { // past the horizon: Reap's, not live
			st.Instances++
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return Stats{}, fmt.Errorf("queue: stats of %s: %w", channel, err)
	}
	st.Ready, st.Delayed, st.Dead = ready.Val(), delayed.Val(), dead.Val()
	for _, p := range proc {
		st.Processing += p.Val()
	}
	return st, nil
}

// DeadList returns up to limit dead-lettered ids of channel, newest first,
// skipping offset.
func (q *Queue) DeadList(ctx context.Context, channel string, offset, limit int64) ([]int64, error) {
	if err := checkChannel(channel); err != nil {
		return nil, fmt.Errorf("queue: list dead: %w", err)
	}
	if offset < 0 || limit < 0 {
		return nil, fmt.Errorf("queue: list dead of %s: offset and limit must not be negative, got %d and %d", channel, offset, limit)
	}
	if limit == 0 {
		return []int64{}, nil
	}
	vals, err := q.c.LRange(ctx, q.keys(channel).dead(), offset, offset+limit-1).Result()
	if err != nil {
		return nil, fmt.Errorf("queue: list dead of %s: %w", channel, err)
	}
	ids, err := parseStrings(vals)
	if err != nil {
		return nil, fmt.Errorf("queue: list dead of %s: %w", channel, err)
	}
	return ids, nil
}

// DeadReplay takes ids (all of them when ids is empty) out of channel's dead
// list and queues them as ready. An id queued already meanwhile only leaves
// the dead list. Returns how many ids left the dead list. Replay in Postgres
// first (FAILED -> QUEUED), or the claim will find them FAILED and ack them.
func (q *Queue) DeadReplay(ctx context.Context, channel string, ids []int64) (int, error) {
	if err := checkChannel(channel); err != nil {
		return 0, fmt.Errorf("queue: replay dead: %w", err)
	}
	k := q.keys(channel)
	keys := []string{k.dead(), k.members(), k.ready()}
	if len(ids) > 0 {
		total := 0
		for start := 0; start < len(ids); start += maxPerCall {
			chunk := ids[start:min(start+maxPerCall, len(ids))]
			n, err := q.eval(ctx, scriptDeadReplay, keys, append([]any{0}, idArgs(chunk)...)...).Int()
			if err != nil {
				return total, fmt.Errorf("queue: replay %d dead ids of %s: %w", len(ids), channel, err)
			}
			total += n
		}
		return total, nil
	}
	// All: take from the old end in bounded steps until a step comes back
	// short, so a huge dead list never stalls Redis in one script.
	total := 0
	for {
		n, err := q.eval(ctx, scriptDeadReplay, keys, maxPerCall).Int()
		if err != nil {
			return total, fmt.Errorf("queue: replay all dead ids of %s: %w", channel, err)
		}
		total += n
		if n < maxPerCall {
			return total, nil
		}
	}
}

// DeadRemove drops ids (all when ids is empty) from channel's dead list, e.g.
// after a replay or purge in Postgres, and returns how many it dropped.
func (q *Queue) DeadRemove(ctx context.Context, channel string, ids []int64) (int, error) {
	if err := checkChannel(channel); err != nil {
		return 0, fmt.Errorf("queue: remove dead: %w", err)
	}
	keys := []string{q.keys(channel).dead()}
	if len(ids) == 0 {
		n, err := q.eval(ctx, scriptDeadRemove, keys).Int()
		if err != nil {
			return 0, fmt.Errorf("queue: remove all dead ids of %s: %w", channel, err)
		}
		return n, nil
	}
	n, err := q.runChunks(ctx, scriptDeadRemove, keys, nil, idArgs(ids), 1)
	if err != nil {
		return n, fmt.Errorf("queue: remove %d dead ids of %s: %w", len(ids), channel, err)
	}
	return n, nil
}
