package config

import (
	"strings"
	"testing"
)

// TestLoad_noURLCredentials: an error about a value never prints the
// password or query values of a URL it quotes — a URL put under the wrong key
// (a swapped environment variable) is the likely case.
func TestLoad_noURLCredentials(t *testing.T) {
	t.Parallel()
	const pgURL = "postgres://app:pgpw-SECRET@127.0.0.1:5432/db?sslpassword=pgq-SECRET"
	tests := []struct {
		name    string
		yaml    string
		env     []string
		wantKey string
	}{
		{"URL as a duration", minimal, []string{"NOTIFYD_SHUTDOWN_SOFT_TIMEOUT=" + pgURL}, "soft_timeout"},
		{"URL as a number", minimal, []string{"NOTIFYD_POSTGRES_MAX_CONNS=" + pgURL}, "max_conns"},
		{"URL as the log format", minimal + "log: {format: \"" + pgURL + "\"}\n", nil, "log.format"},
		{"URL as a time zone", minimal + "channels: {a: {plugin: w, rate_limit: {timezone: \"" + pgURL + "\"}}}\n", nil, "timezone"},
		{"postgres URL with the wrong scheme", "redis: {url: \"redis://127.0.0.1:6379\"}\npostgres: {url: \"mysql://app:pgpw-SECRET@h/db?password=pgq-SECRET\"}\n", nil, "postgres.url"},
		{"redis URL with the wrong scheme", "postgres: {url: \"postgres://x\"}\nredis: {url: \"http://:pgpw-SECRET@h/0?x=pgq-SECRET\"}\n", nil, "redis.url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := tt.env
			if env == nil {
				env = []string{}
			}
			_, err := Load(write(t, tt.yaml), env)
			if err == nil || !strings.Contains(err.Error(), tt.wantKey) {
				t.Fatalf("Load error = %v; want one naming %q", err, tt.wantKey)
			}
			for _, secret := range []string{"pgpw-SECRET", "pgq-SECRET"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows %q", err, secret)
				}
			}
		})
	}
}
