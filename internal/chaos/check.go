package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/redis/go-redis/v9"
)

// queueState is the channel's queues in Redis, summed over its partitions.
type queueState struct {
	Ready, Delayed, Members, Processing int64
	ProcessingLists                     int
	Dead                                []string
	deadQueue                           map[string]string // id → the queue whose dead list holds it
}

func (q queueState) empty() bool {
	return q.Ready == 0 && q.Delayed == 0 && q.Members == 0 && q.Processing == 0
}

func (c *Cluster) queueState(ctx context.Context) (queueState, error) {
	q := queueState{deadQueue: map[string]string{}}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, name := range c.Queues() {
		ready, err := c.RC.LLen(ctx, queueKey(name, "ready")).Result()
		if err != nil {
			return q, err
		}
		delayed, err := c.RC.ZCard(ctx, queueKey(name, "delayed")).Result()
		if err != nil {
			return q, err
		}
		members, err := c.RC.SCard(ctx, queueKey(name, "members")).Result()
		if err != nil {
			return q, err
		}
		dead, err := c.RC.LRange(ctx, queueKey(name, "dead"), 0, -1).Result()
		if err != nil {
			return q, err
		}
		q.Ready += ready
		q.Delayed += delayed
		q.Members += members
		q.Dead = append(q.Dead, dead...)
		for _, id := range dead {
			q.deadQueue[id] = name
		}
	}
	// Processing lists are named by instance: found by SCAN, which on a
	// cluster covers one node, so every master is scanned.
	var mu sync.Mutex
	err := c.forEachShard(ctx, func(ctx context.Context, rc *redis.Client) error {
		for _, name := range c.Queues() {
			iter := rc.Scan(ctx, 0, queueKey(name, "processing:*"), 1000).Iterator()
			for iter.Next(ctx) {
				n, err := rc.LLen(ctx, iter.Val()).Result()
				if err != nil {
					return err
				}
				mu.Lock()
				q.Processing += n
				q.ProcessingLists++
				mu.Unlock()
			}
			if err := iter.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	return q, err
}

// forEachShard calls fn with a client of the one Redis server, or (in
// cluster mode, concurrently) of every master.
func (c *Cluster) forEachShard(ctx context.Context, fn func(context.Context, *redis.Client) error) error {
	switch rc := c.RC.(type) {
	case *redis.ClusterClient:
		return rc.ForEachMaster(ctx, fn)
	case *redis.Client:
		return fn(ctx, rc)
	default:
		return fmt.Errorf("chaos: unexpected Redis client %T", c.RC)
	}
}

// row is one notification as the suite reads it at the end.
type row struct {
	id       int64
	status   string
	due      time.Time
	attempts int
	lastErr  string
	refused  bool
}

// check reads the outcome from Postgres, Redis and the sink and fills the
// report's figures and problems.
func (c *Cluster) check(ctx context.Context, r *Report, keyPrefix string, n int) error {
	rows, err := c.DB.Query(ctx, `
SELECT idempotency_key, id, status, due_at, attempts, coalesce(last_error, ''), recipient
  FROM notifications WHERE idempotency_key LIKE $1 || '%'`, keyPrefix)
	if err != nil {
		return fmt.Errorf("chaos: read outcome: %w", err)
	}
	byKey := make(map[string]row, n)
	for rows.Next() {
		var (
			key, rcpt string
			x         row
			due       pgtype.Timestamptz
		)
		if err := rows.Scan(&key, &x.id, &x.status, &due, &x.attempts, &x.lastErr, &rcpt); err != nil {
			return fmt.Errorf("chaos: read outcome: %w", err)
		}
		x.due, x.refused = due.Time, strings.HasPrefix(rcpt, RefusedPrefix)
		byKey[key] = x
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("chaos: read outcome: %w", err)
	}
	seen := c.Sink.Snapshot()
	r.Statuses = map[string]int{}
	var delays []time.Duration
	failedIDs := map[string]bool{}
	for i := range n {
		key := fmt.Sprintf("%s%d", keyPrefix, i)
		x, ok := byKey[key]
		if !ok {
			r.lost(fmt.Sprintf("%s: accepted but no row in the outbox", key))
			continue
		}
		r.Statuses[x.status]++
		if x.refused {
			r.Refused++
		}
		r.MaxAttempts = max(r.MaxAttempts, x.attempts)
		r.TotalAttempts += x.attempts
		d := seen[key]
		switch x.status {
		case "SENT":
			r.Sent++
			if d.Accepted == 0 {
				r.lost(fmt.Sprintf("%s (id %d): SENT but the sink never accepted it", key, x.id))
				continue
			}
			if x.refused {
				r.problem("%s (id %d): SENT although the sink refuses its recipient", key, x.id)
			}
			r.duplicates(d)
			delay := d.FirstOK.Sub(x.due)
			delays = append(delays, delay)
			if delay > r.MaxDelay {
				r.MaxDelay, r.MaxDelayKey = delay, key
			}
		case "FAILED":
			r.Failed++
			failedIDs[fmt.Sprint(x.id)] = true
			if !x.refused {
				r.WronglyFailed++
				r.problem("%s (id %d): FAILED after %d attempts though the sink never refused it: %s", key, x.id, x.attempts, x.lastErr)
			} else if d.Refused == 0 {
				r.problem("%s (id %d): FAILED without the sink ever refusing it", key, x.id)
			}
			if d.Accepted > 0 {
				r.problem("%s (id %d): FAILED but the sink accepted it %d times", key, x.id, d.Accepted)
			}
		default:
			r.lost(fmt.Sprintf("%s (id %d): still %s after %d attempts (%s)", key, x.id, x.status, x.attempts, x.lastErr))
		}
	}
	if extra := len(byKey) - n; extra > 0 {
		r.problem("%d rows in the outbox that were never enqueued", extra)
	}
	r.Delays = percentiles(delays)

	q, err := c.queueState(ctx)
	if err != nil {
		r.problem("read the Redis queue: %v", err)
	} else {
		r.Redis = q
		if !q.empty() {
			r.problem("Redis holds stray ids: ready %d, delayed %d, members %d, %d in %d processing lists",
				q.Ready, q.Delayed, q.Members, q.Processing, q.ProcessingLists)
		}
		dup := map[string]int{}
		var order []string
		for _, id := range q.Dead {
			if dup[id] == 0 {
				order = append(order, id)
			}
			dup[id]++
		}
		var t0 time.Time
		if len(r.Events) > 0 {
			t0 = r.Events[0].At
		}
		explained := 0
		for _, id := range order {
			if !failedIDs[id] {
				r.problem("dead list of %s holds %s, which is not a FAILED notification", q.deadQueue[id], id)
			}
			if dup[id] > 1 {
				// A FAILED id is dead-listed once, however often it comes
				// through the queue again (Queue.DeadOnce; a failed push
				// retries only its own queue's rows).
				r.DeadRepeats += dup[id] - 1
				why := ""
				if n, err := strconv.ParseInt(id, 10, 64); err == nil && explained < 3 {
					explained++
					why = ": " + c.explain(ctx, n, t0)
				}
				r.problem("dead list of %s holds %s %d times%s", q.deadQueue[id], id, dup[id], why)
			}
		}
		if !r.redisWiped() && len(dup) != len(failedIDs) {
			r.problem("dead list holds %d ids, want the %d FAILED ones (Redis was never wiped)", len(dup), len(failedIDs))
		}
	}
	for _, in := range c.Instances {
		exits, starts := in.Exits()
		r.Starts += starts
		for _, e := range exits {
			r.Exits = append(r.Exits, fmt.Sprintf("%s %s: %s: %s", in.Name, e.At.Format("15:04:05.000"), e.Status, e.Last))
		}
		if panics, races, first := in.LogFindings(); panics+races > 0 {
			r.problem("%s logged %d panics and %d data races; the first: %s", in.Name, panics, races, first)
		}
	}
	return nil
}

// explain describes one notification's history: its row and every settled
// attempt, for the report's stragglers.
func (c *Cluster) explain(ctx context.Context, id int64, t0 time.Time) string {
	var (
		status                      string
		attempts                    int
		created, updated, sent, due pgtype.Timestamptz
		lastErr                     string
	)
	err := c.DB.QueryRow(ctx, `SELECT status, attempts, created_at, updated_at, sent_at, due_at, coalesce(last_error, '')
  FROM notifications WHERE id = $1`, id).Scan(&status, &attempts, &created, &updated, &sent, &due, &lastErr)
	if err != nil {
		return fmt.Sprintf("id %d: %v", id, err)
	}
	at := func(ts pgtype.Timestamptz) string {
		if !ts.Valid {
			return "-"
		}
		return "+" + ts.Time.Sub(t0).Round(time.Millisecond).String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "id %d: %s after %d attempts; due %s, sent %s, updated %s", id, status, attempts, at(due), at(sent), at(updated))
	if lastErr != "" {
		fmt.Fprintf(&b, ", last error %q", lastErr)
	}
	rows, err := c.DB.Query(ctx, `SELECT attempt, started_at, finished_at, outcome, coalesce(error, '')
  FROM notification_attempts WHERE notification_id = $1 ORDER BY started_at, finished_at`, id)
	if err != nil {
		return b.String()
	}
	defer rows.Close()
	for rows.Next() {
		var (
			n               int
			started, ended  pgtype.Timestamptz
			outcome, errMsg string
		)
		if rows.Scan(&n, &started, &ended, &outcome, &errMsg) != nil {
			break
		}
		fmt.Fprintf(&b, "\n        attempt %d: %s..%s %s %s", n, at(started), at(ended), outcome, errMsg)
	}
	return b.String()
}
