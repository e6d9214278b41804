package queue

import (
	"testing"

	"github.com/notifyd/notifyd/internal/testenv"
)

func TestQueue_Epoch(t *testing.T) {
	t.Parallel()

	t.Run("keys wiped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		changed, err := b.q.Epoch(b.ctx, ch)
		if err != nil || changed {
			t.Fatalf("first Epoch = %v, %v; want unchanged", changed, err)
		}
		first, _ := b.c.Get(b.ctx, b.r.Prefix+":epoch").Result()
		if first == "" {
			t.Fatalf("no epoch stored under %s:epoch", b.r.Prefix)
		}
		if changed, err := b.q.Epoch(b.ctx, ch); err != nil || changed {
			t.Errorf("second Epoch = %v, %v; want unchanged", changed, err)
		}
		other := New(b.c, b.r.Prefix) // another instance sees the same epoch
		if changed, err := other.Epoch(b.ctx, ch); err != nil || changed {
			t.Errorf("other Queue's first Epoch = %v, %v; want unchanged", changed, err)
		}

		b.push(t, ch, 1, 2)
		testenv.DeletePrefix(b.ctx, t, b.c, b.r.Prefix) // Redis lost this prefix's data
		changed, err = b.q.Epoch(b.ctx, ch)
		if err != nil || !changed {
			t.Fatalf("Epoch after wipe = %v, %v; want changed", changed, err)
		}
		if next, _ := b.c.Get(b.ctx, b.r.Prefix+":epoch").Result(); next == first || next == "" {
			t.Errorf("epoch after wipe = %q, want a new one (was %q)", next, first)
		}
		if changed, _ := b.q.Epoch(b.ctx, ch); changed {
			t.Errorf("Epoch reported a change twice for one wipe")
		}
		if changed, _ := other.Epoch(b.ctx, ch); !changed {
			t.Errorf("other Queue's Epoch after wipe = unchanged; want changed")
		}
	})

	t.Run("one queue's slot wiped", func(t *testing.T) {
		// On a Redis Cluster one shard can lose its data alone: only the
		// epoch in that queue's own hash slot notices.
		t.Parallel()
		b := setup(t)
		if changed, err := b.q.Epoch(b.ctx, "a", "b"); err != nil || changed {
			t.Fatalf("first Epoch = %v, %v; want unchanged", changed, err)
		}
		if err := b.c.Del(b.ctx, b.r.Prefix+":{ch:b}:epoch").Err(); err != nil {
			t.Fatal(err)
		}
		if changed, err := b.q.Epoch(b.ctx, "a", "b"); err != nil || !changed {
			t.Errorf("Epoch after queue b's slot lost its data = %v, %v; want changed", changed, err)
		}
		if changed, err := b.q.Epoch(b.ctx, "a", "b"); err != nil || changed {
			t.Errorf("Epoch again = %v, %v; want unchanged", changed, err)
		}
		if _, err := b.q.Epoch(b.ctx, "bad{name"); err == nil {
			t.Errorf("Epoch of a queue named bad{name: no error")
		}
	})

	t.Run("server restarted empty", func(t *testing.T) {
		t.Parallel()
		srv := testenv.StartRedis(t)
		c, err := Connect(srv.URL, nil, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx := testenv.Context(t)
		q := New(c, "n")
		if _, err := q.Epoch(ctx, "quiz"); err != nil {
			t.Fatal(err)
		}
		// Stop is a SIGKILL and persistence is off: it comes back empty.
		srv.Stop()
		srv.Start()
		var changed bool
		// The pool's old connections fail once after the restart.
		for range 5 {
			if changed, err = q.Epoch(ctx, "quiz"); err == nil {
				break
			}
		}
		if err != nil || !changed {
			t.Errorf("Epoch after restart = %v, %v; want changed", changed, err)
		}
	})
}
