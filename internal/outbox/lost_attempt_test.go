package outbox_test

import (
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
)

// TestStore_Claim_lostAttempt: a row taken over from a stale claim (its
// claimer died mid-send) gets that claim's attempt recorded as UNKNOWN, so
// after the next settle its attempts and its history agree; a claim of a
// QUEUED row — the first, and a retry after a settle — records nothing
// extra.
func TestStore_Claim_lostAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const stale = time.Minute
	now := time.Now().Truncate(time.Microsecond)
	ids := b.insert(t, notif(1), notif(2))
	if _, err := b.store.Relay(b.ctx, now, 10); err != nil {
		t.Fatal(err)
	}
	first, err := b.store.Claim(b.ctx, ids, now, stale)
	if err != nil || len(first) != 2 || first[0].Attempt != 1 {
		t.Fatalf("first claim = %+v, %v", first, err)
	}
	// ids[1] is settled as a retry and claimed again: an ordinary retry.
	retryAt := now.Add(time.Second)
	if _, err := b.store.Settle(b.ctx, []outbox.Settlement{{ID: ids[1], Attempt: 1, Result: outbox.ResultRetry, NextAttemptAt: retryAt,
		Error: "503", StartedAt: now, FinishedAt: now.Add(time.Millisecond)}}); err != nil {
		t.Fatal(err)
	}
	// ids[0]'s claimer dies; after staleAfter another instance takes it over.
	later := now.Add(2 * stale)
	second, err := b.store.Claim(b.ctx, ids, later, stale)
	if err != nil || len(second) != 2 || second[0].Kind != outbox.ClaimSuspect || second[1].Kind != outbox.ClaimSend || second[1].Attempt != 2 {
		t.Fatalf("second claim = %+v, %v; want the stale one suspect, the retry sent as attempt 2", second, err)
	}
	alones, err := b.store.ClaimSuspects(b.ctx, ids[:1], later, stale)
	if err != nil || len(alones) != 1 {
		t.Fatalf("claim suspects = %+v, %v", alones, err)
	}
	if alone := alones[0]; alone.Kind != outbox.ClaimSend || alone.Attempt != 2 || alone.Crashes != 1 {
		t.Fatalf("claim alone = %+v, %v; want sent as attempt 2 after 1 crash", alone, err)
	}
	for _, id := range ids {
		if _, err := b.store.Settle(b.ctx, []outbox.Settlement{{ID: id, Attempt: 2, Result: outbox.ResultSent,
			StartedAt: later, FinishedAt: later.Add(time.Millisecond)}}); err != nil {
			t.Fatal(err)
		}
	}
	taken, err := b.store.Get(b.ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if taken.Status != outbox.StatusSent || taken.AttemptCount != 2 || len(taken.Attempts) != 2 {
		t.Fatalf("taken-over row: %s, %d attempts, history %+v; want SENT with 2 attempts and 2 history rows", taken.Status, taken.AttemptCount, taken.Attempts)
	}
	lost := taken.Attempts[0]
	if lost.Attempt != 1 || lost.Outcome != outbox.OutcomeUnknown || !lost.StartedAt.Equal(now) || !lost.FinishedAt.Equal(later) ||
		!strings.Contains(lost.Error, "outcome unknown") || !strings.Contains(lost.Error, "1m0s") {
		t.Errorf("lost attempt = %+v; want attempt 1 UNKNOWN from the first claim (%s) to the takeover (%s), saying why", lost, now, later)
	}
	if a := taken.Attempts[1]; a.Attempt != 2 || a.Outcome != outbox.OutcomeSuccess {
		t.Errorf("second attempt = %+v, want attempt 2 SUCCESS", a)
	}
	retried, err := b.store.Get(b.ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if len(retried.Attempts) != 2 || retried.Attempts[0].Outcome != outbox.OutcomeTransient || retried.Attempts[1].Outcome != outbox.OutcomeSuccess {
		t.Errorf("retried row history = %+v, want TRANSIENT then SUCCESS and no UNKNOWN", retried.Attempts)
	}
	if !retried.NextAttemptAt.IsZero() {
		t.Errorf("a SENT row keeps next_attempt_at %v, want none", retried.NextAttemptAt)
	}
}
