package outbox_test

import (
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
)

// An application's SQL may write any integer the columns hold into attempts
// (integer) and crashes (smallint). The claim's answer is what the engine's
// bounds read: Attempt against retry.max_attempts (Exhausted, the claim past
// max_attempts), Crashes against delivery.quarantine_after. A negative count
// carried through the claim (attempts -2^31 claimed as -2147483647) put a row
// out of reach of both for 2^31 attempts or 32,768 crashes: retried without
// end, or crashing its daemon tens of thousands of times before quarantine.
// A claim counts from zero whatever the row held.
func TestStore_ClaimNegativeCounters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.queue(t, 3)
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET attempts = -2147483648 WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET attempts = -7, crashes = -32768 WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	cs, err := b.store.Claim(b.ctx, ids[:2], time.Now(), time.Minute)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	for _, c := range cs {
		if c.Kind != outbox.ClaimSend || c.Attempt != 1 || c.Crashes < 0 {
			t.Errorf("claim of %d: %v, attempt %d, crashes %d; want send, attempt 1, crashes >= 0", c.ID, c.Kind, c.Attempt, c.Crashes)
		}
	}
	// A takeover of a row that claims -32768 crashes before it: this one is
	// its first in a row.
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET status = 'PROCESSING', attempts = 2, crashes = -32768,
		updated_at = now() - interval '1 hour' WHERE id = $1`, ids[2]); err != nil {
		t.Fatal(err)
	}
	cs, err = b.store.ClaimSuspects(b.ctx, ids[2:], time.Now(), time.Minute)
	if err != nil {
		t.Fatalf("ClaimSuspects: %v", err)
	}
	if c := cs[0]; c.Kind != outbox.ClaimSend || c.Crashes != 1 || c.Attempt != 3 {
		t.Errorf("takeover of %d: %v, attempt %d, crashes %d; want send, attempt 3, crashes 1 (this takeover)", c.ID, c.Kind, c.Attempt, c.Crashes)
	}
}

// One count delta (or maintained count) an application's SQL wrote with an
// absurd value: the fold's sum past a bigint failed CompactCounts for good,
// so every later statement's deltas piled up unfolded (each count then reads
// them all), and CountByStatus failed on its sum. Counts saturate at the
// bigint's ends instead: the fold goes on, the overview reads.
func TestStore_CountsSaturate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.insertN(t, 3) // ch PENDING +3
	if _, err := b.store.CompactCounts(b.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Pool.Exec(b.ctx, `INSERT INTO notification_count_deltas (channel, status, d) VALUES
		('ch', 'PENDING', 9223372036854775807), ('app', 'SENT', -9223372036854775808), ('app', 'SENT', -9223372036854775808)`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.CountByStatus(b.ctx); err != nil {
		t.Errorf("CountByStatus with the deltas unfolded: %v", err)
	}
	if _, err := b.store.CompactCounts(b.ctx); err != nil {
		t.Errorf("CompactCounts: %v", err)
	}
	b.insertN(t, 2) // more deltas: the fold must go on past the absurd ones
	if _, err := b.store.CompactCounts(b.ctx); err != nil {
		t.Errorf("CompactCounts after more inserts: %v", err)
	}
	if left := b.count(t, `SELECT count(*) FROM notification_count_deltas`); left != 0 {
		t.Errorf("%d deltas left unfolded; want 0", left)
	}
	counts, err := b.store.CountByStatus(b.ctx)
	if err != nil {
		t.Fatalf("CountByStatus: %v", err)
	}
	if got := counts["ch"]["PENDING"]; got != 9223372036854775807 {
		t.Errorf("ch PENDING %d; want saturated at 9223372036854775807", got)
	}
	if got := counts["app"]["SENT"]; got != -9223372036854775808 {
		t.Errorf("app SENT %d; want saturated at -9223372036854775808", got)
	}
}

// retention_state is a table an application's SQL can write too. Its
// started_at as 'infinity' failed every pass at its read (pgx cannot scan
// it), so nothing was ever retained again; a started_at in the future (a year
// 2999, or a clock that ran ahead) never came within retention.rescan of now,
// so the walk never restarted: with the cursor past every id, no finished row
// was deleted again. A started_at that is not in the past restarts the walk.
func TestStore_RetentionStateOddTimes(t *testing.T) {
	t.Parallel()
	for _, started := range []string{"infinity", "2999-01-01", "-infinity"} {
		t.Run(started, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			now := time.Now()
			day := 24 * time.Hour
			ids := b.insertN(t, 5)
			if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET status = 'SENT', created_at = $2, updated_at = $2 WHERE id = ANY($1)`,
				ids, now.Add(-30*day)); err != nil {
				t.Fatal(err)
			}
			if _, err := b.db.Pool.Exec(b.ctx, `INSERT INTO retention_state (name, cursor, started_at)
				VALUES ('notifications', 9223372036854775807, $1)`, started); err != nil {
				t.Fatal(err)
			}
			r := outbox.Retention{Sent: 7 * day, Cancelled: 7 * day, Failed: 30 * day, Batch: 1000, Rescan: time.Hour}
			for pass := range 2 {
				if _, err := b.store.Retain(b.ctx, r, now.Add(time.Duration(pass)*time.Minute)); err != nil {
					t.Fatalf("pass %d: %v", pass, err)
				}
			}
			if left := b.count(t, `SELECT count(*) FROM notifications WHERE id = ANY($1)`, ids); left != 0 {
				t.Errorf("%d of 5 SENT rows finished 30 days ago left after two passes; want 0", left)
			}
		})
	}
}
