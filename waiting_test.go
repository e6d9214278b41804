package notifyd_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/providers"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/client"
	"github.com/notifyd/notifyd/sdk/wire"
)

// gate is a TCP forwarder on a fixed loopback port that refuses connections
// (nothing listens) until opened: a service that is down, then up.
type gate struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
}

func newGate(t *testing.T, target string) *gate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{addr: ln.Addr().String(), target: target}
	_ = ln.Close() // down until opened
	t.Cleanup(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.ln != nil {
			_ = g.ln.Close()
		}
	})
	return g
}

func (g *gate) open(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", g.addr)
	if err != nil {
		t.Fatalf("open the gate on %s: %v", g.addr, err)
	}
	g.mu.Lock()
	g.ln = ln
	g.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", g.target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c) }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
}

func getJSON(t *testing.T, u string, v any) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	if v != nil {
		_ = json.NewDecoder(resp.Body).Decode(v)
	}
	return resp.StatusCode
}

// TestStart_waitsForServices: started with Postgres and Redis down, notifyd
// answers /healthz at once, says on /readyz what it waits for (each service
// tried on its own, so the one that answers first shows ok), answers the API
// 503, and becomes ready as soon as both answer — in either order — running
// the schedule's fire time it missed meanwhile (within max_late) and
// delivering.
func TestStart_waitsForServices(t *testing.T) {
	t.Parallel()
	for _, first := range []string{"postgres", "redis"} {
		t.Run(first+" first", func(t *testing.T) {
			t.Parallel()
			testWaitsForServices(t, first)
		})
	}
}

func testWaitsForServices(t *testing.T, first string) {
	db := testenv.NewDB(t)
	ctx := testenv.Context(t)
	// A schedule first seen five minutes ago that fires every minute: its
	// latest fire time passed while notifyd waited.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO schedules (name, first_seen_at) VALUES ('minutely', now() - interval '5 minutes')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `
		INSERT INTO subscribers (external_id, addresses) SELECT 'u' || i, jsonb_build_object('inbox', 'user-' || i) FROM generate_series(1, 3) i;
		INSERT INTO topic_subscriptions (topic, subscriber_id) SELECT 'everyone', id FROM subscribers`); err != nil {
		t.Fatal(err)
	}
	pgURL, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	pgGate := newGate(t, pgURL.Host)
	pgURL.Host = pgGate.addr
	rs := testenv.StartRedis(t)
	rs.Stop() // down

	cfg := config.Default()
	cfg.Postgres.URL, cfg.Redis.URL, cfg.Redis.Prefix = pgURL.String(), rs.URL, "wait"
	cfg.HTTP.Listen, cfg.HTTP.Tokens = "127.0.0.1:0", []string{"waiting-token-0123456789"}
	cfg.Log.Level = "warn"
	cfg.Channels = map[string]config.Channel{"inbox": {Plugin: "inbox"}}
	cfg.Schedules = map[string]config.Schedule{"minutely": {Channel: "inbox", Cron: "* * * * *", Timezone: "UTC",
		Lead: time.Second, MaxLate: time.Hour, ChunkSize: 100, Audience: config.Audience{Topic: "everyone"},
		Payload: map[string]any{"text": "the {{.fire_time.Format \"15:04\"}} quiz"}}}
	box := &inbox{got: map[string][]string{}}
	providers := providers.NewInProcess(map[string]sdk.Provider{"inbox": box}, nil)
	t.Cleanup(providers.Close)

	start := time.Now()
	d, err := notifyd.Start(context.Background(), &cfg, notifyd.Options{Providers: providers, WaitForServices: true})
	if err != nil {
		t.Fatalf("Start with the services down: %v, want it to wait", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = d.Stop(context.Background())
		}
	})
	if took := time.Since(start); took > 10*time.Second { // waiting would be for ever; 10 s leaves a busy machine room
		t.Errorf("Start took %s with the services down, want it to return at once", took)
	}
	base := "http://" + d.Addr().String()

	if code := getJSON(t, base+"/healthz", nil); code != 200 {
		t.Errorf("/healthz while waiting = %d, want 200", code)
	}
	var rd wire.Readiness
	if code := getJSON(t, base+"/readyz", &rd); code != 503 || !strings.HasPrefix(rd.Checks["postgres"], "waiting") {
		t.Errorf("/readyz while waiting = %d %+v, want 503 with postgres waiting", code, rd)
	}
	var eb wire.ErrorBody
	if code := getJSON(t, base+"/v1/channels", &eb); code != 503 || eb.Error.Code != wire.CodeUnavailable || !strings.Contains(eb.Error.Message, "Postgres and Redis") {
		t.Errorf("the API while waiting = %d %+v, want 503 unavailable naming Postgres and Redis", code, eb)
	}

	// One service answers: /readyz says so and still waits for the other.
	second := map[string]string{"postgres": "redis", "redis": "postgres"}[first]
	up := map[string]func(){"postgres": func() { pgGate.open(t) }, "redis": rs.Start}
	up[first]()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rd = wire.Readiness{}
		getJSON(t, base+"/readyz", &rd)
		if rd.Checks[first] == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is up but /readyz still says %+v", first, rd)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code := getJSON(t, base+"/readyz", &rd); code != 503 || !strings.HasPrefix(rd.Checks[second], "waiting") {
		t.Errorf("/readyz with only %s up = %d %+v, want 503 still waiting for %s", first, code, rd, second)
	}
	eb = wire.ErrorBody{}
	if getJSON(t, base+"/v1/channels", &eb); !strings.HasSuffix(eb.Error.Message, "waiting for "+map[string]string{"postgres": "Postgres", "redis": "Redis"}[second]) {
		t.Errorf("the API with only %s up says %q, want it waiting for %s alone", first, eb.Error.Message, second)
	}

	// While the API takes over from the stand-in, /healthz keeps answering
	// 200 on new connections: the socket is handed over, never closed.
	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	stopProbe, probed := make(chan struct{}), make(chan []string)
	for range 2 {
		go func() {
			var bad []string
			for {
				select {
				case <-stopProbe:
					probed <- bad
					return
				default:
				}
				resp, err := probe.Get(base + "/healthz")
				if err != nil {
					bad = append(bad, err.Error())
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					bad = append(bad, resp.Status)
				}
			}
		}()
	}
	up[second]()
	bothUp := time.Now()
	select {
	case <-d.Ready():
	case err := <-d.Failed():
		t.Fatalf("bring-up failed: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not ready 30 s after both services answered")
	}
	close(stopProbe)
	for range 2 {
		if bad := <-probed; len(bad) > 0 {
			t.Errorf("/healthz failed %d times while the API took over, first: %s", len(bad), bad[0])
		}
	}
	t.Logf("ready %s after %s answered", time.Since(bothUp).Round(time.Millisecond), second)
	if code := getJSON(t, base+"/readyz", nil); code != 200 {
		t.Errorf("/readyz once running = %d, want 200", code)
	}
	c, err := client.New(base, "waiting-token-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.Enqueue(ctx, client.Notification{Channel: "inbox", Recipient: "ada", Payload: json.RawMessage(`{"text":"hello"}`)})
	if err != nil {
		t.Fatal(err)
	}
	// The fire time missed while waiting runs now; its three recipients and
	// the one enqueued get theirs.
	deadline = time.Now().Add(30 * time.Second)
	for {
		box.mu.Lock()
		done := len(box.got["ada"]) == 1 && len(box.got["user-1"]) == 1 && len(box.got["user-2"]) == 1 && len(box.got["user-3"]) == 1
		got := fmt.Sprint(box.got)
		box.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivered %s; want ada's notification (id %d) and the missed fire time's three", got, n.ID)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var fire time.Time
	if err := db.Pool.QueryRow(ctx, `SELECT fire_time FROM jobs WHERE schedule = 'minutely' ORDER BY fire_time LIMIT 1`).Scan(&fire); err != nil {
		t.Fatal(err)
	}
	if fire.Before(start.Add(-time.Minute)) || fire.After(time.Now()) {
		t.Errorf("first run fires at %s, want the latest minute before notifyd came up (%s)", fire, start)
	}
	// The API closes the socket it took over when it stops.
	stopped = true
	if err := d.Stop(context.Background()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if c, err := net.DialTimeout("tcp", d.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Stop", d.Addr())
	}
}

// TestStart_stopWhileWaiting: Stop while the services are still down returns
// promptly and leaves nothing listening.
func TestStart_stopWhileWaiting(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Postgres.URL = "postgres://postgres@127.0.0.1:1/nowhere?sslmode=disable"
	cfg.Redis.URL = "redis://127.0.0.1:1/0"
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Log.Level = "error"
	providers := providers.NewInProcess(map[string]sdk.Provider{"inbox": &inbox{got: map[string][]string{}}}, nil)
	t.Cleanup(providers.Close)
	cfg.Channels = map[string]config.Channel{"inbox": {Plugin: "inbox"}}
	d, err := notifyd.Start(context.Background(), &cfg, notifyd.Options{Providers: providers, WaitForServices: true})
	if err != nil {
		t.Fatal(err)
	}
	addr := d.Addr().String()
	// Its operations answer "not running yet" while it waits, not a panic.
	var refused *notifyd.Error
	if _, err := d.Enqueue(context.Background(), []wire.Notification{{Channel: "inbox", Recipient: "u", Payload: []byte(`{}`)}}, ""); !errors.As(err, &refused) || refused.Kind != notifyd.KindUnavailable {
		t.Errorf("Enqueue while waiting = %v, want a notifyd.Error of kind KindUnavailable", err)
	}
	if err := d.Pause(context.Background(), "inbox", ""); !errors.As(err, &refused) || refused.Kind != notifyd.KindUnavailable {
		t.Errorf("Pause while waiting = %v, want KindUnavailable", err)
	}
	if ps := d.Plugins(context.Background()); ps != nil {
		t.Errorf("Plugins while waiting = %v, want none", ps)
	}
	time.Sleep(300 * time.Millisecond) // a retry or two
	start := time.Now()
	if err := d.Stop(context.Background()); err != nil {
		t.Errorf("Stop while waiting: %v", err)
	}
	if took := time.Since(start); took > 15*time.Second { // a Stop that waited would wait for the services
		t.Errorf("Stop while waiting took %s", took)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Errorf("%s still accepts connections after Stop", addr)
	}
}

// TestStart_badConfigAtOnce: with the services unreachable, what waiting
// cannot cure — an unparsable postgres.url or redis.url, an instance.id that
// another live notifyd holds — still fails Start at once, naming the key and
// never printing a password, and leaves nothing listening.
func TestStart_badConfigAtOnce(t *testing.T) {
	t.Parallel()
	base := config.Default()
	base.Postgres.URL = "postgres://postgres@127.0.0.1:1/nowhere?sslmode=disable"
	base.Redis.URL = "redis://127.0.0.1:1/0"
	base.Log.Level = "error"
	base.Channels = map[string]config.Channel{"inbox": {Plugin: "inbox"}}
	providers := providers.NewInProcess(map[string]sdk.Provider{"inbox": &inbox{got: map[string][]string{}}}, nil)
	t.Cleanup(providers.Close)

	// A daemon that waits, holding its instance id.
	held := base
	held.HTTP.Listen, held.Instance.ID = "127.0.0.1:0", fmt.Sprintf("bad-config-%d", time.Now().UnixNano())
	d, err := notifyd.Start(context.Background(), &held, notifyd.Options{Providers: providers, WaitForServices: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Stop(context.Background()) })

	for _, tc := range []struct {
		name, want string
		edit       func(c *config.Config)
	}{
		{"unparsable postgres.url", "postgres.url", func(c *config.Config) { c.Postgres.URL = "postgres://app:pw-SECRET@%zz" }},
		{"unparsable redis.url", "redis.url", func(c *config.Config) { c.Redis.URL = "redis://app:pw-SECRET@127.0.0.1:1/notanumber" }},
		{"redis.url of another scheme", "redis.url", func(c *config.Config) { c.Redis.URL = "http://127.0.0.1:1" }},
		{"instance.id held by another", "instance.id", func(c *config.Config) { c.Instance.ID = held.Instance.ID }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.HTTP.Listen = freeAddr(t)
			tc.edit(&cfg)
			d, err := notifyd.Start(context.Background(), &cfg, notifyd.Options{Providers: providers, WaitForServices: true})
			if err == nil {
				_ = d.Stop(context.Background())
				t.Fatalf("Start = a waiting daemon, want an error naming %s", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "pw-SECRET") {
				t.Errorf("Start error %q, want it to name %s and show no password", err, tc.want)
			}
			if c, err := net.DialTimeout("tcp", cfg.HTTP.Listen, time.Second); err == nil {
				c.Close()
				t.Errorf("%s still accepts connections after Start failed", cfg.HTTP.Listen)
			}
		})
	}
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestStart_stopDuringBringUp: a SIGTERM can come at any point of the
// bring-up (the fault suite sends one ~2 s after a restart, while the
// pipeline starts); Stop then takes down whatever was built, never panics,
// and returns.
func TestStart_stopDuringBringUp(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	rds := testenv.NewRedis(t)
	for i := range 12 {
		cfg := config.Default()
		cfg.Postgres.URL, cfg.Redis.URL, cfg.Redis.Prefix = db.URL, rds.URL, rds.Prefix
		cfg.HTTP.Listen, cfg.HTTP.Tokens = "127.0.0.1:0", []string{"embedded-token-0123456789"}
		cfg.Log.Level = "error"
		cfg.Instance.ID = fmt.Sprintf("stop-during-bring-up-%d", i)
		cfg.Channels = map[string]config.Channel{"inbox": {Plugin: "inbox"}}
		providers := providers.NewInProcess(map[string]sdk.Provider{"inbox": &inbox{got: map[string][]string{}}}, nil)
		d, err := notifyd.Start(context.Background(), &cfg, notifyd.Options{Providers: providers, WaitForServices: true})
		if err != nil {
			t.Fatal(err)
		}
		wait := time.Duration(4*i*i) * time.Millisecond // 0 … 484 ms: every stage of the bring-up
		time.Sleep(wait)
		if err := d.Stop(context.Background()); err != nil {
			t.Errorf("Stop after %s: %v", wait, err)
		}
		providers.Close()
	}
}

// TestStart_standInConnectionsCannotBeHeld: the stand-in that answers while
// notifyd waits for Postgres and Redis bounds its connections as the API
// does, requests that show no credential included. Two addresses, 4
// connections each (http.max_connections 8, …_per_client 4), each a request
// whose declared body never comes — an enqueue without a token, a /healthz
// with a body — held every connection for good: the stand-in answered
// without reading the body, net/http then waited for it with no read
// timeout, and such a connection was never closed to admit another, so
// /healthz from anyone else got 503. They are closed to admit it now.
func TestStart_standInConnectionsCannotBeHeld(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Postgres.URL = "postgres://postgres@127.0.0.1:1/nowhere?sslmode=disable"
	cfg.Redis.URL = "redis://127.0.0.1:1/0"
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.HTTP.MaxConnections, cfg.HTTP.MaxConnectionsPerClient = 8, 4
	cfg.Log.Level = "error"
	providers := providers.NewInProcess(map[string]sdk.Provider{"inbox": &inbox{got: map[string][]string{}}}, nil)
	t.Cleanup(providers.Close)
	cfg.Channels = map[string]config.Channel{"inbox": {Plugin: "inbox"}}
	d, err := notifyd.Start(context.Background(), &cfg, notifyd.Options{Providers: providers, WaitForServices: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Stop(context.Background()) })
	addr := d.Addr().String()

	heads := []string{
		"POST /v1/notifications HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
		"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n",
	}
	for _, ip := range []byte{2, 3} {
		for i := range 4 {
			c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, ip)}}).Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			// A /healthz first, whose answer says the stand-in is reading
			// the next request.
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"+heads[i%len(heads)]); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}
	other := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 4)}}).DialContext,
	}}
	res, err := other.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz while requests wait for their bodies: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("GET /healthz from another address while 2 addresses' requests wait for their bodies: %d %s, want 200", res.StatusCode, body)
	}
}
