package outbox_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
)

// failed claims n rows and settles them FAILED on channel ch.
func (b *bundle) failed(t *testing.T, ch string, n int) []int64 {
	t.Helper()
	ns := make([]outbox.NewNotification, n)
	for i := range ns {
		ns[i] = notif(i)
		ns[i].Channel = ch
	}
	ids := b.insert(t, ns...)
	b.force(t, outbox.StatusProcessing, 1, time.Now(), ids...)
	ss := make([]outbox.Settlement, n)
	for i, id := range ids {
		ss[i] = outbox.Settlement{ID: id, Attempt: 1, Result: outbox.ResultFailed, Error: "boom"}
	}
	settle(t, b, ss...)
	return ids
}

func TestStore_Cancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rows := b.insertN(t, 6)
	now := time.Now()
	// PENDING, QUEUED → cancelled; PROCESSING, SENT, FAILED, CANCELLED stay.
	b.force(t, outbox.StatusQueued, 0, now, rows[1])
	b.force(t, outbox.StatusProcessing, 1, now, rows[2])
	b.force(t, outbox.StatusSent, 1, now, rows[3])
	b.force(t, outbox.StatusFailed, 1, now, rows[4])
	b.force(t, outbox.StatusCancelled, 0, now, rows[5])
	got, err := b.store.Cancel(b.ctx, append(slices.Clone(rows), -5))
	if err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	slices.Sort(got)
	if want := rows[:2]; !slices.Equal(got, want) {
		t.Errorf("Cancel changed %v, want %v", got, want)
	}
	want := []string{outbox.StatusCancelled, outbox.StatusCancelled, outbox.StatusProcessing, outbox.StatusSent, outbox.StatusFailed, outbox.StatusCancelled}
	for i, id := range rows {
		if r := b.row(t, id); r.Status != want[i] {
			t.Errorf("row %d = %s, want %s", i, r.Status, want[i])
		}
	}
}

func TestStore_Replay(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("failed rows only, attempts reset, last_error kept", func(t *testing.T) {
		dead := b.failed(t, "a", 2)
		live := b.insertN(t, 1)
		got, err := b.store.Replay(b.ctx, append(slices.Clone(dead), live...))
		if err != nil {
			t.Fatalf("Replay: %v", err)
		}
		slices.SortFunc(got, func(x, y outbox.Queued) int { return int(x.ID - y.ID) })
		if !slices.Equal(ids(got), dead) || got[0].Channel != "a" {
			t.Errorf("Replay = %+v, want %v on channel a", got, dead)
		}
		n, _ := b.store.Get(b.ctx, dead[0])
		if n.Status != outbox.StatusQueued || n.AttemptCount != 0 || n.LastError != "boom" || len(n.Attempts) != 1 {
			t.Errorf("replayed row = %+v, want QUEUED, attempts 0, last_error kept, history kept", n)
		}
		if r := b.row(t, live[0]); r.Status != outbox.StatusPending {
			t.Errorf("pending row = %+v, want untouched", r)
		}
		again, err := b.store.Replay(b.ctx, dead)
		if err != nil || len(again) != 0 {
			t.Errorf("second Replay = %v, %v; want nothing (no longer FAILED)", again, err)
		}
	})

	t.Run("after a replay the attempt log keeps both rounds", func(t *testing.T) {
		id := b.failed(t, "a", 1)[0]
		if _, err := b.store.Replay(b.ctx, []int64{id}); err != nil {
			t.Fatal(err)
		}
		c, err := b.store.Claim(b.ctx, []int64{id}, time.Now(), time.Minute)
		if err != nil || c[0].Attempt != 1 {
			t.Fatalf("Claim after replay = %+v, %v; want attempt 1", c, err)
		}
		settle(t, b, outbox.Settlement{ID: id, Attempt: 1, Result: outbox.ResultSent})
		n, _ := b.store.Get(b.ctx, id)
		if n.Status != outbox.StatusSent || len(n.Attempts) != 2 || n.Attempts[1].Outcome != outbox.OutcomeSuccess {
			t.Errorf("row = %+v, want SENT with two attempt rows, the last a success", n)
		}
	})

	t.Run("by channel, up to limit", func(t *testing.T) {
		mine := b.failed(t, "replay-me", 3)
		other := b.failed(t, "other", 1)
		got, err := b.store.ReplayChannel(b.ctx, "replay-me", 0, 2)
		if err != nil {
			t.Fatalf("ReplayChannel: %v", err)
		}
		slices.SortFunc(got, func(x, y outbox.Queued) int { return int(x.ID - y.ID) })
		if !slices.Equal(ids(got), mine[:2]) {
			t.Errorf("ReplayChannel = %v, want the two lowest ids %v", ids(got), mine[:2])
		}
		// The first two fail again: a pass after the last id it replayed
		// does not visit them a second time.
		if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET status = 'FAILED' WHERE id = ANY($1)`, mine[:2]); err != nil {
			t.Fatal(err)
		}
		got, err = b.store.ReplayChannel(b.ctx, "replay-me", mine[1], 2)
		if err != nil || !slices.Equal(ids(got), mine[2:]) {
			t.Errorf("second ReplayChannel = %v, %v; want %v", ids(got), err, mine[2:])
		}
		if r := b.row(t, other[0]); r.Status != outbox.StatusFailed {
			t.Errorf("other channel's row = %+v, want still FAILED", r)
		}
		if _, err := b.store.ReplayChannel(b.ctx, "", 0, 2); err == nil {
			t.Error("ReplayChannel(\"\"): want an error")
		}
	})
}

func TestStore_PurgeFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.failed(t, "a", 3)
	other := b.failed(t, "b", 2)
	live := b.insertN(t, 1)

	n, err := b.store.PurgeFailed(b.ctx, "", []int64{a[0], other[0], live[0]})
	if err != nil || n != 2 {
		t.Fatalf("PurgeFailed(ids) = %d, %v; want 2", n, err)
	}
	if _, err := b.store.Get(b.ctx, a[0]); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Get purged row: %v, want ErrNotFound", err)
	}
	if c := b.count(t, `SELECT count(*) FROM notification_attempts WHERE notification_id = ANY($1)`, []int64{a[0], other[0]}); c != 0 {
		t.Errorf("attempt rows of purged notifications = %d, want 0", c)
	}
	if r := b.row(t, live[0]); r.Status != outbox.StatusPending {
		t.Errorf("live row = %+v, want kept", r)
	}

	n, err = b.store.PurgeFailed(b.ctx, "a", []int64{other[1]})
	if err != nil || n != 0 {
		t.Errorf("PurgeFailed(channel a, id of channel b) = %d, %v; want 0", n, err)
	}
	n, err = b.store.PurgeFailed(b.ctx, "a", nil)
	if err != nil || n != 2 {
		t.Errorf("PurgeFailed(channel a) = %d, %v; want 2", n, err)
	}
	if r := b.row(t, other[1]); r.Status != outbox.StatusFailed {
		t.Errorf("channel b row = %+v, want kept", r)
	}
	if c := b.count(t, `SELECT count(*) FROM notification_attempts`); c != 1 {
		t.Errorf("attempt rows left = %d, want 1 (channel b's)", c)
	}
	if _, err := b.store.PurgeFailed(b.ctx, "", nil); err == nil {
		t.Error("PurgeFailed with neither channel nor ids: want an error")
	}
}

func TestStore_Sweep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	old := now.Add(-time.Hour)
	rows := b.insertN(t, 7)
	b.force(t, outbox.StatusQueued, 0, old, rows[0])
	b.force(t, outbox.StatusProcessing, 1, old, rows[1])
	b.force(t, outbox.StatusQueued, 0, now, rows[2]) // fresh
	b.force(t, outbox.StatusSent, 1, old, rows[3])
	b.force(t, outbox.StatusFailed, 1, old, rows[4])
	b.force(t, outbox.StatusCancelled, 0, old, rows[5])
	b.force(t, outbox.StatusPending, 0, old, rows[6])
	next := now.Add(time.Minute).Truncate(time.Microsecond)
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET next_attempt_at = $2 WHERE id = $1`, rows[0], next); err != nil {
		t.Fatal(err)
	}

	t.Run("old in-flight rows", func(t *testing.T) {
		got, err := b.store.Sweep(b.ctx, now.Add(-time.Minute), 0, 100)
		if err != nil {
			t.Fatalf("Sweep: %v", err)
		}
		want := []outbox.Queued{{ID: rows[0], Channel: "ch", NextAttemptAt: next}, {ID: rows[1], Channel: "ch"}}
		if !slices.EqualFunc(got, want, func(x, y outbox.Queued) bool {
			return x.ID == y.ID && x.Channel == y.Channel && x.NextAttemptAt.Equal(y.NextAttemptAt)
		}) {
			t.Errorf("Sweep = %+v, want %+v", got, want)
		}
	})

	t.Run("resync: every in-flight row, paged by id", func(t *testing.T) {
		farFuture := now.Add(100 * 365 * 24 * time.Hour)
		var all []int64
		after := int64(0)
		for {
			page, err := b.store.Sweep(b.ctx, farFuture, after, 1)
			if err != nil {
				t.Fatalf("Sweep: %v", err)
			}
			if len(page) == 0 {
				break
			}
			all = append(all, ids(page)...)
			after = page[len(page)-1].ID
		}
		if want := rows[:3]; !slices.Equal(all, want) {
			t.Errorf("resync = %v, want %v", all, want)
		}
		if r := b.row(t, rows[0]); r.Status != outbox.StatusQueued {
			t.Errorf("Sweep changed a row: %+v", r)
		}
	})
}

func TestStore_Get(t *testing.T) {
	t.Parallel()
	b := setup(t)
	n := notif(1)
	n.IdempotencyKey = "get-me"
	id := b.insert(t, n)[0]

	byKey, err := b.store.GetByIdempotencyKey(b.ctx, "get-me")
	if err != nil || byKey.ID != id || len(byKey.Attempts) != 0 {
		t.Errorf("GetByIdempotencyKey = %+v, %v; want id %d, no attempts", byKey, err, id)
	}
	if _, err := b.store.Get(b.ctx, id+1000); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Get(missing) = %v, want ErrNotFound", err)
	}
	if _, err := b.store.GetByIdempotencyKey(b.ctx, "nope"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("GetByIdempotencyKey(missing) = %v, want ErrNotFound", err)
	}
	if _, err := b.store.GetByIdempotencyKey(b.ctx, ""); err == nil || errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("GetByIdempotencyKey(\"\") = %v, want an empty-key error", err)
	}
}

func TestStore_ListFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.failed(t, "a", 5)
	other := b.failed(t, "b", 2)
	b.insertN(t, 3)

	page := func(ch string, limit int) []int64 {
		var all []int64
		after := int64(0)
		for {
			ns, _, err := b.store.ListFailed(b.ctx, ch, after, limit)
			if err != nil {
				t.Fatalf("ListFailed(%q): %v", ch, err)
			}
			if len(ns) > limit {
				t.Fatalf("ListFailed(limit %d) returned %d", limit, len(ns))
			}
			for _, n := range ns {
				if n.Status != outbox.StatusFailed || n.LastError != "boom" || (ch != "" && n.Channel != ch) {
					t.Errorf("ListFailed row = %+v, want FAILED on %q with last_error", n, ch)
				}
				all = append(all, n.ID)
			}
			if len(ns) < limit {
				return all
			}
			after = ns[len(ns)-1].ID
		}
	}
	if got := page("a", 2); !slices.Equal(got, a) {
		t.Errorf("ListFailed(a) pages = %v, want %v", got, a)
	}
	if got, want := page("", 3), append(slices.Clone(a), other...); !slices.Equal(got, want) {
		t.Errorf("ListFailed(all) pages = %v, want %v", got, want)
	}
	if _, _, err := b.store.ListFailed(b.ctx, "a", 0, 0); err == nil {
		t.Error("ListFailed(limit 0): want an error")
	}
}

// TestStore_ReadsClampTimes: a timestamptz an application's SQL wrote reads
// back clamped to the years 1 to 9999, on the row, its attempt log and its
// receipt. Before, 'infinity' and '-infinity' (which pgx cannot scan into a
// time.Time) failed every read that met the row — the DLQ page of its
// channel and of every channel, Get, the lookup by recipient — for the other
// rows on the page too; a year past 9999 read, but failed the API's answer
// (encoding/json prints years 0 to 9999 only).
func TestStore_ReadsClampTimes(t *testing.T) {
	t.Parallel()
	lo, hi := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	field := map[string]func(*outbox.Notification) time.Time{
		"created_at":      func(n *outbox.Notification) time.Time { return n.CreatedAt },
		"due_at":          func(n *outbox.Notification) time.Time { return n.DueAt },
		"updated_at":      func(n *outbox.Notification) time.Time { return n.UpdatedAt },
		"next_attempt_at": func(n *outbox.Notification) time.Time { return n.NextAttemptAt },
		"sent_at":         func(n *outbox.Notification) time.Time { return n.SentAt },
	}
	for col, get := range field {
		for _, tt := range []struct {
			v    string
			want time.Time
		}{{"infinity", hi}, {"-infinity", lo}, {"12000-01-01", hi}} {
			t.Run(col+"="+tt.v, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				good := b.insertN(t, 3)
				b.force(t, "FAILED", 1, time.Now(), good...)
				var bad int64
				if err := b.db.Pool.QueryRow(b.ctx, `
					WITH n AS (
						INSERT INTO notifications (channel, recipient, payload, status, attempts, last_error, idempotency_key, `+col+`)
						VALUES ('ch', 'user-0', '{}', 'FAILED', 1, 'written by SQL', 'bad', $1) RETURNING id),
					a AS (
						INSERT INTO notification_attempts (notification_id, attempt, started_at, finished_at, outcome)
						SELECT id, 1, '-infinity', $1, 'PERMANENT' FROM n),
					r AS (
						INSERT INTO notification_receipts (notification_id, outcome, attempt, reported_at, received_at)
						SELECT id, 'DELIVERED', 1, $1, $1 FROM n)
					SELECT id FROM n`, tt.v).Scan(&bad); err != nil {
					t.Fatal(err)
				}
				if ns, _, err := b.store.ListFailed(b.ctx, "ch", 0, 100); err != nil || len(ns) != 4 {
					t.Errorf("ListFailed(ch) = %d rows, %v; want the 4 dead letters", len(ns), err)
				}
				if ns, _, err := b.store.ListFailed(b.ctx, "", 0, 100); err != nil || len(ns) != 4 {
					t.Errorf("ListFailed(every channel) = %d rows, %v; want 4", len(ns), err)
				}
				if ns, _, err := b.store.ListByRecipient(b.ctx, "user-0", 0, 100); err != nil || len(ns) != 2 {
					t.Errorf("ListByRecipient(user-0) = %d rows, %v; want 2", len(ns), err)
				}
				if _, err := b.store.GetByIdempotencyKey(b.ctx, "bad"); err != nil {
					t.Errorf("GetByIdempotencyKey: %v; want the row", err)
				}
				n, err := b.store.Get(b.ctx, bad)
				if err != nil {
					t.Fatalf("Get(%d): %v; want the row", bad, err)
				}
				if got := get(n); !got.Equal(tt.want) {
					t.Errorf("%s reads %v, want %v", col, got, tt.want)
				}
				if len(n.Attempts) != 1 || !n.Attempts[0].StartedAt.Equal(lo) || !n.Attempts[0].FinishedAt.Equal(tt.want) {
					t.Errorf("attempts = %+v, want one from %v to %v", n.Attempts, lo, tt.want)
				}
				if n.Receipt == nil || !n.Receipt.ReportedAt.Equal(tt.want) || !n.Receipt.ReceivedAt.Equal(tt.want) {
					t.Errorf("receipt = %+v, want reported and received at %v", n.Receipt, tt.want)
				}
				if _, err := json.Marshal(n); err != nil {
					t.Errorf("the row read does not encode: %v", err)
				}
			})
		}
	}
}

func TestStore_CountByStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.failed(t, "a", 2)
	b.insertN(t, 3) // channel ch, PENDING
	b.queue(t, 1)
	got, err := b.store.CountByStatus(b.ctx)
	if err != nil {
		t.Fatalf("CountByStatus: %v", err)
	}
	want := map[string]map[string]int64{"a": {"FAILED": 2}, "ch": {"QUEUED": 4}}
	if len(got) != len(want) || len(got["a"]) != 1 || got["a"]["FAILED"] != 2 || got["ch"]["QUEUED"] != 4 {
		t.Errorf("CountByStatus = %v, want %v", got, want)
	}
}

// notification_count_deltas has no CHECK on its text (migration 00015
// bounded notifications.channel, so no notification can carry a longer
// one): a delta an application's SQL wrote with a 6,400-byte channel that
// does not compress failed every fold for good ("index row size … exceeds
// btree version 4 maximum 2704", on notification_counts' key), so every
// later statement's deltas piled up unfolded and every count read them all.
// A delta no notification can have made — a channel past MaxChannelLen, a
// status past the longest — is dropped by the fold, which goes on.
func TestStore_CompactCounts_deltaNoRowCanHave(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.insertN(t, 3) // ch PENDING +3
	if _, err := b.db.Pool.Exec(b.ctx, `INSERT INTO notification_count_deltas (channel, status, d) VALUES
		((SELECT string_agg(md5(i::text), '') FROM generate_series(1, 200) AS i), 'SENT', 5),
		('app', (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 200) AS i), 7),
		('app', 'SENT', 2)`); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := b.store.CompactCounts(b.ctx); err != nil {
			t.Errorf("CompactCounts: %v", err)
		}
		b.insertN(t, 1) // more deltas: the fold must go on past the bad one
	}
	if _, err := b.store.CompactCounts(b.ctx); err != nil {
		t.Errorf("CompactCounts: %v", err)
	}
	if left := b.count(t, `SELECT count(*) FROM notification_count_deltas`); left != 0 {
		t.Errorf("%d deltas left unfolded; want 0", left)
	}
	counts, err := b.store.CountByStatus(b.ctx)
	if err != nil {
		t.Fatalf("CountByStatus: %v", err)
	}
	if len(counts) != 2 || counts["ch"]["PENDING"] != 5 || counts["app"]["SENT"] != 2 || len(counts["app"]) != 1 {
		t.Errorf("CountByStatus: %d channels, ch PENDING %d, app SENT %d and %d statuses; want ch PENDING 5 and app SENT 2 alone",
			len(counts), counts["ch"]["PENDING"], counts["app"]["SENT"], len(counts["app"]))
	}
}

// A dead-letter page holds at most MaxPageBytes past its first row however
// large a limit it is asked for: 40 rows of 800 KB (within every row bound)
// come in pages of about 21, each saying it was cut, and paging on reads
// every one exactly once.
func TestStore_ListFailed_pageBytes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.db.Pool.Exec(b.ctx, `
		INSERT INTO notifications (channel, recipient, payload, status, attempts, last_error)
		SELECT 'big', 'r' || i, jsonb_build_object('t', repeat('x', 800000)), 'FAILED', 1, 'boom'
		FROM generate_series(1, 40) AS i`); err != nil {
		t.Fatal(err)
	}
	readCutPages(t, 40, 1, func(after int64) ([]outbox.Notification, bool, error) {
		return b.store.ListFailed(b.ctx, "big", after, 1000)
	})
}

// readCutPages pages through want rows of about 800 KB with page (given the
// last id of the page before, 0 first), which must cut each page at
// MaxPageBytes past its first row (plus that row) and read every row exactly
// once over at least two pages, its ids in order (order 1 ascending, -1
// descending).
func readCutPages(t *testing.T, want int, order int64, page func(cursor int64) ([]outbox.Notification, bool, error)) {
	t.Helper()
	seen := map[int64]bool{}
	pages, last := 0, int64(0)
	for cursor := int64(0); ; pages++ {
		ns, cut, err := page(cursor)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, n := range ns {
			if seen[n.ID] {
				t.Fatalf("row %d read twice", n.ID)
			}
			if last != 0 && (n.ID-last)*order <= 0 {
				t.Fatalf("row %d after row %d: out of order", n.ID, last)
			}
			seen[n.ID], last = true, n.ID
			size += len(n.Payload)
		}
		if size > outbox.MaxPageBytes+900_000 {
			t.Errorf("page %d holds %d bytes of payload, over MaxPageBytes (%d) and one row", pages, size, outbox.MaxPageBytes)
		}
		if !cut {
			break
		}
		if len(ns) == 0 || len(ns) >= want {
			t.Fatalf("page %d: %d rows, cut; want some but not all", pages, len(ns))
		}
		cursor = ns[len(ns)-1].ID
	}
	if len(seen) != want || pages < 1 {
		t.Errorf("read %d rows in %d cut pages, want all %d over at least two pages", len(seen), pages, want)
	}
}

// A Get reads the latest MaxHistory attempts of a notification, oldest
// first, and says older ones were left out: every DLQ replay adds attempts,
// so a notification's log has no bound of its own.
func TestStore_GetHistoryBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.failed(t, "a", 1)
	const n = outbox.MaxHistory + 205
	if _, err := b.db.Pool.Exec(b.ctx, `
		INSERT INTO notification_attempts (notification_id, attempt, started_at, finished_at, outcome, error)
		SELECT $1, 1 + i % 5, now() - interval '1 hour' - (($2 - i) * interval '1 second'),
		       now() - interval '1 hour' - (($2 - i) * interval '1 second'), 'TRANSIENT', 'try ' || i
		FROM generate_series(1, $2::int) AS i`, ids[0], n); err != nil {
		t.Fatal(err)
	}
	got, err := b.store.Get(b.ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	last := got.Attempts[len(got.Attempts)-1].Error
	// The log: these n tries, then failed's own attempt ("boom"), the newest.
	if len(got.Attempts) != outbox.MaxHistory || !got.AttemptsCut || got.Attempts[0].Error != fmt.Sprintf("try %d", n-outbox.MaxHistory+2) ||
		last != "boom" {
		t.Errorf("Get: %d attempts (cut %v), first %q, last %q; want the latest %d, oldest first, cut",
			len(got.Attempts), got.AttemptsCut, got.Attempts[0].Error, last, outbox.MaxHistory)
	}
	other := b.failed(t, "a", 1)
	if got, err := b.store.Get(b.ctx, other[0]); err != nil || got.AttemptsCut {
		t.Errorf("Get of a short log: cut %v (%v), want not cut", got.AttemptsCut, err)
	}
}

// CountByStatusOf counts the channels named, whatever their names sort
// after, and the first others by name, saying how many it left out: rows
// written by an application's own SQL may carry any number of channel
// names, and the overview counts every few seconds.
func TestStore_CountByStatusOf(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.db.Pool.Exec(b.ctx, `
		INSERT INTO notifications (channel, recipient, payload, status)
		SELECT 'junk-' || lpad(i::text, 3, '0'), 'r', '{}', 'PENDING' FROM generate_series(1, 150) AS i;
		INSERT INTO notifications (channel, recipient, payload, status)
		SELECT 'zz-configured', 'r' || i, '{}', CASE WHEN i % 2 = 0 THEN 'SENT' ELSE 'FAILED' END FROM generate_series(1, 7) AS i`); err != nil {
		t.Fatal(err)
	}
	counts, omitted, err := b.store.CountByStatusOf(b.ctx, []string{"zz-configured", "idle"}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := counts["zz-configured"]; got["SENT"] != 3 || got["FAILED"] != 4 {
		t.Errorf("zz-configured counts %v, want SENT 3, FAILED 4 (a configured channel is always counted)", got)
	}
	if len(counts) != 101 || counts["junk-001"]["PENDING"] != 1 || counts["junk-100"]["PENDING"] != 1 || counts["junk-101"] != nil {
		t.Errorf("%d channels counted (junk-100 %v, junk-101 %v); want the configured one and junk-001..junk-100", len(counts), counts["junk-100"], counts["junk-101"])
	}
	if omitted != 50 {
		t.Errorf("omitted %d, want 50 (junk-101..junk-150)", omitted)
	}
	// No channel listed at all still says how many were left out.
	if none, omitted, err := b.store.CountByStatusOf(b.ctx, []string{"idle"}, 0); err != nil || len(none) != 0 || omitted != 151 {
		t.Errorf("CountByStatusOf(idle, 0 others) = %d channels, %d omitted (%v); want 0 and 151", len(none), omitted, err)
	}
	all, err := b.store.CountByStatus(b.ctx)
	if err != nil || len(all) != 151 {
		t.Errorf("CountByStatus: %d channels (%v), want all 151", len(all), err)
	}
}
