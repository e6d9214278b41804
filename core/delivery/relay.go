package delivery

import (
	"context"
	"fmt"

	"github.com/notifyd/notifyd/core/outbox"
)

// relay relays up to limit due rows. A relay Postgres refuses for a row's
// data (outbox.IsRowError) would fail every pass and hold every due row
// behind it, so the limit is halved until one row is refused alone: the
// oldest due row, which is finished FAILED with the reason. The pass then
// goes on (the caller calls again while rows come back).
func (e *Engine) relay(ctx context.Context, limit int) ([]outbox.Queued, error) {
	queued, err := e.store.Relay(ctx, e.now(), limit)
	for n := limit / 2; err != nil && outbox.IsRowError(err) && n >= 1; n /= 2 {
		e.log.Warn("relay refused for a row's data; relaying fewer rows to find it", "limit", n, "error", err)
		queued, err = e.store.Relay(ctx, e.now(), n)
	}
	if err == nil || !outbox.IsRowError(err) {
		return queued, err
	}
	id, ferr := e.store.FirstDue(ctx, e.now())
	if ferr != nil || id == 0 {
		return nil, fmt.Errorf("%w (and finding the row at fault: %v)", err, ferr)
	}
	reason := fmt.Sprintf("could not be queued for sending (%v); ended FAILED", err)
	if _, ferr := e.store.Finish(ctx, id, 0, outbox.StatusFailed, reason); ferr != nil {
		e.log.Error("notification cannot be relayed or finished", "id", id, "cause", err, "error", ferr)
		return nil, fmt.Errorf("relay: notification %d cannot be written: %w", id, ferr)
	}
	e.log.Error("notification could not be relayed; finished it FAILED", "id", id, "cause", err)
	e.metrics.Unstorable("", "relay")
	// FAILED in Postgres is the dead-letter list the API and dashboard read;
	// the id was never in a Redis queue, so there is nothing to move there.
	return nil, nil
}
