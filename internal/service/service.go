// Package service is every operation of notifyd, implemented once
// (Operations): enqueue, status and cancel, the dead-letter queue (list,
// replay, purge), the channel overview (counts, queue sizes, throughput,
// plugin health), pause and resume, the providers' callbacks, subscribers,
// schedules, campaigns and jobs, and readiness. The doors — the HTTP API
// (internal/api), the dashboard (internal/ui) and, through the API, the CLI
// — are thin: they parse their input, call an Operations, and render its
// answer, in sdk/wire types, their own way, so an operation behaves the same
// whichever door it comes through (docs/design.md §8).
package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/pluginhost"
	"github.com/notifyd/notifyd/internal/queue"
	"github.com/notifyd/notifyd/internal/schedule"
	"github.com/notifyd/notifyd/sdk"
)

// Engine is what the operations use of the delivery engine
// (*delivery.Engine): channel states, the channels' Redis queues, and the
// pipeline's stalls. It is the one view of the engine the doors have, through
// the Service.
type Engine interface {
	// Instance is this instance's id.
	Instance() string
	Channels(ctx context.Context) []delivery.ChannelState
	Stats(ctx context.Context, channel string) (queue.Stats, error)
	Revive(ctx context.Context, rows []outbox.Queued) error
	DeadRemove(ctx context.Context, channel string, ids []int64) error
	Pause(ctx context.Context, channel, reason string) error
	Resume(ctx context.Context, channel string) error
	// Callback hands a provider's callback to the channel's plugin.
	Callback(ctx context.Context, channel string, req sdk.CallbackRequest) (sdk.CallbackAnswer, error)
	// Stalled and Stalls report pipeline stages without progress, for the
	// metric and readiness.
	Stalled() map[string]time.Duration
	Stalls() []string
}

// Defaults for Options.
const (
	// SampleIntervalDefault is how often the overview counts the outbox in
	// the background (it waits longer when the count itself is slow).
	SampleIntervalDefault = 5 * time.Second
	// SamplePoints is how many samples the throughput ring keeps: ten
	// minutes at the default interval.
	SamplePoints = 120
	// ChunkRows is how many rows one replay or purge transaction moves: a
	// dead-letter queue of any size is handled in bounded transactions and
	// never held in memory whole.
	ChunkRows = 1000
	// CheckTimeoutDefault bounds each readiness check and plugin health
	// check.
	CheckTimeoutDefault = 2 * time.Second
)

// Options configure a Service.
type Options struct {
	Config *config.Config // channels, delivery.sweep_after; required
	Store  *outbox.Store  // required
	// Engine is required by the operations that touch the Redis queues or
	// channel states: replay, purge, overview, pause and resume. The CLI's
	// --config mode, working on the database alone, passes none: Enqueue,
	// Notification, Cancel and Dead work, the others return ErrNoEngine.
	Engine Engine
	// Schedules answers the subscriber, schedule, campaign and job
	// operations; nil: they return ErrNoSchedules.
	Schedules *schedule.Service
	// Plugins is the engine's plugin host, for plugin health (readiness, the
	// dashboard, the plugin metrics); nil: no plugin checks (in-process
	// providers).
	Plugins *pluginhost.Host
	// Redis is pinged by Readiness; nil: no Redis check.
	Redis redis.UniversalClient
	// CheckTimeout bounds each readiness and plugin health check. Default
	// CheckTimeoutDefault.
	CheckTimeout time.Duration
	Logger       hclog.Logger
	// SampleInterval is how often the background sampler counts the outbox.
	// Default SampleIntervalDefault.
	SampleInterval time.Duration
}

// Service runs the operations. Its one background task is the overview's
// sampler, run between Start and Stop; every operation also works on a
// Service that was never started (the overview then counts on demand).
type Service struct {
	cfg     *config.Config
	store   *outbox.Store
	engine  Engine
	sched   *schedule.Service
	plugins *pluginhost.Host
	redis   redis.UniversalClient
	checkTO time.Duration
	log     hclog.Logger
	counts  *counter
	ready   readyShare

	mu   sync.Mutex
	stop context.CancelFunc
	done chan struct{}
}

// New builds a Service.
func New(o Options) (*Service, error) {
	if o.Config == nil || o.Store == nil {
		return nil, errors.New("service: Config and Store are required")
	}
	log := cmp.Or[hclog.Logger](o.Logger, hclog.NewNullLogger())
	s := &Service{
		cfg: o.Config, store: o.Store, engine: o.Engine, log: log,
		sched: o.Schedules, plugins: o.Plugins, redis: o.Redis, checkTO: cmp.Or(o.CheckTimeout, CheckTimeoutDefault),
	}
	s.counts = newCounter(o.Store, cmp.Or(o.SampleInterval, SampleIntervalDefault), SamplePoints, log, s.ChannelNames)
	return s, nil
}

// Start starts the background sampler; it runs until Stop (ctx only bounds
// the start itself, as for every notifyd service). Start on a started
// Service is a no-op.
func (s *Service) Start(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop, s.done = cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		s.counts.run(ctx)
	}()
	return nil
}

// Stop stops the sampler and waits for it, or for ctx.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	stop, done := s.stop, s.done
	s.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("service: stop: %w", ctx.Err())
	}
}

// Configured says whether this instance runs channel.
func (s *Service) Configured(channel string) bool {
	_, ok := s.cfg.Channels[channel]
	return ok
}

// ChannelNames are the configured channels, sorted.
func (s *Service) ChannelNames() []string {
	out := make([]string, 0, len(s.cfg.Channels))
	for name := range s.cfg.Channels {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// ErrNoEngine is what an operation that needs the delivery engine returns on
// a Service built without one (the CLI's database-only mode).
var ErrNoEngine = errors.New("service: this operation needs the delivery engine (a running notifyd); use the API")

// ErrNoSchedules is what a subscriber, schedule, campaign or job operation
// returns on a Service built without a schedule service.
var ErrNoSchedules = errors.New("service: this operation needs the schedule service")

func (s *Service) needSchedules() error {
	if s.sched == nil {
		return ErrNoSchedules
	}
	return nil
}

func (s *Service) needEngine() error {
	if s.engine == nil {
		return ErrNoEngine
	}
	return nil
}

// Kind classifies an operation's refusal, for the doors to map to their own
// answers (the API: 422, 404, 409, 400, 501, 503).
type Kind int

const (
	// Invalid: the request names something that cannot be acted on as
	// asked (an unconfigured channel, a reason too long).
	Invalid Kind = iota + 1
	// NotFound: the thing named does not exist.
	NotFound
	// Conflict: it exists, but its state forbids the action.
	Conflict
	// Unreadable: what the caller sent cannot be read (a provider's
	// callback body its channel's plugin refused).
	Unreadable
	// Unsupported: the operation is not offered here (a plugin that takes
	// no callbacks).
	Unsupported
	// Unavailable: it cannot be done now and may succeed on a retry (a
	// channel not running on this instance, a plugin restarting).
	Unavailable
)

// Error is an operation refused for a reason the caller can fix (or, for
// Unavailable, wait out); any other error is the stores failing. Message is
// fit to show the caller; Err, when set, is the cause, for the log only.
type Error struct {
	Kind    Kind
	Message string
	Err     error
}

// Error is the message, fit to show the caller.
func (e *Error) Error() string { return e.Message }

// Unwrap is the cause.
func (e *Error) Unwrap() error { return e.Err }

func refuse(k Kind, format string, args ...any) error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// StorageRefusal says whether err is Postgres refusing a value of the
// request (a bound every door should have checked before, missed), and the
// message to answer it with, without SQLSTATE text.
func StorageRefusal(err error) (string, bool) {
	if !outbox.IsRowError(err) {
		return "", false
	}
	msg := "a value of the request cannot be stored"
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		msg += ": " + pg.Message
	}
	return msg, true
}
