package notifyd

import "github.com/notifyd/notifyd/config"

// The configuration, re-exported so that an application embedding notifyd
// imports this package and the SDK and nothing else (config/ is the daemon's
// own; docs/config.md names every key). Each name is an alias, so a value of
// one is a value of the other: notifyd.Config is config.Config.

// Config is the whole of notifyd's configuration, what Start takes: build one
// with DefaultConfig and set fields, or read a file with LoadConfig.
type Config = config.Config

// ChannelConfig binds a channel (Config.Channels, by name) to a provider —
// its Plugin is the name NewInProcess's map or plugins.dir resolves — and
// tunes it: the provider's own Config, concurrency, batch size, timeout,
// retries, rate limit, breaker, partitions, dead-letter hook and callback.
// Zero fields get the defaults when the daemon starts.
type ChannelConfig = config.Channel

// RetryConfig is a channel's backoff policy (ChannelConfig.Retry).
type RetryConfig = config.Retry

// RateLimitConfig is a channel's token bucket and per-recipient daily cap
// (ChannelConfig.RateLimit).
type RateLimitConfig = config.RateLimit

// BreakerConfig is a channel's circuit breaker (ChannelConfig.Breaker).
type BreakerConfig = config.Breaker

// DeadLetterHookConfig names the channel told of a channel's dead letters
// (ChannelConfig.DeadLetterHook).
type DeadLetterHookConfig = config.DeadLetterHook

// CallbackConfig is a channel's delivery-report route
// (ChannelConfig.Callback).
type CallbackConfig = config.Callback

// PluginsConfig says where provider plugin executables live
// (notifyd-plugin-<name>) and the SHA-256 each must have (Config.Plugins);
// it is not used when Options.Providers is set.
type PluginsConfig = config.Plugins

// PostgresConfig is the outbox database (Config.Postgres).
type PostgresConfig = config.Postgres

// RedisConfig is the queue server (Config.Redis).
type RedisConfig = config.Redis

// HTTPConfig is the API's listener, tokens and bounds (Config.HTTP).
type HTTPConfig = config.HTTP

// LogConfig sets the level and format of notifyd's logs when
// Options.Logger is nil (Config.Log).
type LogConfig = config.Log

// ShutdownConfig bounds Daemon.Stop's drain (Config.Shutdown).
type ShutdownConfig = config.Shutdown

// ScheduleConfig is a recurring bulk send (Config.Schedules, by name).
type ScheduleConfig = config.Schedule

// AudienceConfig is who a schedule goes to: a topic or an SQL query
// (ScheduleConfig.Audience).
type AudienceConfig = config.Audience

// DefaultConfig is the configuration of an empty config file: every key's
// default, no channel. Set at least Postgres.URL, Redis.URL and Channels.
func DefaultConfig() Config { return config.Default() }

// LoadConfig reads the config the way `notifyd serve --config path` does: the
// YAML file at path (empty: none), overridden by NOTIFYD_ environment
// variables, with ${VAR} references expanded, defaults filled and the whole
// validated. An error names the key at fault.
func LoadConfig(path string) (*Config, error) { return config.Load(path, nil) }
