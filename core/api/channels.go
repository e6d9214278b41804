package api

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/notifyd/notifyd/core/delivery"
	"github.com/notifyd/notifyd/core/metrics"
	"github.com/notifyd/notifyd/core/outbox"
	"github.com/notifyd/notifyd/core/schedule"
	"github.com/notifyd/notifyd/sdk/client"
)

// countsCache keeps outbox.CountByStatus for ttl: the count is a sequential
// scan (about a second per 10M rows), and a dashboard polling /v1/channels
// every second must not turn into a scan every second. One caller counts at
// a time; the others wait for its result.
type countsCache struct {
	store *outbox.Store
	ttl   time.Duration

	mu     sync.Mutex
	at     time.Time
	counts map[string]map[string]int64
}

func (c *countsCache) get(ctx context.Context) (map[string]map[string]int64, time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts != nil && time.Since(c.at) < c.ttl {
		return c.counts, c.at, nil
	}
	counts, err := c.store.CountByStatus(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	c.counts, c.at = counts, time.Now()
	return counts, c.at, nil
}

// listChannels: GET /v1/channels. Every configured channel, plus any channel
// that only has rows left in the outbox.
func (s *Server) listChannels(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	counts, at, err := s.counts.get(ctx)
	if err != nil {
		return err
	}
	states := s.channelStates(ctx)
	names := s.channelNames()
	for ch := range counts {
		if _, ok := s.cfg.Channels[ch]; !ok {
			names = append(names, ch)
		}
	}
	slices.Sort(names)
	out := client.Channels{Channels: make([]client.ChannelStats, 0, len(names)), CountsAt: at}
	for _, name := range names {
		cs := client.ChannelStats{Name: name, Counts: map[string]int64{}}
		if cfg, ok := s.cfg.Channels[name]; ok {
			cs.Configured, cs.Plugin = true, cfg.Plugin
		}
		if st, ok := states[name]; ok {
			cs.Running, cs.Error = st.Running, st.Error
			cs.Paused, cs.PauseReason, cs.Breaker = st.Paused, st.Reason, st.Breaker
			cs.Partitions, cs.PluginRestarts = st.Partitions, st.Restarts
		}
		qs, err := s.engine.Stats(ctx, name)
		if err != nil && cs.Configured {
			return err
		}
		// An unconfigured channel's name came from the outbox and may not
		// even be a valid queue name: it simply has no queue sizes.
		cs.Ready, cs.Delayed, cs.Processing, cs.Dead, cs.Instances = qs.Ready, qs.Delayed, qs.Processing, qs.Dead, qs.Instances
		for _, st := range []string{outbox.StatusPending, outbox.StatusQueued, outbox.StatusProcessing,
			outbox.StatusSent, outbox.StatusFailed, outbox.StatusCancelled} {
			cs.Counts[st] = counts[name][st]
		}
		cs.Sent, cs.Failed = cs.Counts[outbox.StatusSent], cs.Counts[outbox.StatusFailed]
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
	var body client.PauseRequest
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return jsonError(err)
	}
	if len(bytes.TrimSpace(raw)) > 0 { // the body (a reason) is optional
		if e := decodeJSON(bytes.NewReader(raw), &body, false); e != nil {
			return e
		}
	}
	if len(body.Reason) > outbox.MaxReasonLen {
		return invalid("reason: %d bytes long, at most %d", len(body.Reason), outbox.MaxReasonLen)
	}
	return s.setPaused(w, r, name, true, body.Reason)
}

// resumeChannel lets a paused channel send again.
func (s *Server) resumeChannel(w http.ResponseWriter, r *http.Request) error {
	return s.setPaused(w, r, r.PathValue("name"), false, "")
}

func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, name string, paused bool, reason string) error {
	if _, ok := s.cfg.Channels[name]; !ok {
		return notFound("channel %q is not configured", name)
	}
	var err error
	if paused {
		err = s.engine.Pause(r.Context(), name, reason)
	} else {
		err = s.engine.Resume(r.Context(), name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, client.ChannelControl{Name: name, Paused: paused})
	return nil
}

// channelFlows feeds the channel collector: breaker and pause per channel.
func (s *Server) channelFlows(ctx context.Context) []metrics.ChannelFlow {
	var out []metrics.ChannelFlow
	for _, st := range s.engine.Channels(ctx) {
		out = append(out, metrics.ChannelFlow{Name: st.Name, Paused: st.Paused, Breaker: st.Breaker})
	}
	return out
}
