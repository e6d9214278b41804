// Package bench is `notifyd-bench` (cmd/notifyd-bench) (docs/design.md §9): it runs the real delivery
// pipeline — Postgres outbox, Redis queues, the webhook plugin process —
// against an in-process HTTP sink, in a throw-away Postgres schema and Redis
// key prefix, and measures three things on the same machine and sink:
//
//   - the burst: N notifications all due at one instant (the daily 08:00
//     send), until the sink has seen every one: throughput and due→delivered
//     latency, duplicates;
//   - the raw baseline: plain HTTP POSTs of the same size to the same sink at
//     the same concurrency, and the ratio of the two;
//   - idle pick-up: single notifications inserted one at a time into an idle
//     system, insert→received latency.
//
// For scale-out it can run several delivery engines (instances) in the one
// process — each with its own instance id, Postgres pool, plugin host and
// webhook plugin process, sharing Postgres, Redis and the machine's CPUs —
// spread the channel over K partitions, and use a Redis Cluster, either the
// config's redis.cluster_addrs or a throw-away one it starts itself.
package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"runtime"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/fakesens"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/pluginhost"
	"github.com/notifyd/notifyd/internal/providers"
	"github.com/notifyd/notifyd/internal/queue"
	"github.com/notifyd/notifyd/internal/tracing"
)

// Defaults for zero Options. Concurrency and batch were chosen by trying
// combinations on the 2-core development machine: batches of 256 cost the
// least CPU per notification (Postgres and gRPC work per statement and call
// is shared by more rows), and 512 in flight keeps two fetchers busy.
const (
	DefaultN           = 100_000
	DefaultConcurrency = 512
	DefaultBatch       = 256
	DefaultIdle        = 200
	DefaultInstances   = 1
	DefaultPartitions  = 1
	// MaxInstances bounds --instances: each is an engine, a Postgres pool
	// and a plugin process.
	MaxInstances = 16
	// Channel is the bench's one channel.
	Channel = "bench"
	// Plugin is the provider the channel uses by default.
	Plugin = "webhook"
	// ProviderAlimtalk drives the Kakao plugin's AlimTalk mode against the
	// bench's fake SENS partner instead (Options.Provider).
	ProviderAlimtalk = "alimtalk"
)

// Defaults used when no config file is given: the services on loopback.
const (
	DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/notifyd?sslmode=disable"
	DefaultRedisURL    = "redis://127.0.0.1:6379/0"
)

// Options configure a Run.
type Options struct {
	// Config supplies postgres, redis, plugins and delivery (the pipeline's
	// tuning). Its channels and schedules are ignored: the bench configures
	// its own webhook channel pointed at its sink.
	Config      *config.Config
	N           int // notifications in the burst
	Concurrency int // the channel's concurrency, and the raw baseline's
	Batch       int // the channel's batch_size
	Idle        int // single notifications for the idle pick-up phase; negative skips it
	// Quiet keeps the engine polling an empty outbox this long before the
	// burst is written, as it does before the daily send (the raw baseline
	// that runs first adds its own few seconds).
	Quiet  time.Duration
	Logger hclog.Logger
	// CPUProfile, when set, receives a CPU profile of this process (engine,
	// sink, inserts) taken during the burst.
	CPUProfile io.Writer
	// MemProfileBase and MemProfile, when set, receive this process's
	// allocation profile ("allocs": every allocation since the start,
	// sampled) at T and once the sink has seen the whole burst; the burst's
	// own allocations are the difference (go tool pprof -diff_base).
	MemProfileBase, MemProfile io.Writer
	// Progress, when set, gets a line as each phase starts and ends.
	Progress io.Writer
	// Instances is how many delivery engines share the work, each with its
	// own instance id, Postgres pool, plugin host and plugin process, all in
	// this process (on one machine they share its CPUs).
	Instances int
	// Partitions is the bench channel's partitions (queues bench#0..K-1).
	Partitions int
	// RedisCluster starts a throw-away 3-master Redis Cluster on loopback
	// for the run (redis-server and redis-cli on PATH) and uses it instead
	// of the config's redis.url or redis.cluster_addrs.
	RedisCluster bool
	// History, when positive, adds the history phase: N finished
	// notifications (and their attempts) written into the table, the counts
	// timed, the burst run again beside them, and a retention pass removing
	// them timed beside single notifications.
	History int
	// Steady, when positive, replaces every other phase: Steady
	// notifications/s for SteadyFor with retention windows of Retain, the
	// tables' sizes sampled every minute.
	Steady    int
	SteadyFor time.Duration
	// Provider is "webhook" (the default: the webhook plugin posting each
	// notification to the sink) or "alimtalk" (the Kakao plugin in AlimTalk
	// mode, 100 notifications per request to a fake SENS partner that
	// feeds the sink).
	Provider string
	// AlimtalkConfirm is the AlimTalk channel's alimtalk.confirm:
	// "delivered" (the default: each request's results are polled) or
	// "accepted".
	AlimtalkConfirm string
	Retain          time.Duration
}

func (o *Options) fill() error {
	if o.Config == nil {
		return errors.New("bench: Options.Config is required")
	}
	o.N = cmp.Or(o.N, DefaultN)
	o.Concurrency = cmp.Or(o.Concurrency, DefaultConcurrency)
	o.Batch = cmp.Or(o.Batch, DefaultBatch)
	o.Instances = cmp.Or(o.Instances, DefaultInstances)
	o.Partitions = cmp.Or(o.Partitions, DefaultPartitions)
	switch o.Provider {
	case "", Plugin:
		o.Provider = Plugin
	case ProviderAlimtalk:
		if o.Steady > 0 || o.History > 0 {
			return errors.New("bench: --provider alimtalk runs the burst only (no --steady, no --history)")
		}
		// The idle phase waits for notifications by key; the fake partner
		// knows them by number only. The burst is what this path measures.
		o.Idle = -1
		switch o.AlimtalkConfirm {
		case "":
			o.AlimtalkConfirm = "delivered"
		case "delivered", "accepted":
		default:
			return fmt.Errorf("bench: --alimtalk-confirm %q: want delivered or accepted", o.AlimtalkConfirm)
		}
	default:
		return fmt.Errorf("bench: --provider %q: want %s or %s", o.Provider, Plugin, ProviderAlimtalk)
	}
	switch {
	case o.Idle == 0:
		o.Idle = DefaultIdle
	case o.Idle < 0:
		o.Idle = 0 // skip the phase
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	switch {
	case o.N < 1:
		return fmt.Errorf("bench: -n %d: want at least 1 notification", o.N)
	case o.Concurrency < 1 || o.Concurrency > 10000:
		return fmt.Errorf("bench: --concurrency %d: want 1 to 10000", o.Concurrency)
	case o.Batch < 1 || o.Batch > 1000:
		return fmt.Errorf("bench: --batch %d: want 1 to 1000", o.Batch)
	case o.Quiet < 0:
		return fmt.Errorf("bench: --quiet %s: want 0 or more", o.Quiet)
	case o.Instances < 1 || o.Instances > MaxInstances:
		return fmt.Errorf("bench: --instances %d: want 1 to %d", o.Instances, MaxInstances)
	case o.Partitions < 1 || o.Partitions > 256:
		return fmt.Errorf("bench: --partitions %d: want 1 to 256", o.Partitions)
	case o.History < 0 || o.History > 100_000_000:
		return fmt.Errorf("bench: --history %d: want 0 to 100,000,000", o.History)
	case o.Steady < 0 || o.Steady > 100_000:
		return fmt.Errorf("bench: --steady %d: want 0 to 100,000 notifications/s", o.Steady)
	case o.Steady > 0 && (o.SteadyFor < time.Minute || o.Retain < time.Minute):
		return fmt.Errorf("bench: --steady needs --for and --retain of at least 1m (got %s, %s)", o.SteadyFor, o.Retain)
	}
	return nil
}

// DefaultConfig is the configuration used without a config file: Postgres
// and Redis on loopback, plugins in ./bin/plugins, default tuning.
func DefaultConfig() *config.Config {
	c := config.Default()
	c.Postgres.URL = DefaultPostgresURL
	c.Redis.URL = DefaultRedisURL
	c.Log.Level = "warn"
	return &c
}

// env is one run's isolated world: schema, key prefix, sink, engines.
type env struct {
	o         Options
	cfg       *config.Config // the engines': own schema URL, own prefix, one channel
	admin     *pgxpool.Pool  // on the base URL: creates and drops the schema
	app       *pgxpool.Pool  // the "application": inserts and status reads
	store     *outbox.Store  // on app
	rc        redis.UniversalClient
	cluster   *Cluster // the throw-away cluster of --redis-cluster, or nil
	sink      *Sink
	instances []*instance
	tracer    *tracer
	// traces is the OpenTelemetry provider when the config's tracing is on
	// (nil otherwise): every notification is then inserted with a trace of
	// its own, as an API enqueue under tracing stores one.
	traces *tracing.Provider
	schema string
	prefix string
	runID  string
	Teardown
}

// instance is one delivery engine with everything a notifyd process has of
// its own.
type instance struct {
	id     string
	host   *pluginhost.Host
	plugin *pluginhost.Plugin
	engine *delivery.Engine
}

// Run sets up the isolated schema, key prefix, sink and engine, runs the
// three phases and tears everything down again (also on error or when ctx
// is cancelled).
func Run(ctx context.Context, o Options) (rep *Report, err error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	e := &env{o: o}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if cerr := e.close(cctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := e.setUp(ctx); err != nil {
		return nil, err
	}

	rep = &Report{
		Started: time.Now().UTC(),
		Machine: machine(),
		Setup: Setup{
			N: o.N, Concurrency: o.Concurrency, Batch: o.Batch, Idle: o.Idle, QuietSeconds: o.Quiet.Seconds(),
			RelayBatch: e.cfg.Delivery.RelayBatch, SettleBatch: e.cfg.Delivery.SettleBatch,
			PostgresMaxConns: int(e.cfg.Postgres.MaxConns), PluginMaxConcurrency: e.instances[0].plugin.Info().MaxConcurrency,
			Provider: e.o.Provider, AlimtalkConfirm: e.o.AlimtalkConfirm,
			EnvelopeBytes: len(envelope(int64(o.N), recipient(o.N-1), time.Now().Truncate(time.Microsecond))),
			Schema:        e.schema, RedisPrefix: e.prefix, Sink: e.sink.URL(),
			Instances: len(e.instances), Partitions: e.partitions(ctx),
			Redis: e.redisMode(), RedisClusterAddrs: e.cfg.Redis.ClusterAddrs,
		},
	}
	if o.Steady > 0 {
		st, err := e.steady(ctx)
		rep.Steady = &st
		rep.Machine.LoadAfter = loadAvg()
		return rep, err
	}
	var rawLat []time.Duration
	before, lat, err := e.raw(ctx)
	if err != nil {
		return rep, err
	}
	addRaw(&rep.Raw, &rawLat, "before", before, lat)
	if o.Quiet > 0 {
		e.progress("quiet: the engine polls an empty outbox for %s", o.Quiet)
		sleepCtx(ctx, o.Quiet)
	}
	if rep.Burst, err = e.burst(ctx); err != nil {
		return rep, err
	}
	after, lat, err := e.raw(ctx)
	if err != nil {
		return rep, err
	}
	addRaw(&rep.Raw, &rawLat, "after", after, lat)
	if rep.Raw.Throughput > 0 {
		rep.Ratio = rep.Burst.Throughput / rep.Raw.Throughput
	}
	rep.CPU = cpuCost(rep.Machine.CPUs, rep.Burst, rep.Raw)
	if o.Idle > 0 {
		if rep.Idle, err = e.idle(ctx); err != nil {
			return rep, err
		}
	}
	if o.History > 0 {
		h, err := e.history(ctx)
		rep.History = &h
		if err != nil {
			return rep, err
		}
	}
	rep.Machine.LoadAfter = loadAvg()
	return rep, nil
}

func (e *env) progress(format string, args ...any) {
	if e.o.Progress != nil {
		fmt.Fprintf(e.o.Progress, "bench: "+format+"\n", args...)
	}
}

func (e *env) setUp(ctx context.Context) error {
	base := e.o.Config
	e.runID = randHex(4)
	e.schema = "bench_" + e.runID
	e.prefix = "bench-" + e.runID

	var err error
	e.admin, err = pgxpool.New(ctx, base.Postgres.URL)
	if err == nil {
		err = e.admin.Ping(ctx)
	}
	if err != nil {
		return fmt.Errorf("bench: connect to Postgres (postgres.url): %w", err)
	}
	e.onClose(func(context.Context) error { e.admin.Close(); return nil })
	if _, err := e.admin.Exec(ctx, `CREATE SCHEMA `+e.schema); err != nil {
		return fmt.Errorf("bench: create schema %s: %w", e.schema, err)
	}
	e.onClose(func(ctx context.Context) error {
		if _, err := e.admin.Exec(ctx, `DROP SCHEMA `+e.schema+` CASCADE`); err != nil {
			return fmt.Errorf("bench: drop schema %s: %w", e.schema, err)
		}
		return nil
	})
	// The application_name tells this run's backends apart, for the CPU
	// figures.
	schemaURL, err := withSession(base.Postgres.URL, e.schema, e.prefix)
	if err != nil {
		return err
	}

	cfg := *base
	cfg.Postgres.URL = schemaURL
	cfg.Redis.Prefix = e.prefix
	cfg.Instance.ID = "bench-" + e.runID
	cfg.Schedules = nil
	// The engines keep everything: the history phase runs its own timed
	// retention pass, and no pass may remove rows a phase is counting.
	cfg.Retention = config.FillRetention(config.Retention{Sent: -1, Cancelled: -1, Failed: -1})
	if e.o.Steady > 0 { // the steady phase measures retention as notifyd runs it
		cfg.Retention = config.FillRetention(config.Retention{Sent: e.o.Retain, Cancelled: e.o.Retain, Failed: e.o.Retain,
			Interval: min(time.Minute, e.o.Retain/2)})
	}
	e.cfg = &cfg
	if e.traces, err = tracing.New(ctx, cfg.Tracing, tracing.Options{Service: "notifyd-bench"}); err != nil {
		return err
	}
	e.onClose(e.traces.Shutdown)

	if err := e.migrate(ctx); err != nil {
		return err
	}
	if e.app, err = openPool(ctx, schemaURL, 4); err != nil {
		return err
	}
	e.onClose(func(context.Context) error { e.app.Close(); return nil })
	e.store = outbox.New(e.app)
	e.onClose(func(context.Context) error { e.store.Close(); return nil })

	if err := e.connectRedis(ctx); err != nil {
		return err
	}

	if e.sink, err = StartSink(); err != nil {
		return err
	}
	e.onClose(func(context.Context) error { return e.sink.Close() })

	// Every other channel key keeps its default, as in a config file that
	// sets only these.
	ch := config.Channel{
		Plugin:      Plugin,
		Config:      map[string]any{"url": e.sink.URL() + HookPath, "timeout": "10s"},
		Concurrency: e.o.Concurrency,
		BatchSize:   e.o.Batch,
		Partitions:  e.o.Partitions,
	}
	if e.o.Provider == ProviderAlimtalk {
		// The fake partner accepts and delivers every message, counting each
		// at the sink under its number.
		partner, err := fakesens.Start()
		if err != nil {
			return err
		}
		partner.OnAccept = e.sink.deliver
		e.onClose(func(context.Context) error { return partner.Close() })
		ch.Plugin, ch.Config = "kakao", map[string]any{
			"mode": "alimtalk", "timeout": "10s",
			"alimtalk": partner.Alimtalk("daily_quiz", e.o.AlimtalkConfirm),
			"template": map[string]any{"content": "{{.title}}: {{.text}}"},
		}
	}
	cfg.Channels = map[string]config.Channel{Channel: config.FillChannel(ch)}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("bench: %w", err)
	}

	e.tracer = newTracer(e.o.Instances)
	for i := range e.o.Instances {
		if err := e.startInstance(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// migrate creates the outbox tables in the run's schema.
func (e *env) migrate(ctx context.Context) error {
	pool, err := openPool(ctx, e.cfg.Postgres.URL, 1)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := outbox.Migrate(ctx, pool); err != nil {
		return fmt.Errorf("bench: migrate schema %s: %w", e.schema, err)
	}
	return nil
}

// connectRedis connects the bench's own client (key clean-up) to Redis: a
// throw-away cluster when Options.RedisCluster, else what the config says.
func (e *env) connectRedis(ctx context.Context) error {
	if e.o.RedisCluster {
		c, err := StartCluster(ctx)
		if err != nil {
			return err
		}
		e.cluster = c
		e.onClose(func(context.Context) error { return c.Close() })
		e.cfg.Redis.URL, e.cfg.Redis.ClusterAddrs = "", c.Addrs
	}
	key := "redis.url"
	if len(e.cfg.Redis.ClusterAddrs) > 0 {
		key = "redis.cluster_addrs"
	}
	var err error
	e.rc, err = queue.Connect(e.cfg.Redis.URL, e.cfg.Redis.ClusterAddrs, e.cfg.Redis.PoolSize)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	e.onClose(func(context.Context) error { return e.rc.Close() })
	if err := e.rc.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("bench: connect to Redis (%s): %w", key, err)
	}
	e.onClose(e.deleteKeys)
	return nil
}

// partitions is how many partitions the first engine runs the channel on
// (what it did with the config, not what the options asked).
func (e *env) partitions(ctx context.Context) int {
	for _, st := range e.instances[0].engine.Channels(ctx) {
		if st.Name == Channel {
			return st.Partitions
		}
	}
	return 0
}

// redisMode names the Redis the run used, for the report.
func (e *env) redisMode() string {
	switch {
	case e.cluster != nil:
		return fmt.Sprintf("cluster of %d masters started by the bench", clusterMasters)
	case len(e.cfg.Redis.ClusterAddrs) > 0:
		return "cluster (redis.cluster_addrs)"
	default:
		return "single (redis.url)"
	}
}

// startInstance starts delivery engine i as a notifyd process would: its own
// instance id, Postgres pool, plugin host (and so plugin process) and Redis
// client state; the one sink and tracer are shared.
func (e *env) startInstance(ctx context.Context, i int) error {
	in := &instance{id: fmt.Sprintf("bench-%s-%d", e.runID, i+1)}
	log := e.o.Logger
	if e.o.Instances > 1 {
		log = log.With("instance", in.id)
	}
	// The bench keeps the plugin host, to read the plugin's pid (CPU) and
	// limits (the report), and hands it to the daemon as its providers.
	in.host = pluginhost.New(e.cfg.Plugins, log.Named("plugins"))
	e.onClose(in.host.Stop)
	var err error
	if in.plugin, err = in.host.Plugin(ctx, e.cfg.Channels[Channel].Plugin); err != nil {
		if errors.Is(err, pluginhost.ErrNotFound) {
			return fmt.Errorf("bench: %w (build it with `make build`, or point --plugins-dir at the directory holding notifyd-plugin-webhook)", err)
		}
		return fmt.Errorf("bench: %w", err)
	}
	// The whole daemon, as `notifyd serve` runs it (its own instance id,
	// Postgres pool and Redis client; an API on a port of its own, idle),
	// through the root package; the tracer's hooks reach into its pipeline.
	cfg := *e.cfg
	cfg.Instance.ID = in.id
	cfg.HTTP.Listen, cfg.HTTP.Tokens = "127.0.0.1:0", nil
	o := notifyd.Options{Logger: log, Providers: providers.Host(in.host), Hooks: e.tracer.hooks(i), NoMigrate: true}
	if e.traces != nil {
		o.TracerProvider = e.traces.TracerProvider()
	}
	d, err := notifyd.Start(ctx, &cfg, o)
	if err != nil {
		return fmt.Errorf("bench: start notifyd %s: %w", in.id, err)
	}
	e.onClose(func(ctx context.Context) error {
		if err := d.Stop(ctx); err != nil {
			return fmt.Errorf("bench: stop notifyd %s: %w", in.id, err)
		}
		return nil
	})
	in.engine = d.Engine()
	e.instances = append(e.instances, in)
	for _, st := range in.engine.Channels(ctx) {
		if !st.Running {
			return fmt.Errorf("bench: channel %s did not start on %s: %s", st.Name, in.id, st.Error)
		}
	}
	return nil
}

// Teardown holds teardown steps: onClose registers one, close runs them
// in reverse and joins their errors. The peer benchmark (bench/peers) keeps
// its runs' steps in one too.
type Teardown struct{ steps []func(context.Context) error }

func (t *Teardown) onClose(f func(context.Context) error) { t.steps = append(t.steps, f) }

func (t *Teardown) close(ctx context.Context) error {
	var errs []error
	for i := len(t.steps) - 1; i >= 0; i-- {
		if err := t.steps[i](ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// OnClose registers a teardown step.
func (t *Teardown) OnClose(f func(context.Context) error) { t.onClose(f) }

// Close runs the steps in reverse.
func (t *Teardown) Close(ctx context.Context) error { return t.close(ctx) }

// deleteKeys removes every Redis key under the run's prefix.
func (e *env) deleteKeys(ctx context.Context) error {
	del := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, e.prefix+":*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		for len(keys) > 0 {
			n := min(len(keys), 1000)
			// One key per call: in a cluster the keys live in different slots.
			for _, k := range keys[:n] {
				if err := c.Del(ctx, k).Err(); err != nil {
					return err
				}
			}
			keys = keys[n:]
		}
		return nil
	}
	var err error
	switch c := e.rc.(type) {
	case *redis.Client:
		err = del(ctx, c)
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, del)
	default:
		err = fmt.Errorf("unexpected Redis client %T", e.rc)
	}
	if err != nil {
		return fmt.Errorf("bench: delete Redis keys %s:*: %w", e.prefix, err)
	}
	return nil
}

func openPool(ctx context.Context, dsn string, maxConns int32) (*pgxpool.Pool, error) {
	pool, err := OpenPool(ctx, dsn, "", maxConns)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return pool, nil
}

// OpenPool opens a pool of at most maxConns connections to dsn and pings it;
// app, when set, is its connections' application_name. The peer benchmark
// (bench/peers) opens its pools with it too.
func OpenPool(ctx context.Context, dsn, app string, maxConns int32) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres URL: %w", err)
	}
	pc.MaxConns = maxConns
	if app != "" {
		pc.ConnConfig.RuntimeParams["application_name"] = app
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err == nil {
		if err = pool.Ping(ctx); err != nil {
			pool.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	return pool, nil
}

// withSession returns the URL with search_path set to schema, so every
// connection of the pool works inside it, and application_name set to app.
func withSession(raw, schema, app string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("bench: postgres.url is not a URL: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", app)
	// Encode writes a space as "+", which pgx takes literally (options=-c
	// a=b -c c=d); %20 reads as a space everywhere.
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String(), nil
}

// sampleCPU reads the CPU counters of this process, the plugin and this
// run's Postgres backends.
func (e *env) sampleCPU(ctx context.Context) cpuSample {
	var pids []int
	rows, err := e.admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, e.prefix)
	if err == nil {
		for rows.Next() {
			var pid int
			if rows.Scan(&pid) == nil {
				pids = append(pids, pid)
			}
		}
		rows.Close()
	}
	plugins := make([]int, 0, len(e.instances))
	for _, in := range e.instances {
		plugins = append(plugins, in.plugin.PID())
	}
	return sampleCPU(plugins, pids)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func machine() Machine {
	return Machine{
		CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(),
		LoadBefore: loadAvg(),
	}
}

// traceParent is a sampled traceparent of a new trace when the run traces,
// "" otherwise.
func (e *env) traceParent() string {
	if e.traces == nil {
		return ""
	}
	var b [24]byte
	_, _ = rand.Read(b[:])
	return "00-" + hex.EncodeToString(b[:16]) + "-" + hex.EncodeToString(b[16:]) + "-01"
}
