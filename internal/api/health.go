package api

import (
	"context"
	"net/http"

	"github.com/notifyd/notifyd/sdk/wire"
)

// healthz: GET /healthz, open: the process is up and serving.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// readyz: GET /readyz, open: Postgres and Redis answer a ping, every
// running channel's plugin answers Health, no pipeline stage has gone
// without progress for longer than delivery.stall_after, and no configured
// channel is stopped (unless http.ready_with_stopped_channels). 200 when all
// hold, else 503. The answer says which check failed but not why (it is
// unauthenticated; the reason goes to the log), except for a stopped
// channel, whose reason is a config mistake the operator must see where the
// orchestrator shows the probe, cut and redacted (service.Channels).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	out := wire.Readiness{Status: "ready", Checks: map[string]string{}}
	check := func(name string, f func(ctx context.Context) error) {
		ctx, cancel := context.WithTimeout(r.Context(), s.checkTO)
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
	check("redis", func(ctx context.Context) error { return s.redis.Ping(ctx).Err() })
	if s.plugins != nil {
		for _, name := range s.runningPlugins(r.Context()) {
			check("plugin:"+name, func(ctx context.Context) error {
				p, err := s.plugins.Plugin(ctx, name)
				if err != nil {
					return err
				}
				return p.Health(ctx)
			})
		}
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
	// (docs/design.md §1). Its reason is shown fit for an open endpoint
	// (service.Channels); the engine logged the whole error at its start.
	states, err := s.ops.Channels(r.Context())
	if err != nil {
		return err
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
	status := http.StatusOK
	if out.Status != "ready" {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, out)
	return nil
}

// serveMetrics: GET /metrics, Prometheus text format.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	s.metricsHandler.ServeHTTP(w, r)
	return nil
}
