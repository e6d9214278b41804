package notifyd

import (
	"context"
	"encoding/json"

	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/internal/httpguard"
	"github.com/notifyd/notifyd/sdk/wire"
)

// waitServer answers on http.listen while notifyd waits for Postgres and
// Redis (Options.WaitForServices): /healthz 200 — the process is up —,
// /readyz 503 naming what it waits for, and 503 with Retry-After for
// everything else. The API takes its socket over (handOver) once the
// services answer.
type waitServer struct {
	srv  *http.Server
	h    *handoff
	turn net.Listener // the stand-in's turn on the socket

	mu     sync.Mutex
	checks map[string]string // postgres, redis → waiting[: the last error] | ok
}

// conns bounds its connections as the API does (httpguard.Conns): the
// stand-in must answer /healthz however many connections a client holds,
// idle or waiting for bodies that never come.
func startWaitServer(listen string, conns *httpguard.Conns, log hclog.Logger) (*waitServer, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("http.listen %s: %w", listen, err)
	}
	w := &waitServer{h: newHandoff(ln), checks: map[string]string{"postgres": "waiting", "redis": "waiting"}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		writeWaitJSON(rw, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, _ *http.Request) {
		writeWaitJSON(rw, http.StatusServiceUnavailable, wire.Readiness{Status: "unavailable", Checks: w.snapshot()})
	})
	mux.HandleFunc("/", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Retry-After", "1")
		writeWaitJSON(rw, http.StatusServiceUnavailable, wire.ErrorBody{Error: wire.ErrorDetail{
			Code: wire.CodeUnavailable, Message: "notifyd is starting: " + w.waitingFor()}})
	})
	// Served as the API is (httpguard.Conns.Server): its timeouts, and a
	// request serves someone only if it has no body, which none of these
	// routes reads (httpguard.Open). Without them a request whose declared
	// body never came held its connection for good: net/http waited for
	// it after the answer, with no read timeout, and the connection was
	// never closed to admit another.
	open := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		httpguard.Open(r)
		mux.ServeHTTP(rw, r)
	})
	w.srv = conns.Server(open, log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}))
	w.turn = w.h.turn(false)
	go func() { _ = w.srv.Serve(conns.Listener(w.turn)) }()
	return w, nil
}

func (w *waitServer) set(check, state string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checks[check] = state
}

func (w *waitServer) snapshot() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]string, len(w.checks))
	for k, v := range w.checks {
		out[k] = v
	}
	return out
}

func (w *waitServer) waitingFor() string {
	c := w.snapshot()
	switch pg, rd := c["postgres"] != "ok", c["redis"] != "ok"; {
	case pg && rd:
		return "waiting for Postgres and Redis"
	case pg:
		return "waiting for Postgres"
	case rd:
		return "waiting for Redis"
	}
	return "starting the pipeline"
}

// addr is where it listens (the API takes the same address).
func (w *waitServer) addr() net.Addr { return w.h.ln.Addr() }

// listener is the socket for the API (api.Options.Listener): it accepts
// once the stand-in has stopped (handOver), and closing it closes the socket.
func (w *waitServer) listener() net.Listener { return w.h.turn(true) }

// handOver ends the stand-in's turn on the socket, leaving it open for the
// API. Not Shutdown: that drops a connection accepted whose request is not
// read yet; instead what the stand-in accepted gets its answer, and each of
// its connections closes after its response.
func (w *waitServer) handOver() {
	w.srv.SetKeepAlivesEnabled(false)
	_ = w.turn.Close()
}

// stop stops the stand-in and closes the socket (Stop, or a bring-up that
// failed before the API took over).
func (w *waitServer) stop(ctx context.Context) {
	if err := w.srv.Shutdown(ctx); err != nil {
		_ = w.srv.Close()
	}
	w.h.close()
}

func writeWaitJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Backoff between attempts to reach a service: doubling from
// retryFirst up to retryMax, with up to half of it random (so instances
// restarted together do not knock in step).
const (
	retryFirst = 250 * time.Millisecond
	retryMax   = 10 * time.Second
)

// retry calls f until it succeeds or ctx ends, waiting with backoff between
// attempts, logging each failure once at WARN and telling waiting of it
// (f's errors never carry credentials: OpenPostgres redacts them). An error
// no wait cures (final) is returned at once.
func retry(ctx context.Context, log hclog.Logger, what string, f func(context.Context) error, waiting func(error)) error {
	wait := retryFirst
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := f(actx)
		cancel()
		if err == nil {
			if attempt > 1 {
				log.Info(what+" answers", "after_attempts", attempt)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if final(err) {
			return err
		}
		waiting(err)
		d := wait/2 + rand.N(wait/2+1)
		log.Warn("waiting for "+what, "attempt", attempt, "retry_in", d.Round(time.Millisecond), "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
		wait = min(2*wait, retryMax)
	}
}
