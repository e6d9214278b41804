// Package notifyd is notifyd's whole public surface: the composition root
// that builds and starts the daemon — Postgres store, Redis queues,
// providers, the delivery engine, schedules, the API and the dashboard —
// from one config, the way `notifyd serve` does, so that an application can
// embed notifyd in its own process (with providers written in Go, see
// Options.Providers) and tests start it in one call; and the operations
// facade, *Daemon, whose methods take and return the sdk/wire types.
// Everything else lives under internal/. docs/design.md says what each part
// does; README.md, "Using the modules from outside", how to depend on it.
//
//	cfg := notifyd.DefaultConfig()        // or notifyd.LoadConfig(path)
//	cfg.Postgres.URL, cfg.Redis.URL = …
//	cfg.Channels = map[string]notifyd.ChannelConfig{"alerts": {Plugin: "memo"}}
//	d, err := notifyd.Start(ctx, &cfg, notifyd.Options{
//		Providers: notifyd.NewInProcess(map[string]sdk.Provider{"memo": memo{}}, nil),
//	})
//	…
//	defer d.Stop(context.Background())
package notifyd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/api"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/httpguard"
	"github.com/notifyd/notifyd/internal/lifecycle"
	"github.com/notifyd/notifyd/internal/metrics"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/pluginhost"
	"github.com/notifyd/notifyd/internal/providers"
	"github.com/notifyd/notifyd/internal/queue"
	"github.com/notifyd/notifyd/internal/schedule"
	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/internal/tracing"
	"github.com/notifyd/notifyd/internal/ui"
	"github.com/notifyd/notifyd/internal/version"
	"github.com/notifyd/notifyd/sdk"
)

// Options are what a config file cannot say.
type Options struct {
	// Logger receives every part's logs; nil: hclog's default at
	// cfg.Log.Level.
	Logger hclog.Logger
	// Providers resolves channels' `plugin:` names; nil: the plugin host
	// over plugins.dir. NewInProcess serves Go providers.
	Providers Providers
	// NoMigrate skips applying the database migrations at start.
	NoMigrate bool
	// WaitForServices: Start returns at once with http.listen answering
	// /healthz (200) and /readyz (503, naming what it waits for), and
	// connects to Postgres and Redis in the background, retrying with
	// backoff, then starts everything else; Ready is closed when it has,
	// Failed receives an error it cannot wait out (a failing migration,
	// no channel able to start). `notifyd serve` starts this way, so an
	// outage at start delays notifyd instead of stopping it. Without it
	// Start returns a running daemon or an error, as an embedder expects.
	WaitForServices bool
	// Hooks are the delivery pipeline's fault-injection points (a crash
	// between two steps), for the fault suite and the benchmark's stage
	// timings; zero: none.
	Hooks Hooks
	// TracerProvider records notifyd's spans when cfg.Tracing.Enabled (an
	// application that embeds notifyd passes its own); nil: one built from
	// the OTEL_* environment (internal/tracing), flushed by Stop.
	TracerProvider trace.TracerProvider

	// Now is the dashboard's clock — its sessions' idle and lifetime
	// limits, the ages it shows, which jobs it flags stuck — for tests that
	// move time; nil: time.Now. Nothing else reads it: the engine and the
	// schedules keep the real clock.
	Now func() time.Time
	// SampleInterval is how often the channel overview counts the outbox
	// in the background (the counts and throughput the API and dashboard
	// show), for tests that cannot wait for the default
	// (service.SampleIntervalDefault, 5 s); zero: the default.
	SampleInterval time.Duration
	// NoSchedules leaves the schedules and bulk jobs alone, for tests that
	// write jobs and read them back as written: no schedule fires and no
	// job is claimed, run or taken over by this daemon. Their operations
	// (list, run now, campaigns, cancel) still answer; a job they create
	// waits PENDING for an instance that runs schedules.
	NoSchedules bool
}

// Daemon is a running notifyd. Stop it once.
type Daemon struct {
	cfg    *config.Config
	log    hclog.Logger
	pool   *pgxpool.Pool
	redis  redis.UniversalClient
	store  *outbox.Store
	host   *pluginhost.Host // nil with in-process providers
	engine *delivery.Engine
	sched  *schedule.Service
	ops    *service.Service
	api    *api.Server
	cancel context.CancelFunc
	// parts is everything Start started or acquired, stopped in reverse by
	// Stop (internal/lifecycle).
	parts *lifecycle.Group
	// dbOnly: opened with Open (the database alone).
	dbOnly bool
	// tracer is nil with tracing off; traces is the provider Start built
	// (nil when off or given in Options).
	tracer trace.Tracer
	traces *tracing.Provider

	// With Options.WaitForServices: the stand-in server until the API
	// starts, and the bring-up's outcome.
	ident    identity
	wait     *waitServer
	waitAddr net.Addr
	ready    chan struct{}
	failed   chan error
	upDone   chan struct{}
}

// Start connects to Postgres and Redis, applies migrations, starts the
// delivery engine, the schedules and the API (with the dashboard when
// http.tokens are set), and returns once they run. On an error nothing is
// left running. With o.WaitForServices it returns at once and does all that
// in the background (see Options).
func Start(parent context.Context, cfg *config.Config, o Options) (_ *Daemon, err error) {
	if cfg, err = filled(cfg); err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = hclog.New(&hclog.LoggerOptions{Name: "notifyd", Level: hclog.LevelFromString(cfg.Log.Level)})
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	d := &Daemon{cfg: cfg, log: log, cancel: cancel, parts: lifecycle.NewGroup(log)}
	// Released last: the daemon's context, and the instance id, which no
	// other process may take while anything of this one still runs.
	d.parts.Defer("context", func(context.Context) error { cancel(); return nil })
	d.parts.Defer("instance id", func(context.Context) error { d.ident.release(); return nil })
	if !o.WaitForServices {
		if err := d.prepare(o); err != nil {
			d.close(context.Background())
			return nil, err
		}
		if err := d.bringUp(ctx, o); err != nil {
			d.close(context.Background())
			return nil, err
		}
		return d, nil
	}
	proxies, _ := httpguard.ParseProxies(cfg.HTTP.TrustedProxies) // valid: the config was validated
	conns := httpguard.NewConns(cmp.Or(cfg.HTTP.MaxConnections, config.DefaultMaxConnections),
		cmp.Or(cfg.HTTP.MaxConnectionsPerClient, config.DefaultMaxConnectionsPerClient), proxies)
	if d.wait, err = startWaitServer(cfg.HTTP.Listen, conns, log.Named("api")); err != nil {
		cancel()
		return nil, err
	}
	// The API takes the stand-in's address (the port it chose for port 0).
	d.waitAddr = d.wait.addr()
	cfg.HTTP.Listen = d.waitAddr.String()
	// What no wait can cure is refused now, not once Postgres answers.
	if err := d.prepare(o); err != nil {
		d.wait.stop(context.Background())
		d.close(context.Background())
		return nil, err
	}
	d.ready, d.failed, d.upDone = make(chan struct{}), make(chan error, 1), make(chan struct{})
	log.Info("notifyd starting: waiting for Postgres and Redis", "listen", cfg.HTTP.Listen)
	go func() {
		defer close(d.upDone)
		if err := d.bringUp(ctx, o); err != nil {
			if ctx.Err() == nil {
				d.failed <- err
			}
			return
		}
		close(d.ready)
	}()
	return d, nil
}

// filled is a copy of cfg with the defaults applied — here too, not only in
// the file loader: a config built in code may leave a channel's settings
// zero — and validated.
func filled(cfg *config.Config) (*config.Config, error) {
	if cfg == nil {
		return nil, errors.New("notifyd: config is nil")
	}
	f := *cfg
	f.Delivery = config.FillDelivery(cfg.Delivery)
	f.Retention = config.FillRetention(cfg.Retention)
	f.Channels = make(map[string]config.Channel, len(cfg.Channels))
	for name, ch := range cfg.Channels {
		f.Channels[name] = config.FillChannel(ch)
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if _, err := pgxpool.ParseConfig(f.Postgres.URL); err != nil {
		return nil, fmt.Errorf("postgres.url: %s", sdk.RedactURLs(err.Error()))
	}
	return &f, nil
}

// Ready is closed once a daemon started with Options.WaitForServices runs
// (at once for one started without). Engine, Service, Store and Addr's API
// are valid after it.
func (d *Daemon) Ready() <-chan struct{} {
	if d.ready == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return d.ready
}

// Failed receives the error that stopped a daemon started with
// Options.WaitForServices from coming up (never one it waits out, such as a
// service that does not answer yet). Stop it then.
func (d *Daemon) Failed() <-chan error { return d.failed }

// prepare does what needs no service, so that a bad config fails Start at
// once even when Start would wait: plugins.dir (when channels need it), the
// Redis client (which parses redis.url but does not dial), the instance id
// and the tracer provider (whose exporter connects when it first exports).
func (d *Daemon) prepare(o Options) (err error) {
	cfg := d.cfg
	switch {
	case !tracing.On(cfg.Tracing, os.Getenv):
	case o.TracerProvider != nil:
		d.tracer = o.TracerProvider.Tracer(tracing.ScopeName)
	default:
		if d.traces, err = tracing.New(context.Background(), cfg.Tracing, tracing.Options{Version: version.Version}); err != nil {
			return err
		}
		// The last attempts' spans are flushed when everything else has
		// stopped.
		d.parts.Defer("tracing", d.traces.Shutdown, lifecycle.Bound(5*time.Second))
		d.tracer = d.traces.Tracer()
		d.log.Info("tracing on: exporting spans over OTLP/HTTP", "sample_ratio", cfg.Tracing.SampleRatio)
	}
	if o.Providers == nil && len(cfg.Channels) > 0 {
		if err := pluginhost.CheckDir(cfg.Plugins.Dir); err != nil {
			return err
		}
	}
	// A Redis whose eviction policy cannot be read (an ACL without INFO or
	// CONFIG) is used, and said once per server: it must be noeviction.
	policyUnchecked := queue.OnPolicyUnchecked(func(addr string, why error) {
		d.log.Warn("could not read Redis' maxmemory-policy; it must be noeviction, or a full Redis can drop a queue", "addr", addr, "error", why)
	})
	if d.redis, err = queue.Connect(cfg.Redis.URL, cfg.Redis.ClusterAddrs, cfg.Redis.PoolSize, policyUnchecked); err != nil {
		return err // redacted by queue
	}
	d.parts.Defer("redis", func(context.Context) error { return d.redis.Close() })
	// The instance id: instance.id, else one derived from the host and
	// address, the same across restarts; either is held by this process
	// alone (identity.go), so its backup lists at start are its dead
	// predecessor's and are resumed at once.
	if cfg.Instance.ID == "" {
		var why string
		if d.ident, why = stableIdentity(cfg); why != "" {
			d.log.Warn("instance id", "id", d.ident.id, "why", why)
		}
	} else if d.ident, err = holdIdentity(cfg.Instance.ID); err != nil {
		return fmt.Errorf("instance.id: %w; give each instance its own", err)
	}
	return nil
}

// bringUp connects, migrates and starts every part. Postgres (then the
// migrations) and Redis are reached side by side, so /readyz says of each
// whether it answers; with o.WaitForServices each is retried until it
// answers (or ctx ends) and the stand-in server gives way to the API at the
// end.
func (d *Daemon) bringUp(ctx context.Context, o Options) (err error) {
	cfg, log := d.cfg, d.log
	connect := func(ctx context.Context, what string, f func(context.Context) error) error {
		if !o.WaitForServices {
			return f(ctx)
		}
		check := strings.ToLower(what)
		if err := retry(ctx, log, what, f, func(err error) { d.wait.set(check, "waiting: "+shortReason(err)) }); err != nil {
			return err
		}
		d.wait.set(check, "ok")
		return nil
	}
	cctx, stopConnecting := context.WithCancel(ctx)
	defer stopConnecting()
	var (
		wg           sync.WaitGroup
		pgErr, rdErr error
	)
	wg.Go(func() {
		defer func() {
			if pgErr != nil {
				stopConnecting() // no use waiting for Redis then
			}
		}()
		if pgErr = connect(cctx, "Postgres", func(ctx context.Context) (err error) {
			d.pool, err = OpenPostgres(ctx, cfg)
			return err
		}); pgErr != nil || o.NoMigrate {
			return
		}
		n, err := outbox.Migrate(cctx, d.pool)
		if err != nil {
			pgErr = err
			return
		}
		if n > 0 {
			log.Info("migrations applied", "applied", n)
		}
	})
	wg.Go(func() {
		if rdErr = connect(cctx, "Redis", func(ctx context.Context) error {
			if err := d.redis.Ping(ctx).Err(); err != nil {
				key := "redis.url"
				if cfg.Redis.URL == "" {
					key = "redis.cluster_addrs"
				}
				se := &serviceError{key: key, reason: shortReason(err), final: finalRedis(err), cause: err,
					msg: "connect to Redis: " + sdk.RedactURLs(err.Error())}
				if se.final {
					se.msg = "Redis refused the connection: " + se.reason
					if u, err := url.Parse(cfg.Redis.URL); err == nil && u.Host != "" {
						se.msg = "Redis at " + u.Host + " refused the connection: " + se.reason
					}
				}
				return se
			}
			return nil
		}); rdErr != nil {
			stopConnecting()
		}
	})
	wg.Wait()
	// The error that stopped the other one, not the other's "canceled".
	for _, err := range []error{pgErr, rdErr} {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	if d.pool != nil {
		d.parts.Defer("postgres", func(context.Context) error { d.pool.Close(); return nil })
	}
	if err := cmp.Or(pgErr, rdErr); err != nil {
		return err
	}

	provs := o.Providers
	if provs == nil {
		d.host = pluginhost.New(cfg.Plugins, log.Named("plugins"))
		provs = providers.Host(d.host)
		d.parts.Defer("plugins", d.host.Stop, lifecycle.Bound(5*time.Second))
	}
	reg := metrics.New(version.Version)
	d.store = outbox.New(d.pool, outbox.WithLogger(log.Named("outbox")))
	d.parts.Defer("outbox", func(context.Context) error { d.store.Close(); return nil })
	if d.engine, err = delivery.New(delivery.Options{
		Config: cfg, Store: d.store, Queue: queue.New(d.redis, cfg.Redis.Prefix),
		Providers: provs, Logger: log.Named("delivery"), Metrics: reg.Delivery(),
		Instance: d.ident.id, OwnsInstance: d.ident.lock != nil, Tracer: d.tracer, Hooks: o.Hooks,
	}); err != nil {
		return err
	}
	// The engine drains its in-flight sends within shutdown.soft_timeout
	// when stopped, and is killed past the group's (hard) deadline.
	if err := d.parts.Start(ctx, "delivery engine", d.engine); err != nil {
		return err
	}
	// Schedules and bulk jobs: any instance evaluates them; a run is created
	// once per fire time (a fire time missed while notifyd waited is run now
	// if it is within the schedule's max_late), and a job has one owner at a
	// time.
	if d.sched, err = schedule.New(d.pool, cfg, schedule.Options{Logger: log.Named("schedule"), InstanceID: d.engine.Instance()}); err != nil {
		return err
	}
	// Stopped before the engine: no new rows while it drains; running jobs
	// are handed back before the pool closes.
	if !o.NoSchedules {
		if err := d.parts.Start(ctx, "schedules", d.sched); err != nil {
			return err
		}
	}
	// The operations (DLQ, overview, pause, cancel): one implementation,
	// behind both the API and the dashboard.
	if d.ops, err = service.New(service.Options{Config: cfg, Store: d.store, Engine: d.engine, Schedules: d.sched,
		Plugins: d.host, Redis: d.redis, Logger: log.Named("service"), SampleInterval: o.SampleInterval}); err != nil {
		return err
	}
	if err := reg.Register(d.ops.Collectors()...); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	if err := d.parts.Start(ctx, "operations", d.ops); err != nil {
		return err
	}
	var dashboard http.Handler
	if len(cfg.HTTP.Tokens) > 0 {
		dashboard, err = ui.New(ui.Deps{Config: cfg, Ops: d.ops, Logger: log.Named("ui"), Now: o.Now})
		if err != nil {
			log.Warn("dashboard disabled", "error", err)
		}
	}
	var ln net.Listener // nil: the API listens on http.listen
	if d.wait != nil {
		ln = d.wait.listener()
	}
	if d.api, err = api.New(api.Options{
		Config: cfg, Ops: d.ops, Metrics: reg, Logger: log.Named("api"), UI: dashboard, Listener: ln,
		Tracer: d.tracer,
	}); err != nil {
		return err
	}
	if d.wait != nil {
		// The stand-in stops accepting and the API takes its socket over:
		// connections arriving meanwhile wait in the backlog, none is refused.
		d.wait.handOver()
		d.wait = nil
	}
	// Stopped first, so nothing new arrives while the rest stops; bounded by
	// shutdown.soft_timeout, so that a slow request leaves the engine its
	// time to drain.
	soft := cmp.Or(cfg.Shutdown.SoftTimeout, config.DefaultSoftTimeout)
	if err := d.parts.Start(ctx, "API", d.api, lifecycle.Bound(soft)); err != nil {
		return err
	}
	log.Info("notifyd serving", "instance", d.engine.Instance())
	return nil
}

// Stop shuts down gracefully: the API first (no new requests), then the
// engine finishes in-flight sends within shutdown.soft_timeout, and
// everything is stopped by shutdown.hard_timeout or when ctx ends, whichever
// comes first; nothing is lost either way (unfinished work is recovered by
// the next instance to run).
func (d *Daemon) Stop(ctx context.Context) error {
	if d.upDone != nil {
		// Still coming up: stop waiting, and let the bring-up return before
		// taking down what it built.
		select {
		case <-d.ready:
		default:
			d.cancel()
		}
		<-d.upDone
		if d.wait != nil {
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			d.wait.stop(wctx)
			cancel()
		}
	}
	soft := cmp.Or(d.cfg.Shutdown.SoftTimeout, config.DefaultSoftTimeout)
	hard := cmp.Or(d.cfg.Shutdown.HardTimeout, config.DefaultHardTimeout)
	if d.dbOnly {
		return d.close(ctx) // opened with Open: nothing in flight, nothing to announce
	}
	d.log.Info("shutting down: finishing in-flight sends", "soft_timeout", soft, "hard_timeout", hard)
	if err := d.close(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	d.log.Info("stopped")
	return nil
}

// close stops and releases, in reverse, everything Start started or
// acquired — on Stop, or when Start fails part-way — bounded by
// shutdown.hard_timeout and ctx (internal/lifecycle's policy).
func (d *Daemon) close(ctx context.Context) error {
	hardCtx, cancel := context.WithTimeout(ctx, cmp.Or(d.cfg.Shutdown.HardTimeout, config.DefaultHardTimeout))
	defer cancel()
	return d.parts.Stop(hardCtx)
}

// Addr is where the API listens (http.listen; useful with port 0) — or,
// while a daemon started with Options.WaitForServices waits, where its
// stand-in answers /healthz and /readyz (the same address).
func (d *Daemon) Addr() net.Addr {
	select {
	case <-d.Ready():
		if d.api == nil {
			return nil // opened with Open: no API
		}
		return d.api.Addr()
	default:
		return d.waitAddr
	}
}

// Engine is the delivery engine (channel states, stalls): a hook for tests
// and the benchmark; an application uses the operations instead.
func (d *Daemon) Engine() *delivery.Engine { return d.engine }

// Service is the one implementation of the operations behind the daemon's
// own methods, the API and the dashboard: a hook for tests.
func (d *Daemon) Service() *service.Service { return d.ops }

// Store is the outbox: a hook for tests that reach into it. An application
// enqueues with Enqueue, or with sdk/txoutbox.EnqueueTx inside its own
// transactions (the transactional outbox).
func (d *Daemon) Store() *outbox.Store { return d.store }

// OpenPostgres opens the pool that postgres.url and postgres.max_conns
// describe and checks that it answers; errors never print the URL's
// credentials.
func OpenPostgres(ctx context.Context, cfg *config.Config) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(cfg.Postgres.URL)
	if err != nil {
		// pgx masks the password; other query values may be secrets too.
		return nil, fmt.Errorf("postgres.url: %s", sdk.RedactURLs(err.Error()))
	}
	pc.MaxConns = cfg.Postgres.MaxConns
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err == nil {
		if err = pool.Ping(ctx); err != nil {
			pool.Close()
		}
	}
	if err != nil {
		se := &serviceError{key: "postgres.url", reason: shortReason(err), final: finalPostgres(err), cause: err,
			msg: fmt.Sprintf("connect to Postgres at %s: %s", sdk.RedactURL(cfg.Postgres.URL), sdk.RedactURLs(oneLine(err)))}
		if se.final {
			// The server's reason alone: pgx's preamble quotes the user and
			// database from the URL, which reads as if the URL were at fault
			// when a redacted copy of it stands beside.
			se.msg = fmt.Sprintf("Postgres at %s refused the connection: %s", net.JoinHostPort(pc.ConnConfig.Host, fmt.Sprint(pc.ConnConfig.Port)), se.reason)
		}
		return nil, se
	}
	return pool, nil
}

// oneLine folds a multi-line error (pgx lists every address it tried) into
// one line without repeats.
func oneLine(err error) string {
	seen := map[string]bool{}
	var parts []string
	for _, l := range strings.Split(err.Error(), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !seen[l] {
			seen[l] = true
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}
