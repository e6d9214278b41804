package service_test

import (
	"testing"

	"github.com/notifyd/notifyd/internal/service"
)

// A replay by channel works in transactions of ChunkRows, but it used to
// list every id it moved in its answer: 8 bytes a row held for the whole
// replay, then about 9 bytes a row of JSON. A channel with 10 million dead
// letters (an outage's worth) made a 90 MB answer, past the 64 MiB that
// sdk/client (and so `notifyd dlq replay`) reads, so the operator was told
// the replay failed when it had succeeded. The count is every row; the list
// is bounded (10,000 ids), whatever the dead-letter queue holds.
func TestDLQ_ReplayChannelListBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n, listed = 10_005, 10_000
	if _, err := b.db.Pool.Exec(b.ctx, `
INSERT INTO notifications (channel, recipient, payload, status, attempts, last_error)
SELECT 'orders', 'r' || g, '{}', 'FAILED', 5, 'boom' FROM generate_series(1, $1) g`, n); err != nil {
		t.Fatal(err)
	}
	res, err := b.ops.Replay(b.ctx, service.Selector{Channel: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed != n {
		t.Errorf("replayed %d, want %d", res.Replayed, n)
	}
	if len(res.IDs) > listed {
		t.Errorf("the answer lists %d ids, want at most %d: its size grows with the dead-letter queue", len(res.IDs), listed)
	}
	var queued int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM notifications WHERE channel = 'orders' AND status = 'QUEUED'`).Scan(&queued); err != nil {
		t.Fatal(err)
	}
	if queued != n {
		t.Errorf("%d rows QUEUED, want %d", queued, n)
	}
}
