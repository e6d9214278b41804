package api

import (
	"net/http"
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
// orchestrator shows the probe, cut and redacted (service.Readiness).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	out, err := s.ops.Readiness(r.Context())
	if err != nil {
		return err
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
