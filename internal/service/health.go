package service

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/notifyd/notifyd/sdk/wire"
)

// PluginHealth is one plugin of the channels running on this instance.
type PluginHealth struct {
	Name     string
	Version  string
	PID      int // 0: its process is down
	Restarts int
	Healthy  bool
	Health   string   // "ok", or why it is not healthy
	Channels []string // the running channels it serves
}

// runningPlugins are the plugins of the channels this instance runs, each
// once with its channels, sorted by name. A running channel's plugin is
// launched already: nothing here starts one.
func (s *Service) runningPlugins(ctx context.Context) []PluginHealth {
	if s.engine == nil || s.plugins == nil {
		return nil
	}
	var out []PluginHealth
	for _, st := range s.engine.Channels(ctx) {
		if !st.Running {
			continue
		}
		i := slices.IndexFunc(out, func(p PluginHealth) bool { return p.Name == st.Plugin })
		if i < 0 {
			out = append(out, PluginHealth{Name: st.Plugin})
			i = len(out) - 1
		}
		out[i].Channels = append(out[i].Channels, st.Name)
	}
	slices.SortFunc(out, func(a, b PluginHealth) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Plugins checks the plugins of the running channels side by side, each
// within the check timeout; none without a plugin host (in-process
// providers).
func (s *Service) Plugins(ctx context.Context) []PluginHealth {
	out := s.runningPlugins(ctx)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			out[i].Version, out[i].PID, out[i].Restarts, out[i].Health = s.pluginHealth(ctx, out[i].Name)
			out[i].Healthy = out[i].Health == "ok"
		})
	}
	wg.Wait()
	return out
}

// pluginHealth asks one plugin for its health: "ok" or the error's text.
func (s *Service) pluginHealth(ctx context.Context, name string) (version string, pid, restarts int, health string) {
	ctx, cancel := context.WithTimeout(ctx, s.checkTO)
	defer cancel()
	p, err := s.plugins.Plugin(ctx, name)
	if err != nil {
		return "", 0, 0, err.Error()
	}
	version, pid, restarts = p.Info().Version, p.PID(), p.Restarts()
	if err := p.Health(ctx); err != nil {
		return version, pid, restarts, err.Error()
	}
	return version, pid, restarts, "ok"
}

// Readiness is what /readyz answers: Postgres and Redis answer a ping, every
// running channel's plugin answers Health, no pipeline stage has gone
// without progress for longer than delivery.stall_after, and no configured
// channel is stopped (unless http.ready_with_stopped_channels). Status is
// "ready" when all hold, else "unavailable". Each failed check is named,
// not why (the answer is open to anyone; the reason goes to the log), except
// for a stopped channel, whose reason is a config mistake the operator must
// see where the orchestrator shows the probe, cut and redacted
// (Service.Channels).
//
// The probe is open to anyone, and each check costs a Postgres and a Redis
// round trip and a health call to every plugin (which may ask its provider):
// the probes that arrive while a check runs share it, and its answer serves
// the probes of the next ReadyReuse too, so a flood of probes costs one
// check a ReadyReuse whatever its size. A probe that gives up waiting (its
// ctx) leaves the check running for the others.
func (s *Service) Readiness(ctx context.Context) (wire.Readiness, error) {
	r := &s.ready
	r.mu.Lock()
	fresh := !r.at.IsZero() && time.Since(r.at) < ReadyReuse
	out, err := r.out, r.err
	r.mu.Unlock()
	if !fresh {
		check := context.WithoutCancel(ctx)
		ch := r.flight.DoChan("readyz", func() (any, error) {
			out, err := s.readiness(check)
			r.mu.Lock()
			r.out, r.err, r.at = out, err, time.Now()
			r.mu.Unlock()
			return out, err
		})
		select {
		case res := <-ch:
			out, err = res.Val.(wire.Readiness), res.Err
		case <-ctx.Done():
			return wire.Readiness{}, ctx.Err()
		}
	}
	// Each caller its own maps: an embedder may change what it is given.
	out.Checks, out.Stopped = maps.Clone(out.Checks), maps.Clone(out.Stopped)
	return out, err
}

// ReadyReuse is how long one readiness check answers the probes after it.
const ReadyReuse = time.Second

// readyShare is the readiness check the probes share (Readiness): the one
// running (flight) and the last one's answer.
type readyShare struct {
	flight singleflight.Group
	mu     sync.Mutex
	at     time.Time // when the last check ended
	out    wire.Readiness
	err    error
	checks atomic.Int64 // checks run, for tests
}

func (s *Service) readiness(ctx context.Context) (wire.Readiness, error) {
	s.ready.checks.Add(1)
	out := wire.Readiness{Status: "ready", Checks: map[string]string{}}
	if err := s.needEngine(); err != nil {
		return out, err
	}
	check := func(name string, f func(ctx context.Context) error) {
		ctx, cancel := context.WithTimeout(ctx, s.checkTO)
		defer cancel()
		if err := f(ctx); err != nil {
			s.log.Warn("readiness check failed", "check", name, "error", err)
			out.Checks[name] = "failed"
			out.Status = "unavailable"
			return
		}
		out.Checks[name] = "ok"
	}
	check("postgres", func(ctx context.Context) error { return s.store.Pool().Ping(ctx) })
	if s.redis != nil {
		check("redis", func(ctx context.Context) error { return s.redis.Ping(ctx).Err() })
	}
	// The plugins' health as the overview shows it (Plugins: side by side,
	// each within the check timeout).
	for _, p := range s.Plugins(ctx) {
		if p.Healthy {
			out.Checks["plugin:"+p.Name] = "ok"
			continue
		}
		s.log.Warn("readiness check failed", "check", "plugin:"+p.Name, "error", p.Health)
		out.Checks["plugin:"+p.Name] = "failed"
		out.Status = "unavailable"
	}
	// A stage that keeps failing (a batch Postgres refuses, a settle that
	// cannot commit) holds up delivery while every ping above succeeds.
	for _, stage := range s.engine.Stalls() {
		s.log.Warn("readiness: pipeline stage stalled", "stage", stage)
		out.Checks["stage:"+stage] = "stalled"
		out.Status = "unavailable"
	}
	// A configured channel that is stopped (its plugin could not start or
	// refused its config) makes the instance unready unless
	// http.ready_with_stopped_channels: a rollout whose plugin fails to start
	// stops at its first instance, while the old ones keep delivering
	// (docs/design.md §1). The engine logged the whole error at its start.
	states, err := s.Channels(ctx)
	if err != nil {
		return out, err
	}
	for _, st := range states {
		if st.Running {
			continue
		}
		out.Checks["channel:"+st.Name] = "stopped"
		if out.Stopped == nil {
			out.Stopped = map[string]string{}
		}
		out.Stopped[st.Name] = st.Error
		if !s.cfg.HTTP.ReadyWithStoppedChannels {
			out.Status = "unavailable"
		}
	}
	return out, nil
}
