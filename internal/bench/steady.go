package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
)

// Steady is the steady-load phase (Options.Steady): a constant rate for a
// while, with retention on, and the tables' sizes sampled every minute — do
// they stop growing once retention runs?
type Steady struct {
	Rate       int           `json:"rate"`
	Seconds    float64       `json:"seconds"`
	Retain     time.Duration `json:"retain"`
	Autovacuum string        `json:"autovacuum"`
	Inserted   int64         `json:"inserted"`
	Delivered  int           `json:"delivered"`
	Samples    []SizeSample  `json:"samples"`
}

// SizeSample is the outbox tables at one moment.
type SizeSample struct {
	AtSeconds float64 `json:"at_seconds"`
	Rows      int64   `json:"rows"` // notifications, from the maintained counts
	HeapMB    float64 `json:"heap_mb"`
	IndexMB   float64 `json:"index_mb"`
	Attempts  float64 `json:"attempts_mb"` // notification_attempts, heap and indexes
	DeadRows  int64   `json:"dead_rows"`   // notifications' dead tuples (pg_stat_user_tables)
	Vacuums   int64   `json:"autovacuums"` // autovacuum runs on notifications so far
}

// steady runs the steady-load phase.
func (e *env) steady(ctx context.Context) (Steady, error) {
	s := Steady{Rate: e.o.Steady, Seconds: e.o.SteadyFor.Seconds(), Retain: e.o.Retain}
	if err := e.app.QueryRow(ctx, `SHOW autovacuum`).Scan(&s.Autovacuum); err != nil {
		return s, fmt.Errorf("bench: %w", err)
	}
	e.sink.Reset()
	e.progress("steady: %d notifications/s for %s, retention %s (autovacuum %s)", s.Rate, e.o.SteadyFor, s.Retain, s.Autovacuum)
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	sample := time.NewTicker(time.Minute)
	defer sample.Stop()
	per := max(1, s.Rate/10)
	batch := make([]outbox.NewNotification, per)
	take := func() error {
		sm := SizeSample{AtSeconds: time.Since(start).Seconds()}
		c, err := e.store.CountByStatus(ctx)
		if err != nil {
			return err
		}
		for _, byStatus := range c {
			for _, n := range byStatus {
				sm.Rows += n
			}
		}
		err = e.app.QueryRow(ctx, `
			SELECT pg_table_size('notifications') / 1048576.0, pg_indexes_size('notifications') / 1048576.0,
			       pg_total_relation_size('notification_attempts') / 1048576.0,
			       coalesce((SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'notifications'::regclass), 0),
			       coalesce((SELECT autovacuum_count FROM pg_stat_user_tables WHERE relid = 'notifications'::regclass), 0)`).
			Scan(&sm.HeapMB, &sm.IndexMB, &sm.Attempts, &sm.DeadRows, &sm.Vacuums)
		if err != nil {
			return fmt.Errorf("bench: sample sizes: %w", err)
		}
		s.Samples = append(s.Samples, sm)
		e.progress("steady: %.0fs rows %d, heap %.1f MB, indexes %.1f MB, attempts %.1f MB, dead %d, autovacuums %d",
			sm.AtSeconds, sm.Rows, sm.HeapMB, sm.IndexMB, sm.Attempts, sm.DeadRows, sm.Vacuums)
		return nil
	}
	if err := take(); err != nil {
		return s, err
	}
	for time.Since(start) < e.o.SteadyFor {
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-sample.C:
			if err := take(); err != nil {
				return s, err
			}
		case <-tick.C:
			for i := range batch {
				n := s.Inserted + int64(i)
				batch[i] = outbox.NewNotification{Channel: Channel, Recipient: recipient(int(n % 1_000_000)), Payload: payload,
					IdempotencyKey: "steady:" + e.runID + ":" + strconv.FormatInt(n, 10)}
			}
			if _, err := e.store.Insert(ctx, batch); err != nil {
				return s, fmt.Errorf("bench: steady insert: %w", err)
			}
			s.Inserted += int64(len(batch))
		}
	}
	if err := take(); err != nil {
		return s, err
	}
	s.Delivered = e.sink.Counts().Distinct
	return s, nil
}
