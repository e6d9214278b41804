// Package delivery is the pipeline of docs/design.md §4: relay PENDING rows into
// Redis, fetch them into this instance's backup list, claim them in Postgres,
// send them through the channel's plugin, and settle the verdicts — Postgres
// first, then Redis — plus the maintenance that makes it safe: retry
// promotion, lease renewal and reaping, the sweeper, and the resync after
// Redis lost its data.
package delivery

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/backoff"
	"github.com/notifyd/notifyd/internal/metrics"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/queue"
)

// ErrCrash, returned by a Hooks function, abandons the batch at that point as
// if the process had died there: nothing after the hook happens for it.
// Tests use it to open each crash window deterministically.
var ErrCrash = errors.New("delivery: simulated crash")

// Hooks are fault-injection points; nil functions are skipped.
type Hooks struct {
	AfterFetch  func(channel string, ids []int64) error // moved into the backup list, not yet claimed
	AfterClaim  func(channel string, ids []int64) error // PROCESSING in Postgres, not yet sent
	AfterSend   func(channel string, ids []int64) error // the provider answered, nothing settled
	AfterSettle func(channel string, ids []int64) error // committed in Postgres, not yet acked in Redis
}

// Options configure an Engine.
type Options struct {
	Config *config.Config
	Store  *outbox.Store
	Queue  *queue.Queue
	// Providers resolves channels' plugin names to providers: the plugin
	// host (providers.Host) or providers.InProcess; required.
	Providers Providers
	Logger    hclog.Logger
	Hooks     Hooks
	Now       func() time.Time // for tests; time.Now when nil
	// FetchWait is how long a fetcher on an empty queue blocks for a push
	// before it looks again at pause, breaker and rate limit; 0: a second.
	FetchWait time.Duration
	Instance  string // overrides config instance.id (tests)
	// OwnsInstance says no other live process can have this instance id
	// (notifyd.Start holds it with a lock): the rows in its own backup
	// lists at start were claimed by its dead predecessor, and are taken
	// over at once instead of after the claim's staleness period.
	OwnsInstance bool
	Metrics      *metrics.Delivery // where sends and settles are counted; nil: nowhere
	// Tracer records a span per delivery attempt of a traced notification;
	// nil: tracing off, and nothing is done per message (internal/tracing).
	Tracer trace.Tracer
}

// Engine runs every configured channel of one notifyd instance.
type Engine struct {
	cfg      *config.Config
	store    *outbox.Store
	queue    *queue.Queue
	plugins  Providers
	log      hclog.Logger
	hooks    Hooks
	metrics  *metrics.Delivery
	tracer   trace.Tracer // nil: off
	now      func() time.Time
	instance string
	// fetchWait: see Options.FetchWait.
	fetchWait time.Duration
	// ownsInstance: see Options.OwnsInstance.
	ownsInstance bool

	channels map[string]*channel
	settler  *settler
	// lane holds one token: the suspect (a row in flight when a process
	// died) being sent with nothing else suspect in flight (§10).
	lane chan struct{}

	// runCtx governs everything; fetchCtx is cancelled first on graceful stop.
	runCtx, fetchCtx       context.Context
	cancelRun, cancelFetch context.CancelFunc
	fetchWG, sendWG, bgWG  sync.WaitGroup
	stopOnce               sync.Once

	// A resync that failed part-way is retried by the epoch check until one
	// completes; resyncMu keeps passes from overlapping. resyncPending is
	// also set by a relay that failed, and stays set until a pass that
	// started relayGrace after the last such failure (relayFailedAt, under
	// resyncState) completes.
	resyncMu      sync.Mutex
	resyncPending atomic.Bool
	resyncState   sync.Mutex
	relayFailedAt time.Time

	// relayRefused counts the relays in a row that refused the oldest due
	// row alone (relay.go); relayLoop's own.
	relayRefused refusedAlone
	// relaySuspects are the due rows earlier relay passes found refused
	// alone with no row relaying after them (relay.go), at most
	// maxRefusedAlone; relayLoop's own, forgotten with relayRefused.
	relaySuspects []int64
	// relayStall and claimStall time how long those stages have failed.
	relayStall, claimStall stallClock
}

// ChannelState is what an operator sees of one channel on this instance.
type ChannelState struct {
	Name    string
	Plugin  string
	Running bool
	Error   string // why the channel is stopped, e.g. the plugin's Configure error
	Paused  bool
	Reason  string // the operator's reason for the pause
	Breaker string // closed, open or half-open
	// BreakerUntil is when an open breaker half-opens (zero otherwise).
	BreakerUntil time.Time
	Partitions   int
	Restarts     int // plugin process restarts
}

// New validates the options and builds an engine; Start runs it.
func New(o Options) (*Engine, error) {
	if o.Config == nil || o.Store == nil || o.Queue == nil || o.Providers == nil || o.Logger == nil {
		return nil, errors.New("delivery: Config, Store, Queue, Providers and Logger are required")
	}
	// Defaults are applied here too, not only by the config loader: an
	// engine built in code with a zero batch size once divided by zero.
	cfg := *o.Config
	cfg.Delivery = config.FillDelivery(cfg.Delivery)
	cfg.Retention = config.FillRetention(cfg.Retention)
	cfg.Channels = make(map[string]config.Channel, len(o.Config.Channels))
	for name, cc := range o.Config.Channels {
		cfg.Channels[name] = config.FillChannel(cc)
	}
	e := &Engine{
		cfg: &cfg, store: o.Store, queue: o.Queue, plugins: o.Providers,
		log: o.Logger, hooks: o.Hooks, now: o.Now, metrics: o.Metrics, tracer: o.Tracer,
		instance: o.Instance, channels: map[string]*channel{}, ownsInstance: o.OwnsInstance,
	}
	if e.fetchWait = o.FetchWait; e.fetchWait <= 0 {
		e.fetchWait = time.Second
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.instance == "" {
		e.instance = o.Config.Instance.ID
	}
	if e.instance == "" {
		e.instance = NewInstanceID()
	}
	for name, cc := range cfg.Channels {
		ch := &channel{
			e: e, name: name, cfg: cc, policy: backoff.FromConfig(cc.Retry),
			slots:   make(chan struct{}, cc.Concurrency+Prefetch(cc)),
			sending: make(chan struct{}, cc.Concurrency),
			queues:  QueueNames(name, cc.Partitions),
			log:     o.Logger.Named("channel").With("channel", name),
		}
		if err := ch.setupFlow(); err != nil {
			return nil, err
		}
		e.channels[name] = ch
	}
	e.settler = newSettler(e)
	e.lane = make(chan struct{}, 1)
	return e, nil
}

// QueueNames are the Redis queues of a channel with k partitions: the
// channel's name, or name#0 … name#k-1 (each its own hash slot).
func QueueNames(channel string, k int) []string {
	if k <= 1 {
		return []string{channel}
	}
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprintf("%s#%d", channel, i)
	}
	return out
}

// NewInstanceID is a fresh id unique to this process: host name plus random
// bits, so instances need no configuration to be told apart.
func NewInstanceID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "notifyd"
	}
	if len(host) > 40 {
		host = host[:40]
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return sanitize(host) + "-" + hex.EncodeToString(b)
}

func sanitize(s string) string {
	out := []byte(s)
	for i, c := range out {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			out[i] = '-'
		}
	}
	return string(out)
}

// Instance is this engine's instance id.
func (e *Engine) Instance() string { return e.instance }

// Start configures every channel's plugin and starts the stages. A channel
// whose plugin is missing, cannot start or refuses its config is stopped
// with the reason (see Channels); the others run. Channels are configured
// side by side, so a plugin that takes all of plugins.start_timeout holds
// no other channel's start past that bound (docs/design.md §7). Start
// returns an error only when no channel could start while some are
// configured.
func (e *Engine) Start(ctx context.Context) error {
	e.runCtx, e.cancelRun = context.WithCancel(context.WithoutCancel(ctx))
	e.fetchCtx, e.cancelFetch = context.WithCancel(e.runCtx)

	names := make([]string, 0, len(e.channels))
	for name := range e.channels {
		names = append(names, name)
	}
	sort.Strings(names)
	var wg sync.WaitGroup
	for _, name := range names {
		ch := e.channels[name]
		wg.Go(func() {
			if err := ch.configure(ctx); err != nil {
				ch.setError(err)
				e.log.Error("channel stopped", "channel", name, "plugin", ch.cfg.Plugin, "error", err)
			}
		})
	}
	wg.Wait()
	started := 0
	for _, name := range names {
		if e.channels[name].running() {
			started++
		}
	}
	if started == 0 && len(e.channels) > 0 {
		// Nothing runs: Stop has nothing to stop (no settler, no stages).
		e.cancelRun()
		e.cancelRun = nil
		return errors.New("delivery: no channel could start (see the errors above)")
	}

	// Leases first, so a reaper elsewhere never sees this instance as dead.
	for _, ch := range e.channels {
		if !ch.running() {
			continue
		}
		for _, q := range ch.queues {
			if err := e.queue.Renew(ctx, q, e.instance, e.cfg.Delivery.LeaseTTL); err != nil {
				e.log.Warn("renew lease", "queue", q, "error", err)
			}
		}
	}
	e.refreshPaused(ctx)
	e.settler.start()
	// The first epoch read remembers the current one; a resync at start
	// re-pushes anything a crash left between Postgres and Redis.
	if _, err := e.queue.Epoch(ctx, e.allQueues()...); err != nil {
		e.log.Warn("read Redis epoch", "error", err)
	}
	e.deadLetterHooks(ctx)
	e.goBackground(e.relayLoop)
	e.goBackground(e.maintenanceLoop)
	e.goBackground(func(ctx context.Context) { e.resync(ctx, "start") })
	for _, ch := range e.channels {
		if ch.running() {
			ch.start()
		}
	}
	e.log.Info("delivery started", "instance", e.instance, "channels", started)
	return nil
}

func (e *Engine) goBackground(f func(ctx context.Context)) {
	e.bgWG.Add(1)
	go func() {
		defer e.bgWG.Done()
		f(e.runCtx)
	}()
}

// Stop shuts down gracefully: stop fetching, let in-flight sends finish and
// settle within shutdown.soft_timeout, then hand back whatever is left in
// this instance's backup lists; when ctx ends (the hard timeout) it abandons
// the rest, which the reaper or a restart recovers. Nothing is lost either
// way. Stop has the shape of every notifyd service's (docs/design.md §1);
// Kill is the crash.
func (e *Engine) Stop(ctx context.Context) error {
	soft := cmp.Or(e.cfg.Shutdown.SoftTimeout, config.DefaultSoftTimeout)
	var err error
	e.stopOnce.Do(func() { err = e.stop(ctx, soft) })
	return err
}

func (e *Engine) stop(ctx context.Context, soft time.Duration) error {
	if e.cancelRun == nil {
		return nil
	}
	e.cancelFetch()
	e.fetchWG.Wait()

	softCtx, cancel := context.WithTimeout(ctx, soft)
	defer cancel()
	drained := waitCtx(softCtx, &e.sendWG)
	if !drained {
		e.log.Warn("soft shutdown timeout: in-flight sends left to recovery", "soft_timeout", soft)
	}
	e.settler.close(ctx)

	// Hand back the backup lists (unsettled ids go back to ready; their rows
	// are PROCESSING and will be reclaimed once stale) and drop the leases.
	for _, ch := range e.channels {
		if !ch.running() {
			continue
		}
		for _, q := range ch.queues {
			if err := e.queue.Release(ctx, q, e.instance); err != nil {
				e.log.Warn("hand back backup list", "queue", q, "error", err)
			}
		}
	}
	e.cancelRun()
	e.bgWG.Wait()
	if !drained {
		return fmt.Errorf("delivery: stopped with sends still in flight after %s", soft)
	}
	return nil
}

// Kill stops at once, like a crash: nothing is settled, acked or handed back.
// Tests use it to leave the state a kill -9 leaves; serve uses it after the
// hard timeout or a second signal.
func (e *Engine) Kill() {
	if e.cancelRun == nil {
		return
	}
	e.settler.abandon()
	e.cancelFetch()
	e.cancelRun()
}

func waitCtx(ctx context.Context, wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
