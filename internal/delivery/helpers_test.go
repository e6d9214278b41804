package delivery_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/pluginhost"
	"github.com/notifyd/notifyd/internal/providers"
	"github.com/notifyd/notifyd/internal/queue"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
)

const testChannel = "hooks"

// sink is a recording webhook receiver. respond decides each answer from
// the recipient and how many times that recipient was seen (1 = first).
type sink struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     []delivered
	byID    map[string]int
	respond func(recipient string, n int, h http.Header) (int, string)
}

type delivered struct {
	webhookID string // the Idempotency-Key header: the notification's key, or msg_<id> (webhook-id is always msg_<id>)
	id        int64
	recipient string
	attempt   int
	at        time.Time
	status    int
}

func newSink(t *testing.T, respond func(recipient string, n int, h http.Header) (int, string)) *sink {
	t.Helper()
	s := &sink{byID: map[string]int{}, respond: respond}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var env struct {
			ID        int64  `json:"id"`
			Recipient string `json:"recipient"`
			Attempt   int    `json:"attempt"`
		}
		_ = json.Unmarshal(body, &env)
		s.mu.Lock()
		per := 0
		for _, d := range s.got {
			if d.recipient == env.Recipient {
				per++
			}
		}
		s.mu.Unlock()
		status, reply := http.StatusOK, ""
		if s.respond != nil {
			status, reply = s.respond(env.Recipient, per+1, w.Header())
		}
		s.mu.Lock()
		s.got = append(s.got, delivered{r.Header.Get("Idempotency-Key"), env.ID, env.Recipient, env.Attempt, time.Now(), status})
		if status < 300 {
			// Only an accepted delivery counts: a retried 503 is not a duplicate.
			s.byID[r.Header.Get("Idempotency-Key")]++
		}
		s.mu.Unlock()
		w.WriteHeader(status)
		_, _ = io.WriteString(w, reply)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sink) deliveries(recipient string) []delivered {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []delivered
	for _, d := range s.got {
		if d.recipient == recipient {
			out = append(out, d)
		}
	}
	return out
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// distinct is how many distinct notifications arrived, and how many
// deliveries were repeats of one already seen.
func (s *sink) distinct() (ids, duplicates int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.byID {
		ids++
		duplicates += n - 1
	}
	return ids, duplicates
}

// bundle is one test's services and configuration.
type bundle struct {
	t      *testing.T
	cfg    *config.Config
	store  *outbox.Store
	rc     redis.UniversalClient
	queue  *queue.Queue
	sink   *sink
	log    hclog.Logger
	prefix string
	dbURL  string
}

type option func(*config.Config, *config.Channel)

func setup(t *testing.T, s *sink, opts ...option) *bundle {
	t.Helper()
	rds := testenv.NewRedis(t)
	return setupRedis(t, s, rds.Client, rds.URL, rds.Prefix, opts...)
}

// setupCluster is setup on a real 3-master Redis Cluster of the test's own.
func setupCluster(t *testing.T, s *sink, opts ...option) *bundle {
	t.Helper()
	addrs := testenv.StartRedisCluster(t)
	rc, err := queue.Connect("", addrs, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.Close() })
	return setupRedis(t, s, rc, "", "cl", append([]option{func(c *config.Config, _ *config.Channel) {
		c.Redis.ClusterAddrs = addrs
	}}, opts...)...)
}

// redisModes are the Redis deployments the end-to-end tests run on: one
// server, and a real 3-master cluster with the channel over 4 partitions.
var redisModes = []struct {
	name  string
	setup func(*testing.T, *sink, ...option) *bundle
}{
	{"single", setup},
	{"cluster", func(t *testing.T, s *sink, opts ...option) *bundle {
		t.Helper()
		parts := func(_ *config.Config, ch *config.Channel) { ch.Partitions = 4 }
		return setupCluster(t, s, append([]option{parts}, opts...)...)
	}},
}

// queues are the test channel's Redis queues.
func (b *bundle) queues() []string {
	return delivery.QueueNames(testChannel, b.cfg.Channels[testChannel].Partitions)
}

// setupRedis is setup on a Redis of the test's choosing (a private server
// that the test may wipe).
func setupRedis(t *testing.T, s *sink, rc redis.UniversalClient, url, prefix string, opts ...option) *bundle {
	t.Helper()
	db := testenv.NewDB(t)
	dir := t.TempDir()
	testenv.InstallPlugin(t, dir, "webhook", "github.com/notifyd/notifyd/plugins/webhook")

	cfg := config.Default()
	cfg.Postgres.URL = db.URL
	cfg.Redis.URL = url
	cfg.Redis.Prefix = prefix
	cfg.Plugins.Dir = dir
	cfg.Plugins.HealthInterval = time.Second
	cfg.Delivery.LeaseTTL = 2 * time.Second
	cfg.Delivery.PromoteInterval = 20 * time.Millisecond
	cfg.Delivery.EpochInterval = 100 * time.Millisecond
	cfg.Delivery.SweepInterval = time.Second
	cfg.Delivery.SweepAfter = 3 * time.Second
	cfg.Delivery.RelayInterval = 500 * time.Millisecond
	ch := config.Channel{
		Plugin:      "webhook",
		Config:      map[string]any{"url": s.srv.URL + "/hook", "timeout": "2s"},
		Concurrency: 16,
		BatchSize:   16,
		Timeout:     2 * time.Second,
		Retry:       config.Retry{MaxAttempts: 5, Base: 200 * time.Millisecond, Max: 2 * time.Second, Jitter: config.JitterWindow},
	}
	ch = config.FillChannel(ch)
	for _, o := range opts {
		o(&cfg, &ch)
	}
	ch = config.FillChannel(ch) // what an option left zero takes its default
	cfg.Channels = map[string]config.Channel{testChannel: ch}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	log := hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn, Output: testWriter{t}})
	return &bundle{
		t: t, cfg: &cfg, store: testenv.Store(t, db.Pool), rc: rc, queue: queue.New(rc, prefix),
		sink: s, log: log, prefix: prefix, dbURL: db.URL,
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// engine starts an engine with its own plugin host; it is stopped (or, if
// the test killed it, its plugins closed) when the test ends.
func (b *bundle) engine(instance string, hooks delivery.Hooks) *delivery.Engine {
	e, _ := b.engineHost(instance, hooks)
	return e
}

// engineHost is engine, also returning its plugin host. Each engine gets its
// own Queue, as each process has: the epoch it last saw is its own.
func (b *bundle) engineHost(instance string, hooks delivery.Hooks) (*delivery.Engine, *pluginhost.Host) {
	b.t.Helper()
	return b.start(delivery.Options{Instance: instance, Hooks: hooks})
}

// start starts an engine with o, the bundle filling what o leaves zero (a
// test that needs its own store, Redis client or logger sets just that), and
// a plugin host of its own; both stop when the test ends.
func (b *bundle) start(o delivery.Options) (*delivery.Engine, *pluginhost.Host) {
	b.t.Helper()
	o.Config = cmp.Or(o.Config, b.cfg)
	o.Store = cmp.Or(o.Store, b.store)
	o.Queue = cmp.Or(o.Queue, queue.New(b.rc, b.prefix))
	if o.Logger == nil {
		o.Logger = b.log
	}
	host := pluginhost.New(b.cfg.Plugins, o.Logger.Named("plugins"))
	if o.Providers == nil {
		o.Providers = providers.Host(host)
	}
	e, err := delivery.New(o)
	if err != nil {
		b.t.Fatal(err)
	}
	// The engine's goroutines carry the test's name as a profiler label
	// (children inherit it), so goroutineSummary shows this test's only.
	var startErr error
	pprof.Do(context.Background(), pprof.Labels("test", b.t.Name()), func(ctx context.Context) {
		startErr = e.Start(ctx)
	})
	if err := startErr; err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Stop(ctx)
		_ = host.Stop(ctx)
	})
	return e, host
}

// startInProcess starts an engine on cfg whose plugins are the given Go
// providers, in this process (no plugin binary); it stops with the test.
func (b *bundle) startInProcess(cfg *config.Config, ps map[string]sdk.Provider) *delivery.Engine {
	b.t.Helper()
	p := providers.NewInProcess(ps, b.log)
	b.t.Cleanup(p.Close)
	e, _ := b.start(delivery.Options{Config: cfg, Providers: p})
	return e
}

func (b *bundle) send(recipient, key string) int64 {
	b.t.Helper()
	res, err := b.store.Insert(context.Background(), []outbox.NewNotification{{
		Channel: testChannel, Recipient: recipient, Payload: json.RawMessage(`{"text":"hi"}`), IdempotencyKey: key,
	}})
	if err != nil {
		b.t.Fatal(err)
	}
	return res[0].ID
}

func (b *bundle) sendMany(n int, recipient func(i int) string) []int64 {
	b.t.Helper()
	ns := make([]outbox.NewNotification, n)
	for i := range ns {
		ns[i] = outbox.NewNotification{Channel: testChannel, Recipient: recipient(i), Payload: json.RawMessage(`{}`)}
	}
	var ids []int64
	for len(ns) > 0 {
		k := min(len(ns), outbox.MaxInsertBatch)
		res, err := b.store.Insert(context.Background(), ns[:k])
		if err != nil {
			b.t.Fatal(err)
		}
		for _, r := range res {
			ids = append(ids, r.ID)
		}
		ns = ns[k:]
	}
	return ids
}

// wait polls the outbox until id reaches a terminal status and returns the row.
func (b *bundle) wait(id int64, within time.Duration) *outbox.Notification {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for {
		n, err := b.store.Get(context.Background(), id)
		if err != nil {
			b.t.Fatal(err)
		}
		switch n.Status {
		case outbox.StatusSent, outbox.StatusFailed, outbox.StatusCancelled:
			return n
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("notification %d still %s after %s (attempts %d, last error %q)", id, n.Status, within, n.AttemptCount, n.LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitAll waits until no row is non-terminal. within bounds a stall, not
// the wait (testenv.Progress): it fails once no row has finished (SENT or
// FAILED) for within, or after five times within in all.
func (b *bundle) waitAll(within time.Duration) map[string]int64 {
	b.t.Helper()
	var p testenv.Progress
	for {
		counts := b.statusCounts()
		if counts[outbox.StatusPending]+counts[outbox.StatusQueued]+counts[outbox.StatusProcessing] == 0 {
			return counts
		}
		p.Observe(counts[outbox.StatusSent] + counts[outbox.StatusFailed])
		if p.Stalled(within, 5) {
			b.t.Fatalf("not settled (%s, within %s): %v\n%s\n%s", &p, within, counts, b.unfinishedSample(), goroutineSummary(b.t))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// goroutineSummary writes this process's goroutines to a file that outlives
// the test and returns its path with a bounded summary: the engine's
// goroutines grouped by where they wait, so a stall reads at a glance.
func goroutineSummary(t testing.TB) string {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	path := filepath.Join(os.TempDir(), "notifyd-"+name+"-goroutines.txt")
	werr := os.WriteFile(path, buf.Bytes(), 0o644)
	var lines []string
	label := fmt.Sprintf("%q:%q", "test", t.Name())
	for _, g := range strings.Split(buf.String(), "\n\n") {
		head, rest, _ := strings.Cut(g, "\n")
		if strings.HasPrefix(head, "goroutine profile:") {
			head, rest, _ = strings.Cut(rest, "\n")
		}
		// Only this test's engines: the package's other tests run beside it.
		if !strings.Contains(rest, label) || !strings.Contains(rest, "notifyd/internal/delivery.") {
			continue
		}
		// The first frame outside the runtime (what it waits on) and the
		// first in the engine (where).
		var waits string
		for _, l := range strings.Split(rest, "\n") {
			f := strings.Fields(l)
			if len(f) < 3 || f[0] != "#" || f[1] == "labels:" {
				continue
			}
			if waits == "" && !strings.HasPrefix(f[2], "runtime.") {
				waits = f[2]
			}
			if strings.Contains(f[2], "notifyd/internal/delivery.") {
				lines = append(lines, strings.Fields(head)[0]+" × "+short(f[2])+" ← "+short(waits))
				break
			}
		}
	}
	if len(lines) > 20 {
		lines = append(lines[:20], fmt.Sprintf("… and %d more groups", len(lines)-20))
	}
	if werr != nil {
		return fmt.Sprintf("goroutines: %v\n%s", werr, strings.Join(lines, "\n"))
	}
	return "goroutines (all in " + path + "), the engine's by where they wait:\n" + strings.Join(lines, "\n")
}

func (b *bundle) statusCounts() map[string]int64 {
	b.t.Helper()
	rows, err := b.store.Pool().Query(context.Background(), `SELECT status, count(*) FROM notifications GROUP BY status`)
	if err != nil {
		b.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			b.t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

// unfinishedSample describes a few of the rows still to finish, oldest
// change first: what a stall is made of.
func (b *bundle) unfinishedSample() string {
	rows, err := b.store.Pool().Query(context.Background(), `
		SELECT id, status, attempts, crashes, extract(epoch FROM now() - updated_at)::float8, coalesce(left(last_error, 160), '')
		  FROM notifications WHERE status IN ('PENDING', 'QUEUED', 'PROCESSING')
		 ORDER BY updated_at LIMIT 5`)
	if err != nil {
		return "unfinished rows: " + err.Error()
	}
	defer rows.Close()
	var out strings.Builder
	out.WriteString("unfinished rows, oldest change first:")
	for rows.Next() {
		var (
			id                int64
			status, lastError string
			attempts, crashes int
			since             float64
		)
		if err := rows.Scan(&id, &status, &attempts, &crashes, &since, &lastError); err != nil {
			return out.String() + " " + err.Error()
		}
		fmt.Fprintf(&out, "\n  %d %s attempts %d crashes %d, unchanged for %.1f s, last error %q", id, status, attempts, crashes,
			since, lastError)
	}
	return out.String()
}

// queueEmpty checks Redis holds nothing for the channel but dead letters.
func (b *bundle) queueEmpty() {
	b.t.Helper()
	// A row's id pushed again while the row was in flight (the resync after
	// Redis lost its data pushes every QUEUED and PROCESSING row) is deferred
	// by the claim until that claim would be stale, 2 × timeout + lease_ttl
	// (channel.staleAfter), and only then dropped as the row's finished: so
	// long may an id outlive its row's settle, besides the 5 s the rest gets.
	wait := 5 * time.Second
	for _, ch := range b.cfg.Channels {
		wait = max(wait, 5*time.Second+2*ch.Timeout+b.cfg.Delivery.LeaseTTL)
	}
	deadline := time.Now().Add(wait)
	for {
		held := ""
		for _, q := range b.queues() {
			st, err := b.queue.Stats(context.Background(), q)
			if err != nil {
				b.t.Fatal(err)
			}
			members, err := b.rc.SCard(context.Background(), b.prefix+":{ch:"+q+"}:members").Result()
			if err != nil {
				b.t.Fatal(err)
			}
			if st.Ready+st.Delayed+st.Processing+members != 0 {
				held += fmt.Sprintf(" %s: %+v, members %d;", q, st, members)
			}
		}
		if held == "" {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("Redis still holds ids:%s", held)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// crashEvery is once, but every later call crashes too: the engine it is
// installed in never sends anything, so a test that counts deliveries after
// its kill does not race the kill against a second batch the engine claimed
// and sent meanwhile (a duplicate at-least-once allows, but not the one the
// test is about).
func crashEvery(hit chan<- []int64) func(string, []int64) error {
	first := once(hit)
	return func(ch string, ids []int64) error {
		first(ch, ids)
		return delivery.ErrCrash
	}
}

// once returns a hook that crashes the first batch it sees and records its ids.
func once(hit chan<- []int64) func(string, []int64) error {
	var mu sync.Mutex
	done := false
	return func(_ string, ids []int64) error {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return nil
		}
		done = true
		hit <- append([]int64(nil), ids...)
		return delivery.ErrCrash
	}
}

func short(fn string) string { return strings.TrimPrefix(fn, "github.com/notifyd/notifyd/") }
