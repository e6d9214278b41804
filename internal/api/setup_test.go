package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/api"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/metrics"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/pluginhost"
	"github.com/notifyd/notifyd/internal/providers"
	"github.com/notifyd/notifyd/internal/queue"
	"github.com/notifyd/notifyd/internal/schedule"
	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/internal/testdaemon"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/internal/ui"
	"github.com/notifyd/notifyd/internal/version"
	"github.com/notifyd/notifyd/sdk/client"
)

// Two configured tokens; tests use the first unless they test the second.
const (
	tokenA = "token-a-0123456789abcdef"
	tokenB = "token-b-0123456789abcdef"
)

// testConfig is the config every API test starts from: two webhook
// channels (their plugin is never started unless a test starts the engine)
// and one topic schedule.
const testConfig = `
postgres: {url: "%s"}
redis:    {url: "%s", prefix: "%s"}
plugins:  {dir: "%s"}
http:     {listen: "127.0.0.1:0", tokens: ["` + tokenA + `", "` + tokenB + `"]}
log:      {level: warn}
channels:
  orders:
    plugin: webhook
    config: {url: "%s"}
    concurrency: 4
    timeout: 2s
    retry: {max_attempts: 2, base: 50ms, max: 100ms}
  alerts:
    plugin: webhook
    config: {url: "%s"}
schedules:
  daily:
    channel: orders
    cron: "0 8 * * *"
    timezone: Asia/Seoul
    audience: {topic: news}
    payload: {text: "hello {{.recipient}}"}
`

// bundle is one test's services, API server and client.
type bundle struct {
	t       testing.TB
	ctx     context.Context
	cfg     *config.Config
	db      *testenv.DB
	rds     *testenv.Redis
	store   *outbox.Store
	queue   *queue.Queue
	host    *pluginhost.Host  // nil with startEngine (the daemon's own)
	engine  *delivery.Engine  // the daemon's with startEngine
	metrics *metrics.Registry // nil with startEngine (the daemon's own)
	srv     *api.Server       // nil with startEngine (the daemon's own)
	url     string
	c       *client.Client // authenticated with tokenA
}

type setupOptions struct {
	sinkURL     string                // the webhook channels' url
	plugin      bool                  // install the real webhook plugin into the plugin dir
	startEngine bool                  // run the whole daemon (notifyd.Start) with the real webhook plugin
	edit        func(*config.Config)  // change the loaded config
	redis       redis.UniversalClient // the API's Redis client for /readyz (default: the test's; not with startEngine)
}

// setup builds the API on a fresh schema and key prefix. By default it is a
// test of the door, not of the daemon: the API over a service whose engine
// is built but not started (its queue operations work without it, and
// enqueued rows stay PENDING for the assertions) and whose schedules never
// run. With o.startEngine it is the whole daemon instead, started through
// the root package as `notifyd serve` starts it (startDaemon).
func setup(t testing.TB, o setupOptions) *bundle {
	t.Helper()
	db := testenv.NewDB(t)
	rds := testenv.NewRedis(t)
	dir := t.TempDir()
	if o.plugin || o.startEngine {
		testenv.InstallPlugin(t, dir, "webhook", "github.com/notifyd/notifyd/plugins/webhook")
	}
	sink := o.sinkURL
	if sink == "" {
		sink = "http://127.0.0.1:9/unused"
	}
	path := filepath.Join(dir, "notifyd.yaml")
	yaml := fmt.Sprintf(testConfig, db.URL, rds.URL, rds.Prefix, dir, sink, sink)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, []string{})
	if err != nil {
		t.Fatalf("load test config: %v", err)
	}
	if o.edit != nil {
		o.edit(cfg)
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "api-test", Level: hclog.Warn, Output: testWriter{t}})
	b := &bundle{t: t, ctx: testenv.Context(t), cfg: cfg, db: db, rds: rds, queue: queue.New(rds.Client, rds.Prefix)}
	if o.startEngine {
		if o.redis != nil {
			t.Fatal("setup: startEngine runs the daemon on its own Redis client; redis is for the door's tests")
		}
		b.startDaemon(log)
		return b
	}
	b.store, b.metrics = testenv.Store(t, db.Pool), metrics.New("test")
	b.host = pluginhost.New(cfg.Plugins, log.Named("plugins"))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.host.Stop(ctx)
	})
	b.engine, err = delivery.New(delivery.Options{
		Config: cfg, Store: b.store, Queue: b.queue, Providers: providers.Host(b.host), Logger: log.Named("delivery"),
		Metrics: b.metrics.Delivery(),
	})
	if err != nil {
		t.Fatal(err)
	}
	rc := o.redis
	if rc == nil {
		rc = rds.Client
	}
	b.srv = newServer(t, serverOptions{
		Config: cfg, Store: b.store, Engine: b.engine, Redis: rc, Plugins: b.host,
		Metrics: b.metrics, Logger: log.Named("api"),
	})
	hs := httptest.NewServer(b.srv.Handler())
	t.Cleanup(hs.Close)
	b.connect(hs.URL)
	return b
}

// startDaemon starts the whole daemon on b's config through the root
// package — the store, the engine with the plugin host, the schedules, the
// operations and the API on port 0 (http.listen in testConfig) — and stops
// it when the test ends.
func (b *bundle) startDaemon(log hclog.Logger) {
	b.t.Helper()
	// The overview's counts sampled often, so that a test sees a send in
	// /v1/channels without waiting out the default interval.
	d := testdaemon.Start(b.t, b.ctx, b.cfg, notifyd.Options{Logger: log, SampleInterval: 200 * time.Millisecond})
	b.store, b.engine = d.Store(), d.Engine()
	b.connect("http://" + d.Addr().String())
}

// connect points b's raw requests and its client at the API on url.
func (b *bundle) connect(url string) {
	b.t.Helper()
	b.url = url
	var err error
	if b.c, err = client.New(url, tokenA); err != nil {
		b.t.Fatal(err)
	}
}

// serverOptions are what a test builds an API from: the service's parts
// and the API's own options.
type serverOptions struct {
	Config    *config.Config
	Store     *outbox.Store
	Engine    service.Engine
	Redis     redis.UniversalClient // pinged by /readyz
	Plugins   *pluginhost.Host
	Metrics   *metrics.Registry
	Logger    hclog.Logger
	CountsTTL time.Duration
	Tracer    trace.Tracer
	Dashboard bool // serve the dashboard under /ui/, as notifyd does
}

// newServer builds the API as the composition root does, over a service
// layer and a schedule service of its own (neither started: the overview
// counts on demand, and nothing here materialises runs), with the service's
// collectors on the API's registry.
func newServer(t testing.TB, o serverOptions) *api.Server {
	t.Helper()
	sched, err := schedule.New(o.Store.Pool(), o.Config, schedule.Options{Logger: o.Logger})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := service.New(service.Options{
		Config: o.Config, Store: o.Store, Engine: o.Engine, Schedules: sched, Plugins: o.Plugins, Redis: o.Redis, Logger: o.Logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New(version.Version)
	}
	if err := o.Metrics.Register(ops.Collectors()...); err != nil {
		t.Fatal(err)
	}
	var dashboard http.Handler
	if o.Dashboard {
		if dashboard, err = ui.New(ui.Deps{Config: o.Config, Ops: ops, Logger: o.Logger}); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := api.New(api.Options{
		Config: o.Config, Ops: ops, Metrics: o.Metrics, Logger: o.Logger, CountsTTL: o.CountsTTL, Tracer: o.Tracer,
		UI: dashboard,
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// answer is a raw HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// errBody decodes the JSON error body, failing the test if it is not one.
func (a answer) errBody(t *testing.T) client.ErrorDetail {
	t.Helper()
	var eb client.ErrorBody
	if err := json.Unmarshal(a.body, &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
		t.Fatalf("answer %d is not a JSON error body {\"error\": {\"code\", \"message\"}}: %s", a.status, a.body)
	}
	return eb.Error
}

// do sends a raw request with tokenA.
func (b *bundle) do(method, path, body string) answer {
	b.t.Helper()
	return b.doAuth(method, path, "Bearer "+tokenA, body)
}

// doAuth sends a raw request with the given Authorization header ("" = none).
func (b *bundle) doAuth(method, path, auth, body string) answer {
	b.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(b.ctx, method, b.url+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: raw}
}

// wantStatus fails unless a has status want; it returns a.
func wantStatus(t *testing.T, a answer, want int) answer {
	t.Helper()
	if a.status != want {
		t.Fatalf("status %d, want %d; body: %s", a.status, want, a.body)
	}
	return a
}

// wantError checks an error answer's status, code and that its message
// mentions each of mention (the field at fault).
func wantError(t *testing.T, a answer, status int, code string, mention ...string) {
	t.Helper()
	if a.status != status {
		t.Fatalf("status %d, want %d; body: %s", a.status, status, a.body)
	}
	e := a.errBody(t)
	if e.Code != code {
		t.Errorf("error code %q, want %q (message %q)", e.Code, code, e.Message)
	}
	for _, m := range mention {
		if !strings.Contains(e.Message, m) {
			t.Errorf("error message %q does not mention %q", e.Message, m)
		}
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
}

// insert writes notifications on channel straight into the outbox.
func (b *bundle) insert(channel string, recipients ...string) []int64 {
	b.t.Helper()
	return b.insertRows(rows(channel, recipients...))
}

// rows are notifications on channel to recipients, with a small payload.
func rows(channel string, recipients ...string) []outbox.NewNotification {
	ns := make([]outbox.NewNotification, len(recipients))
	for i, r := range recipients {
		ns[i] = outbox.NewNotification{Channel: channel, Recipient: r, Payload: json.RawMessage(`{"n":1}`)}
	}
	return ns
}

// insertRows writes ns straight into the outbox.
func (b *bundle) insertRows(ns []outbox.NewNotification) []int64 {
	b.t.Helper()
	res, err := b.store.Insert(b.ctx, ns)
	if err != nil {
		b.t.Fatal(err)
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

// deadLetter takes new notifications of channel through the pipeline's
// steps to FAILED, in Postgres and in Redis' dead list, as the engine would.
func (b *bundle) deadLetter(channel string, recipients ...string) []int64 {
	b.t.Helper()
	return b.deadLetterRows(channel, rows(channel, recipients...))
}

// deadLetterRows is deadLetter for notifications ns, all on channel.
func (b *bundle) deadLetterRows(channel string, ns []outbox.NewNotification) []int64 {
	b.t.Helper()
	ids := b.insertRows(ns)
	ctx, now := b.ctx, time.Now()
	if _, err := b.store.Relay(ctx, now.Add(time.Minute), 10_000); err != nil {
		b.t.Fatal(err)
	}
	items := make([]queue.Item, len(ids))
	for i, id := range ids {
		items[i] = queue.Item{ID: id}
	}
	const instance = "test-instance"
	must(b.t, b.queue.Renew(ctx, channel, instance, time.Minute))
	if _, err := b.queue.Push(ctx, channel, items); err != nil {
		b.t.Fatal(err)
	}
	fetched, err := b.queue.Fetch(ctx, channel, instance, len(ids), 0)
	if err != nil || len(fetched) != len(ids) {
		b.t.Fatalf("fetch %d ids: got %v, %v", len(ids), fetched, err)
	}
	claimed, err := b.store.Claim(ctx, ids, now.Add(time.Minute), time.Minute)
	if err != nil {
		b.t.Fatal(err)
	}
	ss := make([]outbox.Settlement, len(claimed))
	for i, cl := range claimed {
		ss[i] = outbox.Settlement{ID: cl.ID, Attempt: cl.Attempt, Result: outbox.ResultFailed, Error: "HTTP 400 from the provider"}
	}
	if _, err := b.store.Settle(ctx, ss); err != nil {
		b.t.Fatal(err)
	}
	must(b.t, b.queue.Dead(ctx, channel, instance, ids))
	must(b.t, b.queue.Release(ctx, channel, instance))
	return ids
}

// status reads one notification's status from the outbox.
func (b *bundle) status(id int64) string {
	b.t.Helper()
	n, err := b.store.Get(b.ctx, id)
	if err != nil {
		b.t.Fatal(err)
	}
	return n.Status
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func jsonBody(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func decode[T any](t *testing.T, a answer) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, a.body, err)
	}
	return v
}

// serve sends a request straight to srv's handler, without a listener.
func serve(t *testing.T, srv *api.Server, method, path, auth, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	return answer{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}
