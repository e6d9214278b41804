package queue

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Epoch reads the epochs of the Redis data, creating any that is missing,
// and reports whether one differs from what this Queue saw on its previous
// call (never on the first read of a key). A change means Redis lost data
// since: resync every unfinished notification from Postgres.
//
// There is one epoch under the prefix and one in each named queue's hash
// slot: on a Redis Cluster a single shard can restart empty or be flushed
// while the others keep their data, and only an epoch stored on that shard
// notices. On a single server the keys simply live side by side.
//
// Every key is read even when one fails; changed is reported together with
// the first error, so a lost shard is never hidden by another one that is
// down.
func (q *Queue) Epoch(ctx context.Context, queues ...string) (changed bool, err error) {
	keys := []string{q.prefix + ":epoch"}
	for _, name := range queues {
		if err := checkChannel(name); err != nil {
			return false, fmt.Errorf("queue: epoch: %w", err)
		}
		keys = append(keys, q.keys(name).base+"epoch")
	}
	// One pipeline: one round trip (per node, on a cluster) however many
	// queues. EVAL rather than EVALSHA, since a pipeline cannot fall back on
	// NOSCRIPT; the script is a few bytes.
	pipe := q.c.Pipeline()
	cmds := make([]*redis.Cmd, len(keys))
	for i, key := range keys {
		cmds[i] = scriptEpoch.Eval(ctx, pipe, []string{key}, newEpoch())
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	var errs []error
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.epochs == nil {
		q.epochs = map[string]string{}
	}
	for i, key := range keys {
		epoch, err := cmds[i].Text()
		if err != nil {
			errs = append(errs, fmt.Errorf("queue: read epoch %s: %w", key, err))
			continue
		}
		if prev, seen := q.epochs[key]; seen && prev != epoch {
			changed = true
		}
		q.epochs[key] = epoch
	}
	return changed, errors.Join(errs...)
}

// newEpoch is a fresh random epoch, offered in case none exists.
func newEpoch() string {
	return rand.Text()
}
