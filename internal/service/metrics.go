package service

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/notifyd/notifyd/internal/metrics"
)

// Collectors are the Prometheus collectors that read the engine, the plugins
// and the jobs through the Service: queue depths, plugin processes, bulk
// job progress, channel flow (running, breaker, pause) and stalled stages.
// The composition root registers them on the registry the API serves at
// /metrics; the doors register none of their own.
func (s *Service) Collectors() []prometheus.Collector {
	cs := []prometheus.Collector{metrics.NewPluginCollector(s.pluginStates)}
	if s.engine != nil {
		cs = append(cs,
			metrics.NewQueueCollector(s.queueStats, s.ChannelNames),
			metrics.NewChannelCollector(s.channelFlows),
			metrics.NewStallCollector(s.engine.Stalled),
		)
	}
	if s.sched != nil {
		cs = append(cs, metrics.NewJobCollector(s.activeJobs))
	}
	return cs
}

// queueStats is one channel's queue, for the queue collector.
func (s *Service) queueStats(ctx context.Context, channel string) (metrics.QueueStats, error) {
	st, err := s.engine.Stats(ctx, channel)
	return metrics.QueueStats{Ready: st.Ready, Delayed: st.Delayed, Processing: st.Processing, Dead: st.Dead, Instances: st.Instances}, err
}

// pluginStates feeds the plugin metrics: a running channel's plugin is
// launched already, so nothing is started and no health call is made.
func (s *Service) pluginStates(ctx context.Context) []metrics.PluginState {
	var out []metrics.PluginState
	for _, p := range s.runningPlugins(ctx) {
		pl, err := s.plugins.Plugin(ctx, p.Name)
		if err != nil {
			continue
		}
		out = append(out, metrics.PluginState{Name: p.Name, Up: pl.PID() != 0, Restarts: pl.Restarts()})
	}
	return out
}

// channelFlows feeds the channel collector: running, breaker and pause per
// channel.
func (s *Service) channelFlows(ctx context.Context) []metrics.ChannelFlow {
	var out []metrics.ChannelFlow
	for _, st := range s.engine.Channels(ctx) {
		out = append(out, metrics.ChannelFlow{Name: st.Name, Up: st.Running, Paused: st.Paused, Breaker: st.Breaker})
	}
	return out
}

// activeJobs feeds the job metrics: every PENDING and RUNNING job (at most
// 1,000 of each), read without its audience, payload or error.
func (s *Service) activeJobs(ctx context.Context) ([]metrics.JobProgress, error) {
	jobs, err := s.sched.ActiveJobs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]metrics.JobProgress, 0, len(jobs))
	for _, j := range jobs {
		total := int64(-1)
		if j.Total != nil {
			total = *j.Total
		}
		out = append(out, metrics.JobProgress{ID: j.ID, Kind: j.Kind, Schedule: j.Schedule, State: j.State, Done: j.Done, Total: total})
	}
	return out, nil
}
