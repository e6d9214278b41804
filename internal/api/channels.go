package api

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"slices"

	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/metrics"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/schedule"
	"github.com/notifyd/notifyd/sdk/wire"
)

// listChannels: GET /v1/channels. Every configured channel, plus any channel
// that only has rows left in the outbox (service.Overview); the counts are
// at most http's counts TTL old.
func (s *Server) listChannels(w http.ResponseWriter, r *http.Request) error {
	ov, err := s.ops.Overview(r.Context(), s.countsTTL)
	if err != nil {
		return err
	}
	if ov.CountErr != nil {
		return ov.CountErr
	}
	out := wire.Channels{Channels: make([]wire.ChannelStats, 0, len(ov.Channels)), CountsAt: ov.CountsAt}
	for _, c := range ov.Channels {
		if c.QueueErr != nil {
			return c.QueueErr
		}
		st, q := c.State, c.Queue
		cs := wire.ChannelStats{
			Name: c.Name, Configured: c.Configured, Plugin: c.Plugin, Counts: c.Counts,
			Running: st.Running, Error: st.Error, Paused: st.Paused, PauseReason: st.Reason, Breaker: st.Breaker,
			Partitions: st.Partitions, PluginRestarts: st.Restarts,
			Ready: q.Ready, Delayed: q.Delayed, Processing: q.Processing, Dead: q.Dead, Instances: q.Instances,
			Sent: c.Counts[outbox.StatusSent], Failed: c.Counts[outbox.StatusFailed],
		}
		out.Channels = append(out.Channels, cs)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// channelNames are the configured channels, sorted.
func (s *Server) channelNames() []string {
	return slices.Sorted(maps.Keys(s.cfg.Channels))
}

// channelStates is the engine's view by name.
func (s *Server) channelStates(ctx context.Context) map[string]delivery.ChannelState {
	out := map[string]delivery.ChannelState{}
	for _, st := range s.engine.Channels(ctx) {
		out[st.Name] = st
	}
	return out
}

// runningPlugins are the plugins of the channels this instance runs, each
// once, sorted.
func (s *Server) runningPlugins(ctx context.Context) []string {
	var out []string
	for _, st := range s.channelStates(ctx) {
		if st.Running && !slices.Contains(out, st.Plugin) {
			out = append(out, st.Plugin)
		}
	}
	slices.Sort(out)
	return out
}

// pluginStates feeds the plugin metrics. A running channel's plugin is
// launched already, so Plugin returns it without starting anything.
func (s *Server) pluginStates(ctx context.Context) []metrics.PluginState {
	if s.plugins == nil {
		return nil
	}
	var out []metrics.PluginState
	for _, name := range s.runningPlugins(ctx) {
		p, err := s.plugins.Plugin(ctx, name)
		if err != nil {
			continue
		}
		out = append(out, metrics.PluginState{Name: name, Up: p.PID() != 0, Restarts: p.Restarts()})
	}
	return out
}

// activeJobs feeds the job metrics: every PENDING and RUNNING job.
func (s *Server) activeJobs(ctx context.Context) ([]metrics.JobProgress, error) {
	var out []metrics.JobProgress
	for _, state := range []schedule.JobState{schedule.JobPending, schedule.JobRunning} {
		jobs, err := s.schedules.ListJobs(ctx, schedule.JobFilter{State: state, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, j := range jobs {
			total := int64(-1)
			if j.Total != nil {
				total = *j.Total
			}
			out = append(out, metrics.JobProgress{
				ID: j.ID, Kind: j.Kind, Schedule: j.Schedule, State: string(j.State), Done: j.Done, Total: total,
			})
		}
	}
	return out, nil
}

// pauseChannel stops every instance sending on a channel; its messages wait
// in the queue. The pause is kept in Postgres, so it survives a Redis wipe.
func (s *Server) pauseChannel(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	var body wire.PauseRequest
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return jsonError(err)
	}
	if len(bytes.TrimSpace(raw)) > 0 { // the body (a reason) is optional
		if e := decodeJSON(bytes.NewReader(raw), &body, false); e != nil {
			return e
		}
	}
	return s.setPaused(w, r, name, true, body.Reason)
}

// resumeChannel lets a paused channel send again.
func (s *Server) resumeChannel(w http.ResponseWriter, r *http.Request) error {
	return s.setPaused(w, r, r.PathValue("name"), false, "")
}

func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, name string, paused bool, reason string) error {
	var err error
	if paused {
		err = s.ops.Pause(r.Context(), name, reason)
	} else {
		err = s.ops.Resume(r.Context(), name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.ChannelControl{Name: name, Paused: paused})
	return nil
}

// channelFlows feeds the channel collector: running, breaker and pause per
// channel.
func (s *Server) channelFlows(ctx context.Context) []metrics.ChannelFlow {
	var out []metrics.ChannelFlow
	for _, st := range s.engine.Channels(ctx) {
		out = append(out, metrics.ChannelFlow{Name: st.Name, Up: st.Running, Paused: st.Paused, Breaker: st.Breaker})
	}
	return out
}

// queueStats is the metrics queue collector's view of one channel's queue.
func (s *Server) queueStats(ctx context.Context, channel string) (metrics.QueueStats, error) {
	st, err := s.engine.Stats(ctx, channel)
	return metrics.QueueStats{Ready: st.Ready, Delayed: st.Delayed, Processing: st.Processing, Dead: st.Dead, Instances: st.Instances}, err
}
