package ui

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/core/outbox"
)

// maxDuty bounds the share of time the sampler spends counting: after a
// count that took d it waits at least d/maxDuty. CountByStatus reads the
// whole table (about a second per 10M rows), so on a big outbox the samples
// thin out instead of keeping a database core busy.
const maxDuty = 0.05

// sampler counts notifications per channel and status every interval and
// keeps the last points' SENT counts in a ring, from which the Channels page
// draws throughput. Counting in Postgres makes the numbers cluster-wide:
// every instance's sends show, whichever instance serves the page.
type sampler struct {
	store    *outbox.Store
	interval time.Duration
	log      hclog.Logger

	mu      sync.Mutex
	ring    ring[point]
	latest  map[string]map[string]int64 // channel → status → rows, from the last good sample
	at      time.Time                   // when latest was taken
	lastErr error                       // the last sample's error, nil after a good one
}

// point is one sample's SENT count per channel.
type point struct {
	at   time.Time
	sent map[string]int64
}

func newSampler(store *outbox.Store, interval time.Duration, points int, log hclog.Logger) *sampler {
	return &sampler{store: store, interval: interval, log: log, ring: newRing[point](points)}
}

// run samples until ctx is done, calling tick after each sample (the
// session sweep rides along).
func (s *sampler) run(ctx context.Context, tick func()) {
	for {
		started := time.Now()
		s.sample(ctx)
		took := time.Since(started)
		if tick != nil {
			tick()
		}
		wait := max(s.interval, time.Duration(float64(took)/maxDuty))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (s *sampler) sample(parent context.Context) {
	ctx, cancel := context.WithTimeout(parent, max(30*time.Second, 2*s.interval))
	defer cancel()
	counts, err := s.store.CountByStatus(ctx)
	at := time.Now()
	if parent.Err() != nil {
		return // shutting down
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.lastErr == nil { // once per outage, not every interval
			s.log.Warn("throughput sample: count notifications", "error", err)
		}
		s.lastErr = err
		return
	}
	if s.lastErr != nil {
		s.log.Info("throughput sample: counting again")
	}
	sent := make(map[string]int64, len(counts))
	for ch, byStatus := range counts {
		sent[ch] = byStatus[outbox.StatusSent]
	}
	s.ring.push(point{at: at, sent: sent})
	s.latest, s.at, s.lastErr = counts, at, nil
}

// counts returns the last good sample's counts (nil before the first), when
// it was taken, and the error of the latest attempt.
func (s *sampler) counts() (map[string]map[string]int64, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest, s.at, s.lastErr
}

// rate is sends per second between two samples.
type rate struct {
	at     time.Time
	perSec float64
}

// rates is channel's throughput between consecutive samples, oldest first.
// A count that went down (rows deleted) counts as zero, not negative.
func (s *sampler) rates(channel string) []rate {
	s.mu.Lock()
	pts := s.ring.items()
	s.mu.Unlock()
	out := make([]rate, 0, max(len(pts)-1, 0))
	for i := 1; i < len(pts); i++ {
		dt := pts[i].at.Sub(pts[i-1].at).Seconds()
		if dt <= 0 {
			continue
		}
		d := float64(pts[i].sent[channel] - pts[i-1].sent[channel])
		out = append(out, rate{at: pts[i].at, perSec: max(d, 0) / dt})
	}
	return out
}

// ring is a fixed-size ring buffer: push overwrites the oldest item.
type ring[T any] struct {
	buf  []T
	next int // where the next push goes
	full bool
}

func newRing[T any](n int) ring[T] { return ring[T]{buf: make([]T, n)} }

func (r *ring[T]) push(v T) {
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

// items returns a copy, oldest first.
func (r *ring[T]) items() []T {
	if !r.full {
		return append([]T(nil), r.buf[:r.next]...)
	}
	out := make([]T, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// Chart geometry, in SVG user units.
const (
	chartW = 240.0
	chartH = 48.0
)

// chart is a throughput sparkline, drawn as inline SVG by the template.
type chart struct {
	Line   string  // polyline points "x,y x,y …"
	Area   string  // the same, closed along the bottom edge, for the fill
	Last   float64 // latest rate, per second
	Peak   float64 // highest rate in the window
	Span   time.Duration
	Points int
}

// newChart lays rates out over the chart: x by time across the window they
// span, y from 0 to the peak (at least 1/s, so a trickle does not look like
// a flood).
func newChart(rs []rate) chart {
	c := chart{Points: len(rs)}
	if len(rs) < 2 {
		if len(rs) == 1 {
			c.Last, c.Peak = rs[0].perSec, rs[0].perSec
		}
		return c
	}
	first, last := rs[0].at, rs[len(rs)-1].at
	c.Span = last.Sub(first)
	c.Last = rs[len(rs)-1].perSec
	top := 1.0
	for _, r := range rs {
		c.Peak = max(c.Peak, r.perSec)
	}
	top = max(top, c.Peak)
	var line strings.Builder
	for i, r := range rs {
		x := chartW * r.at.Sub(first).Seconds() / c.Span.Seconds()
		y := chartH - 2 - (chartH-4)*r.perSec/top
		if i > 0 {
			line.WriteByte(' ')
		}
		line.WriteString(num(x) + "," + num(y))
	}
	c.Line = line.String()
	c.Area = "0," + num(chartH) + " " + c.Line + " " + num(chartW) + "," + num(chartH)
	return c
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// perSec formats a rate for people: "0", "0.4/s", "12/s", "1.2k/s".
func perSec(f float64) string {
	switch {
	case f == 0:
		return "0/s"
	case f < 10:
		return strconv.FormatFloat(f, 'f', 1, 64) + "/s"
	case f < 1000:
		return fmt.Sprintf("%.0f/s", f)
	default:
		return strconv.FormatFloat(f/1000, 'f', 1, 64) + "k/s"
	}
}
