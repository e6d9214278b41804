package dailyquiz_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk/client"
)

// appToken is the API token the tests give notifyd (NOTIFYD_API_TOKEN).
const appToken = "daily-quiz-test-token-0123"

// appDB is a database of its own with the application's tables from
// schema.sql, holding the rows in seed (SQL).
func appDB(t *testing.T, seed string) *testenv.DB {
	t.Helper()
	db := testenv.NewDB(t)
	ctx := testenv.Context(t)
	schema, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, string(schema)); err != nil {
		t.Fatalf("schema.sql: %v", err)
	}
	if _, err := db.Pool.Exec(ctx, seed); err != nil {
		t.Fatalf("the test's rows: %v", err)
	}
	return db
}

// exampleConfig is the example's notifyd.yaml — audience query, templates
// and schedule unchanged but for its cron's hour (below) — with the
// services' addresses, the listen address and the token given as an
// operator would, in NOTIFYD_* variables (env adds more).
func exampleConfig(t *testing.T, db *testenv.DB, rds *testenv.Redis, env ...string) *config.Config {
	t.Helper()
	cfg, err := config.Load("notifyd.yaml", append([]string{
		"NOTIFYD_POSTGRES_URL=" + db.URL, "NOTIFYD_REDIS_URL=" + rds.URL, "NOTIFYD_REDIS_PREFIX=" + rds.Prefix,
		"NOTIFYD_HTTP_LISTEN=127.0.0.1:0", "NOTIFYD_API_TOKEN=" + appToken, "NOTIFYD_LOG_LEVEL=warn",
	}, env...))
	if err != nil {
		t.Fatalf("the example's notifyd.yaml: %v", err)
	}
	// The schedule's own fire is moved 12 hours from now (its hour only):
	// within its lead (07:50–08:00 Seoul) it materialises the day's quiz,
	// due at 08:00, and the day's content key then rightly makes the test's
	// own run send nothing — a test that failed ten minutes a day.
	s := cfg.Schedules["daily-quiz"]
	loc, err := time.LoadLocation(s.Timezone)
	if err != nil {
		t.Fatal(err)
	}
	s.Cron = fmt.Sprintf("0 %d * * *", time.Now().In(loc).Add(12*time.Hour).Hour())
	cfg.Schedules["daily-quiz"] = s
	return cfg
}

// startExample runs notifyd with cfg until the test ends and returns a
// client of its API.
func startExample(t *testing.T, cfg *config.Config, o notifyd.Options) *client.Client {
	t.Helper()
	d, err := notifyd.Start(testenv.Context(t), cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Stop(context.Background()) })
	c, err := client.New("http://"+d.Addr().String(), appToken)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
