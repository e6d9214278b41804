package outbox_test

import (
	"slices"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
)

// updated_at is the pipeline's clock of a row in flight: the sweep re-pushes
// what has not moved for sweep_after (and the resync after Redis lost its
// data, what changed before now + 24 h), and a PROCESSING row's claim is
// stale once it is staleAfter old. An application's SQL may write it as
// anything a timestamptz holds. A QUEUED or PROCESSING row written with
// updated_at in year 3000, 294276 or 'infinity' was never swept nor resynced
// (so, in no Redis queue, never sent), and a PROCESSING one was never stale:
// claimed fresh, deferred again every time, for good. A time further ahead
// than any instance's clock can be (the claim and the sweep allow
// outbox.MaxClockAhead) is taken as no claim's: swept, and stale.
func TestStore_InFlightUpdatedInTheFuture(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	rows := b.insertN(t, 6)
	for i, w := range []struct {
		status, at string
	}{
		{"QUEUED", "infinity"}, {"QUEUED", "294276-01-01"}, {"PROCESSING", "3000-01-01"}, {"PROCESSING", "infinity"},
		{"QUEUED", "now"}, {"PROCESSING", "now"}, // fresh: not swept, a PROCESSING one not stale
	} {
		if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET status = $2, attempts = 1, updated_at = $3::timestamptz + interval '1 minute' * (CASE WHEN $3 = 'now' THEN 10 ELSE 0 END) WHERE id = $1`,
			rows[i], w.status, w.at); err != nil {
			t.Fatal(err)
		}
	}
	odd := rows[:4]

	swept, err := b.store.Sweep(b.ctx, now.Add(-time.Minute), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(swept); !slices.Equal(got, odd) {
		t.Errorf("Sweep = %v, want the rows updated past any clock, %v", got, odd)
	}
	resynced, err := b.store.Sweep(b.ctx, now.Add(24*time.Hour), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(resynced); !slices.Equal(got, rows) {
		t.Errorf("resync Sweep = %v, want every in-flight row, %v", got, rows)
	}

	cs, err := b.store.Claim(b.ctx, []int64{rows[2], rows[3], rows[5]}, now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []outbox.ClaimKind{outbox.ClaimSuspect, outbox.ClaimSuspect, outbox.ClaimDefer} {
		if c := cs[i]; c.Kind != want {
			t.Errorf("Claim of row %d (%v): %v, want %v", c.ID, c.Status, c.Kind, want)
		}
	}
	taken, err := b.store.ClaimSuspects(b.ctx, rows[2:4], now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range taken {
		if c.Kind != outbox.ClaimSend || c.Attempt != 2 || c.Crashes != 1 {
			t.Errorf("ClaimSuspects of row %d: %v, attempt %d, crashes %d; want send, attempt 2, crashes 1", c.ID, c.Kind, c.Attempt, c.Crashes)
			continue
		}
		n, err := b.store.Get(b.ctx, c.ID)
		if err != nil || len(n.Attempts) != 1 || n.Attempts[0].Outcome != outbox.OutcomeUnknown {
			t.Errorf("row %d's history after the takeover: %+v, %v; want its lost attempt, UNKNOWN", c.ID, n.Attempts, err)
		}
	}
}

// A QUEUED row's next_attempt_at written as 'infinity' (pgx reads it as the
// zero time) was deferred as a claim that lost a race: "look again in
// staleAfter", so the row went round Redis and the claim every staleAfter
// for good (a claim a minute per such row). It is deferred as the latest
// time there is, which the queue parks queue.MaxDelay at a time.
func TestStore_Claim_nextAttemptInfinity(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.queue(t, 1)[0]
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET next_attempt_at = 'infinity' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	cs, err := b.store.Claim(b.ctx, []int64{id}, now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if c := cs[0]; c.Kind != outbox.ClaimDefer || c.NotBefore.Before(now.Add(365*24*time.Hour)) {
		t.Errorf("Claim of a row not due before infinity: %v until %v; want deferred as far as a time goes", c.Kind, c.NotBefore)
	}
}
