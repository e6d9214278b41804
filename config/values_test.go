package config

import (
	"strings"
	"testing"
)

// TestLoad_valueErrors: a value the decoder cannot read is named by its key
// with what is wrong with it, from the file or the environment, at the top
// level and under a channel; a URL whose scheme is misspelt is named by its
// key and scheme.
func TestLoad_valueErrors(t *testing.T) {
	t.Parallel()
	const channel = minimal + "channels: {x: {plugin: webhook, retry: {max_attempts: 3, base: 1s}}}\n"
	tests := []struct {
		name, yaml string
		env        []string
		want       string
	}{
		{"channel duration", minimal + "channels: {x: {plugin: webhook, retry: {base: 200xs}}}\n", nil,
			`config key "channels.x.retry.base": "200xs" is not a duration (such as 500ms or 2s): unknown unit "xs"`},
		{"channel integer", minimal + "channels: {x: {plugin: webhook, retry: {max_attempts: four}}}\n", nil,
			`config key "channels.x.retry.max_attempts": "four" is not an integer`},
		{"channel duration from the environment", channel, []string{"NOTIFYD_CHANNELS_X_RETRY_BASE=200xs"},
			`config key "channels.x.retry.base": "200xs" is not a duration (such as 500ms or 2s): unknown unit "xs"`},
		{"channel integer from the environment", channel, []string{"NOTIFYD_CHANNELS_X_RETRY_MAX_ATTEMPTS=four"},
			`config key "channels.x.retry.max_attempts": "four" is not an integer`},
		{"top-level duration", minimal + "delivery: {sweep_after: 2 minutes}\n", nil,
			`config key "delivery.sweep_after": "2 minutes" is not a duration (such as 500ms or 2s)`},
		{"top-level duration without a unit", minimal + "shutdown: {soft_timeout: \"10\"}\n", nil,
			`config key "shutdown.soft_timeout": "10" is not a duration (such as 500ms or 2s): missing unit`},
		{"top-level integer from the environment", minimal, []string{"NOTIFYD_DELIVERY_RELAY_BATCH=lots"},
			`config key "delivery.relay_batch": "lots" is not an integer`},
		{"a fraction for an integer", minimal + "channels: {x: {plugin: webhook, concurrency: 2.5}}\n", nil,
			`config key "channels.x.concurrency": 2.5 is not a whole number`},
		{"an int32 out of range", "redis: {url: \"redis://127.0.0.1:6379\"}\npostgres: {url: \"postgres://x\", max_conns: 99999999999}\n", nil,
			`config key "postgres.max_conns": 99999999999 is out of range (at most 2147483647)`},
		{"an int32 out of range from the environment", minimal, []string{"NOTIFYD_POSTGRES_MAX_CONNS=99999999999"},
			`config key "postgres.max_conns": "99999999999" is out of range (at most 2147483647)`},
		{"a boolean", minimal + "http: {public_metrics: sometimes}\n", nil,
			`config key "http.public_metrics": "sometimes" is not true or false`},
		{"a ratio", minimal + "channels: {x: {plugin: webhook, breaker: {ratio: half}}}\n", nil,
			`config key "channels.x.breaker.ratio": "half" is not a number`},
		{"a long value is cut", minimal + "shutdown: {soft_timeout: " + strings.Repeat("a", 200) + "}\n", nil,
			`config key "shutdown.soft_timeout": "` + strings.Repeat("a", maxQuoted) + `…" is not a duration`},
		{"postgress://", "redis: {url: \"redis://127.0.0.1:6379\"}\npostgres: {url: \"postgress://app:pw-SECRET@127.0.0.1/db\"}\n", nil,
			`config key "postgres.url": scheme "postgress" is not one notifyd speaks; use postgres:// or postgresql://`},
		{"no scheme", "redis: {url: \"redis://127.0.0.1:6379\"}\npostgres: {url: \"host=127.0.0.1 password=pw-SECRET\"}\n", nil,
			`config key "postgres.url": must be a postgres:// or postgresql:// URL`},
		{"redis+tls://", "postgres: {url: \"postgres://x\"}\nredis: {url: \"redis+tls://:pw-SECRET@127.0.0.1:6379\"}\n", nil,
			`config key "redis.url": scheme "redis+tls" is not one notifyd speaks; use redis:// or rediss://`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := loadErr(t, tt.yaml, tt.env)
			if err == nil {
				t.Fatalf("Load succeeded, want %s", tt.want)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Load error:\n got %s\nwant %s", err, tt.want)
			}
			if strings.Contains(err.Error(), "pw-SECRET") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

// loadErr loads yaml with env (none when nil, never the process's own) and
// answers Load's error.
func loadErr(t *testing.T, yaml string, env []string) error {
	t.Helper()
	if env == nil {
		env = []string{}
	}
	_, err := Load(write(t, yaml), env)
	return err
}

// TestLoad_DurationWithoutUnit: a duration written as a bare number in the
// file was read as nanoseconds: `soft_timeout: 10` (meaning seconds) loaded
// as 10ns, `lease_ttl: 15` as 15ns (every instance's lease lapsing at
// once), `timeout: 30` as 30ns (every send timed out). As a string ("10",
// or NOTIFYD_…=10) it was already refused. A bare number other than 0 (the
// default) is refused naming the key and the form.
func TestLoad_DurationWithoutUnit(t *testing.T) {
	t.Parallel()
	for yaml, key := range map[string]string{
		"shutdown: {soft_timeout: 10}\n":                   "shutdown.soft_timeout",
		"delivery: {lease_ttl: 15}\n":                      "delivery.lease_ttl",
		"channels: {a: {plugin: w, timeout: 30}}\n":        "channels.a.timeout",
		"channels: {a: {plugin: w, retry: {base: 1.5}}}\n": "channels.a.retry.base",
		"channels: {a: {plugin: w, retry: {max: -5}}}\n":   "channels.a.retry.max",
		"retention: {sent: 168}\n":                         "retention.sent",
	} {
		err := loadErr(t, minimal+yaml, nil)
		if err == nil || !strings.Contains(err.Error(), `config key "`+key+`"`) || !strings.Contains(err.Error(), "unit") {
			t.Errorf("%s: Load = %v; want an error naming %s and its missing unit", strings.TrimSpace(yaml), err, key)
		}
	}
	// 0 needs no unit (as "0" did not): what it means is the key's own rule.
	if err := loadErr(t, minimal+"channels: {a: {plugin: w, retry: {max_retry_after: 0}}}\n", nil); err != nil {
		t.Errorf("max_retry_after: 0: %v; want the default", err)
	}
	if err := loadErr(t, minimal+"shutdown: {soft_timeout: 10}\n", []string{"NOTIFYD_SHUTDOWN_SOFT_TIMEOUT=10s"}); err != nil {
		t.Errorf("soft_timeout: 10 overridden by 10s: %v", err)
	}
	if err := loadErr(t, minimal, []string{"NOTIFYD_SHUTDOWN_SOFT_TIMEOUT=10"}); err == nil || !strings.Contains(err.Error(), "unit") {
		t.Errorf("NOTIFYD_SHUTDOWN_SOFT_TIMEOUT=10: %v; want an error naming the missing unit", err)
	}
}
