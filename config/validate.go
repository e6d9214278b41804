package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/robfig/cron/v3"

	"github.com/notifyd/notifyd/sdk/wire"
)

// CronParser is the one cron dialect notifyd accepts: five fields plus the
// @daily-style descriptors, as robfig/cron's standard parser.
var CronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron parses a schedule's cron with CronParser and refuses what it
// would accept but not run as written: a day that no month has ("0 0 31 2
// *", never fired), and an @every that robfig/cron silently turns into
// every second (under a second, zero or negative: "@every 1ns", "@every
// -1h") or rounds down ("@every 1500ms").
func ParseCron(spec string) (cron.Schedule, error) {
	if prefix, name, spaced, ok := cronZone(spec); ok {
		if !spaced {
			// robfig/cron slices the spec at the space and panics.
			return nil, fmt.Errorf("%s= names a zone but no schedule follows it (write %s=Asia/Seoul 0 8 * * *)", prefix, prefix)
		}
		// robfig/cron reads the machine's own zone for `Local`, and a
		// SpecSchedule in time.Local reads as one without a prefix.
		if _, err := LoadZone(name); err != nil {
			return nil, fmt.Errorf("%s: %w", prefix, err)
		}
	}
	sched, err := parseCron(spec)
	if err != nil {
		return nil, err
	}
	switch s := sched.(type) {
	case *cron.SpecSchedule:
		// Every date a day-of-month and month can name occurs in
		// 2000-2004 (29 February 2000); robfig/cron looks 5 years ahead.
		wall := *s
		wall.Location = time.UTC
		if wall.Next(time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC)).IsZero() {
			return nil, fmt.Errorf("matches no date (a day the month does not have, like 30 February), so it would never fire")
		}
	case cron.ConstantDelaySchedule:
		const every = "@every "
		d := time.Duration(-1)
		if i := strings.Index(spec, every); i >= 0 {
			d, _ = time.ParseDuration(strings.TrimSpace(spec[i+len(every):]))
		}
		if d < time.Second || d%time.Second != 0 {
			return nil, fmt.Errorf("@every needs a whole number of seconds, at least 1s (robfig/cron would fire it every %s)", s.Delay)
		}
	}
	return sched, nil
}

// parseCron is CronParser.Parse, a panic in it an error: a parser of
// another's making, fed a value from the config file, must not crash start.
func parseCron(spec string) (sched cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("robfig/cron could not read it (%v)", r)
		}
	}()
	return CronParser.Parse(spec)
}

// Validate checks every value; the first problem is returned naming its key.
func (c *Config) Validate() error {
	if c.Postgres.URL == "" {
		// No query in the example: Error masks query values (sslmode=xxxxx).
		return &Error{Key: "postgres.url", Reason: "is required (e.g. postgres://127.0.0.1:5432/notifyd)"}
	}
	if reason := urlScheme(c.Postgres.URL, "postgres", "postgresql"); reason != "" {
		return &Error{Key: "postgres.url", Reason: reason}
	}
	if c.Postgres.MaxConns < 1 {
		return &Error{Key: "postgres.max_conns", Reason: "must be at least 1"}
	}
	switch {
	case c.Redis.URL == "" && len(c.Redis.ClusterAddrs) == 0:
		return &Error{Key: "redis.url", Reason: "is required (or redis.cluster_addrs)"}
	case c.Redis.URL != "" && len(c.Redis.ClusterAddrs) > 0:
		return &Error{Key: "redis.cluster_addrs", Reason: "give either redis.url or redis.cluster_addrs, not both"}
	case c.Redis.URL != "":
		if reason := urlScheme(c.Redis.URL, "redis", "rediss"); reason != "" {
			return &Error{Key: "redis.url", Reason: reason}
		}
	}
	if !NameRE.MatchString(c.Redis.Prefix) {
		return &Error{Key: "redis.prefix", Reason: "must match " + NameRE.String()}
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return &Error{Key: "log.format", Reason: quote(c.Log.Format) + " is not one of text, json"}
	}
	if hclog.LevelFromString(c.Log.Level) == hclog.NoLevel {
		return &Error{Key: "log.level", Reason: quote(c.Log.Level) + " is not one of trace, debug, info, warn, error"}
	}
	// An empty address listens on every interface, on a port the kernel
	// picks: an empty NOTIFYD_HTTP_LISTEN (a template's unset value) put the
	// API on all interfaces where the default is loopback.
	if strings.TrimSpace(c.HTTP.Listen) == "" {
		return &Error{Key: "http.listen", Reason: "is empty: give host:port (the default is " + DefaultListen + "; \":8080\" listens on every interface)"}
	}
	if _, _, err := net.SplitHostPort(c.HTTP.Listen); err != nil {
		return &Error{Key: "http.listen", Reason: fmt.Sprintf("%s is not host:port (such as %s): %s", quote(c.HTTP.Listen), DefaultListen, cutReason(err.Error(), maxQuoted))}
	}
	if c.HTTP.MaxBodyBytes < 1 {
		return &Error{Key: "http.max_body_bytes", Reason: "must be positive"}
	}
	if c.HTTP.MaxPayloadBytes < 1 || c.HTTP.MaxPayloadBytes > c.HTTP.MaxBodyBytes || c.HTTP.MaxPayloadBytes > MaxPayloadCeiling {
		return &Error{Key: "http.max_payload_bytes", Reason: fmt.Sprintf(
			"must be positive, at most http.max_body_bytes and at most %d (the outbox's ceiling)", MaxPayloadCeiling)}
	}
	if c.HTTP.AuthFailuresPerMinute < 0 {
		return &Error{Key: "http.auth_failures_per_minute", Reason: "must be positive (0 = the default, 10)"}
	}
	if c.HTTP.MaxConnections < 1 {
		return &Error{Key: "http.max_connections", Reason: "must be positive"}
	}
	if c.HTTP.MaxConnectionsPerClient < 1 {
		return &Error{Key: "http.max_connections_per_client", Reason: fmt.Sprintf(
			"must be positive (default %d; at or above http.max_connections it is no cap of its own)", DefaultMaxConnectionsPerClient)}
	}
	if c.HTTP.MaxInflightBodyBytes < c.HTTP.MaxBodyBytes {
		return &Error{Key: "http.max_inflight_body_bytes", Reason: "must be at least http.max_body_bytes"}
	}
	if len(c.HTTP.TrustedProxies) > MaxTokens {
		return &Error{Key: "http.trusted_proxies", Reason: fmt.Sprintf("%d addresses or CIDRs, at most %d: every connection's and request's address is looked up in each of them",
			len(c.HTTP.TrustedProxies), MaxTokens)}
	}
	for i, p := range c.HTTP.TrustedProxies {
		if _, err := netip.ParsePrefix(p); err != nil {
			if _, err := netip.ParseAddr(p); err != nil {
				return &Error{Key: fmt.Sprintf("http.trusted_proxies[%d]", i), Reason: quote(p) + " is not an address or CIDR"}
			}
		}
	}
	if len(c.HTTP.Tokens) > MaxTokens {
		return &Error{Key: "http.tokens", Reason: fmt.Sprintf("%d tokens, at most %d: every request's token is compared with each of them", len(c.HTTP.Tokens), MaxTokens)}
	}
	for i, tok := range c.HTTP.Tokens {
		if len(tok) < 16 {
			return &Error{Key: fmt.Sprintf("http.tokens[%d]", i), Reason: "must be at least 16 characters"}
		}
	}
	if c.Plugins.MaxMemoryBytes < MinPluginMaxMemory {
		return &Error{Key: "plugins.max_memory_bytes", Reason: fmt.Sprintf(
			"must be at least %d (64 MiB): a plugin's runtime alone takes tens of MB (default %d, 1 GiB)",
			MinPluginMaxMemory, DefaultPluginMaxMemory)}
	}
	if cpu := c.Plugins.MaxCPU; cpu != 0 && !(cpu >= MinPluginMaxCPU && cpu <= MaxPluginMaxCPU) {
		return &Error{Key: "plugins.max_cpu", Reason: fmt.Sprintf(
			"must be from %g to %d CPUs (0.5 is half of one), or 0 for half the machine's CPUs, at least one; got %g",
			MinPluginMaxCPU, MaxPluginMaxCPU, cpu)}
	}
	for name, sum := range c.Plugins.Checksums {
		if len(sum) != 64 || strings.Trim(strings.ToLower(sum), "0123456789abcdef") != "" {
			return &Error{Key: "plugins.checksums." + name, Reason: "must be a hex SHA-256 (64 characters)"}
		}
	}
	if c.Instance.ID != "" && !NameRE.MatchString(c.Instance.ID) {
		return &Error{Key: "instance.id", Reason: "must match " + NameRE.String()}
	}
	if c.Instance.MaxProcs < 0 || c.Instance.MaxProcs > MaxMaxProcs {
		return &Error{Key: "instance.max_procs", Reason: fmt.Sprintf("must be from 1 to %d CPUs, or 0 for every CPU Go gives the process", MaxMaxProcs)}
	}
	if err := positive(map[string]time.Duration{
		"shutdown.soft_timeout": c.Shutdown.SoftTimeout, "shutdown.hard_timeout": c.Shutdown.HardTimeout,
		"delivery.relay_interval":   c.Delivery.RelayInterval,
		"delivery.promote_interval": c.Delivery.PromoteInterval, "delivery.sweep_interval": c.Delivery.SweepInterval,
		"delivery.sweep_after": c.Delivery.SweepAfter, "delivery.lease_ttl": c.Delivery.LeaseTTL,
		"delivery.epoch_interval": c.Delivery.EpochInterval, "jobs.heartbeat": c.Jobs.Heartbeat,
		"delivery.stall_after": c.Delivery.StallAfter,
		"jobs.stuck_after":     c.Jobs.StuckAfter, "plugins.start_timeout": c.Plugins.StartTimeout,
		"plugins.health_interval": c.Plugins.HealthInterval,
	}); err != nil {
		return err
	}
	for _, f := range []struct {
		key      string
		d, least time.Duration
		what     string
	}{
		{"plugins.health_interval", c.Plugins.HealthInterval, MinPluginHealth, "each plugin is asked for Health every interval and given the interval to answer; three misses replace it (its in-flight sends are sent again), and under a second a busy machine's pause is a miss"},
		{"delivery.relay_interval", c.Delivery.RelayInterval, MinRelayInterval, "a relay statement on Postgres each interval (LISTEN/NOTIFY wakes the relay sooner)"},
		{"delivery.promote_interval", c.Delivery.PromoteInterval, MinPromoteInterval, "a Redis script per queue each interval"},
		{"delivery.epoch_interval", c.Delivery.EpochInterval, MinEpochInterval, "a Redis read each interval"},
		{"delivery.sweep_interval", c.Delivery.SweepInterval, MinSweepInterval, "a scan of the outbox's in-flight rows each interval"},
		{"delivery.lease_ttl", c.Delivery.LeaseTTL, MinLeaseTTL, "the lease is renewed every third of it, and one that lapses in a pause has its work taken back by other instances (sent again)"},
		{"jobs.heartbeat", c.Jobs.Heartbeat, MinJobHeartbeat, "an UPDATE of each running job's row each beat"},
		{"retention.interval", c.Retention.Interval, MinRetentionInterval, "a retention pass each interval"},
		{"retention.rescan", c.Retention.Rescan, MinRetentionRescan, "each rescan the retention walk starts again from the oldest row"},
	} {
		if err := atLeast(f.key, f.d, f.least, f.what); err != nil {
			return err
		}
	}
	if c.Delivery.LeaseTTL > MaxLeaseTTL {
		// It is how long a dead instance's work waits: seconds as a rule.
		return &Error{Key: "delivery.lease_ttl", Reason: fmt.Sprintf("must be at most %s, got %s", MaxLeaseTTL, c.Delivery.LeaseTTL)}
	}
	if c.Delivery.QuarantineAfter < 3 || c.Delivery.QuarantineAfter > 100 {
		// The first crash is in a batch and the second in a group of
		// suspects: only from the third on is a row alone when it dies.
		return &Error{Key: "delivery.quarantine_after", Reason: "must be between 3 and 100"}
	}
	if c.Jobs.MaxTakeovers < 0 || c.Jobs.MaxTakeovers > 100 {
		return &Error{Key: "jobs.max_takeovers", Reason: "must be between 1 and 100 (0 = the default, 3)"}
	}
	if c.Shutdown.HardTimeout < c.Shutdown.SoftTimeout {
		return &Error{Key: "shutdown.hard_timeout", Reason: "must be at least shutdown.soft_timeout"}
	}
	if c.Jobs.StuckAfter <= c.Jobs.Heartbeat {
		return &Error{Key: "jobs.stuck_after", Reason: "must be longer than jobs.heartbeat"}
	}
	for key, n := range map[string]int{"delivery.relay_batch": c.Delivery.RelayBatch, "delivery.settle_batch": c.Delivery.SettleBatch, "jobs.chunk_size": c.Jobs.ChunkSize} {
		if n < 1 || n > 10000 {
			return &Error{Key: key, Reason: "must be between 1 and 10000"}
		}
	}
	if err := positive(map[string]time.Duration{"retention.interval": c.Retention.Interval, "retention.rescan": c.Retention.Rescan}); err != nil {
		return err
	}
	if c.Retention.Batch < 1 || c.Retention.Batch > 10000 {
		return &Error{Key: "retention.batch", Reason: "must be between 1 and 10000"}
	}
	for key, d := range map[string]time.Duration{"retention.sent": c.Retention.Sent, "retention.cancelled": c.Retention.Cancelled, "retention.failed": c.Retention.Failed} {
		if d >= 0 && d < time.Minute {
			return &Error{Key: key, Reason: "must be at least 1m (or negative to keep forever)"}
		}
	}
	if r := c.Tracing.SampleRatio; r < 0 || r > 1 || r != r {
		return &Error{Key: "tracing.sample_ratio", Reason: fmt.Sprintf("%v is not between 0 and 1 (the share of new traces recorded)", r)}
	}
	for name, ch := range c.Channels {
		if err := validateChannel(name, ch); err != nil {
			return err
		}
		if err := c.validateDeadLetterHook(name, ch.DeadLetterHook); err != nil {
			return err
		}
	}
	for name, s := range c.Schedules {
		if err := c.validateSchedule(name, s); err != nil {
			return err
		}
	}
	return nil
}

// MaxTokens bounds http.tokens: every API request's bearer token, a bad
// one's too, is compared with each configured token in constant time (800,000
// made a request cost 6.4 ms of CPU). http.trusted_proxies too: every
// connection's address is looked up in each, one after another.
const MaxTokens = 1000

// urlScheme says what is wrong with raw as a URL of one of schemes, or "".
// It never quotes the URL (it may carry a password), only its scheme: a
// typo there ("postgress://") would otherwise surface from the driver as an
// unrelated complaint about the whole value.
func urlScheme(raw string, schemes ...string) string {
	want := "a " + strings.Join(schemes, ":// or ") + ":// URL"
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return "must be " + want
	}
	for _, s := range schemes {
		if scheme == s {
			if _, err := url.Parse(raw); err != nil {
				return "must be " + want + "; it does not parse (check that the password's special characters are %-encoded)"
			}
			return ""
		}
	}
	if len(scheme) > 20 || strings.Trim(strings.ToLower(scheme), "abcdefghijklmnopqrstuvwxyz0123456789+.-") != "" {
		return "must be " + want
	}
	return fmt.Sprintf("scheme %q is not one notifyd speaks; use %s", scheme, strings.Join(schemes, ":// or ")+"://")
}

// atLeast refuses d under least (the floor of a key a loop runs on),
// saying what each interval costs.
func atLeast(key string, d, least time.Duration, what string) error {
	if d < least {
		return &Error{Key: key, Reason: fmt.Sprintf("%s is under %s, its floor: %s", d, least, what)}
	}
	return nil
}

func positive(durations map[string]time.Duration) error {
	for key, d := range durations {
		if d <= 0 {
			return &Error{Key: key, Reason: "must be a positive duration such as 5s"}
		}
	}
	return nil
}

func validateChannel(name string, ch Channel) error {
	key := "channels." + name
	if !NameRE.MatchString(name) {
		return &Error{Key: key, Reason: "channel name must match " + NameRE.String()}
	}
	if ch.Plugin == "" {
		return &Error{Key: key + ".plugin", Reason: "is required (e.g. webhook)"}
	}
	if !NameRE.MatchString(ch.Plugin) {
		return &Error{Key: key + ".plugin", Reason: "must match " + NameRE.String()}
	}
	if ch.Concurrency < 1 || ch.Concurrency > MaxConcurrency {
		return &Error{Key: key + ".concurrency", Reason: fmt.Sprintf("must be between 1 and %d", MaxConcurrency)}
	}
	if ch.BatchSize < 1 || ch.BatchSize > 1000 {
		return &Error{Key: key + ".batch_size", Reason: "must be between 1 and 1000"}
	}
	if ch.Timeout <= 0 {
		return &Error{Key: key + ".timeout", Reason: "must be a positive duration"}
	}
	r := ch.Retry
	switch {
	case r.MaxAttempts < 1 || r.MaxAttempts > 1000:
		return &Error{Key: key + ".retry.max_attempts", Reason: "must be between 1 and 1000"}
	case r.Base <= 0:
		return &Error{Key: key + ".retry.base", Reason: "must be a positive duration"}
	case r.Max < r.Base:
		return &Error{Key: key + ".retry.max", Reason: "must be at least retry.base"}
	case r.Jitter != JitterFull && r.Jitter != JitterWindow && r.Jitter != JitterNone:
		return &Error{Key: key + ".retry.jitter", Reason: quote(r.Jitter) + " is not one of full, window, none"}
	case r.MaxRetryAfter < 0 || r.MaxRetryAfter > 7*24*time.Hour:
		return &Error{Key: key + ".retry.max_retry_after", Reason: "must be between 0 (the default, 1h) and 168h"}
	}
	rl := ch.RateLimit
	switch {
	case rl.Rate < 0:
		return &Error{Key: key + ".rate_limit.rate", Reason: "must not be negative (0 = no limit)"}
	case rl.Per <= 0:
		return &Error{Key: key + ".rate_limit.per", Reason: "must be a positive duration"}
	case rl.Per < MinRateLimitPer:
		return atLeast(key+".rate_limit.per", rl.Per, MinRateLimitPer, "the shared bucket counts in whole milliseconds; under one it is 0, and every take is granted (no limit)")
	case rl.Per%time.Millisecond != 0:
		return &Error{Key: key + ".rate_limit.per", Reason: fmt.Sprintf("%s is not a whole number of milliseconds: the shared bucket counts in them (it would be %s)", rl.Per, rl.Per.Truncate(time.Millisecond))}
	case rl.Rate > 0 && rl.Burst < 1:
		return &Error{Key: key + ".rate_limit.burst", Reason: "must be at least 1"}
	case rl.PerRecipientDaily < 0:
		return &Error{Key: key + ".rate_limit.per_recipient_daily", Reason: "must not be negative (0 = no cap)"}
	}
	if _, err := LoadZone(rl.Timezone); err != nil {
		return &Error{Key: key + ".rate_limit.timezone", Reason: err.Error()}
	}
	if ch.Breaker.Failures < -1 {
		return &Error{Key: key + ".breaker.failures", Reason: "must be positive, or -1 to disable the breaker"}
	}
	if err := atLeast(key+".breaker.cooldown", ch.Breaker.Cooldown, MinBreakerCooldown,
		"an open breaker pauses sends to the provider this long; under a millisecond it opened until the moment it opened, and a provider that is down was probed without pause"); err != nil {
		return err
	}
	if ch.Breaker.Ratio <= 0 || ch.Breaker.Ratio > 1 {
		return &Error{Key: key + ".breaker.ratio", Reason: "must be more than 0 and at most 1 (the share of a window's sends that failed)"}
	}
	if ch.Breaker.Window < time.Second || ch.Breaker.Window > time.Hour {
		return &Error{Key: key + ".breaker.window", Reason: "must be between 1s and 1h"}
	}
	if ch.Breaker.Probes < 1 || ch.Breaker.Probes > 1000 {
		return &Error{Key: key + ".breaker.probes", Reason: "must be between 1 and 1000"}
	}
	if ch.Partitions < 1 || ch.Partitions > 256 {
		return &Error{Key: key + ".partitions", Reason: "must be between 1 and 256"}
	}
	return validateCallback(key+".callback", ch.Callback)
}

// validateCallback never quotes the secret, only its length.
func validateCallback(key string, cb Callback) error {
	switch {
	case cb.Secret != "" && (len(cb.Secret) < MinCallbackSecretLen || len(cb.Secret) > MaxCallbackSecretLen):
		return &Error{Key: key + ".secret", Reason: fmt.Sprintf("is %d bytes; want %d to %d (a random token: anyone who has it can record receipts)",
			len(cb.Secret), MinCallbackSecretLen, MaxCallbackSecretLen)}
	case cb.Secret != "" && !headerValue(cb.Secret):
		return &Error{Key: key + ".secret", Reason: "holds a character an HTTP header cannot carry (a control character or non-ASCII byte)"}
	case !headerName(cb.Header):
		return &Error{Key: key + ".header", Reason: quote(cb.Header) + " is not an HTTP header name"}
	case cb.MaxBodyBytes < 1 || cb.MaxBodyBytes > MaxCallbackBodyCeiling:
		return &Error{Key: key + ".max_body_bytes", Reason: fmt.Sprintf("must be between 1 and %d", MaxCallbackBodyCeiling)}
	}
	return nil
}

// MaxCallbackBodyCeiling is the most channels.<c>.callback.max_body_bytes
// may be: a callback body travels to the plugin in one gRPC message.
const MaxCallbackBodyCeiling = 1 << 20

func headerName(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func headerValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// validateDeadLetterHook: the hook's channel is configured, is not the
// channel itself and has no hook of its own (so a dead letter can never
// feed back into a loop of hooks), and its bounds hold.
func (c *Config) validateDeadLetterHook(name string, h DeadLetterHook) error {
	key := "channels." + name + ".dead_letter_hook"
	if h.Channel == "" {
		if h.Recipient != "" {
			return &Error{Key: key + ".channel", Reason: "is required with dead_letter_hook.recipient: the channel to tell of dead letters"}
		}
		return nil
	}
	hook, ok := c.Channels[h.Channel]
	switch {
	case !ok:
		return &Error{Key: key + ".channel", Reason: fmt.Sprintf("channel %s is not configured", quote(h.Channel))}
	case h.Channel == name:
		return &Error{Key: key + ".channel", Reason: "is the channel itself; name another channel (its own dead letters would feed it forever)"}
	case hook.DeadLetterHook.Channel != "":
		return &Error{Key: key + ".channel", Reason: fmt.Sprintf("channel %s has a dead_letter_hook of its own; a hook channel may not (no chains or loops of hooks)", quote(h.Channel))}
	case h.Recipient == "":
		return &Error{Key: key + ".recipient", Reason: "is required: who on the hook channel is told (a webhook URL, an address)"}
	case len(h.Recipient) > wire.MaxRecipientLen:
		return &Error{Key: key + ".recipient", Reason: fmt.Sprintf("is %d bytes, at most %d", len(h.Recipient), wire.MaxRecipientLen)}
	case h.Batch < 0 || h.Batch > MaxDeadLetterBatch:
		return &Error{Key: key + ".batch", Reason: fmt.Sprintf("must be between 1 and %d", MaxDeadLetterBatch)}
	case h.Every < 0:
		return &Error{Key: key + ".every", Reason: "must not be negative"}
	case h.Every < MinDeadLetterEvery:
		return atLeast(key+".every", h.Every, MinDeadLetterEvery, "a Postgres statement for the channel's dead letters each interval")
	}
	return nil
}

func (c *Config) validateSchedule(name string, s Schedule) error {
	key := "schedules." + name
	if !NameRE.MatchString(name) {
		return &Error{Key: key, Reason: "schedule name must match " + NameRE.String()}
	}
	if _, ok := c.Channels[s.Channel]; !ok {
		return &Error{Key: key + ".channel", Reason: fmt.Sprintf("channel %s is not configured", quote(s.Channel))}
	}
	if _, err := ParseCron(s.Cron); err != nil {
		return &Error{Key: key + ".cron", Reason: fmt.Sprintf("invalid cron %s: %s", quote(s.Cron), cutReason(err.Error(), 4*maxQuoted))}
	}
	if _, err := LoadZone(s.Timezone); err != nil {
		return &Error{Key: key + ".timezone", Reason: err.Error()}
	}
	if s.Lead < 0 || s.Lead > MaxScheduleLead {
		return &Error{Key: key + ".lead", Reason: fmt.Sprintf("%s is not between 0 and %s (config.MaxScheduleLead): a run is materialised, its whole audience written, lead before its fire time",
			s.Lead, MaxScheduleLead)}
	}
	if s.MaxLate < 0 {
		return &Error{Key: key + ".max_late", Reason: "must not be negative"}
	}
	if s.ChunkSize < 1 || s.ChunkSize > 10000 {
		return &Error{Key: key + ".chunk_size", Reason: "must be between 1 and 10000"}
	}
	a := s.Audience
	switch {
	case (a.Topic == "") == (a.Query == ""):
		return &Error{Key: key + ".audience", Reason: "give exactly one of topic or query"}
	case a.Query != "" && a.Key == "":
		return &Error{Key: key + ".audience.key", Reason: "is required with audience.query: the column used for keyset paging"}
	}
	if len(s.Payload) == 0 {
		return &Error{Key: key + ".payload", Reason: "is required: the payload template rendered per recipient"}
	}
	if len(s.ContentKey) > MaxContentKeyLen {
		return &Error{Key: key + ".content_key", Reason: fmt.Sprintf("is %d bytes, at most %d", len(s.ContentKey), MaxContentKeyLen)}
	}
	return nil
}

// NewLogger builds the one hclog logger that is passed down through notifyd.
func (l Log) NewLogger(name string, out interface{ Write([]byte) (int, error) }) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      hclog.LevelFromString(l.Level),
		JSONFormat: l.Format == "json",
		Output:     out,
	})
}
