package backoff

import (
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
)

func TestPolicy_Bounds(t *testing.T) {
	t.Parallel()
	window := Policy{Base: time.Second, Max: 16 * time.Second, MaxAttempts: 10, Window: true}
	full := Policy{Base: time.Second, Max: 16 * time.Second, MaxAttempts: 10}
	tests := []struct {
		name   string
		p      Policy
		n      int
		lo, hi time.Duration
	}{
		{"window first", window, 1, 0, time.Second},
		{"window second", window, 2, time.Second, 2 * time.Second},
		{"window third", window, 3, 2 * time.Second, 4 * time.Second},
		{"window capped", window, 6, 8 * time.Second, 16 * time.Second},
		{"window far past cap", window, 60, 8 * time.Second, 16 * time.Second},
		{"full first", full, 1, 0, time.Second},
		{"full fourth", full, 4, 0, 8 * time.Second},
		{"full capped", full, 40, 0, 16 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := tt.p.Bounds(tt.n)
			if lo != tt.lo || hi != tt.hi {
				t.Errorf("Bounds(%d) = [%v, %v], want [%v, %v]", tt.n, lo, hi, tt.lo, tt.hi)
			}
		})
	}
}

func TestPolicy_Delay(t *testing.T) {
	t.Parallel()
	p := FromConfig(config.Retry{Base: time.Second, Max: 16 * time.Second, MaxAttempts: 5, Jitter: config.JitterWindow})
	t.Run("drawn inside the window", func(t *testing.T) {
		for n := 1; n <= 8; n++ {
			lo, hi := p.Bounds(n)
			for range 200 {
				if d := p.Delay(n, 0); d < lo || d > hi {
					t.Fatalf("Delay(%d) = %v, outside [%v, %v]", n, d, lo, hi)
				}
			}
		}
	})
	t.Run("random, not constant", func(t *testing.T) {
		seen := map[time.Duration]bool{}
		for range 50 {
			seen[p.Delay(3, 0)] = true
		}
		if len(seen) < 10 {
			t.Errorf("50 delays gave %d distinct values, want spread", len(seen))
		}
	})
	t.Run("retry-after raises", func(t *testing.T) {
		if got := p.WithRand(func() float64 { return 0 }).Delay(1, 30*time.Second); got != 30*time.Second {
			t.Errorf("Delay with retryAfter 30s = %v, want 30s", got)
		}
	})
	t.Run("retry-after capped", func(t *testing.T) {
		zero := p.WithRand(func() float64 { return 0 })
		// 99999999 s, as a hostile Retry-After once parked a message for 27,777 h.
		if got := zero.Delay(1, 99999999*time.Second); got != config.DefaultMaxRetryAfter {
			t.Errorf("Delay with a years-long retryAfter = %v, want the default cap %v", got, config.DefaultMaxRetryAfter)
		}
		own := zero
		own.MaxRetryAfter = 2 * time.Minute
		if got := own.Delay(1, 10*time.Minute); got != 2*time.Minute {
			t.Errorf("Delay with retryAfter 10m and max_retry_after 2m = %v, want 2m", got)
		}
		if got := zero.Delay(1, -time.Hour); got != 0 {
			t.Errorf("Delay with a negative retryAfter = %v, want 0 (no hint; the window's low end)", got)
		}
	})
	t.Run("retry-after never lowers", func(t *testing.T) {
		pin := p.WithRand(func() float64 { return 0.5 })
		if got := pin.Delay(4, time.Millisecond); got != 6*time.Second {
			t.Errorf("Delay(4) with tiny retryAfter = %v, want 6s (middle of [4s, 8s])", got)
		}
	})
}

func TestPolicy_Exhausted(t *testing.T) {
	t.Parallel()
	p := Policy{Base: time.Second, Max: time.Minute, MaxAttempts: 3}
	for n, want := range map[int]bool{1: false, 2: false, 3: true, 4: true} {
		if got := p.Exhausted(n); got != want {
			t.Errorf("Exhausted(%d) = %v, want %v", n, got, want)
		}
	}
}
