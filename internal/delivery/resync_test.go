package delivery_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/queue"
	"github.com/notifyd/notifyd/internal/testenv"
)

// Redis loses its data while Postgres is unreachable, so the resync after
// the epoch change fails: it must be tried again once Postgres answers, not
// left to the sweeper (sweep_after, 2 minutes by default), since rows queued
// since the sweep horizon are in no queue at all. Found by the chaos suite
// (internal/chaos), where a Redis restart during a Postgres outage left
// notifications waiting for the sweeper.
func TestEngine_ResyncRetriedAfterFailure(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t)
	rc := srv.Client()
	s := newSink(t, nil)
	b := setupRedis(t, s, rc, srv.URL, "resync", func(c *config.Config, _ *config.Channel) {
		// Only a resync can bring the rows back within the test.
		c.Delivery.SweepAfter, c.Delivery.SweepInterval = time.Hour, time.Hour
	})

	// The engine reaches Postgres through a proxy the test can cut; the test
	// itself keeps its direct connection (b.store).
	u, err := url.Parse(b.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	px := startProxy(t, u.Host)
	u.Host = px.Listen
	pool, err := pgxpool.New(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b.start(delivery.Options{Store: testenv.Store(t, pool), Queue: queue.New(rc, b.prefix)})
	time.Sleep(300 * time.Millisecond) // the start resync (of nothing) is done

	px.Stop() // Postgres is unreachable for the engine
	ids := b.sendMany(20, func(i int) string { return fmt.Sprintf("r%d", i) })
	// QUEUED in Postgres but in no Redis queue: what a Redis that lost its
	// data leaves behind.
	if q, err := b.store.Relay(context.Background(), time.Now(), 100); err != nil || len(q) != len(ids) {
		t.Fatalf("relay = %d rows, %v; want %d", len(q), err, len(ids))
	}
	if err := rc.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	// The engine's epoch check recreates the epoch key, sees the change and
	// tries to resync, which fails without Postgres.
	deadline := time.Now().Add(10 * time.Second)
	for rc.Exists(context.Background(), b.prefix+":epoch").Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the engine never read the epoch again after FLUSHALL")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(5 * b.cfg.Delivery.EpochInterval)

	if err := px.Start(); err != nil {
		t.Fatalf("restore the proxy: %v", err)
	}
	counts := b.waitAll(15 * time.Second)
	if counts[outbox.StatusSent] != int64(len(ids)) {
		t.Fatalf("statuses %v, want all %d SENT", counts, len(ids))
	}
	b.queueEmpty()
}

// A relay whose push fails (Redis unreachable) has committed its rows QUEUED
// although they are in no Redis queue: it must push them again once Redis
// answers, not leave them to the sweeper (sweep_after, 2 minutes by
// default). Found by the chaos suite, where rows relayed during a Redis
// restart were still QUEUED long after everything had healed.
func TestEngine_RelayRetriesFailedPush(t *testing.T) {
	t.Parallel()
	s := newSink(t, nil)
	b := setup(t, s, func(c *config.Config, _ *config.Channel) {
		c.Delivery.SweepAfter, c.Delivery.SweepInterval = time.Hour, time.Hour
	})
	// The engine reaches Redis through a proxy the test can cut.
	px := startProxy(t, strings.TrimPrefix(strings.TrimSuffix(b.cfg.Redis.URL, "/0"), "redis://"))
	rc := redis.NewClient(&redis.Options{Addr: px.Listen, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	// The engine's log says when the push failed.
	failed := make(chan struct{})
	var once sync.Once
	log := hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn, Output: lineFunc(func(line string) {
		t.Log(line)
		if strings.Contains(line, "relayed rows") {
			once.Do(func() { close(failed) })
		}
	})})
	b.start(delivery.Options{Queue: queue.New(rc, b.prefix), Logger: log})
	time.Sleep(300 * time.Millisecond)

	px.Stop() // Redis is unreachable for the engine
	ids := b.sendMany(20, func(i int) string { return fmt.Sprintf("r%d", i) })
	select {
	case <-failed:
	case <-time.After(20 * time.Second):
		t.Fatalf("the engine never failed to push relayed rows: %v", b.statusCounts())
	}
	if got := b.statusCounts()[outbox.StatusQueued]; got != int64(len(ids)) {
		t.Fatalf("%d rows QUEUED, want all %d relayed", got, len(ids))
	}

	if err := px.Start(); err != nil {
		t.Fatalf("restore the proxy: %v", err)
	}
	counts := b.waitAll(15 * time.Second)
	if counts[outbox.StatusSent] != int64(len(ids)) {
		t.Fatalf("statuses %v, want all %d SENT", counts, len(ids))
	}
}

// One queue's push fails while the channel's others succeed (on a Redis
// Cluster: one shard down). The relay must keep only the failed queue's rows
// for its next pass: pushing the others again on every pass queued again
// those delivered meanwhile, and a FAILED one landed on the dead list once
// per pass (found by the chaos suite's cluster mode: one id listed 19
// times). Here partition 1's pushes are refused for a while; partition 0's
// rows must be pushed once, and everything delivered after.
func TestEngine_RelayRetriesOnlyTheFailedQueue(t *testing.T) {
	t.Parallel()
	s := newSink(t, nil)
	b := setup(t, s, func(c *config.Config, ch *config.Channel) {
		ch.Partitions = 2
		c.Delivery.SweepAfter, c.Delivery.SweepInterval = time.Hour, time.Hour
	})
	hook := &pushFaults{refuse: b.prefix + ":{ch:" + testChannel + "#1}:members"}
	hook.failing.Store(true)
	rc := redis.NewClient(&redis.Options{Addr: strings.TrimSuffix(strings.TrimPrefix(b.cfg.Redis.URL, "redis://"), "/0")})
	rc.AddHook(hook)
	t.Cleanup(func() { _ = rc.Close() })
	b.start(delivery.Options{Queue: queue.New(rc, b.prefix)})
	// Let the resync at start finish on the empty outbox first: a resync
	// that met the refusal would be retried (it re-reads Postgres, pushing
	// partition 0's undelivered rows again, harmlessly), which is not what
	// this test counts.
	time.Sleep(300 * time.Millisecond)

	ids := b.sendMany(20, func(i int) string { return fmt.Sprintf("r%d", i) })
	deadline := time.Now().Add(10 * time.Second)
	for hook.refused.Load() < 3 { // three relay passes met the refusal
		if time.Now().After(deadline) {
			t.Fatalf("partition 1's push was refused %d times in 10 s; want relay passes retrying it", hook.refused.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := hook.pushes(b.prefix + ":{ch:" + testChannel + "#0}:members"); got != 1 {
		t.Errorf("partition 0's rows were pushed %d times while partition 1 failed; want once", got)
	}
	hook.failing.Store(false)
	counts := b.waitAll(15 * time.Second)
	if counts[outbox.StatusSent] != int64(len(ids)) {
		t.Fatalf("statuses %v, want all %d SENT", counts, len(ids))
	}
}

// pushFaults is a go-redis hook on a real client: it refuses the queue push
// script (KEYS members, ready, delayed) for one queue while failing is set,
// and counts the pushes that went through, by queue.
type pushFaults struct {
	refuse  string // the refused queue's members key
	failing atomic.Bool
	refused atomic.Int64
	mu      sync.Mutex
	ok      map[string]int
}

func (h *pushFaults) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *pushFaults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *pushFaults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		members := pushQueue(cmd)
		if members == "" {
			return next(ctx, cmd)
		}
		if members == h.refuse && h.failing.Load() {
			h.refused.Add(1)
			err := fmt.Errorf("test: push to %s refused", members)
			cmd.SetErr(err)
			return err
		}
		err := next(ctx, cmd)
		if err == nil {
			h.mu.Lock()
			if h.ok == nil {
				h.ok = map[string]int{}
			}
			h.ok[members]++
			h.mu.Unlock()
		}
		return err
	}
}

func (h *pushFaults) pushes(members string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ok[members]
}

// pushQueue is the members key of a push script call (EVAL or EVALSHA with
// KEYS members, ready, delayed), "" for any other command.
func pushQueue(cmd redis.Cmder) string {
	args := cmd.Args()
	if len(args) < 6 || (cmd.Name() != "evalsha" && cmd.Name() != "eval") {
		return ""
	}
	k := make([]string, 3)
	for i := range k {
		k[i], _ = args[3+i].(string)
	}
	if strings.HasSuffix(k[0], ":members") && strings.HasSuffix(k[1], ":ready") && strings.HasSuffix(k[2], ":delayed") {
		return k[0]
	}
	return ""
}

// startProxy starts a TCP proxy to upstream that the test can stop (every
// connection through it closed, new ones refused) and start again on the
// same address.
func startProxy(t *testing.T, upstream string) *toxiproxy.Proxy {
	t.Helper()
	px := toxiproxy.NewProxy(toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop()),
		"proxy", "127.0.0.1:0", upstream)
	if err := px.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Stop)
	return px
}

// lineFunc is an io.Writer handing each write (one log line) to f.
type lineFunc func(string)

func (f lineFunc) Write(p []byte) (int, error) {
	f(string(p))
	return len(p), nil
}
