package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
	"golang.org/x/time/rate"
)

func TestPerMinute(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		n     int
		limit rate.Limit
		burst int
	}{
		{0, rate.Inf, 0},
		{2000, 1800.0 / 60, 200},
		{8_000_000, 7_200_000.0 / 60, 800_000},
		{5, 5.0 / 60, 1},
	} {
		if l, b := perMinute(tt.n); l != tt.limit || b != tt.burst {
			t.Errorf("perMinute(%d) = %v, %d; want %v, %d", tt.n, l, b, tt.limit, tt.burst)
		}
	}
}

// TestPacer_reserve drives the buckets on a made-up clock: no sleeping, no
// timing to flake.
func TestPacer_reserve(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)

	t.Run("rpm: a burst of a tenth, then the rest spread over the minute", func(t *testing.T) {
		t.Parallel()
		p := newPacer(100, 0) // burst 10, 90 a minute after it
		for i := range 10 {
			if _, d, ok := p.reserve(t0, time.Time{}, 1); !ok || d != 0 {
				t.Fatalf("request %d: delay %v ok %v; want at once", i, d, ok)
			}
		}
		_, d, _ := p.reserve(t0, time.Time{}, 1)
		if want := time.Minute / 90; d.Round(time.Millisecond) != want.Round(time.Millisecond) {
			t.Errorf("11th request waits %v; want %v", d, want)
		}
		// In any minute: 10 + 90 requests at once, never more.
		n := 11
		for ; ; n++ {
			if _, d, _ := p.reserve(t0, time.Time{}, 1); d > time.Minute {
				break
			}
		}
		if n != 100 {
			t.Errorf("%d requests within the first minute; want 100 (rpm)", n)
		}
	})

	t.Run("tpm: a request over the burst waits for a full bucket", func(t *testing.T) {
		t.Parallel()
		p := newPacer(0, 600) // burst 60 tokens, 9 a second after it
		if _, d, ok := p.reserve(t0, time.Time{}, 1000); !ok || d != 0 {
			t.Errorf("first big request: delay %v ok %v; want at once (a full bucket)", d, ok)
		}
		_, d, ok := p.reserve(t0, time.Time{}, 1000)
		if want := 60 * time.Second / 9; !ok || d.Round(time.Millisecond) != want.Round(time.Millisecond) {
			t.Errorf("second big request: delay %v ok %v; want %v, the time to refill the bucket", d, ok, want)
		}
	})

	t.Run("a wait past the deadline takes nothing", func(t *testing.T) {
		t.Parallel()
		p := newPacer(0, 600)
		p.reserve(t0, time.Time{}, 60)
		_, d, ok := p.reserve(t0, t0.Add(time.Second), 60)
		if ok || d.Round(time.Millisecond) != (60*time.Second/9).Round(time.Millisecond) {
			t.Errorf("delay %v ok %v; want refused, saying 6.667s", d, ok)
		}
		// Refused, it took nothing: the next one waits no longer.
		if _, d2, _ := p.reserve(t0, time.Time{}, 60); d2 != d {
			t.Errorf("after a refusal the wait is %v; want %v (the refused tokens given back)", d2, d)
		}
	})

	t.Run("charge takes the tokens Voyage counted beyond the estimate", func(t *testing.T) {
		t.Parallel()
		p := newPacer(0, 600)
		p.reserve(t0, time.Time{}, 30)
		p.charge(t0, 30)
		if _, d, _ := p.reserve(t0, time.Time{}, 1); d <= 0 {
			t.Errorf("after 30 estimated + 30 charged of a 60 burst the next token waits %v; want a wait", d)
		}
	})

	t.Run("0 is unlimited", func(t *testing.T) {
		t.Parallel()
		p := newPacer(0, 0)
		for range 10_000 {
			if _, d, ok := p.reserve(t0, t0, 1_000_000); !ok || d != 0 {
				t.Fatalf("delay %v ok %v; want never a wait", d, ok)
			}
		}
	})
}

func TestProvider_Configure_pacing(t *testing.T) {
	t.Parallel()
	cfg := func(extra map[string]any) json.RawMessage {
		c := map[string]any{"api_key": testKey, "model": "voyage-3.5"}
		for k, v := range extra {
			c[k] = v
		}
		raw, _ := json.Marshal(c)
		return raw
	}
	p := &provider{}
	get := func(channel string, extra map[string]any) *pacer {
		s, err := p.Configure(context.Background(), sdk.ConfigureRequest{Channel: channel, Config: cfg(extra)})
		if err != nil {
			t.Fatal(err)
		}
		return s.(*sender).pace
	}

	a := get("a", nil)
	if a.rpm != 2000 || a.tpm != 8_000_000 {
		t.Errorf("voyage-3.5 defaults: rpm %d tpm %d; want tier 1's 2000 and 8M", a.rpm, a.tpm)
	}
	if l := get("l", map[string]any{"model": "voyage-3-large"}); l.tpm != 3_000_000 {
		t.Errorf("voyage-3-large: tpm %d; want 3M", l.tpm)
	}
	if u := get("u", map[string]any{"model": "voyage-99-preview"}); u.rpm != 2000 || u.tpm != 3_000_000 {
		t.Errorf("unknown model: rpm %d tpm %d; want the smallest family's 2000 and 3M", u.rpm, u.tpm)
	}
	if a2 := get("a", map[string]any{"rpm": 0, "tpm": 100}); a2 != a || a.rpm != 0 || a.tpm != 100 {
		t.Errorf("channel a again: same pacer %v, rpm %d tpm %d; want the same pacer at 0 and 100", a2 == a, a.rpm, a.tpm)
	}
	if b := get("b", nil); b == a {
		t.Error("channels a and b share a pacer; want one each")
	}
	for _, bad := range []map[string]any{{"rpm": -1}, {"tpm": -5}, {"tpm": "fast"}} {
		_, err := p.Configure(context.Background(), sdk.ConfigureRequest{Channel: "x", Config: cfg(bad)})
		if err == nil || (!strings.Contains(err.Error(), "rpm") && !strings.Contains(err.Error(), "tpm")) {
			t.Errorf("Configure(%v) error = %v; want one naming the key", bad, err)
		}
	}
}

// TestSender_Send_pacedPastDeadline: a send whose pacing wait would outlast
// its deadline is TRANSIENT at once, with the wait as RetryAfter, and never
// reaches Voyage; every sender of the channel shares the budget.
func TestSender_Send_pacedPastDeadline(t *testing.T) {
	t.Parallel()
	f := newFakeVoyage(t)
	p := &provider{}
	raw, _ := json.Marshal(map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5", "tpm": 100})
	s1, err := p.Configure(context.Background(), sdk.ConfigureRequest{Channel: "embed", Config: raw})
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := p.Configure(context.Background(), sdk.ConfigureRequest{Channel: "embed", Config: raw})

	// 600 bytes ≈ 100 tokens: over the 10-token burst, it takes the full bucket.
	big := message(`{"input":"` + strings.Repeat("a", 600) + `"}`)
	if v := s1.Send(context.Background(), big); v.Outcome != sdk.OutcomeSuccess {
		t.Fatalf("first send: %v %q", v.Outcome, v.Detail)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	v := s2.Send(ctx, big)
	if v.Outcome != sdk.OutcomeTransient || v.RetryAfter < 5*time.Second || !strings.Contains(v.Detail, "deadline") {
		t.Errorf("second send = %v retry %v %q; want TRANSIENT with the bucket's refill time (≥ 5s) as RetryAfter", v.Outcome, v.RetryAfter, v.Detail)
	}
	if n := f.hits.Load(); n != 1 {
		t.Errorf("Voyage got %d requests; want 1", n)
	}
}

func TestSender_Send_429(t *testing.T) {
	t.Parallel()
	f := newFakeVoyage(t)
	f.respond = func(w http.ResponseWriter, _ voyageRequest) {
		w.Header().Set("Retry-After", "20")
		w.WriteHeader(http.StatusTooManyRequests)
	}
	v := configure(t, map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5"}).
		Send(context.Background(), message(`{"input":"a"}`))
	if v.Outcome != sdk.OutcomeTransient || v.RetryAfter != 20*time.Second {
		t.Errorf("429: %v retry %v; want TRANSIENT, Retry-After 20s honoured", v.Outcome, v.RetryAfter)
	}
}
