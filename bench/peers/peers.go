// Package peers measures notifyd's 08:00 burst side by side with two peers
// — River (a Postgres job queue) and asynq (a Redis task queue) — and with
// raw HTTP POSTs, in one run on one machine (issue 29; docs/performance.md,
// "Peers side by side").
//
// Every system delivers the same N notifications, all due at one instant T,
// one POST each to one sink process that decodes every body as JSON, with the
// same concurrency. Each runs in its own fresh Postgres database or Redis DB
// number, with its own processes: the real notifyd daemon (bin/notifyd serve)
// and its webhook plugin; a River client; an asynq server; a plain HTTP
// client. From T until the sink has seen all N the run measures throughput
// and, from /proc, the CPU time of every process involved: the system's own,
// its Postgres backends, the Redis server, the sink.
//
// It is a Go module of its own so that River and asynq never enter the
// daemon's go.mod.
package peers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"

	"github.com/notifyd/notifyd/internal/bench"
)

// The systems.
const (
	Notifyd = "notifyd"
	River   = "river"
	Asynq   = "asynq"
	Raw     = "raw"
)

// Systems is every system, in the first round's order.
var Systems = []string{Notifyd, River, Asynq, Raw}

// Defaults (issue 29's scenario).
const (
	DefaultN           = 50_000
	DefaultConcurrency = 64
	DefaultBatch       = 256
	DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	DefaultRedisAddr   = "127.0.0.1:6379"
	// DefaultRedisDB is notifyd's Redis DB number; asynq's is the next.
	DefaultRedisDB = 14
)

// The peers' settings for a burst (see Options). River's and asynq's
// defaults poll for due work every 1–5 s, and River fetches at most once
// per FetchCooldown (100 ms) per queue, which caps 64 workers at 640 jobs/s
// (measured: 619/s); a user who runs a daily burst on them sets these.
// River's cooldown is its minimum: in trial bursts of 50,000 on the busy
// 2-core machine, 1 and 5 ms were within each other's noise (4,221 and
// 3,673 jobs/s one minute, 848 and 897 in a slower one), 20 ms slower
// (2,430), at about the same CPU per job (173–189 µs).
const (
	DefaultRiverFetchCooldown = river.FetchCooldownMin
	DefaultRiverFetchPoll     = 100 * time.Millisecond
	DefaultAsynqTaskCheck     = 100 * time.Millisecond
	DefaultAsynqDelayedCheck  = 100 * time.Millisecond
)

// stall fails a run when the sink sees nothing new for this long.
const stall = 60 * time.Second

// Options configure a Run.
type Options struct {
	N           int
	Concurrency int
	Batch       int      // notifyd's batch_size
	Systems     []string // which systems, in the first round's order
	Rounds      int      // each round runs every system; odd rounds in reverse order
	// PostgresURL is a database to connect to for creating and dropping
	// each system's own database (the same server holds them).
	PostgresURL string
	RedisAddr   string
	RedisDB     int // notifyd's DB number; asynq uses RedisDB+1
	// NotifydBin is bin/notifyd; PluginsDir holds notifyd-plugin-webhook.
	NotifydBin string
	PluginsDir string

	RiverFetchCooldown time.Duration
	RiverFetchPoll     time.Duration
	AsynqTaskCheck     time.Duration
	AsynqDelayedCheck  time.Duration
	// AsynqPoolSize is asynq's Redis pool; 0: concurrency + 16 (asynq's
	// own default, 10 per CPU, is below the 64 workers here).
	AsynqPoolSize int

	// Out gets progress lines and each round's table; nil discards them.
	Out io.Writer
	// WorkDir holds the daemon's config and every process's log; "" makes
	// a temporary one, removed after a successful run.
	WorkDir string
}

func (o *Options) fill() error {
	o.N = cmp.Or(o.N, DefaultN)
	o.Concurrency = cmp.Or(o.Concurrency, DefaultConcurrency)
	o.Batch = cmp.Or(o.Batch, DefaultBatch)
	o.Rounds = cmp.Or(o.Rounds, 1)
	o.PostgresURL = cmp.Or(o.PostgresURL, DefaultPostgresURL)
	o.RedisAddr = cmp.Or(o.RedisAddr, DefaultRedisAddr)
	o.RiverFetchCooldown = cmp.Or(o.RiverFetchCooldown, DefaultRiverFetchCooldown)
	o.RiverFetchPoll = cmp.Or(o.RiverFetchPoll, DefaultRiverFetchPoll)
	o.AsynqTaskCheck = cmp.Or(o.AsynqTaskCheck, DefaultAsynqTaskCheck)
	o.AsynqDelayedCheck = cmp.Or(o.AsynqDelayedCheck, DefaultAsynqDelayedCheck)
	o.AsynqPoolSize = cmp.Or(o.AsynqPoolSize, o.Concurrency+16)
	if len(o.Systems) == 0 {
		o.Systems = Systems
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	seen := map[string]bool{}
	for _, s := range o.Systems {
		if !slices.Contains(Systems, s) {
			return fmt.Errorf("peers: -systems: unknown system %q (want some of %s)", s, strings.Join(Systems, ","))
		}
		if seen[s] {
			return fmt.Errorf("peers: -systems: %s given twice", s)
		}
		seen[s] = true
	}
	switch {
	case o.N < 1 || o.N > 10_000_000:
		return fmt.Errorf("peers: -n %d: want 1 to 10,000,000", o.N)
	case o.Concurrency < 1 || o.Concurrency > 10_000:
		return fmt.Errorf("peers: -concurrency %d: want 1 to 10,000", o.Concurrency)
	case o.Batch < 1 || o.Batch > 1000:
		return fmt.Errorf("peers: -batch %d: want 1 to 1000", o.Batch)
	case o.Rounds < 1 || o.Rounds > 100:
		return fmt.Errorf("peers: -rounds %d: want 1 to 100", o.Rounds)
	case o.RedisDB < 0 || o.RedisDB > 14:
		return fmt.Errorf("peers: -redis-db %d: want 0 to 14 (asynq takes the next)", o.RedisDB)
	}
	if seen[Notifyd] {
		if o.NotifydBin == "" {
			o.NotifydBin = findNotifyd()
		}
		if o.NotifydBin == "" {
			return errors.New("peers: bin/notifyd not found here or above; build it with `make build` or give -notifyd")
		}
		if o.PluginsDir == "" {
			o.PluginsDir = filepath.Join(filepath.Dir(o.NotifydBin), "plugins")
		}
		for _, p := range []string{o.NotifydBin, filepath.Join(o.PluginsDir, "notifyd-plugin-webhook")} {
			if _, err := os.Stat(p); err != nil {
				return fmt.Errorf("peers: %w (build it with `make build`)", err)
			}
		}
		var err error
		if o.NotifydBin, err = filepath.Abs(o.NotifydBin); err != nil {
			return err
		}
		if o.PluginsDir, err = filepath.Abs(o.PluginsDir); err != nil {
			return err
		}
	}
	return nil
}

// findNotifyd looks for bin/notifyd in the working directory and up to
// three above it (the repository's root, from bench/peers).
func findNotifyd() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for range 4 {
		p := filepath.Join(dir, "bin", "notifyd")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
		dir = filepath.Dir(dir)
	}
	return ""
}

// Report is everything a Run measured.
type Report struct {
	Started time.Time `json:"started"`
	Machine Machine   `json:"machine"`
	Setup   Setup     `json:"setup"`
	Rounds  []Round   `json:"rounds"`
	// Summary is over all rounds: each system's median.
	Summary *Summary `json:"summary,omitempty"`
}

// Machine is where the run happened.
type Machine struct {
	CPUs       int        `json:"cpus"`
	Go         string     `json:"go"`
	LoadBefore [3]float64 `json:"load_before"`
	LoadAfter  [3]float64 `json:"load_after"`
}

// Setup is what was measured, and how.
type Setup struct {
	N           int      `json:"n"`
	Concurrency int      `json:"concurrency"`
	Batch       int      `json:"notifyd_batch_size"`
	Systems     []string `json:"systems"`
	Rounds      int      `json:"rounds"`
	BodyBytes   int      `json:"body_bytes"`
	// The peers' settings.
	RiverFetchCooldownMs float64  `json:"river_fetch_cooldown_ms"`
	RiverFetchPollMs     float64  `json:"river_fetch_poll_ms"`
	AsynqTaskCheckMs     float64  `json:"asynq_task_check_ms"`
	AsynqDelayedCheckMs  float64  `json:"asynq_delayed_check_ms"`
	AsynqPoolSize        int      `json:"asynq_pool_size"`
	Notes                []string `json:"notes"`
}

// Round is one pass over the systems.
type Round struct {
	Index   int      `json:"index"`
	Order   []string `json:"order"`
	Results []Result `json:"results"`
	Ratios  Ratios   `json:"ratios"`
}

// Result is one system's burst.
type Result struct {
	System     string `json:"system"`
	N          int    `json:"n"`
	Delivered  int    `json:"delivered"`  // distinct notifications the sink saw
	Duplicates int    `json:"duplicates"` // requests beyond the first per notification
	// Connections is how many connections the sink accepted (the
	// coordinator's own few included).
	Connections int       `json:"sink_connections"`
	DueAt       time.Time `json:"due_at"` // T
	// PrepareSeconds is how long writing the burst took (not timed).
	PrepareSeconds float64 `json:"prepare_seconds"`
	FirstMs        float64 `json:"first_ms"` // the first delivery, after T
	LastMs         float64 `json:"last_ms"`  // the last
	P50Ms          float64 `json:"p50_ms"`   // due → delivered, over the N
	P99Ms          float64 `json:"p99_ms"`
	Throughput     float64 `json:"throughput_per_s"` // N / (last − T)
	// SettledMs: when the system itself had nothing left (every row SENT,
	// job completed, task done), after T; read after the timed phase.
	SettledMs float64 `json:"settled_ms"`
	CPU       CPU     `json:"cpu"`
	// PerNotificationUs is CPU per notification in µs: "total", "postgres",
	// "redis", "sink", "own" and each own process by name.
	PerNotificationUs map[string]float64 `json:"cpu_per_notification_us"`
	Load              [3]float64         `json:"load_at_end"`
}

// Ratios compare notifyd with the others of the same round (0 where one
// side did not run).
type Ratios struct {
	// BestPeer is the faster of River and asynq; ThroughputVsBestPeer
	// notifyd's throughput over its.
	BestPeer             string  `json:"best_peer,omitempty"`
	ThroughputVsBestPeer float64 `json:"throughput_vs_best_peer"`
	// CheapestPeer needs the least CPU per notification; CPUVsCheapestPeer
	// is notifyd's over its.
	CheapestPeer      string  `json:"cheapest_peer,omitempty"`
	CPUVsCheapestPeer float64 `json:"cpu_vs_cheapest_peer"`
	ThroughputVsRaw   float64 `json:"throughput_vs_raw"`
	CPUVsRaw          float64 `json:"cpu_vs_raw"`
}

// Summary is the median of each system over the rounds.
type Summary struct {
	Throughput map[string]float64 `json:"throughput_per_s"`
	CPUUs      map[string]float64 `json:"cpu_per_notification_us"`
	Ratios     Ratios             `json:"ratios"`
}

// Run runs every system Rounds times and reports.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	c := &coord{o: o, id: randHex(3)}
	if o.WorkDir == "" {
		dir, err := os.MkdirTemp("", "notifyd-peers-")
		if err != nil {
			return nil, err
		}
		c.o.WorkDir = dir
		c.tempDir = dir
	} else if err := os.MkdirAll(o.WorkDir, 0o755); err != nil {
		return nil, err
	}
	var err error
	if c.admin, err = openPool(ctx, o.PostgresURL, "peers-coordinator", 2); err != nil {
		return nil, err
	}
	defer c.admin.Close()
	c.rc = redis.NewClient(&redis.Options{Addr: o.RedisAddr})
	defer c.rc.Close()

	created := time.Now().Truncate(time.Microsecond)
	rep := &Report{
		Started: time.Now().UTC(),
		Machine: Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), LoadBefore: bench.LoadAvg()},
		Setup: Setup{
			N: o.N, Concurrency: o.Concurrency, Batch: o.Batch, Systems: o.Systems, Rounds: o.Rounds,
			BodyBytes:            len(bench.Envelope(int64(o.N), bench.Recipient(o.N-1), created)),
			RiverFetchCooldownMs: ms(o.RiverFetchCooldown), RiverFetchPollMs: ms(o.RiverFetchPoll),
			AsynqTaskCheckMs: ms(o.AsynqTaskCheck), AsynqDelayedCheckMs: ms(o.AsynqDelayedCheck),
			AsynqPoolSize: o.AsynqPoolSize,
			Notes:         notes,
		},
	}
	for r := range o.Rounds {
		order := slices.Clone(o.Systems)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		round := Round{Index: r + 1, Order: order}
		for _, name := range order {
			c.progress("round %d: %s", r+1, name)
			res, err := c.runOne(ctx, name)
			for try := 2; errors.Is(err, errDisturbed) && try <= maxTries; try++ {
				c.progress("%s: %v; running it again (try %d of %d)", name, err, try, maxTries)
				if err = c.waitServices(ctx); err == nil {
					res, err = c.runOne(ctx, name)
				}
			}
			if err != nil {
				rep.Machine.LoadAfter = bench.LoadAvg()
				return rep, fmt.Errorf("peers: round %d, %s: %w (logs in %s)", r+1, name, err, c.o.WorkDir)
			}
			round.Results = append(round.Results, res)
		}
		round.Ratios = ratios(round.Results)
		rep.Rounds = append(rep.Rounds, round)
		writeRound(o.Out, o, round)
	}
	if o.Rounds > 1 {
		rep.Summary = summarise(rep.Rounds)
		writeSummary(o.Out, rep.Summary)
	}
	rep.Machine.LoadAfter = bench.LoadAvg()
	if c.tempDir != "" {
		_ = os.RemoveAll(c.tempDir)
	}
	return rep, nil
}

// notes say what a reader of the figures must know.
var notes = []string{
	"notifyd: the real daemon (bin/notifyd serve) with its webhook plugin; the burst is written straight into its outbox (outbox.Insert, one transaction, due_at = T), as notifyd-bench's burst does",
	"river: InsertManyFast in one transaction with ScheduledAt = T, at least 6 s ahead so River's scheduler (every 5 s, 5 s look-ahead) has made the jobs available by T, as it has for jobs written long before",
	"asynq: Enqueue with ProcessAt(T); its forwarder moves them to pending from T",
	"raw: plain POSTs from T, no queue",
	"the peers' workers post with net/http's client; notifyd's webhook plugin with fasthttp's",
	"redis is the whole Redis server at -redis (shared: an upper bound), counted only for the systems that use Redis; postgres is the backends of the system's own database",
	"a run during which Postgres or Redis restarted is run again (up to 3 tries)",
}

// coord is the coordinator's state across runs.
type coord struct {
	o       Options
	id      string
	admin   *pgxpool.Pool
	rc      *redis.Client // DB 0 of -redis: INFO only
	tempDir string
}

// errDisturbed is a run during which Postgres or Redis restarted (on a
// shared machine, another session's CI rehearsal does that): its figures are
// void, and it is run again up to maxTries times in all.
var errDisturbed = errors.New("Postgres or Redis restarted during the run")

const maxTries = 3

// services identifies the running Postgres and Redis servers.
type services struct {
	pgStart  time.Time
	redisID  string // run_id
	redisPID int    // process_id: the server whose CPU is counted
}

func (c *coord) services(ctx context.Context) (services, error) {
	var s services
	if err := c.admin.QueryRow(ctx, `SELECT pg_postmaster_start_time()`).Scan(&s.pgStart); err != nil {
		return s, fmt.Errorf("Postgres: %w", err)
	}
	info, err := c.rc.Info(ctx, "server").Result()
	if err != nil {
		return s, fmt.Errorf("Redis %s: %w", c.o.RedisAddr, err)
	}
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "run_id":
			s.redisID = v
		case "process_id":
			s.redisPID, _ = strconv.Atoi(v)
		}
	}
	return s, nil
}

// waitServices waits up to two minutes for Postgres and Redis to answer.
func (c *coord) waitServices(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := c.services(ctx)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		sleepCtx(ctx, time.Second)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func (c *coord) progress(format string, args ...any) {
	fmt.Fprintf(c.o.Out, "peers: "+format+"\n", args...)
}

// run is one system's run: what it set up, to tear down.
type run struct {
	c        *coord
	name     string
	sink     *proc
	sinkURL  string
	sc       *sinkClient
	db       string // the system's own database, if any
	dbURL    string // its URL, without application_name
	procs    []*proc
	teardown bench.Teardown
}

func (r *run) onClose(f func(context.Context) error) { r.teardown.OnClose(f) }

func (r *run) close(ctx context.Context) error { return r.teardown.Close(ctx) }

// system is what differs between the systems.
type system interface {
	// start creates the system's database and processes (not timed).
	start(ctx context.Context, r *run) error
	// prepare writes the burst due at T (not timed), ready to commit.
	prepare(ctx context.Context, r *run, due time.Time) (commit, abort func(context.Context) error, err error)
	// lead is how long before T prepare must have finished.
	lead() time.Duration
	// groups are the system's own processes by name.
	groups() []group
	usesRedis() bool
	// settle waits until the system has nothing left to do.
	settle(ctx context.Context, r *run) error
}

func (c *coord) newSystem(name string) system {
	switch name {
	case Notifyd:
		return &notifydSys{}
	case River:
		return &riverSys{}
	case Asynq:
		return &asynqSys{}
	default:
		return &rawSys{}
	}
}

// runOne runs one system's burst from start to tear-down.
func (c *coord) runOne(ctx context.Context, name string) (res Result, err error) {
	res = Result{System: name, N: c.o.N}
	r := &run{c: c, name: name}
	svc, err := c.services(ctx)
	if err != nil {
		return res, err
	}
	defer func() {
		// An error while Postgres or Redis restarted is the restart's.
		if err != nil && !errors.Is(err, errDisturbed) {
			if now, serr := c.services(ctx); serr != nil || now != svc {
				err = fmt.Errorf("%w (%v)", errDisturbed, err)
			}
		}
	}()
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if cerr := r.close(cctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	var line string
	if r.sink, line, err = startRole(ctx, c.o.WorkDir, roleSink); err != nil {
		return res, err
	}
	r.onClose(func(context.Context) error { return r.sink.stop(10 * time.Second) })
	r.sinkURL = line
	r.sc = &sinkClient{url: line, hc: &http.Client{Timeout: time.Minute}}

	sys := c.newSystem(name)
	if err := sys.start(ctx, r); err != nil {
		return res, err
	}
	due, took, err := c.prepare(ctx, r, sys)
	if err != nil {
		return res, err
	}
	res.DueAt, res.PrepareSeconds = due, took.Seconds()
	if name == Raw {
		c.progress("%s: the client starts at %s", name, due.Format("15:04:05"))
	} else {
		c.progress("%s: %d notifications written in %s, due at %s", name, c.o.N, took.Round(time.Millisecond), due.Format("15:04:05"))
	}

	sleepCtx(ctx, time.Until(due))
	groups := append(sys.groups(), group{name: "sink", pids: []int{r.sink.pid()}})
	backends := r.backends(ctx)
	cpu0 := sample(groups, backends, svc.redisPID)
	st, err := c.waitSink(ctx, r)
	groups = append(sys.groups(), group{name: "sink", pids: []int{r.sink.pid()}})
	cpu1 := sample(groups, union(backends, r.backends(ctx)), svc.redisPID)
	res.Load = bench.LoadAvg()
	res.Delivered, res.Duplicates = st.Distinct, st.Deliveries-st.Distinct
	if err != nil {
		return res, err
	}
	// A restart's processes took their CPU time with them.
	if now, err := c.services(ctx); err != nil || now != svc {
		return res, errDisturbed
	}
	res.CPU = cpu1.since(cpu0, sys.usesRedis())
	res.PerNotificationUs = perNotification(res.CPU, c.o.N)
	if st, err = r.sc.Stats(ctx); err != nil {
		return res, err
	}
	at := func(ns int64) float64 { return ms(time.Unix(0, ns).Sub(due)) }
	res.FirstMs, res.LastMs, res.P50Ms, res.P99Ms = at(st.FirstNs), at(st.LastNs), at(st.P50Ns), at(st.P99Ns)
	res.Connections = st.Conns
	if last := time.Unix(0, st.LastNs).Sub(due); last > 0 {
		res.Throughput = float64(c.o.N) / last.Seconds()
	}
	if err := sys.settle(ctx, r); err != nil {
		return res, err
	}
	res.SettledMs = ms(time.Since(due))
	// Deliveries a retry added while the system settled.
	if st, err = r.sc.Stats(ctx); err == nil {
		res.Delivered, res.Duplicates = st.Distinct, st.Deliveries-st.Distinct
	}
	c.progress("%s: %d delivered in %.0f ms: %.0f/s, %.0f µs CPU per notification", name, res.Delivered, res.LastMs, res.Throughput, res.PerNotificationUs["total"])
	return res, nil
}

// prepare writes the burst due at a whole second T, leaving at least the
// system's lead before T; writing that took too long is rolled back and
// done again with a later T.
func (c *coord) prepare(ctx context.Context, r *run, sys system) (time.Time, time.Duration, error) {
	perRow := 100 * time.Microsecond // a first guess: 10k rows/s on a busy 2-core machine
	for attempt := 1; ; attempt++ {
		start := time.Now()
		due := start.Add(time.Duration(c.o.N)*perRow + sys.lead() + time.Second).Truncate(time.Second)
		commit, abort, err := sys.prepare(ctx, r, due)
		if err != nil {
			return due, 0, err
		}
		took := time.Since(start)
		if time.Until(due) < sys.lead() && attempt < 3 {
			if err := abort(ctx); err != nil {
				return due, took, err
			}
			perRow = 2 * took / time.Duration(c.o.N)
			c.progress("%s: writing took %s, too close to T; again with a later T", r.name, took.Round(time.Millisecond))
			continue
		}
		if err := commit(ctx); err != nil {
			return due, took, err
		}
		if time.Until(due) < 0 {
			return due, took, fmt.Errorf("writing the burst took %s, past T", took.Round(time.Millisecond))
		}
		return due, time.Since(start), nil
	}
}

// waitSink waits until the sink has seen N distinct notifications, failing
// when it sees nothing new for the stall time or a process exits.
func (c *coord) waitSink(ctx context.Context, r *run) (SinkStats, error) {
	last, lastChange := -1, time.Now()
	procs := append([]*proc{r.sink}, r.procs...)
	for {
		st, err := r.sc.Wait(ctx, c.o.N, time.Second)
		if err != nil {
			return st, err
		}
		if st.Distinct >= c.o.N {
			return st, nil
		}
		for _, p := range procs {
			if err := p.exited(); err != nil {
				return st, fmt.Errorf("the sink saw %d of %d: %w", st.Distinct, c.o.N, err)
			}
		}
		if st.Distinct != last {
			last, lastChange = st.Distinct, time.Now()
		} else if time.Since(lastChange) > stall {
			return st, fmt.Errorf("the sink saw %d of %d and nothing new for %s", st.Distinct, c.o.N, stall)
		}
		if err := ctx.Err(); err != nil {
			return st, err
		}
	}
}

// createDB creates the system's own database and drops it at the end.
func (r *run) createDB(ctx context.Context) error {
	r.db = fmt.Sprintf("peers_%s_%s", r.c.id, r.name)
	if _, err := r.c.admin.Exec(ctx, `CREATE DATABASE `+r.db); err != nil {
		return fmt.Errorf("create database %s: %w", r.db, err)
	}
	r.onClose(func(ctx context.Context) error {
		if _, err := r.c.admin.Exec(ctx, `DROP DATABASE IF EXISTS `+r.db+` WITH (FORCE)`); err != nil {
			return fmt.Errorf("drop database %s: %w", r.db, err)
		}
		return nil
	})
	u, err := url.Parse(r.c.o.PostgresURL)
	if err != nil {
		return err
	}
	u.Path = "/" + r.db
	r.dbURL = u.String()
	return nil
}

// appURL is the database's URL with an application_name.
func (r *run) appURL(app string) string {
	u, _ := url.Parse(r.dbURL)
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String()
}

// backends are the pids of the system's Postgres sessions (the
// coordinator's own left out).
func (r *run) backends(ctx context.Context) []int {
	if r.db == "" {
		return nil
	}
	rows, err := r.c.admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name <> 'peers-coordinator'`, r.db)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var pids []int
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// redisDB connects to Redis DB n, which must be empty, and empties it at
// the end.
func (r *run) redisDB(ctx context.Context, n int) (*redis.Client, error) {
	rc := redis.NewClient(&redis.Options{Addr: r.c.o.RedisAddr, DB: n})
	size, err := rc.DBSize(ctx).Result()
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("redis %s DB %d: %w", r.c.o.RedisAddr, n, err)
	}
	if size != 0 {
		rc.Close()
		return nil, fmt.Errorf("redis %s DB %d holds %d keys: choose free DB numbers with -redis-db", r.c.o.RedisAddr, n, size)
	}
	r.onClose(func(ctx context.Context) error {
		defer rc.Close()
		return rc.FlushDB(ctx).Err()
	})
	return rc, nil
}

func openPool(ctx context.Context, dsn, app string, maxConns int32) (*pgxpool.Pool, error) {
	return bench.OpenPool(ctx, dsn, app, maxConns)
}

func perNotification(u CPU, n int) map[string]float64 {
	us := func(s float64) float64 { return 1e6 * s / float64(n) }
	m := map[string]float64{"total": us(u.Total), "postgres": us(u.Postgres), "redis": us(u.Redis), "sink": us(u.Sink)}
	var own float64
	for name, s := range u.Own {
		m["own:"+name] = us(s)
		own += s
	}
	m["own"] = us(own)
	return m
}

func ratios(rs []Result) Ratios {
	var q Ratios
	by := map[string]Result{}
	for _, r := range rs {
		by[r.System] = r
	}
	nd, ok := by[Notifyd]
	if !ok {
		return q
	}
	var fast, cheap *Result
	for _, p := range []string{River, Asynq} {
		r, ok := by[p]
		if !ok {
			continue
		}
		if fast == nil || r.Throughput > fast.Throughput {
			fast = &r
		}
		if cheap == nil || r.PerNotificationUs["total"] < cheap.PerNotificationUs["total"] {
			cheap = &r
		}
	}
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	if fast != nil {
		q.BestPeer, q.ThroughputVsBestPeer = fast.System, div(nd.Throughput, fast.Throughput)
		q.CheapestPeer, q.CPUVsCheapestPeer = cheap.System, div(nd.PerNotificationUs["total"], cheap.PerNotificationUs["total"])
	}
	if raw, ok := by[Raw]; ok {
		q.ThroughputVsRaw = div(nd.Throughput, raw.Throughput)
		q.CPUVsRaw = div(nd.PerNotificationUs["total"], raw.PerNotificationUs["total"])
	}
	return q
}

func summarise(rounds []Round) *Summary {
	tp, cpu := map[string][]float64{}, map[string][]float64{}
	for _, r := range rounds {
		for _, res := range r.Results {
			tp[res.System] = append(tp[res.System], res.Throughput)
			cpu[res.System] = append(cpu[res.System], res.PerNotificationUs["total"])
		}
	}
	s := &Summary{Throughput: map[string]float64{}, CPUUs: map[string]float64{}}
	var med []Result
	for name := range tp {
		s.Throughput[name], s.CPUUs[name] = median(tp[name]), median(cpu[name])
		med = append(med, Result{System: name, Throughput: s.Throughput[name], PerNotificationUs: map[string]float64{"total": s.CPUUs[name]}})
	}
	s.Ratios = ratios(med)
	return s
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func union(a, b []int) []int {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
