package limit_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/limit"
	"github.com/notifyd/notifyd/internal/testenv"
)

func TestBucket_Take(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	ctx := testenv.Context(t)
	// 10 an hour: a token refills every 6 minutes, so a test stalled by a
	// busy machine between two takes still finds the bucket as it left it.
	b := limit.NewBucket(r.Client, r.Prefix, "c", 10, time.Hour, 5)

	t.Run("burst then empty", func(t *testing.T) {
		got, _, err := b.Take(ctx, 100)
		if err != nil || got != 5 {
			t.Fatalf("Take(100) = %d, %v; want the burst of 5", got, err)
		}
		got, wait, err := b.Take(ctx, 1)
		if err != nil || got != 0 || wait <= 0 || wait > 6*time.Minute {
			t.Fatalf("Take on empty = %d, wait %v, %v; want 0 and a wait of ≤ 6m (10/h)", got, wait, err)
		}
	})
	t.Run("refund", func(t *testing.T) {
		if err := b.Refund(ctx, 3); err != nil {
			t.Fatal(err)
		}
		got, _, err := b.Take(ctx, 10)
		if err != nil || got != 3 {
			t.Fatalf("Take after refund of 3 = %d, %v; want 3", got, err)
		}
	})
}

// Many takers at once never get more than the rate allows.
func TestBucket_Concurrent(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	ctx := testenv.Context(t)
	const rate, burst = 200, 20
	b := limit.NewBucket(r.Client, r.Prefix, "c", rate, time.Second, burst)
	var total atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < time.Second {
				got, wait, err := b.Take(ctx, 7)
				if err != nil {
					t.Error(err)
					return
				}
				total.Add(int64(got))
				if got == 0 {
					time.Sleep(wait)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	max := float64(burst) + rate*elapsed.Seconds()
	if got := float64(total.Load()); got > max+1 || got < 0.5*max { // the ceiling is the promise; a busy machine takes fewer
		t.Errorf("took %v tokens in %v, want about (and never over) %.0f", got, elapsed, max)
	}
}

func TestRecipientCap_Allow(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	ctx := testenv.Context(t)
	seoul, _ := time.LoadLocation("Asia/Seoul")
	c := limit.NewRecipientCap(r.Client, r.Prefix, "c", 2, seoul)
	now := time.Date(2026, 3, 1, 14, 30, 0, 0, time.UTC) // 23:30 in Seoul
	ok, reset, err := c.Allow(ctx, now, []string{"a", "a", "b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, true, true, false}; !equal(ok, want) {
		t.Errorf("Allow = %v, want %v", ok, want)
	}
	if want := time.Date(2026, 3, 2, 0, 0, 0, 0, seoul); !reset.Equal(want) {
		t.Errorf("reset = %v, want Seoul midnight %v", reset, want)
	}
	// The next Seoul day starts a new count.
	ok, _, err = c.Allow(ctx, now.Add(time.Hour), []string{"a"})
	if err != nil || !ok[0] {
		t.Errorf("next day Allow(a) = %v, %v; want allowed", ok, err)
	}
}

func TestBreaker(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	ctx := testenv.Context(t)
	b := limit.NewBreaker(r.Client, r.Prefix, "c")
	state := func() limit.BreakerState {
		t.Helper()
		s, _, err := b.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := state(); s != limit.Closed {
		t.Fatalf("new breaker %s, want closed", s)
	}
	if err := b.Trip(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if s, left, _ := b.State(ctx); s != limit.Open || left <= 0 {
		t.Fatalf("tripped breaker %s (%v left), want open", s, left)
	}
	time.Sleep(350 * time.Millisecond)
	if s := state(); s != limit.HalfOpen {
		t.Fatalf("after cooldown %s, want half-open", s)
	}
	won, err := b.TryProbe(ctx, time.Second)
	if err != nil || !won {
		t.Fatalf("first probe = %v, %v; want won", won, err)
	}
	if won, _ := b.TryProbe(ctx, time.Second); won {
		t.Fatal("second probe won too; want one probe at a time")
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if s := state(); s != limit.Closed {
		t.Fatalf("closed breaker %s", s)
	}
}

func equal(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
