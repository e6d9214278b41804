package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reconnect backoff of Listen.
const (
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// notifyChannelSQL names the channel the trigger in 00001_outbox.sql uses.
const notifyChannelSQL = `
SELECT 'notifyd_outbox_' || n.nspname
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.oid = 'notifications'::regclass`

// NotifyChannel is the NOTIFY channel the insert trigger signals on:
// "notifyd_outbox_" followed by the schema that holds the notifications
// table the Store's search_path resolves to.
func (s *Store) NotifyChannel(ctx context.Context) (string, error) {
	var ch string
	if err := s.pool.QueryRow(ctx, notifyChannelSQL).Scan(&ch); err != nil {
		return "", fmt.Errorf("outbox notify channel: %w", err)
	}
	return ch, nil
}

// Listen holds a dedicated connection (outside the pool) LISTENing on
// NotifyChannel and sends a wake on each notification, without blocking: a
// wake already pending in the channel stands for any number of inserts. It
// also sends one after each (re)connect, since inserts may have been missed
// while it was away. A lost connection is re-established with backoff
// (100ms doubling to 5s) until ctx ends; Listen then returns nil. A wake is a
// hint only: the relay must poll as well.
func (s *Store) Listen(ctx context.Context, wake chan<- struct{}) error {
	backoff := listenBackoffMin
	for {
		err := s.listenOnce(ctx, wake, func() { backoff = listenBackoffMin })
		if ctx.Err() != nil {
			return nil
		}
		s.logger.Warn("outbox listen connection lost; reconnecting, the relay polls meanwhile", "error", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, listenBackoffMax)
	}
}

// listenOnce listens on one connection until it fails or ctx ends; it calls
// connected once LISTEN is in place.
func (s *Store) listenOnce(ctx context.Context, wake chan<- struct{}, connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	var ch string
	if err := conn.QueryRow(ctx, notifyChannelSQL).Scan(&ch); err != nil {
		return fmt.Errorf("notify channel: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
		return fmt.Errorf("listen %s: %w", ch, err)
	}
	connected()
	for {
		notify(wake)
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("wait for notification on %s: %w", ch, err)
		}
	}
}

func notify(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}
