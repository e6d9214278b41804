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
		first, changed, err := b.q.Epoch(b.ctx)
		if err != nil || first == "" || changed {
			t.Fatalf("first Epoch = %q, %v, %v; want a new epoch, unchanged", first, changed, err)
		}
		if got, _ := b.c.Get(b.ctx, b.r.Prefix+":epoch").Result(); got != first {
			t.Errorf("stored epoch = %q, want %q", got, first)
		}
		again, changed, err := b.q.Epoch(b.ctx)
		if err != nil || again != first || changed {
			t.Errorf("second Epoch = %q, %v, %v; want %q, unchanged", again, changed, err, first)
		}
		other := New(b.c, b.r.Prefix) // another instance sees the same epoch
		if got, changed, _ := other.Epoch(b.ctx); got != first || changed {
			t.Errorf("other Queue's Epoch = %q, %v; want %q, unchanged", got, changed, first)
		}

		b.push(t, ch, 1, 2)
		testenv.DeletePrefix(b.ctx, t, b.c, b.r.Prefix) // Redis lost this prefix's data
		next, changed, err := b.q.Epoch(b.ctx)
		if err != nil || next == first || !changed {
			t.Fatalf("Epoch after wipe = %q, %v, %v; want a new epoch, changed", next, changed, err)
		}
		if _, changed, _ := b.q.Epoch(b.ctx); changed {
			t.Errorf("Epoch reported a change twice for one wipe")
		}
		if got, changed, _ := other.Epoch(b.ctx); got != next || !changed {
			t.Errorf("other Queue's Epoch after wipe = %q, %v; want %q, changed", got, changed, next)
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
		first, _, err := q.Epoch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Stop is a SIGKILL and persistence is off: it comes back empty.
		srv.Stop()
		srv.Start()
		var next string
		var changed bool
		// The pool's old connections fail once after the restart.
		for range 5 {
			if next, changed, err = q.Epoch(ctx); err == nil {
				break
			}
		}
		if err != nil || next == first || !changed {
			t.Errorf("Epoch after restart = %q, %v, %v; want a new epoch than %q, changed", next, changed, err, first)
		}
	})
}
