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
