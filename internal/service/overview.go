package service

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Statuses are the notification statuses in the order an overview lists
// them.
var Statuses = []string{
	outbox.StatusPending, outbox.StatusQueued, outbox.StatusProcessing,
	outbox.StatusSent, outbox.StatusFailed, outbox.StatusCancelled,
}

// Overview is every channel at a glance: the configured ones, and any other
// that still has rows in the outbox. It is what could be read, and Unread
// says what could not: one behaviour for every door (docs/design.md §8).
type Overview struct {
	// Channels are by name, each with its engine state (a stopped channel's
	// Error fit to show: Service.Channels), its Redis queue sizes across
	// partitions and its outbox rows by status, cluster-wide (every status
	// present, 0 when none).
	Channels []wire.ChannelStats
	// CountsAt is when the outbox counts were taken (zero: not yet).
	CountsAt time.Time
	// Unread is what could not be read, in the order it was found: the
	// outbox counts (the counts shown are then the last good ones, or none)
	// and each channel whose queue sizes could not be read (shown as 0).
	Unread []Unread
	// OmittedChannels is how many channels that are not configured but have
	// rows are left out of Channels: beside the configured ones, the first
	// MaxUnconfiguredChannels by name are listed.
	OmittedChannels int
}

// Unread is one part of the overview that could not be read.
type Unread struct {
	// Channel is the channel whose queue sizes are missing; "" is the
	// outbox counts.
	Channel string
	Err     error
}

// Err is the first part that could not be read, nil when every part was.
func (o Overview) Err() error {
	if len(o.Unread) == 0 {
		return nil
	}
	return o.Unread[0].Err
}

// CountErr is why the outbox counts could not be read, nil when they were.
func (o Overview) CountErr() error { return o.unread("") }

// QueueErr is why channel's queue sizes could not be read, nil when they
// were.
func (o Overview) QueueErr(channel string) error { return o.unread(channel) }

func (o Overview) unread(channel string) error {
	for _, u := range o.Unread {
		if u.Channel == channel {
			return u.Err
		}
	}
	return nil
}

// Overview reads every channel. The outbox counts come from the last
// sample when it is younger than maxAge, and are counted now otherwise (one
// count at a time: concurrent callers wait for it and share it); maxAge < 0
// takes the last sample whatever its age and never counts on the caller's
// time, for a page that refreshes itself. A part that cannot be read (the
// counts, a channel's queue) does not stop the others: it is named in
// Unread. The only error is a Service without an engine (ErrNoEngine).
func (s *Service) Overview(ctx context.Context, maxAge time.Duration) (Overview, error) {
	if err := s.needEngine(); err != nil {
		return Overview{}, err
	}
	counts, at, countErr := s.counts.get(ctx, maxAge)
	out := Overview{CountsAt: at, OmittedChannels: s.counts.omittedChannels()}
	if countErr != nil {
		out.Unread = append(out.Unread, Unread{Err: countErr})
	}
	states := map[string]delivery.ChannelState{}
	chans, err := s.Channels(ctx)
	if err != nil {
		return Overview{}, err
	}
	for _, st := range chans {
		states[st.Name] = st
	}
	names := s.ChannelNames()
	for ch := range counts {
		if !s.Configured(ch) {
			names = append(names, ch)
		}
	}
	slices.Sort(names)
	out.Channels = make([]wire.ChannelStats, len(names))
	queueErrs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		st := states[name]
		c := wire.ChannelStats{
			Name: name, Counts: make(map[string]int64, len(Statuses)),
			Running: st.Running, Error: st.Error, Paused: st.Paused, PauseReason: st.Reason, Breaker: st.Breaker,
			Partitions: st.Partitions, PluginRestarts: st.Restarts,
		}
		if cfg, ok := s.cfg.Channels[name]; ok {
			c.Configured, c.Plugin = true, cfg.Plugin
		}
		for _, status := range Statuses {
			c.Counts[status] = counts[name][status]
		}
		c.Sent, c.Failed = c.Counts[outbox.StatusSent], c.Counts[outbox.StatusFailed]
		out.Channels[i] = c
		if c.Configured { // an outbox-only name may not even be a valid queue name
			wg.Go(func() {
				q, err := s.engine.Stats(ctx, name)
				queueErrs[i] = err
				c := &out.Channels[i]
				c.Ready, c.Delayed, c.Processing, c.Dead, c.Instances = q.Ready, q.Delayed, q.Processing, q.Dead, q.Instances
			})
		}
	}
	wg.Wait()
	for i, err := range queueErrs {
		if err != nil {
			out.Unread = append(out.Unread, Unread{Channel: names[i], Err: err})
		}
	}
	return out, nil
}

// Rate is the SENT throughput between two samples.
type Rate struct {
	At     time.Time
	PerSec float64
}

// Rates is channel's throughput over the samples the ring holds (ten
// minutes at the default interval), oldest first: the dashboard's chart.
func (s *Service) Rates(channel string) []Rate { return s.counts.rates(channel) }

// maxDuty bounds the share of time the sampler spends counting: after a
// count that took d it waits at least d/maxDuty. CountByStatus reads the
// whole table (about a second per 10M rows), so on a big outbox the samples
// thin out instead of keeping a database core busy.
const maxDuty = 0.05

// counter counts notifications per channel and status — every interval in
// the background, or on demand when the last count is too old — and keeps
// the last points' SENT counts in a ring, for throughput. Counting in
// Postgres makes the numbers cluster-wide: every instance's sends show,
// whichever instance answers.
type counter struct {
	store    *outbox.Store
	interval time.Duration
	log      hclog.Logger

	// counting serialises counts: a caller that finds the sample too old
	// counts under it, and those that wait behind it reuse its result.
	counting sync.Mutex

	// names are the configured channels, always counted; at most
	// MaxUnconfiguredChannels others are (outbox.CountByStatusOf).
	names func() []string

	mu      sync.Mutex
	ring    ring[point]
	omitted int                         // channels with rows the last good count left out
	latest  map[string]map[string]int64 // channel → status → rows, from the last good count
	at      time.Time                   // when latest was taken
	lastErr error                       // the last count's error, nil after a good one
}

// point is one count's SENT rows per channel.
type point struct {
	at   time.Time
	sent map[string]int64
}

// MaxUnconfiguredChannels bounds the channels the overview counts beside the
// configured ones (the first by name): rows written by an application's own
// SQL may carry any number of channel names, and every instance counts every
// few seconds, keeping SamplePoints of them.
const MaxUnconfiguredChannels = 100

func newCounter(store *outbox.Store, interval time.Duration, points int, log hclog.Logger, names func() []string) *counter {
	if names == nil {
		names = func() []string { return nil }
	}
	return &counter{store: store, interval: interval, log: log, ring: newRing[point](points), names: names}
}

// omittedChannels is how many channels with rows the last good count left
// out (past MaxUnconfiguredChannels).
func (c *counter) omittedChannels() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.omitted
}

// run counts until ctx is done, every interval or slower (maxDuty).
func (c *counter) run(ctx context.Context) {
	for {
		started := time.Now()
		c.count(ctx)
		wait := max(c.interval, time.Duration(float64(time.Since(started))/maxDuty))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// get returns the counts, counting first when the last good count is older
// than maxAge (never when maxAge < 0).
func (c *counter) get(ctx context.Context, maxAge time.Duration) (map[string]map[string]int64, time.Time, error) {
	if counts, at, err, fresh := c.snapshot(maxAge); fresh || maxAge < 0 {
		return counts, at, err
	}
	c.counting.Lock()
	defer c.counting.Unlock()
	if counts, at, err, fresh := c.snapshot(maxAge); fresh {
		return counts, at, err // counted by the caller ahead of this one
	}
	c.count(ctx)
	counts, at, err, _ := c.snapshot(maxAge)
	return counts, at, err
}

func (c *counter) snapshot(maxAge time.Duration) (map[string]map[string]int64, time.Time, error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fresh := c.latest != nil && c.lastErr == nil && maxAge >= 0 && time.Since(c.at) < maxAge
	return c.latest, c.at, c.lastErr, fresh
}

// count takes one count, within a bound of its own so a hung Postgres
// cannot hold the counter.
func (c *counter) count(parent context.Context) {
	ctx, cancel := context.WithTimeout(parent, max(30*time.Second, 2*c.interval))
	defer cancel()
	counts, omitted, err := c.store.CountByStatusOf(ctx, c.names(), MaxUnconfiguredChannels)
	at := time.Now()
	if parent.Err() != nil {
		return // the caller is gone, or the service is stopping
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if c.lastErr == nil { // once per outage, not every interval
			c.log.Warn("overview: count notifications", "error", err)
		}
		c.lastErr = err
		return
	}
	if c.lastErr != nil {
		c.log.Info("overview: counting again")
	}
	sent := make(map[string]int64, len(counts))
	for ch, byStatus := range counts {
		sent[ch] = byStatus[outbox.StatusSent]
	}
	c.ring.push(point{at: at, sent: sent})
	if omitted > 0 && c.omitted == 0 {
		c.log.Warn("overview: rows name more channels than are configured; counting the configured ones and the first of the others",
			"counted_others", MaxUnconfiguredChannels, "left_out", omitted)
	}
	c.latest, c.at, c.lastErr, c.omitted = maps.Clone(counts), at, nil, omitted
}

func (c *counter) rates(channel string) []Rate {
	c.mu.Lock()
	pts := c.ring.items()
	c.mu.Unlock()
	out := make([]Rate, 0, max(len(pts)-1, 0))
	for i := 1; i < len(pts); i++ {
		dt := pts[i].at.Sub(pts[i-1].at).Seconds()
		if dt <= 0 {
			continue
		}
		d := float64(pts[i].sent[channel] - pts[i-1].sent[channel])
		out = append(out, Rate{At: pts[i].at, PerSec: max(d, 0) / dt})
	}
	return out
}

// ring is a fixed-size ring buffer, oldest overwritten first.
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

// items are the ring's values, oldest first.
func (r *ring[T]) items() []T {
	if !r.full {
		return append([]T(nil), r.buf[:r.next]...)
	}
	out := make([]T, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}
