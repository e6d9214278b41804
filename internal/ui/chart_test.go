package ui

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/service"
)

func TestNewChart(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	t.Run("too few points", func(t *testing.T) {
		if c := newChart(nil); c.Points != 0 || c.Line != "" {
			t.Errorf("empty: %+v", c)
		}
		if c := newChart([]service.Rate{{At: t0, PerSec: 3}}); c.Line != "" || c.Last != 3 {
			t.Errorf("one point: %+v, want no line and last 3", c)
		}
	})
	t.Run("line within the box, peak on top", func(t *testing.T) {
		c := newChart([]service.Rate{{At: t0, PerSec: 0}, {At: t0.Add(5 * time.Second), PerSec: 40}, {At: t0.Add(10 * time.Second), PerSec: 10}})
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
		c := newChart([]service.Rate{{At: t0, PerSec: 0.2}, {At: t0.Add(time.Second), PerSec: 0.2}})
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
