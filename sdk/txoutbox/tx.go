// Package txoutbox writes notifications into the notifyd outbox inside an
// application's own Postgres transaction — the transactional outbox: the
// notification exists if and only if the application's transaction commits.
//
// It is the one implementation of the outbox insert: the daemon's own
// writers (the API, schedules, campaigns) call the same Insert through
// internal/outbox. It depends on pgx; an application that only talks HTTP uses
// sdk/client and never links it.
package txoutbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/notifyd/notifyd/sdk/traceparent"
	"github.com/notifyd/notifyd/sdk/wire"
)

// EnqueueTx writes n into the notifyd outbox inside tx, the application's
// own transaction, so the notification exists if and only if tx commits: a
// rollback leaves nothing behind and nothing is ever sent; after the commit
// notifyd picks it up (woken at once by the outbox's insert trigger) and
// delivers it.
//
// tx must be on the notifyd database with the notifyd tables on its
// search_path. The channel is not checked against notifyd's config here
// (the application does not have it): a notification for a channel notifyd
// does not run waits, PENDING or QUEUED, until that channel is configured.
// A repeated IdempotencyKey returns the original (Duplicate set) and writes
// nothing. n is held to what the API holds a notification to (Row.Check:
// docs/config.md "Bounds"), before any SQL runs, so a refusal names the
// field and leaves tx usable: a payload key given twice, a SendAt outside
// years 1 to 9999 (UTC, its last day excluded) among them. When ctx carries an OpenTelemetry span, its trace is stored with
// the notification and every delivery attempt continues it.
func EnqueueTx(ctx context.Context, tx pgx.Tx, n wire.Notification) (wire.Enqueued, error) {
	out, err := EnqueueBatchTx(ctx, tx, []wire.Notification{n})
	if err != nil {
		return wire.Enqueued{}, err
	}
	return out[0], nil
}

// EnqueueBatchTx is EnqueueTx for many notifications (at most
// wire.MaxInsertBatch), written in one statement; the answers come in the
// same order.
func EnqueueBatchTx(ctx context.Context, tx pgx.Tx, ns []wire.Notification) ([]wire.Enqueued, error) {
	if tx == nil {
		return nil, fmt.Errorf("notifyd enqueue in transaction: tx is nil")
	}
	if len(ns) == 0 {
		return nil, nil
	}
	rows := make([]Row, len(ns))
	tp := traceparent.FromContext(ctx)
	for i, n := range ns {
		if !wire.NameRE.MatchString(n.Channel) {
			// Quoted cut, as every door quotes text of unbounded length: a
			// 1 MiB channel must not make a 1 MiB error (and log line).
			return nil, fmt.Errorf("notifyd enqueue in transaction: notification %d: channel %q (%d bytes) is not a channel name (%s)",
				i, wire.Truncate(n.Channel, 100), len(n.Channel), wire.NameRE)
		}
		rows[i] = Row{
			Channel: n.Channel, Recipient: n.Recipient, Payload: n.Payload,
			IdempotencyKey: n.IdempotencyKey, DueAt: n.SendAt, TraceParent: tp,
		}
	}
	res, err := Insert(ctx, tx, rows)
	if err != nil {
		return nil, fmt.Errorf("notifyd enqueue in transaction: %w", err)
	}
	out := make([]wire.Enqueued, len(res))
	for i, r := range res {
		out[i] = wire.Enqueued{ID: r.ID, Status: r.Status, Duplicate: r.Duplicate}
	}
	return out, nil
}
