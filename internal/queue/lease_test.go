package queue

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
)

func TestQueue_Renew(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := time.Now()
	if err := b.q.Renew(b.ctx, ch, "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	score, err := b.c.ZScore(b.ctx, b.q.keys(ch).instances(), "a").Result()
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := before.Add(time.Minute).UnixMilli(), time.Now().Add(time.Minute).UnixMilli(); int64(score) < lo || int64(score) > hi {
		t.Errorf("lease expiry = %d, want in [%d, %d]", int64(score), lo, hi)
	}
	for _, tc := range []struct {
		instance string
		ttl      time.Duration
		want     string
	}{
		{"", time.Second, "instance id is empty"},
		{"a", 0, "ttl must be positive"},
	} {
		if err := b.q.Renew(b.ctx, ch, tc.instance, tc.ttl); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Renew(%q, %s) error = %v, want %q", tc.instance, tc.ttl, err, tc.want)
		}
	}
}

func TestQueue_Reap(t *testing.T) {
	t.Parallel()

	t.Run("expired lease's list goes back to ready", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.q.keys(ch)
		b.push(t, ch, seq(1, 6)...)
		if err := b.q.Renew(b.ctx, ch, "a", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		b.renew(t, ch, "b") // one minute
		b.fetch(t, ch, "a", 3)
		b.fetch(t, ch, "b", 2)

		if n, err := b.q.Reap(b.ctx, ch, time.Now()); err != nil || n != 0 {
			t.Fatalf("Reap(now) = %d, %v; want 0 (no lease expired)", n, err)
		}
		n, err := b.q.Reap(b.ctx, ch, time.Now().Add(20*time.Second))
		if err != nil || n != 3 {
			t.Fatalf("Reap(+20s) = %d, %v; want 3", n, err)
		}
		// a's ids come back at the fetching end, oldest first, ahead of 6.
		wantIDs(t, "ready", b.list(t, k.ready()), []int64{6, 3, 2, 1})
		wantIDs(t, "a's processing", b.list(t, k.processing("a")), []int64{})
		wantIDs(t, "b's processing", sorted(b.list(t, k.processing("b"))), []int64{4, 5})
		wantIDs(t, "members", b.set(t, k.members()), seq(1, 6))
		if _, err := b.c.ZScore(b.ctx, k.instances(), "a").Result(); err == nil {
			t.Errorf("a's lease survived the reap")
		}
		if _, err := b.q.Fetch(b.ctx, ch, "a", 1, 0); !errors.Is(err, ErrNoLease) {
			t.Errorf("Fetch by reaped instance error = %v, want ErrNoLease", err)
		}
		// A late ack from a changes nothing; a fresh lease lets it work again.
		if err := b.q.Ack(b.ctx, ch, "a", []int64{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "members after late ack", b.set(t, k.members()), seq(1, 6))
		b.renew(t, ch, "a")
		wantIDs(t, "a fetches again", b.fetch(t, ch, "a", 2), []int64{1, 2})
	})

	t.Run("a lease renewed meanwhile is kept", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.q.keys(ch)
		b.push(t, ch, 1)
		b.renew(t, ch, "a")
		b.fetch(t, ch, "a", 1)
		// The reaper listed a as expired as of a moment when it was not.
		n, err := b.q.reapOne(b.ctx, ch, "a", time.Now(), false)
		if err != nil || n != -1 {
			t.Fatalf("reapOne(live lease) = %d, %v; want -1", n, err)
		}
		wantIDs(t, "a's processing", b.list(t, k.processing("a")), []int64{1})
	})

	t.Run("many reapers at once move each id once", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.q.keys(ch)
		b.push(t, ch, seq(1, 1000)...)
		for _, inst := range []string{"a", "b", "c"} {
			if err := b.q.Renew(b.ctx, ch, inst, time.Second); err != nil {
				t.Fatal(err)
			}
			b.fetch(t, ch, inst, 300)
		}
		later := time.Now().Add(time.Minute)
		results := make(chan int, 4)
		for range 4 {
			go func() {
				n, err := b.q.Reap(b.ctx, ch, later)
				if err != nil {
					t.Error(err)
				}
				results <- n
			}()
		}
		total := 0
		for range 4 {
			total += <-results
		}
		if total != 900 {
			t.Errorf("reapers moved %d ids in total, want 900", total)
		}
		wantIDs(t, "ready", sorted(b.list(t, k.ready())), seq(1, 1000))
	})

	t.Run("empty channel", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if n, err := b.q.Reap(b.ctx, ch, time.Now()); err != nil || n != 0 {
			t.Errorf("Reap(empty) = %d, %v", n, err)
		}
	})
}

func TestQueue_Release(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k := b.q.keys(ch)
	b.push(t, ch, 1, 2, 3)
	b.renew(t, ch, "a")
	b.fetch(t, ch, "a", 2)
	if err := b.q.Release(b.ctx, ch, "a"); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "ready", b.list(t, k.ready()), []int64{3, 2, 1})
	wantIDs(t, "members", b.set(t, k.members()), []int64{1, 2, 3})
	if n, _ := b.c.Exists(b.ctx, k.processing("a")).Result(); n != 0 {
		t.Errorf("processing list survived Release")
	}
	if _, err := b.q.Fetch(b.ctx, ch, "a", 1, 0); !errors.Is(err, ErrNoLease) {
		t.Errorf("Fetch after Release error = %v, want ErrNoLease", err)
	}
	if err := b.q.Release(b.ctx, ch, "a"); err != nil {
		t.Errorf("second Release = %v", err)
	}
}

// The config's bound on delivery.lease_ttl is the lease Renew grants.
func TestMaxLeaseTTL_isTheConfigs(t *testing.T) {
	t.Parallel()
	if MaxLeaseTTL != config.MaxLeaseTTL {
		t.Errorf("queue.MaxLeaseTTL %v, config.MaxLeaseTTL %v: a lease_ttl the config takes must be one Renew grants", MaxLeaseTTL, config.MaxLeaseTTL)
	}
}
