package queue

import (
	"context"
	"crypto/rand"
	"fmt"
)

// Epoch returns the epoch of the Redis data, creating it when missing, and
// whether it differs from the one this Queue saw on its previous call (false
// on the first call). A change means Redis lost its data since: resync every
// unfinished notification from Postgres.
func (q *Queue) Epoch(ctx context.Context) (epoch string, changed bool, err error) {
	epoch, err = scriptEpoch.Run(ctx, q.c, []string{q.prefix + ":epoch"}, newEpoch()).Text()
	if err != nil {
		return "", false, fmt.Errorf("queue: read epoch: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	changed = q.epoch != "" && q.epoch != epoch
	q.epoch = epoch
	return epoch, changed, nil
}

// newEpoch is a fresh random epoch, offered in case none exists.
func newEpoch() string {
	return rand.Text()
}
