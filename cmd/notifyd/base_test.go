package main

import (
	"context"
	"strings"
	"testing"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/config"
)

// TestOpenPostgres_noURLCredentials: a database that cannot be reached, or
// a URL pgx cannot parse, is reported without the URL's password or query
// values (password=, sslpassword= and the like).
func TestOpenPostgres_noURLCredentials(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		// Port 1 on loopback: nothing listens there.
		"postgres://app:pgpw-SECRET@127.0.0.1:1/db?password=pgq-SECRET&sslmode=disable&connect_timeout=2",
		"postgres://app:pgpw-SECRET@127.0.0.1:1/db?sslpassword=pgq-SECRET&sslmode=disable&connect_timeout=2",
		"postgres://app:pgpw-SECRET@127.0.0.1:1/db?sslkey=pgq-SECRET&connect_timeout=x",
	} {
		cfg := config.Default()
		cfg.Postgres.URL = raw
		_, err := notifyd.Migrate(context.Background(), &cfg) // connects first
		if err == nil {
			t.Fatalf("connecting to %s… = nil error; want a connect or parse error", raw[:20])
		}
		for _, secret := range []string{"pgpw-SECRET", "pgq-SECRET"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q shows %q", err, secret)
			}
		}
	}
}
