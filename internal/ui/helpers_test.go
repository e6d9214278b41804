package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

	"github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/httpguard"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/testdaemon"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/internal/ui"
)

// testToken is the one API token the dashboards under test accept.
const testToken = "ui-test-token-7d1f0c"

const testChannel = "hooks"

// sink is a webhook receiver. A recipient starting with "fail-first" is
// refused (400, a permanent failure) the first time and accepted after; one
// starting with "fail-always" is always refused; anyone else is accepted.
type sink struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen map[string]int
}

func newSink(t testing.TB) *sink {
	t.Helper()
	s := &sink{seen: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var env struct {
			Recipient string `json:"recipient"`
		}
		_ = json.Unmarshal(body, &env)
		s.mu.Lock()
		s.seen[env.Recipient]++
		n := s.seen[env.Recipient]
		s.mu.Unlock()
		switch {
		case strings.HasPrefix(env.Recipient, "fail-always"),
			strings.HasPrefix(env.Recipient, "fail-first") && n == 1:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"recipient rejected by the test sink"}`)
		default:
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"message_id":"m-`+fmt.Sprint(n)+`"}`)
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sink) deliveries(recipient string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[recipient]
}

// bundle is one test's notifyd: the whole daemon on real Postgres and
// Redis with the webhook plugin, started through the root package as
// `notifyd serve` starts it, its dashboard served by its own API.
type bundle struct {
	t      testing.TB
	ctx    context.Context
	cfg    *config.Config
	db     *testenv.DB
	d      *notifyd.Daemon
	store  *outbox.Store
	rc     redis.UniversalClient
	prefix string
	engine *delivery.Engine
	sink   *sink
	// url is the dashboard's origin; transport reaches it.
	url       string
	transport http.RoundTripper

	started time.Time // when traffic began
}

type options struct {
	tls        bool
	emptyToken bool
	sample     time.Duration
	now        func() time.Time
	redisURL   string // a private Redis the test may stop; "" = the shared one
	channels   []string
	missing    []string // channels whose plugin is not installed: they stay stopped
	schedule   bool     // configure a schedule
	stillJobs  bool     // the daemon runs no schedule and no job
	proxies    []string
	answers    *httpguard.Answers // the door's bound on answers in flight
}

type option func(*options)

// withTLS serves the dashboard over TLS. notifyd itself serves plain HTTP
// (TLS ends at a proxy: withTrustedProxies), so this is a test of the
// door's own TLS branch: the dashboard built over the running daemon's
// operations, behind a TLS server of the test's.
func withTLS() option { return func(o *options) { o.tls = true } }

// withEmptyTokenConfigured serves a dashboard whose token list starts with
// "" (an unset variable), which config validation refuses and notifyd.Start
// therefore never runs with: a test of the door, built over the running
// daemon's operations, that "" still logs no one in.
func withEmptyTokenConfigured() option    { return func(o *options) { o.emptyToken = true } }
func withNow(now func() time.Time) option { return func(o *options) { o.now = now } }
func withRedis(url string) option         { return func(o *options) { o.redisURL = url } }
func withSample(d time.Duration) option   { return func(o *options) { o.sample = d } }
func withChannels(names ...string) option { return func(o *options) { o.channels = names } }

// withMissingPlugin adds channels on the plugin "relay", which is not
// installed: the engine starts without them.
func withMissingPlugin(names ...string) option { return func(o *options) { o.missing = names } }
func withSchedule() option                     { return func(o *options) { o.schedule = true } }

// withStillJobs keeps the daemon's schedules from running (notifyd
// Options.NoSchedules): the jobs a test writes, a stuck one among them,
// stay as written for the pages to show.
func withStillJobs() option { return func(o *options) { o.stillJobs = true } }
func withTrustedProxies(cidrs ...string) option {
	return func(o *options) { o.proxies = cidrs }
}

// withAnswers serves the dashboard under a bound on answers in flight of
// the test's own, as the API's handler carries its own for it.
func withAnswers(a *httpguard.Answers) option { return func(o *options) { o.answers = a } }

func setup(t testing.TB, opts ...option) *bundle {
	t.Helper()
	o := options{sample: 200 * time.Millisecond, channels: []string{testChannel}}
	for _, f := range opts {
		f(&o)
	}
	b := &bundle{t: t, ctx: testenv.Context(t), sink: newSink(t)}
	b.db = testenv.NewDB(t)
	var redisURL string
	if o.redisURL != "" {
		ropts, err := redis.ParseURL(o.redisURL)
		if err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(ropts)
		t.Cleanup(func() { _ = c.Close() })
		b.rc, b.prefix, redisURL = c, "uitest", o.redisURL
	} else {
		r := testenv.NewRedis(t)
		b.rc, b.prefix, redisURL = r.Client, r.Prefix, r.URL
	}

	dir := t.TempDir()
	testenv.InstallPlugin(t, dir, "webhook", "github.com/notifyd/notifyd/plugins/webhook")
	cfg := config.Default()
	cfg.Postgres.URL = b.db.URL
	cfg.Redis.URL = redisURL
	cfg.Redis.Prefix = b.prefix
	cfg.Plugins.Dir = dir
	cfg.Plugins.HealthInterval = time.Second
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.HTTP.Tokens = []string{testToken}
	cfg.HTTP.TrustedProxies = o.proxies
	cfg.Delivery.LeaseTTL = 2 * time.Second
	cfg.Delivery.PromoteInterval = 20 * time.Millisecond
	cfg.Delivery.EpochInterval = 100 * time.Millisecond
	cfg.Delivery.RelayInterval = 200 * time.Millisecond
	// The sweeper would push a replayed row that the dashboard failed to
	// push; keep it out of the way so the tests see what the dashboard did.
	cfg.Delivery.SweepAfter = 10 * time.Minute
	cfg.Channels = map[string]config.Channel{}
	for _, name := range o.channels {
		cfg.Channels[name] = config.FillChannel(config.Channel{
			Plugin:      "webhook",
			Config:      map[string]any{"url": b.sink.srv.URL + "/" + name, "timeout": "2s"},
			Concurrency: 8, BatchSize: 8, Timeout: 2 * time.Second,
			Retry: config.Retry{MaxAttempts: 3, Base: 100 * time.Millisecond, Max: time.Second, Jitter: config.JitterWindow},
		})
	}
	for _, name := range o.missing {
		cfg.Channels[name] = config.FillChannel(config.Channel{Plugin: "relay", Concurrency: 1, BatchSize: 1, Timeout: time.Second})
	}
	if o.schedule {
		cfg.Schedules = map[string]config.Schedule{"morning-quiz": {
			Channel: o.channels[0], Cron: "0 8 * * *", Timezone: "Asia/Seoul", Lead: 10 * time.Minute,
			Audience: config.Audience{Topic: "quiz"}, Payload: map[string]any{"text": "Today's quiz"},
			MaxLate: time.Hour, ChunkSize: 1000,
		}}
	}
	b.cfg = &cfg

	log := hclog.New(&hclog.LoggerOptions{Name: "uitest", Level: hclog.Warn, Output: testWriter{t}})
	d := testdaemon.Start(t, b.ctx, b.cfg, notifyd.Options{
		Logger: log, Now: o.now, SampleInterval: o.sample, NoSchedules: o.stillJobs,
	})
	b.d, b.store, b.engine = d, d.Store(), d.Engine()
	b.url, b.transport = "http://"+d.Addr().String(), http.DefaultTransport
	if o.tls || o.emptyToken || o.answers != nil {
		b.door(log, o)
	}
	return b
}

// door serves a dashboard of the test's own over the running daemon's
// operations, for what notifyd never runs with (withTLS,
// withEmptyTokenConfigured) or what a test holds (withAnswers), and points
// the bundle's clients at it.
func (b *bundle) door(log hclog.Logger, o options) {
	b.t.Helper()
	cfg := *b.cfg
	if o.emptyToken {
		cfg.HTTP.Tokens = append([]string{""}, cfg.HTTP.Tokens...)
	}
	h, err := ui.New(ui.Deps{Config: &cfg, Ops: b.d, Logger: log, Now: o.now})
	if err != nil {
		b.t.Fatalf("ui.New: %v", err)
	}
	if o.answers != nil {
		h = o.answers.Wrap(h)
	}
	mux := http.NewServeMux()
	mux.Handle(ui.Prefix, h)
	var srv *httptest.Server
	if o.tls {
		srv = httptest.NewTLSServer(mux)
	} else {
		srv = httptest.NewServer(mux)
	}
	b.t.Cleanup(srv.Close)
	b.url, b.transport = srv.URL, srv.Client().Transport
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// send inserts one notification on channel and returns its id.
func (b *bundle) send(channel, recipient, key string) int64 {
	b.t.Helper()
	res, err := b.store.Insert(b.ctx, []outbox.NewNotification{{
		Channel: channel, Recipient: recipient, Payload: json.RawMessage(`{"text":"Today's quiz is up"}`), IdempotencyKey: key,
	}})
	if err != nil {
		b.t.Fatal(err)
	}
	return res[0].ID
}

// waitStatus polls the outbox until id is in status.
func (b *bundle) waitStatus(id int64, status string, within time.Duration) *outbox.Notification {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for {
		n, err := b.store.Get(b.ctx, id)
		if err != nil {
			b.t.Fatal(err)
		}
		if n.Status == status {
			return n
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("notification %d is %s after %s, want %s (last error %q)", id, n.Status, within, status, n.LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// deadLetter sends to a recipient the sink refuses first and waits for the
// dead letter.
func (b *bundle) deadLetter(channel, recipient string) int64 {
	b.t.Helper()
	id := b.send(channel, recipient, "")
	b.waitStatus(id, outbox.StatusFailed, 15*time.Second)
	return id
}

// forceFailed writes n FAILED rows of channel straight into the outbox (and
// the channel's Redis dead list), faster than failing them through the
// pipeline. The sink accepts their recipients.
func (b *bundle) forceFailed(channel string, n int) []int64 {
	b.t.Helper()
	rows, err := b.db.Pool.Query(b.ctx, `
INSERT INTO notifications (channel, recipient, payload, status, attempts, last_error)
SELECT $1, 'bulk-' || g || '@example.com', '{}', 'FAILED', 1, 'test: forced into FAILED'
  FROM generate_series(1, $2) g
RETURNING id`, channel, n)
	if err != nil {
		b.t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			b.t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		b.t.Fatal(err)
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	if err := b.rc.LPush(b.ctx, b.deadKey(channel), args...).Err(); err != nil {
		b.t.Fatal(err)
	}
	return ids
}

func (b *bundle) deadKey(channel string) string { return b.prefix + ":{ch:" + channel + "}:dead" }

func (b *bundle) status(id int64) string {
	b.t.Helper()
	var s string
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT status FROM notifications WHERE id = $1`, id).Scan(&s); err != nil {
		b.t.Fatalf("status of %d: %v", id, err)
	}
	return s
}

// client is a browser without a browser: a cookie jar and the dashboard's
// URL.
type client struct {
	t    testing.TB
	b    *bundle
	http *http.Client
}

func (b *bundle) client() *client {
	b.t.Helper()
	jar, _ := cookiejar.New(nil)
	// A client of its own, with a jar of its own: a shared client's jar
	// would be every test client's.
	hc := &http.Client{
		Transport:     b.transport,
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &client{t: b.t, b: b, http: hc}
}

type response struct {
	status int
	header http.Header
	body   string
}

func (c *client) do(req *http.Request) response {
	c.t.Helper()
	res, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: string(body)}
}

func (c *client) get(path string) response {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.b.url+path, nil)
	return c.do(req)
}

// post submits a form as a browser on the dashboard's page would: with the
// dashboard's Origin (unless headers say otherwise).
func (c *client) post(path string, form url.Values, headers ...string) response {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.b.url+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", c.b.url)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return c.do(req)
}

func (c *client) login(token string) response {
	c.t.Helper()
	return c.post("/ui/login", url.Values{"token": {token}, "next": {"/ui/"}})
}

// loggedIn is a client with a session and the session's CSRF token.
func (b *bundle) loggedIn() (*client, string) {
	b.t.Helper()
	c := b.client()
	if res := c.login(testToken); res.status != http.StatusSeeOther {
		b.t.Fatalf("login: status %d, want 303; body:\n%s", res.status, res.body)
	}
	return c, c.csrf()
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the session's CSRF token from a page's hidden field.
func (c *client) csrf() string {
	c.t.Helper()
	res := c.get("/ui/lookup")
	m := csrfRE.FindStringSubmatch(res.body)
	if m == nil {
		c.t.Fatalf("no csrf field on /ui/lookup (status %d)", res.status)
	}
	return m[1]
}
