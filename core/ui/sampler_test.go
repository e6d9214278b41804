package ui

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/core/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
)

func TestRing_Items(t *testing.T) {
	t.Parallel()
	r := newRing[int](3)
	for i, want := range [][]int{{1}, {1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 5}, {4, 5, 6}, {5, 6, 7}} {
		r.push(i + 1)
		if got := r.items(); !slices.Equal(got, want) {
			t.Errorf("after %d pushes: %v, want %v", i+1, got, want)
		}
	}
	got := r.items()
	got[0] = 99
	if r.items()[0] == 99 {
		t.Error("items shares the ring's memory")
	}
}

func TestSampler_Rates(t *testing.T) {
	t.Parallel()
	s := newSampler(nil, time.Second, 4, hclog.NewNullLogger())
	t0 := time.Unix(1_700_000_000, 0)
	for i, sent := range []map[string]int64{
		{"a": 0},
		{"a": 10, "b": 5}, // b appears: counts from 0
		{"a": 10, "b": 5},
		{"a": 4, "b": 25}, // a went down (rows deleted): 0, not negative
		{"a": 24, "b": 25},
	} {
		s.ring.push(point{at: t0.Add(time.Duration(i) * 2 * time.Second), sent: sent})
	}
	// The ring holds 4 points: the first one is gone.
	for ch, want := range map[string][]float64{"a": {0, 0, 10}, "b": {0, 10, 0}, "c": {0, 0, 0}} {
		var got []float64
		for _, r := range s.rates(ch) {
			got = append(got, r.perSec)
		}
		if !slices.Equal(got, want) {
			t.Errorf("rates of %s: %v, want %v", ch, got, want)
		}
	}
}

func TestNewChart(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	t.Run("too few points", func(t *testing.T) {
		if c := newChart(nil); c.Points != 0 || c.Line != "" {
			t.Errorf("empty: %+v", c)
		}
		if c := newChart([]rate{{t0, 3}}); c.Line != "" || c.Last != 3 {
			t.Errorf("one point: %+v, want no line and last 3", c)
		}
	})
	t.Run("line within the box, peak on top", func(t *testing.T) {
		c := newChart([]rate{{t0, 0}, {t0.Add(5 * time.Second), 40}, {t0.Add(10 * time.Second), 10}})
		if c.Last != 10 || c.Peak != 40 || c.Span != 10*time.Second || c.Points != 3 {
			t.Errorf("chart %+v, want last 10, peak 40, span 10s, 3 points", c)
		}
		pts := strings.Fields(c.Line)
		if len(pts) != 3 {
			t.Fatalf("line %q: want 3 points", c.Line)
		}
		var ys []float64
		for i, p := range pts {
			x, y, _ := strings.Cut(p, ",")
			xf, _ := strconv.ParseFloat(x, 64)
			yf, _ := strconv.ParseFloat(y, 64)
			if xf < 0 || xf > chartW || yf < 0 || yf > chartH {
				t.Errorf("point %d (%s) outside %gx%g", i, p, chartW, chartH)
			}
			ys = append(ys, yf)
		}
		if xs := pts[0][:strings.Index(pts[0], ",")]; xs != "0.0" {
			t.Errorf("first x %s, want 0.0", xs)
		}
		if !(ys[1] < ys[2] && ys[2] < ys[0]) {
			t.Errorf("y %v: want the peak highest (smallest y) and zero lowest", ys)
		}
		if !strings.HasPrefix(c.Area, "0,48.0 ") || !strings.HasSuffix(c.Area, " 240.0,48.0") {
			t.Errorf("area %q is not closed along the bottom", c.Area)
		}
	})
	t.Run("a trickle is not drawn as a flood", func(t *testing.T) {
		c := newChart([]rate{{t0, 0.2}, {t0.Add(time.Second), 0.2}})
		_, y, _ := strings.Cut(strings.Fields(c.Line)[0], ",")
		if yf, _ := strconv.ParseFloat(y, 64); yf < chartH/2 {
			t.Errorf("0.2/s drawn at y=%g, want the lower half (the scale is at least 1/s)", yf)
		}
	})
}

func TestPerSec(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]string{0: "0/s", 0.25: "0.2/s", 7.5: "7.5/s", 42.4: "42/s", 1234: "1.2k/s"} {
		if got := perSec(in); got != want {
			t.Errorf("perSec(%g) = %q, want %q", in, got, want)
		}
	}
}

// TestSampler_Sample counts real rows: SENT rows added between two samples
// show as throughput, per channel.
func TestSampler_Sample(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	store := testenv.Store(t, db.Pool)
	ctx := testenv.Context(t)
	s := newSampler(store, time.Second, 10, hclog.NewNullLogger())
	sent := func(channel string, n int) {
		t.Helper()
		_, err := db.Pool.Exec(ctx, `INSERT INTO notifications (channel, recipient, payload, status, sent_at)
SELECT $1, 'r' || g, '{}', 'SENT', now() FROM generate_series(1, $2) g`, channel, n)
		if err != nil {
			t.Fatal(err)
		}
	}
	sent("a", 5)
	s.sample(ctx)
	sent("a", 30)
	sent("b", 12)
	if _, err := store.Insert(ctx, []outbox.NewNotification{{Channel: "b", Recipient: "x", Payload: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	s.sample(ctx)

	counts, at, err := s.counts()
	if err != nil || at.IsZero() {
		t.Fatalf("counts: at %v, err %v", at, err)
	}
	if got := fmt.Sprint(counts); got != "map[a:map[SENT:35] b:map[PENDING:1 SENT:12]]" {
		t.Errorf("counts %s", got)
	}
	for ch, sentBetween := range map[string]float64{"a": 30, "b": 12} {
		rs := s.rates(ch)
		if len(rs) != 1 {
			t.Fatalf("%s: %d rates, want 1", ch, len(rs))
		}
		// The samples are ≥100ms and well under 10s apart.
		if rs[0].perSec <= sentBetween/10 || rs[0].perSec > sentBetween*10 {
			t.Errorf("%s: %g/s for %g sent between samples", ch, rs[0].perSec, sentBetween)
		}
	}
}
