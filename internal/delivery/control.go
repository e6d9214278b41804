package delivery

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/queue"
)

// Channels reports each configured channel's state on this instance.
func (e *Engine) Channels(ctx context.Context) []ChannelState {
	out := make([]ChannelState, 0, len(e.channels))
	for _, ch := range e.channels {
		out = append(out, ch.state(ctx))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ErrUnknownChannel is returned for a channel that is not configured.
var ErrUnknownChannel = fmt.Errorf("delivery: unknown channel")

// Pause stops every instance from sending on channel (durably, in Postgres);
// its messages wait in the queue. Resume undoes it.
func (e *Engine) Pause(ctx context.Context, channel, reason string) error {
	return e.setPaused(ctx, channel, true, reason)
}

// Resume lets a paused channel send again.
func (e *Engine) Resume(ctx context.Context, channel string) error {
	return e.setPaused(ctx, channel, false, "")
}

func (e *Engine) setPaused(ctx context.Context, channel string, paused bool, reason string) error {
	if _, ok := e.channels[channel]; !ok {
		return fmt.Errorf("%w %q", ErrUnknownChannel, channel)
	}
	if err := e.store.SetPaused(ctx, channel, paused, reason); err != nil {
		return err
	}
	e.refreshPaused(ctx)
	return nil
}

// refreshPaused reads the paused channels; every instance does so each
// second, so a pause reaches all of them within one.
func (e *Engine) refreshPaused(ctx context.Context) {
	names := make([]string, 0, len(e.channels))
	for name := range e.channels {
		names = append(names, name)
	}
	paused, err := e.store.PausedChannels(ctx, names)
	if err != nil {
		e.log.Warn("read paused channels", "error", err)
		return
	}
	for name, ch := range e.channels {
		reason, p := paused[name]
		if ch.flow.paused.Swap(p) != p {
			e.log.Info("channel pause changed", "channel", name, "paused", p, "reason", reason)
		}
		ch.flow.pauseReason.Store(reason)
	}
}

// Stats sums a channel's queues (all its partitions).
func (e *Engine) Stats(ctx context.Context, channel string) (queue.Stats, error) {
	var total queue.Stats
	for _, q := range e.queuesOf(channel) {
		st, err := e.queue.Stats(ctx, q)
		if err != nil {
			return total, err
		}
		total.Ready += st.Ready
		total.Delayed += st.Delayed
		total.Processing += st.Processing
		total.Dead += st.Dead
		total.Instances = max(total.Instances, st.Instances)
	}
	return total, nil
}

// Revive queues rows a dead-letter replay has just moved FAILED → QUEUED in
// Postgres: it takes them off their channels' dead lists, then pushes them
// (each into its partition). Dead lists first: a row pushed first could fail
// again and be dead-listed anew before the removal wiped that entry. Between
// the two steps a row is in neither list, which loses nothing: it is QUEUED
// in Postgres, and the sweeper pushes it if the push never comes.
func (e *Engine) Revive(ctx context.Context, rows []outbox.Queued) error {
	byChannel := map[string][]int64{}
	for _, q := range rows {
		byChannel[q.Channel] = append(byChannel[q.Channel], q.ID)
	}
	var errs []error
	for ch, ids := range byChannel {
		if err := e.DeadRemove(ctx, ch, ids); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := e.pushQueued(ctx, rows); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// DeadRemove drops ids from a channel's dead-letter lists (after a replay
// or purge in Postgres); no ids means all of them.
func (e *Engine) DeadRemove(ctx context.Context, channel string, ids []int64) error {
	for _, q := range e.queuesOf(channel) {
		if _, err := e.queue.DeadRemove(ctx, q, ids); err != nil {
			return err
		}
	}
	return nil
}

// queuesOf is a channel's queue names; an unconfigured channel has one.
func (e *Engine) queuesOf(channel string) []string {
	if ch, ok := e.channels[channel]; ok {
		return ch.queues
	}
	return []string{channel}
}

// queueOf is the queue a notification of channel lives in.
func (e *Engine) queueOf(channel string, id int64) string {
	if ch, ok := e.channels[channel]; ok {
		return ch.queueOf(id)
	}
	return channel
}

// allQueues is every configured channel's queue names.
func (e *Engine) allQueues() []string {
	var out []string
	for _, ch := range e.channels {
		out = append(out, ch.queues...)
	}
	return out
}
