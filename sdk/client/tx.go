package client

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/notifyd/notifyd/core/config"
	"github.com/notifyd/notifyd/core/outbox"
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
// nothing.
func EnqueueTx(ctx context.Context, tx pgx.Tx, n Notification) (Enqueued, error) {
	out, err := EnqueueBatchTx(ctx, tx, []Notification{n})
	if err != nil {
		return Enqueued{}, err
	}
	return out[0], nil
}

// EnqueueBatchTx is EnqueueTx for many notifications, written in one
// statement; the answers come in the same order.
func EnqueueBatchTx(ctx context.Context, tx pgx.Tx, ns []Notification) ([]Enqueued, error) {
	if tx == nil {
		return nil, fmt.Errorf("notifyd enqueue in transaction: tx is nil")
	}
	if len(ns) == 0 {
		return nil, nil
	}
	rows := make([]outbox.NewNotification, len(ns))
	for i, n := range ns {
		if !config.NameRE.MatchString(n.Channel) {
			return nil, fmt.Errorf("notifyd enqueue in transaction: notification %d: channel %q is not a channel name (%s)", i, n.Channel, config.NameRE)
		}
		rows[i] = outbox.NewNotification{
			Channel: n.Channel, Recipient: n.Recipient, Payload: n.Payload,
			IdempotencyKey: n.IdempotencyKey, DueAt: n.SendAt,
		}
	}
	res, err := outbox.Insert(ctx, tx, rows)
	if err != nil {
		return nil, fmt.Errorf("notifyd enqueue in transaction: %w", err)
	}
	out := make([]Enqueued, len(res))
	for i, r := range res {
		out[i] = Enqueued{ID: r.ID, Status: r.Status, Duplicate: r.Duplicate}
	}
	return out, nil
}
