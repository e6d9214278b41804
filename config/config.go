// Package config loads notifyd's configuration: a YAML file, overridden by
// NOTIFYD_-prefixed environment variables, filled with defaults and validated
// so that a bad key or value fails at start with the key named.
package config

import (
	"cmp"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Config is the whole of notifyd's configuration. The koanf tags are the YAML
// keys and are part of the contract (docs/design.md §8).
type Config struct {
	Postgres  Postgres            `koanf:"postgres"`
	Redis     Redis               `koanf:"redis"`
	Plugins   Plugins             `koanf:"plugins"`
	HTTP      HTTP                `koanf:"http"`
	Log       Log                 `koanf:"log"`
	Instance  Instance            `koanf:"instance"`
	Shutdown  Shutdown            `koanf:"shutdown"`
	Delivery  Delivery            `koanf:"delivery"`
	Jobs      Jobs                `koanf:"jobs"`
	Retention Retention           `koanf:"retention"`
	Tracing   Tracing             `koanf:"tracing"`
	Channels  map[string]Channel  `koanf:"channels"`
	Schedules map[string]Schedule `koanf:"schedules"`
}

// Postgres is the outbox database.
type Postgres struct {
	URL      string `koanf:"url"`
	MaxConns int32  `koanf:"max_conns"`
}

// Redis is the queue server: a single node by URL or a cluster by addresses.
type Redis struct {
	URL          string   `koanf:"url"`
	ClusterAddrs []string `koanf:"cluster_addrs"`
	Prefix       string   `koanf:"prefix"`
	PoolSize     int      `koanf:"pool_size"`
}

// Plugins says where provider plugin executables live and, optionally, the
// SHA-256 each must have.
type Plugins struct {
	Dir            string            `koanf:"dir"`
	Checksums      map[string]string `koanf:"checksums"`
	StartTimeout   time.Duration     `koanf:"start_timeout"`
	HealthInterval time.Duration     `koanf:"health_interval"`
	// MaxMemoryBytes bounds each plugin process's memory: its private
	// writable memory as a limit the kernel enforces (RLIMIT_DATA), its
	// resident memory checked at every health check.
	MaxMemoryBytes int64 `koanf:"max_memory_bytes"`
	// MaxCPU bounds the CPU each plugin's processes may use together, in
	// CPUs (0.5 is half of one): past it, after a burst of one second's
	// worth, they are paused until under it again. 0 is half the machine's
	// CPUs, at least one.
	MaxCPU float64 `koanf:"max_cpu"`
}

// HTTP is the API listener.
type HTTP struct {
	Listen          string   `koanf:"listen"`
	Tokens          []string `koanf:"tokens"`
	PublicMetrics   bool     `koanf:"public_metrics"`
	MaxBodyBytes    int64    `koanf:"max_body_bytes"`
	MaxPayloadBytes int64    `koanf:"max_payload_bytes"`
	// MaxConnections caps open connections to the API and dashboard.
	MaxConnections int `koanf:"max_connections"`
	// MaxConnectionsPerClient caps those from one peer address (not a
	// trusted proxy's); past it, or past MaxConnections, an idle
	// connection is closed to admit a new one.
	MaxConnectionsPerClient int `koanf:"max_connections_per_client"`
	// MaxInflightBodyBytes caps request body bytes being read at once
	// across all requests; past it a request gets 503 with Retry-After.
	MaxInflightBodyBytes int64 `koanf:"max_inflight_body_bytes"`
	// TrustedProxies are the CIDRs of TLS-terminating proxies whose
	// X-Forwarded-For and X-Forwarded-Proto are believed.
	TrustedProxies []string `koanf:"trusted_proxies"`
	// AuthFailuresPerMinute: a client presenting more bad tokens (API) or
	// failed logins (dashboard) than this in a minute gets 429 until the
	// minute ends.
	AuthFailuresPerMinute int `koanf:"auth_failures_per_minute"`
	// ReadyWithStoppedChannels: /readyz answers 200 while a configured
	// channel is stopped (its plugin could not start). Off by default: a
	// stopped channel makes the instance unready, so a rollout whose plugin
	// fails to start stops at its first instance (docs/design.md §1).
	ReadyWithStoppedChannels bool `koanf:"ready_with_stopped_channels"`
}

// Log sets the level and format of notifyd's own logs.
type Log struct {
	Level  string `koanf:"level"`
	Format string `koanf:"format"`
}

// Instance identifies this process in Redis. An empty ID means a fresh unique
// id per process.
type Instance struct {
	ID string `koanf:"id"`
	// MaxProcs is how many CPUs `notifyd serve` runs goroutines on at once
	// (its GOMAXPROCS); 0, the default, leaves Go's own choice (every CPU
	// the process is given). A GOMAXPROCS in the environment wins.
	MaxProcs int `koanf:"max_procs"`
}

// MinPluginMaxCPU and MaxPluginMaxCPU bound plugins.max_cpu (in CPUs).
const (
	MinPluginMaxCPU = 0.05
	MaxPluginMaxCPU = 4096
)

// MaxMaxProcs bounds instance.max_procs.
const MaxMaxProcs = 4096

// Shutdown bounds a graceful stop.
type Shutdown struct {
	SoftTimeout time.Duration `koanf:"soft_timeout"`
	HardTimeout time.Duration `koanf:"hard_timeout"`
}

// Delivery tunes the pipeline's stages; the defaults suit most installations.
type Delivery struct {
	RelayInterval   time.Duration `koanf:"relay_interval"`
	RelayBatch      int           `koanf:"relay_batch"`
	SettleBatch     int           `koanf:"settle_batch"`
	PromoteInterval time.Duration `koanf:"promote_interval"`
	SweepInterval   time.Duration `koanf:"sweep_interval"`
	SweepAfter      time.Duration `koanf:"sweep_after"`
	LeaseTTL        time.Duration `koanf:"lease_ttl"`
	EpochInterval   time.Duration `koanf:"epoch_interval"`
	// StallAfter: a stage (relay, claim, settle) that has made no progress
	// for this long makes /readyz answer 503 (notifyd_stage_stalled_seconds).
	StallAfter time.Duration `koanf:"stall_after"`
	// QuarantineAfter: a notification in flight when the process died this
	// many times in a row (sent alone after the first) is FAILED, quarantined,
	// instead of being sent again (docs/design.md §10).
	QuarantineAfter int `koanf:"quarantine_after"`
}

// Retention removes finished notifications and their attempts once they are
// older than their state's window (measured from when they finished); a
// negative window keeps that state forever. Every instance runs it; one
// does at a time (internal/outbox/retention.go).
type Retention struct {
	Sent      time.Duration `koanf:"sent"`
	Cancelled time.Duration `koanf:"cancelled"`
	Failed    time.Duration `koanf:"failed"`
	// Interval between passes; Batch rows per delete transaction; Rescan: how
	// often a pass starts again from the oldest row, for rows that finished
	// after a pass had walked past them.
	Interval time.Duration `koanf:"interval"`
	Batch    int           `koanf:"batch"`
	Rescan   time.Duration `koanf:"rescan"`
}

// Retention defaults: delivered and cancelled notifications a week, dead
// letters a month.
const (
	DefaultRetentionSent      = 7 * 24 * time.Hour
	DefaultRetentionCancelled = 7 * 24 * time.Hour
	DefaultRetentionFailed    = 30 * 24 * time.Hour
	DefaultRetentionInterval  = time.Minute
	DefaultRetentionBatch     = 1000
	DefaultRetentionRescan    = 24 * time.Hour
)

// FillRetention applies the retention defaults to zero fields.
func FillRetention(r Retention) Retention {
	r.Sent = cmp.Or(r.Sent, DefaultRetentionSent)
	r.Cancelled = cmp.Or(r.Cancelled, DefaultRetentionCancelled)
	r.Failed = cmp.Or(r.Failed, DefaultRetentionFailed)
	r.Interval = cmp.Or(r.Interval, DefaultRetentionInterval)
	r.Batch = cmp.Or(r.Batch, DefaultRetentionBatch)
	r.Rescan = cmp.Or(r.Rescan, DefaultRetentionRescan)
	return r
}

// Tracing turns on OpenTelemetry traces (docs/design.md §11). The exporter,
// its endpoint and the service's resource come from the standard OTEL_*
// environment (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME, …), which
// plugins inherit; OTEL_SDK_DISABLED=true keeps it off whatever Enabled says.
type Tracing struct {
	Enabled bool `koanf:"enabled"`
	// SampleRatio is the share of new traces recorded — an API request that
	// arrives without a sampled traceparent, a CLI send — (0–1). A request
	// whose caller sampled it is always recorded, one whose caller did not
	// never is: notifyd follows its caller. OTEL_TRACES_SAMPLER, when set,
	// replaces it.
	SampleRatio float64 `koanf:"sample_ratio"`
}

// DefaultSampleRatio records every trace.
const DefaultSampleRatio = 1.0

// Jobs tunes bulk jobs (schedule runs and campaigns).
type Jobs struct {
	ChunkSize  int           `koanf:"chunk_size"`
	Heartbeat  time.Duration `koanf:"heartbeat"`
	StuckAfter time.Duration `koanf:"stuck_after"`
	// MaxTakeovers: a RUNNING job whose owners went stale this many times in
	// a row at the same cursor is failed instead of taken over again.
	MaxTakeovers int `koanf:"max_takeovers"`
}

// Channel binds a channel to a provider plugin and its config.
type Channel struct {
	Plugin      string         `koanf:"plugin"`
	Config      map[string]any `koanf:"config"`
	Concurrency int            `koanf:"concurrency"`
	BatchSize   int            `koanf:"batch_size"`
	Timeout     time.Duration  `koanf:"timeout"`
	Retry       Retry          `koanf:"retry"`
	RateLimit   RateLimit      `koanf:"rate_limit"`
	Breaker     Breaker        `koanf:"breaker"`
	// Partitions spreads one hot channel over K Redis hash slots
	// ({ch:<name>#<k>}); a notification's partition is its id mod K.
	Partitions int `koanf:"partitions"`
	// DeadLetterHook tells another channel of this channel's dead letters.
	DeadLetterHook DeadLetterHook `koanf:"dead_letter_hook"`
	// Callback lets the channel's provider report delivery later, on
	// POST /v1/channels/{name}/callback (docs/design.md §7, Receipts).
	Callback Callback `koanf:"callback"`
}

// Callback is a channel's delivery-report route. It is off unless Secret is
// set: a request is taken only when its Header carries exactly Secret
// (compared in constant time); its body is at most MaxBodyBytes.
type Callback struct {
	Secret       string `koanf:"secret"`
	Header       string `koanf:"header"`
	MaxBodyBytes int64  `koanf:"max_body_bytes"`
}

// Enabled reports whether the channel takes callbacks.
func (c Callback) Enabled() bool { return c.Secret != "" }

// Callback defaults and bounds.
const (
	DefaultCallbackHeader       = "X-Notifyd-Callback-Secret"
	DefaultCallbackMaxBodyBytes = 64 << 10
	MinCallbackSecretLen        = 16
	MaxCallbackSecretLen        = 1024
)

// DeadLetterHook names a channel (a webhook to the on-call tool, say) that
// is told of each dead letter of the channel it is set on, in batches: every
// Every, the dead letters since the last batch (at most Batch per
// notification) become one notification on Channel to Recipient, delivered
// with the same guarantees as any other. Channel "" = no hook.
type DeadLetterHook struct {
	Channel   string        `koanf:"channel"`
	Recipient string        `koanf:"recipient"`
	Batch     int           `koanf:"batch"`
	Every     time.Duration `koanf:"every"`
}

// Dead-letter hook defaults and bounds.
const (
	DefaultDeadLetterBatch = 100
	MaxDeadLetterBatch     = 500
	DefaultDeadLetterEvery = 10 * time.Second
)

// RateLimit is a channel's distributed token bucket, shared by every
// instance, plus an optional per-recipient daily cap. Rate 0 means no limit.
type RateLimit struct {
	Rate  int           `koanf:"rate"`
	Per   time.Duration `koanf:"per"`
	Burst int           `koanf:"burst"`
	// PerRecipientDaily caps sends to one recipient per day (Kakao's
	// per-recipient quota); the day starts at midnight in Timezone.
	PerRecipientDaily int    `koanf:"per_recipient_daily"`
	Timezone          string `koanf:"timezone"`
}

// Breaker is a channel's circuit breaker. It opens when, over the last
// Window on an instance, at least Failures sends failed transiently and they
// were at least Ratio of that window's sends: a few bad recipients among many
// good ones do not open it, a provider that is down does. Open, every
// instance stops fetching for Cooldown (messages stay queued); then up to
// Probes messages are sent: one success closes it, all failing opens it
// again. Failures -1 disables it.
type Breaker struct {
	Failures int           `koanf:"failures"`
	Ratio    float64       `koanf:"ratio"`
	Window   time.Duration `koanf:"window"`
	Cooldown time.Duration `koanf:"cooldown"`
	Probes   int           `koanf:"probes"`
}

// Retry is a channel's backoff policy (docs/design.md §5).
type Retry struct {
	MaxAttempts int           `koanf:"max_attempts"`
	Base        time.Duration `koanf:"base"`
	Max         time.Duration `koanf:"max"`
	Jitter      string        `koanf:"jitter"`
	// MaxRetryAfter caps a provider's Retry-After hint (a 429's header, a
	// quota reset): a hint of days or years must not park a message. 0 is
	// the default, DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration `koanf:"max_retry_after"`
}

// Jitter shapes.
const (
	JitterFull   = "full"
	JitterWindow = "window"
	// JitterNone: exactly min(max, base·2ⁿ⁻¹) — with base = max, retries a
	// fixed interval apart ("3 retries 5 minutes apart"). Opt-in: many
	// senders retrying in step hit a recovering provider together.
	JitterNone = "none"
)

// Schedule is a recurring bulk send (docs/design.md §6).
type Schedule struct {
	Channel   string         `koanf:"channel"`
	Cron      string         `koanf:"cron"`
	Timezone  string         `koanf:"timezone"`
	Lead      time.Duration  `koanf:"lead"`
	MaxLate   time.Duration  `koanf:"max_late"`
	ChunkSize int            `koanf:"chunk_size"`
	Audience  Audience       `koanf:"audience"`
	Payload   map[string]any `koanf:"payload"`
	// ContentKey names the run's content, a text/template over .fire_time
	// and .schedule ("quiz-{{.fire_time.Format \"2006-01-02\"}}"); runs
	// and campaigns naming the same content on one channel send each
	// recipient once between them. "": the content is the fire time.
	ContentKey string `koanf:"content_key"`
}

// MaxScheduleLead is the longest schedules.<name>.lead: a run is created
// and materialised lead before its fire time — its audience read as it is
// then, its rows written PENDING — and a lead with no bound (100000h) made
// one run ahead a tick, each the whole audience, for years ahead. The
// planner also keeps at most schedule.MaxRunsAhead runs waiting ahead.
const MaxScheduleLead = 24 * time.Hour

// MaxContentKeyLen bounds a content key, rendered (and a content key
// template, unrendered): schedules.<name>.content_key and a campaign's.
const MaxContentKeyLen = 200

// Audience is who a schedule or campaign goes to: a topic of subscribers, or
// an SQL query returning (recipient, data) with a key column for keyset paging.
type Audience struct {
	Topic string `koanf:"topic"`
	Query string `koanf:"query"`
	Key   string `koanf:"key"`
}

// Defaults; Load fills every zero value with these.
const (
	DefaultRedisPrefix     = "notifyd"
	DefaultPluginsDir      = "./bin/plugins"
	DefaultListen          = "127.0.0.1:8080"
	DefaultMaxBodyBytes    = 1 << 20
	DefaultMaxPayloadBytes = 256 << 10
	DefaultMaxConnections  = 256
	// DefaultMaxConnectionsPerClient is a quarter of DefaultMaxConnections.
	DefaultMaxConnectionsPerClient = 64
	DefaultMaxInflight             = 64 << 20
	DefaultAuthFailures            = 10
	// MaxPayloadCeiling is outbox.MaxPayloadBytes (a test keeps them equal):
	// http.max_payload_bytes may lower it, never raise it.
	MaxPayloadCeiling      = 1 << 20
	DefaultConcurrency     = 16
	DefaultBatchSize       = 64
	DefaultSendTimeout     = 10 * time.Second
	DefaultMaxAttempts     = 5
	DefaultRetryBase       = time.Second
	DefaultRetryMax        = 5 * time.Minute
	DefaultMaxRetryAfter   = time.Hour
	DefaultScheduleLead    = 10 * time.Minute
	DefaultScheduleMaxLate = time.Hour
	DefaultJobChunkSize    = 1000
	DefaultJobHeartbeat    = 5 * time.Second
	DefaultJobMaxTakeovers = 3
	DefaultJobStuckAfter   = time.Minute
	DefaultSoftTimeout     = 10 * time.Second
	DefaultHardTimeout     = 30 * time.Second
	DefaultRelayInterval   = time.Second
	DefaultRelayBatch      = 1000
	DefaultSettleBatch     = 1000
	DefaultPromoteInterval = 100 * time.Millisecond
	DefaultSweepInterval   = 30 * time.Second
	DefaultSweepAfter      = 2 * time.Minute
	DefaultLeaseTTL        = 15 * time.Second
	// MaxLeaseTTL is the longest delivery.lease_ttl: the queue grants no
	// longer lease (queue.MaxLeaseTTL), and reads one that expires further
	// ahead as written by a skewed clock or a restore.
	MaxLeaseTTL             = time.Hour
	DefaultEpochInterval    = time.Second
	DefaultStallAfter       = time.Minute
	DefaultQuarantineAfter  = 3
	DefaultPluginStart      = 10 * time.Second
	DefaultPluginHealth     = 5 * time.Second
	DefaultPluginMaxMemory  = 1 << 30
	MinPluginMaxMemory      = 64 << 20
	DefaultPostgresMaxConns = 16
	DefaultBreakerFailures  = 20
	DefaultBreakerCooldown  = 30 * time.Second
	DefaultBreakerRatio     = 0.5
	DefaultBreakerWindow    = 10 * time.Second
	DefaultBreakerProbes    = 3
)

// The floors of the duration keys a loop runs on (a ticker, a poll, a
// renewal) or that the Redis scripts read in whole milliseconds: under them
// a loop is busy (1ns: as fast as Postgres or Redis answers) or a bound is
// silently off. Each is refused at load naming the key; the values other
// packages' tests set to run fast are at or above them.
const (
	// MinPluginHealth: Health is asked every interval and given the
	// interval to answer; three misses replace the plugin, whose in-flight
	// sends are sent again. Under a second a busy machine's pause is a miss.
	MinPluginHealth = time.Second
	// MinRelayInterval: a relay statement on Postgres each pass (LISTEN/
	// NOTIFY wakes the relay sooner anyway).
	MinRelayInterval = 100 * time.Millisecond
	// MinPromoteInterval: a Redis script per queue each pass.
	MinPromoteInterval = 10 * time.Millisecond
	// MinEpochInterval: a Redis read each pass.
	MinEpochInterval = 100 * time.Millisecond
	// MinSweepInterval: a scan of the outbox's in-flight rows each pass.
	MinSweepInterval = time.Second
	// MinLeaseTTL: the lease is renewed every third of it (a Redis call per
	// queue); 2ns made that interval 0, a panic at start, and a lease
	// shorter than a pause lapses, and other instances take back its work
	// (sent again).
	MinLeaseTTL = 2 * time.Second
	// MinJobHeartbeat: an UPDATE of the job's row each beat, per running
	// job.
	MinJobHeartbeat = time.Second
	// MinRetentionInterval: a retention pass (an advisory lock and a walk)
	// each interval.
	MinRetentionInterval = time.Second
	// MinRetentionRescan: each rescan the walk starts again from the oldest
	// row, walking every kept row again.
	MinRetentionRescan = time.Minute
	// MinDeadLetterEvery: a Postgres statement per hooked channel each
	// pass.
	MinDeadLetterEvery = 100 * time.Millisecond
	// MinBreakerCooldown: the Redis breaker is opened for whole
	// milliseconds; under one it opened until the moment it opened, and a
	// provider that is down was probed without pause.
	MinBreakerCooldown = time.Second
	// MinRateLimitPer: the Redis bucket reads per in whole milliseconds;
	// under one it is 0, and the bucket granted every take.
	MinRateLimitPer = time.Millisecond
)

// Default returns the configuration used when a key is absent.
func Default() Config {
	return Config{
		Redis: Redis{Prefix: DefaultRedisPrefix},
		Plugins: Plugins{Dir: DefaultPluginsDir, StartTimeout: DefaultPluginStart, HealthInterval: DefaultPluginHealth,
			MaxMemoryBytes: DefaultPluginMaxMemory},
		HTTP: HTTP{Listen: DefaultListen, MaxBodyBytes: DefaultMaxBodyBytes, MaxPayloadBytes: DefaultMaxPayloadBytes,
			MaxConnections: DefaultMaxConnections, MaxConnectionsPerClient: DefaultMaxConnectionsPerClient,
			MaxInflightBodyBytes:  DefaultMaxInflight,
			AuthFailuresPerMinute: DefaultAuthFailures},
		Log:      Log{Level: "info", Format: "text"},
		Postgres: Postgres{MaxConns: DefaultPostgresMaxConns},
		Shutdown: Shutdown{SoftTimeout: DefaultSoftTimeout, HardTimeout: DefaultHardTimeout},
		Delivery: Delivery{
			RelayInterval: DefaultRelayInterval, RelayBatch: DefaultRelayBatch,
			SettleBatch:     DefaultSettleBatch,
			PromoteInterval: DefaultPromoteInterval, SweepInterval: DefaultSweepInterval,
			SweepAfter: DefaultSweepAfter, LeaseTTL: DefaultLeaseTTL, EpochInterval: DefaultEpochInterval,
			StallAfter: DefaultStallAfter, QuarantineAfter: DefaultQuarantineAfter,
		},
		Jobs: Jobs{ChunkSize: DefaultJobChunkSize, Heartbeat: DefaultJobHeartbeat, StuckAfter: DefaultJobStuckAfter,
			MaxTakeovers: DefaultJobMaxTakeovers},
		Retention: FillRetention(Retention{}),
		Tracing:   Tracing{SampleRatio: DefaultSampleRatio},
	}
}

// fillChannel applies per-channel defaults.
func fillChannel(c Channel) Channel {
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultSendTimeout
	}
	if c.Retry.MaxAttempts == 0 {
		c.Retry.MaxAttempts = DefaultMaxAttempts
	}
	if c.Retry.Base == 0 {
		c.Retry.Base = DefaultRetryBase
	}
	if c.Retry.Max == 0 {
		c.Retry.Max = max(DefaultRetryMax, c.Retry.Base)
	}
	if c.Retry.Jitter == "" {
		c.Retry.Jitter = JitterFull
	}
	if c.Retry.MaxRetryAfter == 0 {
		c.Retry.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if c.Config == nil {
		c.Config = map[string]any{}
	}
	if c.RateLimit.Per == 0 {
		c.RateLimit.Per = time.Second
	}
	if c.DeadLetterHook.Channel != "" {
		if c.DeadLetterHook.Batch == 0 {
			c.DeadLetterHook.Batch = DefaultDeadLetterBatch
		}
		if c.DeadLetterHook.Every == 0 {
			c.DeadLetterHook.Every = DefaultDeadLetterEvery
		}
	}
	if c.RateLimit.Burst == 0 {
		c.RateLimit.Burst = c.RateLimit.Rate
	}
	if c.RateLimit.Timezone == "" {
		c.RateLimit.Timezone = "UTC"
	}
	if c.Breaker.Failures == 0 {
		c.Breaker.Failures = DefaultBreakerFailures
	}
	if c.Breaker.Ratio == 0 {
		c.Breaker.Ratio = DefaultBreakerRatio
	}
	if c.Breaker.Window == 0 {
		c.Breaker.Window = DefaultBreakerWindow
	}
	if c.Breaker.Probes == 0 {
		c.Breaker.Probes = DefaultBreakerProbes
	}
	if c.Breaker.Cooldown == 0 {
		c.Breaker.Cooldown = DefaultBreakerCooldown
	}
	if c.Partitions == 0 {
		c.Partitions = 1
	}
	if c.Callback.Header == "" {
		c.Callback.Header = DefaultCallbackHeader
	}
	if c.Callback.MaxBodyBytes == 0 {
		c.Callback.MaxBodyBytes = DefaultCallbackMaxBodyBytes
	}
	return c
}

// FillDelivery applies the defaults to a delivery block built in code: a zero
// interval would be a ticker that panics, a zero batch a pipeline that never
// drains.
func FillDelivery(d Delivery) Delivery {
	def := Default().Delivery
	d.RelayInterval = cmp.Or(d.RelayInterval, def.RelayInterval)
	d.RelayBatch = cmp.Or(d.RelayBatch, def.RelayBatch)
	d.SettleBatch = cmp.Or(d.SettleBatch, def.SettleBatch)
	d.PromoteInterval = cmp.Or(d.PromoteInterval, def.PromoteInterval)
	d.SweepInterval = cmp.Or(d.SweepInterval, def.SweepInterval)
	d.SweepAfter = cmp.Or(d.SweepAfter, def.SweepAfter)
	d.LeaseTTL = cmp.Or(d.LeaseTTL, def.LeaseTTL)
	d.EpochInterval = cmp.Or(d.EpochInterval, def.EpochInterval)
	d.StallAfter = cmp.Or(d.StallAfter, def.StallAfter)
	d.QuarantineAfter = cmp.Or(d.QuarantineAfter, def.QuarantineAfter)
	return d
}

// FillChannel applies the per-channel defaults to a channel built in code
// (tests, notifyd-bench); Load does this for every configured channel.
func FillChannel(c Channel) Channel { return fillChannel(c) }

// MaxConcurrency bounds a channel's concurrency, and so the messages one
// instance has in flight on it (Slots).
const MaxConcurrency = 10000

// Slots is how many sends a channel may have in flight on one instance: for
// a plain plugin (its Sender called once per message) concurrency messages,
// so a plugin call carries at most min(batch_size, concurrency); for a
// batching plugin (an sdk.BatchSender) concurrency plugin calls, each of up
// to batch_size messages — but no more calls than keep the messages in
// flight within MaxConcurrency.
func (c Channel) Slots(batches bool) int {
	if !batches {
		return c.Concurrency
	}
	return max(1, min(c.Concurrency, MaxConcurrency/max(1, c.BatchSize)))
}

func fillSchedule(s Schedule, jobs Jobs) Schedule {
	if s.Lead == 0 {
		s.Lead = DefaultScheduleLead
	}
	if s.MaxLate == 0 {
		s.MaxLate = DefaultScheduleMaxLate
	}
	if s.ChunkSize == 0 {
		s.ChunkSize = jobs.ChunkSize
	}
	if s.Timezone == "" {
		s.Timezone = "UTC"
	}
	return s
}

// NameRE is what channel and schedule names may look like: they appear in
// Redis keys, URLs and metric labels.
var NameRE = wire.NameRE

// Error is a validation failure that names the offending key.
type Error struct {
	Key    string
	Reason string
}

// Error never prints a URL's credentials: a Reason that quotes a value (a
// URL put under the wrong key, say) has them masked.
func (e *Error) Error() string {
	return fmt.Sprintf("config key %q: %s", cutKey(e.Key), cutReason(sdk.RedactURLs(e.Reason), maxReasonShown))
}

// maxReasonShown bounds a reason as an error shows it, whatever it quotes
// (each value is quoted within maxQuoted; this is the backstop).
const maxReasonShown = 2048

// cutReason is s within n bytes, cut on a UTF-8 boundary and marked "…".
func cutReason(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// maxKeyShown bounds a key as an error names it: a key is as long as the
// file makes it (a 1 MiB key made a 2 MiB error, quoted twice).
const maxKeyShown = 256

// cutKey is key within maxKeyShown bytes, cut on a UTF-8 boundary and
// marked with "…".
func cutKey(key string) string {
	return cutReason(key, maxKeyShown)
}
