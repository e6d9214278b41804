// Package api is notifyd's HTTP API (docs/design.md §8): JSON over net/http with
// Go's pattern routing, served by `notifyd serve` on http.listen.
//
// Every /v1 route needs a bearer token from http.tokens (compared in
// constant time against every configured token) but a channel's callback
// route, which a provider calls with the channel's own callback secret and
// which is off unless the channel sets one (callback.go); /metrics needs one too
// unless http.public_metrics is set; /healthz and /readyz are open, for load
// balancers and orchestrators, and say nothing secret. With no tokens
// configured the API refuses every /v1 request with 401 (and New logs a
// warning): an open admin API is never the default.
//
// Errors are {"error": {"code", "message"}} with the message naming the
// field or parameter at fault: 400 for a body or parameter that cannot be
// read, 401 for a missing or wrong token, 404 for an unknown id or route,
// 409 for an action the notification's state forbids (cancelling a SENT
// one, replaying one that is not FAILED), 413 for a body over
// http.max_body_bytes, 422 for a well-formed request with an unacceptable
// value (an unknown channel, a payload over http.max_payload_bytes).
// The request and response types are sdk/wire's; docs/openapi.yaml
// describes every route. Every route is a thin door over one operation of a
// service.Operations (docs/design.md §8): it parses the request, calls the
// operation and writes its answer; the API imports no store, queue or plugin
// host.
package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/httpguard"
	"github.com/notifyd/notifyd/internal/metrics"
	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/internal/version"
	"github.com/notifyd/notifyd/sdk/wire"
)

// CountsTTLDefault is the default of Options.CountsTTL.
const CountsTTLDefault = 5 * time.Second

// Waits for the server's shared bounds (its timeouts are httpguard's: every
// server on http.listen has the same).
const (
	// inflightWait is how long a request waits for room under
	// http.max_inflight_body_bytes before it is refused with 503.
	inflightWait = 2 * time.Second
	// answerWait is how long a page waits for its share of the bound on
	// answers in flight (Options.MaxAnswerBytes) before it is refused
	// with 503: a page is answered in well under a second.
	answerWait = 5 * time.Second
)

// Options configure a Server.
type Options struct {
	Config *config.Config // http section and channels; required
	// Ops runs every operation the routes answer (the daemon's
	// *service.Service, or *notifyd.Daemon); required. The API is one of its
	// doors.
	Ops service.Operations
	// UI, when set, is served under /ui/ (the dashboard; it does its own
	// session auth).
	UI http.Handler
	// Metrics is where the API reports and what /metrics serves; nil makes
	// one. The collectors that read the queues, plugins and jobs are the
	// service's, registered on it by the composition root
	// (service.Service.Collectors).
	Metrics *metrics.Registry
	Logger  hclog.Logger
	// CountsTTL is how old the outbox counts /v1/channels answers with may
	// be (a count reads the whole table; the service's sampler keeps one).
	// Default CountsTTLDefault.
	CountsTTL time.Duration
	// Listener, when set, is what Start serves on instead of listening on
	// http.listen (Stop closes it): notifyd hands over the one its stand-in
	// answered on while it waited for Postgres and Redis, so the address
	// never stops accepting.
	Listener net.Listener
	// Tracer records the enqueue's server span, whose trace each new
	// notification keeps (internal/tracing); nil: tracing off.
	Tracer trace.Tracer
	// MaxAnswerBytes bounds the bytes of answers built from rows in flight
	// at once, the API's and the dashboard's together (httpguard.Answers):
	// each page holds its read bound (httpguard.PageCharge, up to about
	// 21 MiB), and each row read alone its own (a notification ~9 MiB),
	// then its encoded answer's size until it has been written; one client
	// address at most its share (httpguard.AnswerShare). Default
	// DefaultMaxAnswerBytes.
	MaxAnswerBytes int64
}

// DefaultMaxAnswerBytes is the default of Options.MaxAnswerBytes: three
// pages of dead letters at their largest at once (about 21 MiB each, read,
// then as much again encoded), many small ones.
const DefaultMaxAnswerBytes = 64 << 20

// Server is the HTTP API.
type Server struct {
	cfg       *config.Config
	ops       service.Operations
	metrics   *metrics.Registry
	tracer    trace.Tracer // nil: off
	log       hclog.Logger
	tokens    tokens
	proxies   httpguard.Proxies
	throttle  *httpguard.Throttle // failed bearer tokens per client
	countsTTL time.Duration
	handler   http.Handler
	// metricsHandler serves s.metrics, built once.
	metricsHandler http.Handler
	ui             http.Handler
	// callbacks are the channels that take callbacks, by name.
	callbacks map[string]callbackDoor

	srv   *http.Server
	ln    net.Listener
	given net.Listener // Options.Listener
}

// New builds the API and its routes; Start serves it.
func New(o Options) (*Server, error) {
	if o.Config == nil || o.Ops == nil {
		return nil, errors.New("api: Config and Ops are required")
	}
	s := &Server{
		cfg: o.Config, ops: o.Ops, metrics: o.Metrics, ui: o.UI, given: o.Listener, tracer: o.Tracer,
		log:       cmp.Or[hclog.Logger](o.Logger, hclog.NewNullLogger()),
		countsTTL: cmp.Or(o.CountsTTL, CountsTTLDefault),
	}
	if s.metrics == nil {
		s.metrics = metrics.New(version.Version)
	}
	s.tokens = newTokens(o.Config.HTTP.Tokens)
	s.callbacks = newCallbackDoors(o.Config)
	proxies, err := httpguard.ParseProxies(o.Config.HTTP.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	s.proxies, s.throttle = proxies, httpguard.NewThrottle(o.Config.HTTP.AuthFailuresPerMinute)
	if s.tokens.empty() {
		s.log.Warn("http.tokens is empty: every /v1 request will be refused with 401; set http.tokens to use the API")
	}
	s.metricsHandler = s.metrics.Handler()
	inflight := cmp.Or(o.Config.HTTP.MaxInflightBodyBytes, config.DefaultMaxInflight)
	share := httpguard.ClientShare(inflight, cmp.Or(o.Config.HTTP.MaxConnectionsPerClient, config.DefaultMaxConnectionsPerClient),
		cmp.Or(o.Config.HTTP.MaxConnections, config.DefaultMaxConnections))
	s.handler = httpguard.NewInflight(inflight, o.Config.HTTP.MaxBodyBytes, share, inflightWait, s.proxies.ClientIP).Wrap(s.routes())
	// One client (address) holds at most its connections' share of the
	// answers in flight, and at least one page at its largest: an answer
	// is held until its client has read it, so without a share three slow
	// readers of big pages held the bound for the write timeout.
	answers := cmp.Or(o.MaxAnswerBytes, DefaultMaxAnswerBytes)
	s.handler = httpguard.NewAnswers(answers, answerWait).PerClient(httpguard.AnswerShare(answers,
		cmp.Or(o.Config.HTTP.MaxConnectionsPerClient, config.DefaultMaxConnectionsPerClient),
		cmp.Or(o.Config.HTTP.MaxConnections, config.DefaultMaxConnections)), s.proxies.ClientIP).Wrap(s.handler)
	return s, nil
}

// Handler is the API as an http.Handler (tests serve it with httptest).
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on http.listen (or serves Options.Listener) in the
// background. A listen error (address in use) is returned at once.
func (s *Server) Start(ctx context.Context) error {
	ln := s.given
	if ln == nil {
		var (
			lc  net.ListenConfig
			err error
		)
		if ln, err = lc.Listen(ctx, "tcp", s.cfg.HTTP.Listen); err != nil {
			return fmt.Errorf("api: listen on %s (http.listen): %w", s.cfg.HTTP.Listen, err)
		}
	}
	conns := httpguard.NewConns(cmp.Or(s.cfg.HTTP.MaxConnections, config.DefaultMaxConnections),
		cmp.Or(s.cfg.HTTP.MaxConnectionsPerClient, config.DefaultMaxConnectionsPerClient), s.proxies)
	ln = conns.Listener(ln)
	s.ln = ln
	s.srv = conns.Server(s.handler, s.log.Named("http").StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}))
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("API server stopped", "error", err)
		}
	}()
	s.log.Info("API listening", "addr", ln.Addr().String(), "public_metrics", s.cfg.HTTP.PublicMetrics)
	return nil
}

// Addr is the address Start listens on (useful with port 0).
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Stop stops accepting requests and waits, until ctx ends, for those in
// flight to finish.
func (s *Server) Stop(ctx context.Context) error {
	if s.srv == nil {
		return nil
	}
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
		return fmt.Errorf("api: shutdown: %w", err)
	}
	return nil
}

// handlerFunc is a route: it writes a success itself and returns any error,
// which serve answers.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// access says who may call a route.
type access int

const (
	open      access = iota // /healthz, /readyz
	token                   // /v1/...
	partner                 // a channel's callback: its own secret, checked by the route
	metricsAc               // /metrics: a token unless http.public_metrics
)

// route is one entry of the route table.
type route struct {
	pattern string
	access  access
	handler func(*Server, http.ResponseWriter, *http.Request) error
}

// routeTable is every route, exactly the list (docs/design.md §8).
var routeTable = []route{
	{"POST /v1/notifications", token, (*Server).enqueue},
	{"GET /v1/notifications/{id}", token, (*Server).getNotification},
	{"POST /v1/notifications/{id}/cancel", token, (*Server).cancel},
	{"GET /v1/dlq", token, (*Server).dlqList},
	{"POST /v1/dlq/replay", token, (*Server).dlqReplay},
	{"POST /v1/dlq/purge", token, (*Server).dlqPurge},
	{"GET /v1/channels", token, (*Server).listChannels},
	{"PUT /v1/subscribers/{id}", token, (*Server).putSubscriber},
	{"GET /v1/subscribers/{id}", token, (*Server).getSubscriber},
	{"DELETE /v1/subscribers/{id}", token, (*Server).deleteSubscriber},
	{"GET /v1/schedules", token, (*Server).listSchedules},
	{"POST /v1/schedules/{name}/run", token, (*Server).runSchedule},
	{"POST /v1/campaigns", token, (*Server).createCampaign},
	{"GET /v1/jobs", token, (*Server).listJobs},
	{"GET /v1/jobs/{id}", token, (*Server).getJob},
	{"POST /v1/channels/{name}/pause", token, (*Server).pauseChannel},
	{"POST /v1/channels/{name}/resume", token, (*Server).resumeChannel},
	{"POST /v1/channels/{name}/callback", partner, (*Server).callback},
	{"GET /metrics", metricsAc, (*Server).serveMetrics},
	{"GET /healthz", open, (*Server).healthz},
	{"GET /readyz", open, (*Server).readyz},
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range routeTable {
		h := rt.handler
		mux.Handle(rt.pattern, s.wrap(rt.access, func(w http.ResponseWriter, r *http.Request) error { return h(s, w, r) }))
	}
	if s.ui != nil {
		mux.Handle("/ui/", s.ui)
	}
	return s.fallback(mux)
}

// Routes lists every route the API serves as "METHOD /path", sorted; the
// OpenAPI test checks docs/openapi.yaml against it.
func Routes() []string {
	out := make([]string, len(routeTable))
	for i, rt := range routeTable {
		out[i] = rt.pattern
	}
	sort.Strings(out)
	return out
}

// wrap applies, in order: metrics, panic recovery, auth, the body limit,
// and the error answer.
func (s *Server) wrap(ac access, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("panic in API handler", "route", r.Pattern, "panic", p, "stack", string(debug.Stack()))
				if !rec.wrote {
					writeError(rec, errorf(http.StatusInternalServerError, wire.CodeInternal, "internal error; see the server log"))
				}
			}
			s.metrics.HTTP().Observe(r.Pattern, rec.code(), time.Since(start))
		}()
		if ac == token || (ac == metricsAc && !s.cfg.HTTP.PublicMetrics) {
			// The token is checked first, whoever shares the client's
			// address: the throttle limits failing requests, never a valid
			// token (a loopback or an untrusted proxy is everyone's
			// address). docs/design.md §10.
			if e := s.tokens.check(r); e != nil {
				if r.Header.Get("Authorization") != "" { // a guess, not a probe without credentials
					who := s.proxies.ClientIP(r)
					if wait := s.throttle.Blocked(who); wait > 0 {
						rec.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
						writeError(rec, errorf(http.StatusTooManyRequests, wire.CodeTooManyRequests,
							"too many requests with a bad token from %s; retry in %s", who, wait.Round(time.Second)))
						return
					}
					s.throttle.Fail(who)
				}
				writeError(rec, e)
				return
			}
		}
		switch {
		case ac == partner: // a callback serves once its secret is checked (callback)
		case ac == open || ac == metricsAc && s.cfg.HTTP.PublicMetrics:
			httpguard.Open(r)
		default:
			if err := httpguard.Serving(r.Context()); err != nil {
				s.answer(rec, r, err)
				return
			}
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(rec, r.Body, s.cfg.HTTP.MaxBodyBytes)
		}
		if e := checkRequestText(r); e != nil {
			writeError(rec, e)
			return
		}
		if e := checkEncoding(ac, r); e != nil {
			writeError(rec, e)
			return
		}
		if err := h(rec, r); err != nil {
			s.answer(rec, r, err)
		}
	})
}

// checkEncoding refuses a body with a Content-Encoding (gzip, say) on a
// route that reads it as JSON: read as sent, its first byte was reported as
// invalid UTF-8, not its encoding. Nothing is decompressed, so a body's
// bound stays its size on the wire. A callback's body goes to its plugin
// with its headers, encoding and all.
func checkEncoding(ac access, r *http.Request) *Error {
	ce := strings.TrimSpace(r.Header.Get("Content-Encoding"))
	if ac == partner || r.ContentLength == 0 || ce == "" || strings.EqualFold(ce, "identity") {
		return nil
	}
	return badRequest("request body has Content-Encoding %q: send it uncompressed (the API reads JSON as sent)", ce)
}

// outageRetryAfter is the Retry-After, in seconds, of a 503 for an
// unreachable Postgres or Redis: the stand-in's while notifyd waits for them.
const outageRetryAfter = 1

// answer writes err: an *Error as it is, a service.Error by its Kind, an
// outage of Postgres or Redis (httpguard.Outage) as 503 with Retry-After,
// anything else as a 500 whose text goes only to the log (it may hold
// database details).
func (s *Server) answer(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if errors.As(err, &e) {
		writeError(w, e)
		return
	}
	var se *service.Error
	if errors.As(err, &se) {
		writeError(w, refusal(se))
		return
	}
	var busy *httpguard.Busy
	if errors.As(err, &busy) {
		w.Header().Set("Retry-After", strconv.Itoa(busy.RetryAfter))
		writeError(w, unavailable("%s", busy.Message))
		return
	}
	if msg, ok := service.StorageRefusal(err); ok {
		// Postgres refused a value of the request (every bound is checked
		// before, so this is a bound that was missed): the client's fault,
		// said without SQLSTATE text.
		s.log.Warn("API request refused by the database", "route", r.Pattern, "error", err)
		writeError(w, invalid("%s", msg))
		return
	}
	if r.Context().Err() != nil {
		// The client went away; nobody reads the answer, nothing to log.
		writeError(w, unavailable("request cancelled"))
		return
	}
	if httpguard.Outage(r.Context(), err) {
		// Postgres or Redis is unreachable or restarting: the request may
		// succeed in a moment, so say when to retry instead of 500.
		s.log.Warn("API request failed: a dependency is unavailable", "route", r.Pattern, "error", err)
		w.Header().Set("Retry-After", strconv.Itoa(outageRetryAfter))
		writeError(w, unavailable("Postgres or Redis is unavailable; retry in %d s", outageRetryAfter))
		return
	}
	s.log.Error("API request failed", "route", r.Pattern, "error", err)
	writeError(w, errorf(http.StatusInternalServerError, wire.CodeInternal, "internal error; see the server log"))
}

// fallback answers unknown routes (404) and wrong methods (405) with the
// JSON error body instead of the mux's plain text.
func (s *Server) fallback(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		probe := &statusRecorder{ResponseWriter: discardWriter{h: http.Header{}}}
		mux.ServeHTTP(probe, r)
		code := probe.code()
		if code == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", probe.Header().Get("Allow"))
			writeError(w, errorf(code, wire.CodeMethodNotAllowed, "%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, probe.Header().Get("Allow")))
		} else {
			writeError(w, notFound("no route %s %s", r.Method, r.URL.Path))
		}
		s.metrics.HTTP().Observe("", code, time.Since(start))
	})
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.status, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) code() int {
	if !r.wrote {
		return http.StatusOK
	}
	return r.status
}

// Unwrap lets http.ResponseController reach the real writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}
