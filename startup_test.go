package notifyd_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/providers"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/wire"
)

// withDB is the test database's URL with another database or user.
func withDB(t *testing.T, user, db string) string {
	t.Helper()
	u, err := url.Parse(testenv.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		u.User = url.User(user)
	}
	if db != "" {
		u.Path = "/" + db
	}
	return u.String()
}

// withParam is the test database's URL with one more query parameter.
func withParam(t *testing.T, name, value string) string {
	t.Helper()
	u, err := url.Parse(testenv.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(name, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// passwordRedis is a Redis of its own that wants a password (testenv's
// waits for a PING that would be refused).
func passwordRedis(t *testing.T, password string) string {
	t.Helper()
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"), "--requirepass", password)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not listen: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStart_refusedForGood: what waiting cannot cure — a database or role
// that does not exist, a Redis DB out of range, a Redis password missing or
// wrong, a Redis that evicts keys — fails Start at once without WaitForServices, and with it (as
// `notifyd serve` starts) arrives on Failed instead of being waited on
// forever; either way naming the key to change and the server's own
// reason, never a password.
func TestStart_refusedForGood(t *testing.T) {
	t.Parallel()
	rds := testenv.NewRedis(t)
	locked := passwordRedis(t, "pw-SECRET-right")
	evicting := testenv.StartRedis(t, "--maxmemory-policy", "allkeys-lru")
	missingDB := fmt.Sprintf("notifyd_no_such_db_%d", time.Now().UnixNano())
	providers := providers.NewInProcess(map[string]sdk.Provider{"inbox": &inbox{got: map[string][]string{}}}, nil)
	t.Cleanup(providers.Close)

	tests := []struct {
		name      string
		pg, redis string
		want      []string
	}{
		{"a database that does not exist", withDB(t, "", missingDB), rds.URL,
			[]string{"postgres.url", `database "` + missingDB + `" does not exist`, "3D000", "waiting will not change this"}},
		{"a role that does not exist", withDB(t, "nosuchrole", ""), rds.URL,
			[]string{"postgres.url", `role "nosuchrole" does not exist`, "28000"}},
		// postgres.url's other query parameters are session settings: one
		// the server does not know, or whose value it refuses, was waited
		// on for ever (/readyz: waiting).
		{"a session setting Postgres does not know", withParam(t, "statment_timeout", "5s"), rds.URL,
			[]string{"postgres.url", `unrecognized configuration parameter "statment_timeout"`, "42704", "waiting will not change this"}},
		{"a session setting's value Postgres refuses", withParam(t, "TimeZone", "Nowhere"), rds.URL,
			[]string{"postgres.url", `invalid value for parameter "TimeZone"`, "22023", "waiting will not change this"}},
		{"Redis DB 99", testenv.DatabaseURL(), strings.TrimSuffix(strings.TrimSuffix(rds.URL, "/0"), "/") + "/99",
			[]string{"redis.url", "ERR DB index is out of range"}},
		{"a Redis password missing", testenv.DatabaseURL(), "redis://" + locked + "/0",
			[]string{"redis.url", "NOAUTH"}},
		{"a Redis password wrong", testenv.DatabaseURL(), "redis://:pw-SECRET-wrong@" + locked + "/0",
			[]string{"redis.url", "WRONGPASS"}},
		// A Redis that evicts keys when full can drop a queue, leaving its
		// notifications QUEUED for good: refused until it is set to
		// noeviction, which no wait does.
		{"a Redis that evicts keys", testenv.DatabaseURL(), evicting.URL,
			[]string{"redis.url", "Redis at " + evicting.Addr, "maxmemory-policy allkeys-lru", "set maxmemory-policy noeviction", "waiting will not change this"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := config.Default()
			cfg.Postgres.URL, cfg.Redis.URL, cfg.Redis.Prefix = tt.pg, tt.redis, rds.Prefix
			cfg.HTTP.Listen, cfg.Log.Level = "127.0.0.1:0", "off"
			cfg.Channels = map[string]config.Channel{"inbox": {Plugin: "inbox"}}
			check := func(how string, err error) {
				t.Helper()
				for _, w := range tt.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: error %q does not say %q", how, err, w)
					}
				}
				if strings.Contains(err.Error(), "pw-SECRET") {
					t.Errorf("%s: error %q shows a password", how, err)
				}
			}

			d, err := notifyd.Start(testenv.Context(t), &cfg, notifyd.Options{Providers: providers, NoMigrate: true})
			if err == nil {
				_ = d.Stop(context.Background())
				t.Fatal("Start succeeded")
			}
			check("Start", err)

			d, err = notifyd.Start(testenv.Context(t), &cfg, notifyd.Options{Providers: providers, NoMigrate: true, WaitForServices: true})
			if err != nil {
				t.Fatalf("Start waiting: %v", err)
			}
			defer d.Stop(context.Background())
			select {
			case err := <-d.Failed():
				check("Failed", err)
			case <-d.Ready():
				t.Fatal("ready")
			case <-time.After(60 * time.Second):
				var rd wire.Readiness
				getJSON(t, "http://"+d.Addr().String()+"/readyz", &rd)
				t.Fatalf("still waiting after 60 s: /readyz %+v", rd.Checks)
			}
		})
	}
}

// TestStart_readyzSaysWhy: what waiting can cure (here nothing listening)
// is waited on, and /readyz shows the last error beside "waiting",
// redacted.
func TestStart_readyzSaysWhy(t *testing.T) {
	t.Parallel()
	pgAddr, rdAddr := freeAddr(t), freeAddr(t)
	cfg := config.Default()
	cfg.Postgres.URL = "postgres://app:pw-SECRET@" + pgAddr + "/notifyd?sslmode=disable&password=pw-SECRET"
	cfg.Redis.URL = "redis://:pw-SECRET@" + rdAddr + "/0"
	cfg.HTTP.Listen, cfg.Log.Level = "127.0.0.1:0", "off"
	cfg.Channels = map[string]config.Channel{"inbox": {Plugin: "inbox"}}
	providers := providers.NewInProcess(map[string]sdk.Provider{"inbox": &inbox{got: map[string][]string{}}}, nil)
	t.Cleanup(providers.Close)
	d, err := notifyd.Start(testenv.Context(t), &cfg, notifyd.Options{Providers: providers, WaitForServices: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Stop(context.Background()) })
	want := map[string]string{
		"postgres": "waiting: connection refused (" + pgAddr + ")",
		"redis":    "waiting: connection refused (" + rdAddr + ")",
	}
	var rd wire.Readiness
	deadline := time.Now().Add(60 * time.Second)
	for {
		rd = wire.Readiness{}
		code := getJSON(t, "http://"+d.Addr().String()+"/readyz", &rd)
		if code == 503 && rd.Checks["postgres"] == want["postgres"] && rd.Checks["redis"] == want["redis"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %v, want 503 with %v", code, rd.Checks, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case err := <-d.Failed():
		t.Fatalf("gave up on a service that may yet answer: %v", err)
	default:
	}
}

// TestStart_pluginsDir: a plugins.dir that is missing or not a directory is
// said plainly at start, even while the services are unreachable.
func TestStart_pluginsDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{
		{filepath.Join(dir, "nope"), strconv.Quote(filepath.Join(dir, "nope")) + ": no such directory"},
		{file, strconv.Quote(file) + ": not a directory"},
	} {
		cfg := config.Default()
		cfg.Postgres.URL = "postgres://postgres@" + freeAddr(t) + "/nowhere?sslmode=disable"
		cfg.Redis.URL = "redis://" + freeAddr(t) + "/0"
		cfg.HTTP.Listen, cfg.Log.Level = "127.0.0.1:0", "off"
		cfg.Plugins.Dir = tc.dir
		cfg.Channels = map[string]config.Channel{"hooks": {Plugin: "webhook"}}
		d, err := notifyd.Start(testenv.Context(t), &cfg, notifyd.Options{WaitForServices: true})
		if err == nil {
			_ = d.Stop(context.Background())
			t.Fatalf("Start with plugins.dir %s waits, want an error", tc.dir)
		}
		if want := "plugins.dir " + tc.want; err.Error() != want {
			t.Errorf("Start error:\n got %s\nwant %s", err, want)
		}
	}
}
