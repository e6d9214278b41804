package outbox_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
)

func TestStore_Relay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()

	due := notif(1)
	due.DueAt = now.Add(-2 * time.Minute)
	older := notif(2)
	older.DueAt = now.Add(-3 * time.Minute)
	later := notif(3)
	later.DueAt = now.Add(time.Hour)
	idsIn := b.insert(t, due, older, later)

	t.Run("due rows, oldest first, up to limit", func(t *testing.T) {
		got, err := b.store.Relay(b.ctx, now, 1)
		if err != nil {
			t.Fatalf("Relay: %v", err)
		}
		if want := []int64{idsIn[1]}; !slices.Equal(ids(got), want) {
			t.Fatalf("Relay(limit 1) = %v, want the oldest due %v", ids(got), want)
		}
		if got[0].Channel != "ch" || !got[0].NextAttemptAt.IsZero() {
			t.Errorf("Relay = %+v, want channel ch and no next attempt", got[0])
		}
		got, err = b.store.Relay(b.ctx, now, 10)
		if err != nil {
			t.Fatalf("Relay: %v", err)
		}
		if want := []int64{idsIn[0]}; !slices.Equal(ids(got), want) {
			t.Errorf("second Relay = %v, want %v (the future row stays)", ids(got), want)
		}
		for _, id := range idsIn[:2] {
			if r := b.row(t, id); r.Status != outbox.StatusQueued {
				t.Errorf("row %d = %+v, want QUEUED", id, r)
			}
		}
		if r := b.row(t, idsIn[2]); r.Status != outbox.StatusPending {
			t.Errorf("future row = %+v, want PENDING", r)
		}
	})

	t.Run("nothing left twice", func(t *testing.T) {
		got, err := b.store.Relay(b.ctx, now, 10)
		if err != nil || len(got) != 0 {
			t.Errorf("Relay of queued rows = %v, %v; want nothing", got, err)
		}
	})

	t.Run("once due", func(t *testing.T) {
		got, err := b.store.Relay(b.ctx, now.Add(2*time.Hour), 10)
		if err != nil || !slices.Equal(ids(got), idsIn[2:]) {
			t.Errorf("Relay two hours later = %v, %v; want %v", ids(got), err, idsIn[2:])
		}
	})

	t.Run("guard: terminal and in-flight rows never relayed", func(t *testing.T) {
		rows := b.insertN(t, 4)
		b.force(t, outbox.StatusProcessing, 1, now, rows[0])
		b.force(t, outbox.StatusSent, 1, now, rows[1])
		b.force(t, outbox.StatusFailed, 1, now, rows[2])
		b.force(t, outbox.StatusCancelled, 0, now, rows[3])
		got, err := b.store.Relay(b.ctx, now, 10)
		if err != nil || len(got) != 0 {
			t.Errorf("Relay = %v, %v; want nothing", got, err)
		}
	})

	t.Run("bad limit", func(t *testing.T) {
		if _, err := b.store.Relay(b.ctx, now, 0); err == nil {
			t.Error("Relay(limit 0): want an error")
		}
	})
}

func TestStore_Relay_parallel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const rows, relays, limit = 5000, 4, 97
	for range rows / 1000 {
		b.insertN(t, 1000)
	}
	var (
		mu    sync.Mutex
		got   []int64
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for range relays {
		wg.Go(func() {
			<-start
			for {
				q, err := b.store.Relay(b.ctx, time.Now(), limit)
				if err != nil {
					t.Errorf("Relay: %v", err)
					return
				}
				mu.Lock()
				got = append(got, ids(q)...)
				mu.Unlock()
				if len(q) == 0 {
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	seen := make(map[int64]bool, len(got))
	for _, id := range got {
		if seen[id] {
			t.Fatalf("row %d queued twice", id)
		}
		seen[id] = true
	}
	if len(seen) != rows {
		t.Errorf("relayed %d rows, want %d", len(seen), rows)
	}
	if n := b.count(t, `SELECT count(*) FROM notifications WHERE status = 'QUEUED'`); n != rows {
		t.Errorf("QUEUED rows = %d, want %d", n, rows)
	}
}

func TestStore_Claim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	const stale = time.Minute

	t.Run("queued and due: send, attempts+1", func(t *testing.T) {
		n := notif(7)
		n.IdempotencyKey = "claim-send"
		id := b.insert(t, n)
		if _, err := b.store.Relay(b.ctx, now, 10); err != nil {
			t.Fatal(err)
		}
		got, err := b.store.Claim(b.ctx, id, now, stale)
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		c := got[0]
		if c.Kind != outbox.ClaimSend || c.Attempt != 1 || c.Status != outbox.StatusProcessing || c.Channel != "ch" ||
			c.Recipient != "user-7" || c.IdempotencyKey != "claim-send" || string(c.Payload) != `{"n": 7}` || c.CreatedAt.IsZero() {
			t.Errorf("Claim = %+v (payload %s), want send attempt 1 with the row's fields", c, c.Payload)
		}
		if r := b.row(t, id[0]); r != (row{outbox.StatusProcessing, 1}) {
			t.Errorf("row = %+v, want PROCESSING attempt 1", r)
		}
	})

	t.Run("fresh processing: defer until stale, unchanged", func(t *testing.T) {
		id := b.queue(t, 1)
		b.force(t, outbox.StatusProcessing, 3, now.Add(-10*time.Second), id...)
		got, err := b.store.Claim(b.ctx, id, now, stale)
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		want := now.Add(-10 * time.Second).Add(stale)
		if c := got[0]; c.Kind != outbox.ClaimDefer || c.Status != outbox.StatusProcessing || !c.NotBefore.Equal(want.Truncate(time.Microsecond)) {
			t.Errorf("Claim = %+v, want defer until %v", c, want)
		}
		if r := b.row(t, id[0]); r != (row{outbox.StatusProcessing, 3}) {
			t.Errorf("row = %+v, want unchanged PROCESSING attempt 3", r)
		}
	})

	t.Run("stale processing: a suspect, reclaimed alone, attempts+1", func(t *testing.T) {
		id := b.queue(t, 1)
		b.force(t, outbox.StatusProcessing, 3, now.Add(-2*stale), id...)
		got, err := b.store.Claim(b.ctx, id, now, stale)
		if err != nil || got[0].Kind != outbox.ClaimSuspect {
			t.Fatalf("Claim = %+v, %v; want suspect", got, err)
		}
		if r := b.row(t, id[0]); r != (row{outbox.StatusProcessing, 3}) {
			t.Errorf("row after a batch claim = %+v, want unchanged PROCESSING attempt 3", r)
		}
		cs, err := b.store.ClaimSuspects(b.ctx, id, now, stale)
		if err != nil || len(cs) != 1 {
			t.Fatalf("ClaimSuspects: %+v, %v", cs, err)
		}
		c := cs[0]
		if c.Kind != outbox.ClaimSend || c.Attempt != 4 || c.Crashes != 1 {
			t.Errorf("ClaimAlone = %+v, want send attempt 4, crash 1", c)
		}
		// The claim refreshed updated_at: an immediate second claim defers.
		again, err := b.store.Claim(b.ctx, id, now.Add(time.Second), stale)
		if err != nil || again[0].Kind != outbox.ClaimDefer {
			t.Errorf("second Claim = %+v, %v; want defer", again, err)
		}
	})

	t.Run("retry not yet due: defer until next_attempt_at", func(t *testing.T) {
		c := b.claim(t, 1)[0]
		next := now.Add(time.Hour).Truncate(time.Microsecond)
		settle(t, b, outbox.Settlement{ID: c.ID, Attempt: c.Attempt, Result: outbox.ResultRetry, NextAttemptAt: next, Error: "busy"})
		got, err := b.store.Claim(b.ctx, []int64{c.ID}, now, stale)
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		if g := got[0]; g.Kind != outbox.ClaimDefer || g.Status != outbox.StatusQueued || !g.NotBefore.Equal(next) {
			t.Errorf("Claim = %+v, want defer until %v", g, next)
		}
		got, err = b.store.Claim(b.ctx, []int64{c.ID}, next, stale)
		if err != nil || got[0].Kind != outbox.ClaimSend || got[0].Attempt != 2 {
			t.Errorf("Claim at next_attempt_at = %+v, %v; want send attempt 2", got, err)
		}
	})

	t.Run("terminal, pending and missing: skip, unchanged", func(t *testing.T) {
		rows := b.queue(t, 3)
		b.force(t, outbox.StatusSent, 1, now.Add(-time.Hour), rows[0])
		b.force(t, outbox.StatusFailed, 5, now.Add(-time.Hour), rows[1])
		b.force(t, outbox.StatusCancelled, 0, now.Add(-time.Hour), rows[2])
		future := notif(9)
		future.DueAt = now.Add(time.Hour) // stays PENDING: later subtests' relays leave it alone
		pending := b.insert(t, future)
		in := append(slices.Clone(rows), pending[0], -1)
		got, err := b.store.Claim(b.ctx, in, now, stale)
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		wantStatus := []string{outbox.StatusSent, outbox.StatusFailed, outbox.StatusCancelled, outbox.StatusPending, ""}
		for i, c := range got {
			if c.ID != in[i] || c.Kind != outbox.ClaimSkip || c.Status != wantStatus[i] || c.Payload != nil {
				t.Errorf("Claim[%d] = %+v, want skip of %d with status %q", i, c, in[i], wantStatus[i])
			}
		}
		for i, id := range rows {
			if r := b.row(t, id); r.Status != wantStatus[i] {
				t.Errorf("row %d = %+v, want unchanged %s", id, r, wantStatus[i])
			}
		}
	})

	t.Run("one answer per distinct id, in input order", func(t *testing.T) {
		rows := b.queue(t, 2)
		got, err := b.store.Claim(b.ctx, []int64{rows[1], rows[0], rows[1], rows[0]}, now, stale)
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		if len(got) != 2 || got[0].ID != rows[1] || got[1].ID != rows[0] {
			t.Fatalf("Claim = %+v, want one each of %d, %d", got, rows[1], rows[0])
		}
		for _, c := range got {
			if c.Kind != outbox.ClaimSend || c.Attempt != 1 {
				t.Errorf("Claim = %+v, want send attempt 1 (claimed once)", c)
			}
		}
	})

	t.Run("bad input", func(t *testing.T) {
		if _, err := b.store.Claim(b.ctx, []int64{1}, now, 0); err == nil {
			t.Error("Claim(staleAfter 0): want an error")
		}
		if got, err := b.store.Claim(b.ctx, nil, now, stale); err != nil || got != nil {
			t.Errorf("Claim(nil) = %v, %v; want nothing", got, err)
		}
	})
}

func TestStore_Claim_parallel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rows := b.queue(t, 2000)
	const claimers = 4
	var (
		mu    sync.Mutex
		sends = make(map[int64]int)
		wg    sync.WaitGroup
	)
	for range claimers {
		wg.Go(func() {
			got, err := b.store.Claim(b.ctx, rows, time.Now(), time.Minute)
			if err != nil {
				t.Errorf("Claim: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, c := range got {
				if c.Kind == outbox.ClaimSend {
					sends[c.ID]++
				} else if c.Kind != outbox.ClaimDefer {
					t.Errorf("Claim %d: %v, want send or defer", c.ID, c.Kind)
				}
			}
		})
	}
	wg.Wait()
	for _, id := range rows {
		if sends[id] != 1 {
			t.Fatalf("row %d claimed for sending %d times, want 1", id, sends[id])
		}
	}
}

func settle(t *testing.T, b *bundle, ss ...outbox.Settlement) []bool {
	t.Helper()
	got, err := b.store.Settle(b.ctx, ss)
	if err != nil {
		t.Fatalf("Settle: %v", err)
	}
	return got
}
