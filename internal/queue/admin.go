package queue

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	// A filter's marker (DeadRemove of many ids) is no dead letter.
	vals = slices.DeleteFunc(vals, func(v string) bool { return strings.HasPrefix(v, deadSentinel) })
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

// deadRemoveBudget bounds the elements of a dead list one DeadRemove script
// may read (an LREM of the whole list per id): past it the list is
// filtered in steps of maxPerCall instead. The dead list is never trimmed
// but by replays and purges, so it may hold millions: 1,000 ids against a
// million was one script of 10^9 elements, Redis serving nobody else for
// longer than the client's 10 s timeout.
const deadRemoveBudget = 64 * maxPerCall

// deadSentinel begins the marker a dead-list filter pushes where the list
// began (deadFilter), followed by when (Unix ms) and a token: one left by
// a filter that died is dropped by a later filter once it is an hour old.
const deadSentinel = "notifyd:filter:"

// deadFilterTTL is how long a filter's drop hash lives, and after which a
// sentinel it left is taken for a dead filter's.
const deadFilterTTL = time.Hour

// DeadRemove drops ids (all when ids is empty) from channel's dead list, e.g.
// after a replay or purge in Postgres, and returns how many it dropped. No
// script reads more than deadRemoveBudget elements of the list (filtering a
// long one takes a step per maxPerCall of its ids).
func (q *Queue) DeadRemove(ctx context.Context, channel string, ids []int64) (int, error) {
	if err := checkChannel(channel); err != nil {
		return 0, fmt.Errorf("queue: remove dead: %w", err)
	}
	k := q.keys(channel)
	keys := []string{k.dead()}
	if len(ids) == 0 {
		n, err := q.eval(ctx, scriptDeadRemove, keys, deadRemoveBudget).Int()
		if err != nil {
			return 0, fmt.Errorf("queue: remove all dead ids of %s: %w", channel, err)
		}
		return n, nil
	}
	total := 0
	for start := 0; start < len(ids); start += maxPerCall {
		chunk := ids[start:min(start+maxPerCall, len(ids))]
		n, err := q.eval(ctx, scriptDeadRemove, keys, append([]any{deadRemoveBudget}, idArgs(chunk)...)...).Int()
		if err == nil && n < 0 {
			n, err = q.deadFilter(ctx, k, chunk)
		}
		if err != nil {
			return total, fmt.Errorf("queue: remove %d dead ids of %s: %w", len(ids), channel, err)
		}
		total += n
	}
	return total, nil
}

// deadFilter drops ids from the long dead list of k in bounded steps
// (scriptDeadFilter), the ids to drop held in a hash beside it (removed
// after, and expiring should this process die first).
func (q *Queue) deadFilter(ctx context.Context, k keys, ids []int64) (int, error) {
	now := time.Now()
	token := rand.Text()
	sentinel := deadSentinel + strconv.FormatInt(unixMs(now), 10) + ":" + token
	drop := k.base + "deadfilter:" + token
	args := make([]any, 0, 2*len(ids))
	for _, id := range ids {
		args = append(args, id, "0")
	}
	pipe := q.c.TxPipeline()
	pipe.HSet(ctx, drop, args...)
	pipe.Expire(ctx, drop, deadFilterTTL)
	length := pipe.LLen(ctx, k.dead())
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	defer q.c.Del(context.WithoutCancel(ctx), drop)
	dropped, taken, first := 0, int64(0), "1"
	for {
		res, err := q.eval(ctx, scriptDeadFilter, []string{k.dead(), drop}, sentinel, maxPerCall, first,
			unixMs(now.Add(-deadFilterTTL))).Int64Slice()
		if err != nil {
			return dropped, err
		}
		if len(res) != 3 {
			return dropped, fmt.Errorf("unexpected script reply %v", res)
		}
		first = "0"
		dropped += int(res[0])
		taken += res[1]
		// Done when the sentinel came off; or the list went away (its
		// sentinel with it: UNLINKed by a purge of all) and more came off
		// than it held: nothing left to look at.
		if res[2] == 1 || taken > length.Val()+maxPerCall {
			return dropped, nil
		}
	}
}
