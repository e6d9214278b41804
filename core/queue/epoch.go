package queue

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
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
	var errs []error
	for _, key := range keys {
		epoch, err := scriptEpoch.Run(ctx, q.c, []string{key}, newEpoch()).Text()
		if err != nil {
			errs = append(errs, fmt.Errorf("queue: read epoch %s: %w", key, err))
			continue
		}
		q.mu.Lock()
		if q.epochs == nil {
			q.epochs = map[string]string{}
		}
		if prev, seen := q.epochs[key]; seen && prev != epoch {
			changed = true
		}
		q.epochs[key] = epoch
		q.mu.Unlock()
	}
	return changed, errors.Join(errs...)
}

// newEpoch is a fresh random epoch, offered in case none exists.
func newEpoch() string {
	return rand.Text()
}
