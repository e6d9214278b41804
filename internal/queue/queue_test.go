package queue

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

const ch = "email"

func TestQueue_Push(t *testing.T) {
	t.Parallel()

	t.Run("empty batch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		n, err := b.q.Push(b.ctx, ch, nil)
		if err != nil || n != 0 {
			t.Fatalf("Push(nil) = %d, %v; want 0, nil", n, err)
		}
		if keys, _ := b.c.Keys(b.ctx, b.r.Prefix+"*").Result(); len(keys) != 0 {
			t.Errorf("empty push created keys %v", keys)
		}
	})

	t.Run("ready in push order", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if n := b.push(t, ch, 3, 1, 2); n != 3 {
			t.Errorf("added = %d, want 3", n)
		}
		b.renew(t, ch, "a")
		wantIDs(t, "fetched", b.fetch(t, ch, "a", 10), []int64{3, 1, 2})
	})

	t.Run("duplicates in one batch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.q.keys(ch)
		if n := b.push(t, ch, 5, 5, 6, 5, 6); n != 2 {
			t.Errorf("added = %d, want 2", n)
		}
		wantIDs(t, "ready", sorted(b.list(t, k.ready())), []int64{5, 6})
		wantIDs(t, "members", b.set(t, k.members()), []int64{5, 6})
	})

	t.Run("idempotent wherever the id is", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.q.keys(ch)
		b.push(t, ch, 1, 2, 3)
		b.renew(t, ch, "a")
		b.fetch(t, ch, "a", 1) // 1 → processing
		due := time.Now().Add(time.Hour)
		if err := b.q.Retry(b.ctx, ch, "a", []Item{{ID: 1, Due: due}}); err != nil {
			t.Fatal(err)
		}
		b.fetch(t, ch, "a", 1) // 2 → processing; 1 delayed, 3 ready
		if n := b.push(t, ch, 1, 2, 3); n != 0 {
			t.Errorf("added = %d, want 0 for ids already queued", n)
		}
		wantIDs(t, "ready", b.list(t, k.ready()), []int64{3})
		wantIDs(t, "processing", b.list(t, k.processing("a")), []int64{2})
		if got, want := b.zset(t, k.delayed()), due.UnixMilli(); len(got) != 1 || got[1] != want {
			t.Errorf("delayed = %v, want {1: %d} (backoff kept)", got, want)
		}
	})

	t.Run("future due is delayed, past due is ready", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.q.keys(ch)
		future := time.Now().Add(time.Minute)
		n, err := b.q.Push(b.ctx, ch, []Item{
			{ID: 1, Due: future},
			{ID: 2, Due: time.Now().Add(-time.Minute)},
			{ID: 3},
			{ID: 1}, // a repeat: the first due wins
		})
		if err != nil || n != 3 {
			t.Fatalf("Push = %d, %v; want 3, nil", n, err)
		}
		wantIDs(t, "ready", b.list(t, k.ready()), []int64{3, 2})
		if got := b.zset(t, k.delayed()); len(got) != 1 || got[1] != future.UnixMilli() {
			t.Errorf("delayed = %v, want {1: %d}", got, future.UnixMilli())
		}
	})

	t.Run("10k ids with duplicates", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.q.keys(ch)
		ids := append(seq(1, 10000), seq(1, 500)...) // 500 repeats, across chunks
		if n := b.push(t, ch, ids...); n != 10000 {
			t.Errorf("added = %d, want 10000", n)
		}
		wantIDs(t, "members", b.set(t, k.members()), seq(1, 10000))
		wantIDs(t, "ready", sorted(b.list(t, k.ready())), seq(1, 10000))
		if n := b.push(t, ch, ids...); n != 0 {
			t.Errorf("added again = %d, want 0", n)
		}
	})

	t.Run("bad channel", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, name := range []string{"", "a{b", "a}b"} {
			_, err := b.q.Push(b.ctx, name, []Item{{ID: 1}})
			if !errors.Is(err, ErrChannelName) || !strings.Contains(err.Error(), "channel name") {
				t.Errorf("Push(channel %q) error = %v, want ErrChannelName, naming the channel name", name, err)
			}
		}
	})
}

func TestQueue_Fetch(t *testing.T) {
	t.Parallel()

	t.Run("needs a lease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.push(t, ch, 1)
		_, err := b.q.Fetch(b.ctx, ch, "a", 1, 0)
		if !errors.Is(err, ErrNoLease) {
			t.Fatalf("Fetch without lease error = %v, want ErrNoLease", err)
		}
		if err := b.q.Renew(b.ctx, ch, "a", time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		if _, err := b.q.Fetch(b.ctx, ch, "a", 1, time.Second); !errors.Is(err, ErrNoLease) {
			t.Fatalf("Fetch with expired lease error = %v, want ErrNoLease", err)
		}
		wantIDs(t, "ready", b.list(t, b.q.keys(ch).ready()), []int64{1})
	})

	t.Run("bad arguments", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, tc := range []struct {
			instance string
			max      int
			wait     time.Duration
			want     string
		}{
			{"", 1, 0, "instance id is empty"},
			{"a", 0, 0, "max must be at least 1"},
			{"a", 1, -time.Second, "wait must not be negative"},
		} {
			_, err := b.q.Fetch(b.ctx, ch, tc.instance, tc.max, tc.wait)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Fetch(%q, %d, %s) error = %v, want %q", tc.instance, tc.max, tc.wait, err, tc.want)
			}
		}
	})

	t.Run("wait 0 on empty returns at once", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.renew(t, ch, "a")
		start := time.Now()
		ids, err := b.q.Fetch(b.ctx, ch, "a", 10, 0)
		if err != nil || len(ids) != 0 {
			t.Fatalf("Fetch = %v, %v; want nothing", ids, err)
		}
		if d := time.Since(start); d > 10*time.Second { // BLMOVE 0 would block for ever
			t.Errorf("Fetch with wait 0 blocked for %s (BLMOVE's smallest timeout is 1ms, not 0)", d)
		}
	})

	t.Run("moves up to max into processing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.q.keys(ch)
		b.push(t, ch, seq(1, 5)...)
		b.renew(t, ch, "a")
		wantIDs(t, "first fetch", b.fetch(t, ch, "a", 3), []int64{1, 2, 3})
		wantIDs(t, "second fetch", b.fetch(t, ch, "a", 3), []int64{4, 5})
		wantIDs(t, "third fetch", b.fetch(t, ch, "a", 3), []int64{})
		wantIDs(t, "members", b.set(t, k.members()), seq(1, 5))
		if n, _ := b.c.Exists(b.ctx, k.ready()).Result(); n != 0 {
			t.Errorf("ready still exists after being emptied")
		}
	})

	t.Run("10k ids", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.push(t, ch, seq(1, 10000)...)
		b.renew(t, ch, "a")
		wantIDs(t, "fetched", b.fetch(t, ch, "a", 20000), seq(1, 10000))
		pending, err := b.q.Pending(b.ctx, ch, "a")
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "pending", pending, seq(1, 10000))
	})

	t.Run("blocks and wakes on push", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.renew(t, ch, "a")
		type result struct {
			ids []int64
			err error
			at  time.Time
		}
		done := make(chan result, 1)
		go func() {
			ids, err := b.q.Fetch(b.ctx, ch, "a", 10, 30*time.Second)
			done <- result{ids, err, time.Now()}
		}()
		time.Sleep(100 * time.Millisecond) // let it block
		select {
		case r := <-done:
			t.Fatalf("Fetch returned %v, %v before any push", r.ids, r.err)
		default:
		}
		pushed := time.Now()
		b.push(t, ch, 7, 8, 9)
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatal(r.err)
			}
			wantIDs(t, "woken fetch", r.ids, []int64{7, 8, 9})
			t.Logf("woke %s after the push", r.at.Sub(pushed))
		case <-time.After(20 * time.Second):
			t.Fatal("Fetch did not wake on push")
		}
		wantIDs(t, "processing", sorted(b.list(t, b.q.keys(ch).processing("a"))), []int64{7, 8, 9})
	})

	t.Run("blocks for wait when nothing comes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.renew(t, ch, "a")
		for _, wait := range []time.Duration{300 * time.Millisecond, 1200 * time.Millisecond} {
			start := time.Now()
			ids, err := b.q.Fetch(b.ctx, ch, "a", 1, wait)
			d := time.Since(start)
			if err != nil || len(ids) != 0 {
				t.Fatalf("Fetch = %v, %v; want nothing", ids, err)
			}
			// Redis times blocked clients out on its ~10ms clock tick.
			if d < wait-20*time.Millisecond {
				t.Errorf("Fetch(wait %s) returned after %s, before the wait was up", wait, d)
			}
		}
	})
}

func TestQueue_Pending(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(t, ch, 1, 2, 3)
	b.renew(t, ch, "a")
	b.fetch(t, ch, "a", 2)
	for range 2 {
		got, err := b.q.Pending(b.ctx, ch, "a")
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "pending", got, []int64{1, 2})
	}
	got, err := b.q.Pending(b.ctx, ch, "never-fetched")
	if err != nil || len(got) != 0 {
		t.Errorf("Pending(unknown instance) = %v, %v; want nothing", got, err)
	}
}

func TestQueue_Ack(t *testing.T) {
	t.Parallel()

	t.Run("removes from processing and members", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.q.keys(ch)
		b.push(t, ch, 1, 2, 3, 4)
		b.renew(t, ch, "a")
		b.fetch(t, ch, "a", 3)
		if err := b.q.Ack(b.ctx, ch, "a", []int64{2, 2, 1, 99}); err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "processing", b.list(t, k.processing("a")), []int64{3})
		wantIDs(t, "members", b.set(t, k.members()), []int64{3, 4})
		wantIDs(t, "ready", b.list(t, k.ready()), []int64{4})
		// Acked ids may be queued again (a new notification never reuses an
		// id, but the sweeper may race an ack).
		if n := b.push(t, ch, 1); n != 1 {
			t.Errorf("push after ack added %d, want 1", n)
		}
	})

	t.Run("empty and unknown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.q.keys(ch)
		b.push(t, ch, 1)
		if err := b.q.Ack(b.ctx, ch, "a", nil); err != nil {
			t.Errorf("Ack(nil) = %v", err)
		}
		if err := b.q.Ack(b.ctx, ch, "a", []int64{1, 2, 3}); err != nil {
			t.Errorf("Ack(unknown) = %v", err)
		}
		wantIDs(t, "members", b.set(t, k.members()), []int64{1})
		wantIDs(t, "ready", b.list(t, k.ready()), []int64{1})
	})

	t.Run("only the acking instance's list", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.q.keys(ch)
		b.push(t, ch, 1, 2)
		b.renew(t, ch, "a")
		b.renew(t, ch, "b")
		b.fetch(t, ch, "a", 1)
		b.fetch(t, ch, "b", 1)
		// a lost id 2 to b (say, through Reap) and acks it late.
		if err := b.q.Ack(b.ctx, ch, "a", []int64{2}); err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "b's processing", b.list(t, k.processing("b")), []int64{2})
		wantIDs(t, "members", b.set(t, k.members()), []int64{1, 2})
	})

	t.Run("few ids against a long list", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.q.keys(ch)
		b.push(t, ch, seq(1, 1000)...)
		b.renew(t, ch, "a")
		b.fetch(t, ch, "a", 1000)
		if err := b.q.Ack(b.ctx, ch, "a", []int64{500, 1, 1000, 5000}); err != nil {
			t.Fatal(err)
		}
		left := slices.DeleteFunc(seq(1, 1000), func(id int64) bool { return id == 1 || id == 500 || id == 1000 })
		wantIDs(t, "processing", sorted(b.list(t, k.processing("a"))), left)
		wantIDs(t, "members", b.set(t, k.members()), left)
	})

	t.Run("10k ids", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.q.keys(ch)
		b.push(t, ch, seq(1, 10000)...)
		b.renew(t, ch, "a")
		b.fetch(t, ch, "a", 10000)
		acks := append(seq(1, 9000), seq(1, 100)...)
		if err := b.q.Ack(b.ctx, ch, "a", acks); err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "processing", sorted(b.list(t, k.processing("a"))), seq(9001, 1000))
		wantIDs(t, "members", b.set(t, k.members()), seq(9001, 1000))
		if err := b.q.Ack(b.ctx, ch, "a", seq(9001, 1000)); err != nil {
			t.Fatal(err)
		}
		if n, _ := b.c.Exists(b.ctx, k.processing("a"), k.members()).Result(); n != 0 {
			t.Errorf("%d of processing, members still exist after acking everything", n)
		}
	})
}

func TestQueue_Retry(t *testing.T) {
	t.Parallel()

	t.Run("to delayed or ready, members kept", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.q.keys(ch)
		b.push(t, ch, 1, 2, 3)
		b.renew(t, ch, "a")
		b.fetch(t, ch, "a", 3)
		due := time.Now().Add(time.Hour)
		err := b.q.Retry(b.ctx, ch, "a", []Item{{ID: 1, Due: due}, {ID: 2}, {ID: 1, Due: time.Now()}, {ID: 42, Due: due}})
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "processing", b.list(t, k.processing("a")), []int64{3})
		wantIDs(t, "ready", b.list(t, k.ready()), []int64{2})
		if got := b.zset(t, k.delayed()); len(got) != 1 || got[1] != due.UnixMilli() {
			t.Errorf("delayed = %v, want {1: %d}", got, due.UnixMilli())
		}
		wantIDs(t, "members", b.set(t, k.members()), []int64{1, 2, 3})
		if err := b.q.Retry(b.ctx, ch, "a", nil); err != nil {
			t.Errorf("Retry(nil) = %v", err)
		}
	})

	t.Run("only the retrying instance's list", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.q.keys(ch)
		b.push(t, ch, 1)
		b.renew(t, ch, "b")
		b.fetch(t, ch, "b", 1)
		if err := b.q.Retry(b.ctx, ch, "a", []Item{{ID: 1, Due: time.Now().Add(time.Hour)}}); err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "b's processing", b.list(t, k.processing("b")), []int64{1})
		if got := b.zset(t, k.delayed()); len(got) != 0 {
			t.Errorf("delayed = %v, want empty", got)
		}
	})

	t.Run("10k ids", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.q.keys(ch)
		b.push(t, ch, seq(1, 10000)...)
		b.renew(t, ch, "a")
		b.fetch(t, ch, "a", 10000)
		if err := b.q.Retry(b.ctx, ch, "a", items(seq(1, 10000), time.Now().Add(time.Hour))); err != nil {
			t.Fatal(err)
		}
		if got := b.zset(t, k.delayed()); len(got) != 10000 {
			t.Errorf("delayed holds %d ids, want 10000", len(got))
		}
		if got := b.list(t, k.processing("a")); len(got) != 0 {
			t.Errorf("processing = %s, want empty", short(got))
		}
	})
}

func TestQueue_Promote(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k := b.q.keys(ch)
	now := time.Now()
	_, err := b.q.Push(b.ctx, ch, []Item{
		{ID: 1, Due: now.Add(3 * time.Minute)},
		{ID: 2, Due: now.Add(1 * time.Minute)},
		{ID: 3, Due: now.Add(2 * time.Minute)},
		{ID: 4, Due: now.Add(time.Hour)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.q.Promote(b.ctx, ch, now, 10); err != nil || n != 0 {
		t.Errorf("Promote(nothing due) = %d, %v; want 0", n, err)
	}
	if n, err := b.q.Promote(b.ctx, ch, now.Add(5*time.Minute), 2); err != nil || n != 2 {
		t.Errorf("Promote(max 2) = %d, %v; want 2", n, err)
	}
	if n, err := b.q.Promote(b.ctx, ch, now.Add(5*time.Minute), 10); err != nil || n != 1 {
		t.Errorf("Promote(rest) = %d, %v; want 1", n, err)
	}
	b.renew(t, ch, "a")
	wantIDs(t, "fetched", b.fetch(t, ch, "a", 10), []int64{2, 3, 1})
	if got := b.zset(t, k.delayed()); len(got) != 1 || got[4] == 0 {
		t.Errorf("delayed = %v, want only 4", got)
	}
	wantIDs(t, "members", b.set(t, k.members()), []int64{1, 2, 3, 4})
	if _, err := b.q.Promote(b.ctx, ch, now, 0); err == nil || !strings.Contains(err.Error(), "max must be at least 1") {
		t.Errorf("Promote(max 0) error = %v", err)
	}

	t.Run("10k ids", func(t *testing.T) {
		b := setup(t)
		if _, err := b.q.Push(b.ctx, ch, items(seq(1, 10000), time.Now().Add(time.Second))); err != nil {
			t.Fatal(err)
		}
		if n, err := b.q.Promote(b.ctx, ch, time.Now().Add(time.Minute), 20000); err != nil || n != 10000 {
			t.Errorf("Promote = %d, %v; want 10000", n, err)
		}
		wantIDs(t, "ready", sorted(b.list(t, b.q.keys(ch).ready())), seq(1, 10000))
	})
}

// DeadOnce lists an id only if it is not on the dead list already: a FAILED
// row pushed again after it was dead-lettered (a relay or resync racing its
// settle) is taken out of processing without being listed twice.
func TestQueue_DeadOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k := b.q.keys(ch)
	b.push(t, ch, 1, 2, 3)
	b.renew(t, ch, "a")
	b.fetch(t, ch, "a", 3)
	if err := b.q.Dead(b.ctx, ch, "a", []int64{1, 2}); err != nil {
		t.Fatal(err)
	}
	b.push(t, ch, 1, 2) // pushed again after they failed
	b.fetch(t, ch, "a", 2)
	if err := b.q.DeadOnce(b.ctx, ch, "a", []int64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	got, err := b.q.DeadList(b.ctx, ch, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "dead, each once", sorted(got), []int64{1, 2, 3})
	wantIDs(t, "processing", b.list(t, k.processing("a")), []int64{})
	wantIDs(t, "members", b.set(t, k.members()), []int64{})
	if err := b.q.DeadOnce(b.ctx, ch, "", []int64{1}); err == nil {
		t.Error("DeadOnce with no instance: no error")
	}
}

func TestQueue_Dead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k := b.q.keys(ch)
	b.push(t, ch, seq(1, 6)...)
	b.renew(t, ch, "a")
	b.fetch(t, ch, "a", 6)
	if err := b.q.Dead(b.ctx, ch, "a", []int64{1, 2, 2, 77}); err != nil {
		t.Fatal(err)
	}
	if err := b.q.Dead(b.ctx, ch, "a", []int64{3, 4, 5}); err != nil {
		t.Fatal(err)
	}
	if err := b.q.Dead(b.ctx, ch, "b", []int64{6}); err != nil { // not b's
		t.Fatal(err)
	}
	wantIDs(t, "processing", b.list(t, k.processing("a")), []int64{6})
	wantIDs(t, "members", b.set(t, k.members()), []int64{6})

	t.Run("list", func(t *testing.T) {
		got, err := b.q.DeadList(b.ctx, ch, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "dead, newest first", got, []int64{5, 4, 3, 2, 1})
		got, _ = b.q.DeadList(b.ctx, ch, 1, 2)
		wantIDs(t, "dead page", got, []int64{4, 3})
		got, _ = b.q.DeadList(b.ctx, ch, 0, 0)
		wantIDs(t, "dead limit 0", got, []int64{})
		if _, err := b.q.DeadList(b.ctx, ch, -1, 2); err == nil || !strings.Contains(err.Error(), "must not be negative") {
			t.Errorf("DeadList(offset -1) error = %v", err)
		}
	})

	t.Run("replay some", func(t *testing.T) {
		b.push(t, ch, 2) // replayed in Postgres and pushed by the sweeper already
		n, err := b.q.DeadReplay(b.ctx, ch, []int64{1, 2, 2, 99})
		if err != nil || n != 2 {
			t.Fatalf("DeadReplay = %d, %v; want 2", n, err)
		}
		got, _ := b.q.DeadList(b.ctx, ch, 0, 100)
		wantIDs(t, "dead", got, []int64{5, 4, 3})
		wantIDs(t, "ready", sorted(b.list(t, k.ready())), []int64{1, 2})
		wantIDs(t, "members", b.set(t, k.members()), []int64{1, 2, 6})
	})

	t.Run("remove some, then all", func(t *testing.T) {
		n, err := b.q.DeadRemove(b.ctx, ch, []int64{4, 4, 100})
		if err != nil || n != 1 {
			t.Fatalf("DeadRemove = %d, %v; want 1", n, err)
		}
		n, err = b.q.DeadRemove(b.ctx, ch, nil)
		if err != nil || n != 2 {
			t.Fatalf("DeadRemove(all) = %d, %v; want 2", n, err)
		}
		if got, _ := b.q.DeadList(b.ctx, ch, 0, 100); len(got) != 0 {
			t.Errorf("dead = %v, want empty", got)
		}
	})

	t.Run("replay all, 10k", func(t *testing.T) {
		b := setup(t)
		k := b.q.keys(ch)
		b.push(t, ch, seq(1, 12000)...)
		b.renew(t, ch, "a")
		b.fetch(t, ch, "a", 12000)
		if err := b.q.Dead(b.ctx, ch, "a", seq(1, 12000)); err != nil {
			t.Fatal(err)
		}
		if got := b.set(t, k.members()); len(got) != 0 {
			t.Fatalf("members hold %d ids after dead-lettering all", len(got))
		}
		n, err := b.q.DeadReplay(b.ctx, ch, nil)
		if err != nil || n != 12000 {
			t.Fatalf("DeadReplay(all) = %d, %v; want 12000", n, err)
		}
		wantIDs(t, "ready", sorted(b.list(t, k.ready())), seq(1, 12000))
		wantIDs(t, "members", b.set(t, k.members()), seq(1, 12000))
		wantIDs(t, "fetched after replay (oldest dead first)", b.fetch(t, ch, "a", 3), []int64{1, 2, 3})
		if got := b.list(t, k.dead()); len(got) != 0 {
			t.Errorf("dead = %s, want empty", short(got))
		}
	})
}

func TestQueue_Stats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(t, ch, seq(1, 10)...)
	if _, err := b.q.Push(b.ctx, ch, items(seq(100, 3), time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	b.renew(t, ch, "a")
	b.renew(t, ch, "b")
	if err := b.q.Renew(b.ctx, ch, "gone", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	b.fetch(t, ch, "a", 4)
	b.fetch(t, ch, "b", 2)
	if err := b.q.Dead(b.ctx, ch, "a", []int64{1}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	got, err := b.q.Stats(b.ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{Ready: 4, Delayed: 3, Processing: 5, Dead: 1, Instances: 2}
	if got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	empty, err := b.q.Stats(b.ctx, "other")
	if err != nil || empty != (Stats{}) {
		t.Errorf("Stats(unused channel) = %+v, %v; want zero", empty, err)
	}
}
