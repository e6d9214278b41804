package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/pluginhost"
	"github.com/notifyd/notifyd/internal/queue"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
)

// BenchmarkStages takes the pipeline apart: each stage of docs/design.md §4 runs on
// its own over N rows (NOTIFYD_BENCH_N, default 20,000), at the batch sizes
// the engine uses, and reports its wall time per row and — for Postgres —
// the CPU its backends spent per row, so a slow burst can be traced to
// the stage that costs. Run with
//
//	go test ./internal/bench -run '^$' -bench Stages -benchtime 1x
func BenchmarkStages(b *testing.B) {
	n := 20_000
	if v := os.Getenv("NOTIFYD_BENCH_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("NOTIFYD_BENCH_N=%q: %v", v, err)
		}
	}
	batch := DefaultBatch
	ctx := context.Background()
	db := testenv.NewDB(b)
	pc, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		b.Fatal(err)
	}
	// One connection per pool (the Store's hot-path pools copy this config),
	// all named so that their backends' CPU is the stage's.
	const appName = "notifyd-bench-stages"
	pc.MaxConns = 1
	pc.ConnConfig.RuntimeParams["application_name"] = appName
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	store := testenv.Store(b, pool)
	backendCPU := func() time.Duration {
		// The hot-path pools connect on first use, so list the backends
		// each time; one that appears during a stage started within it.
		rows, err := db.Pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, appName)
		if err != nil {
			b.Fatal(err)
		}
		var total time.Duration
		for rows.Next() {
			var pid int
			if err := rows.Scan(&pid); err != nil {
				b.Fatal(err)
			}
			c, _ := procCPU(strconv.Itoa(pid))
			total += c
		}
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
		return total
	}
	r := testenv.NewRedis(b)
	q := queue.New(r.Client, r.Prefix)
	const inst = "stages"

	type result struct {
		name        string
		rows        int
		wall, pgCPU time.Duration
	}
	var results []result
	stage := func(name string, rows int, f func()) {
		c0 := backendCPU()
		t0 := time.Now()
		f()
		wall := time.Since(t0)
		c1 := backendCPU()
		results = append(results, result{name, rows, wall, c1 - c0})
	}

	for b.Loop() {
		results = results[:0]
		if _, err := pool.Exec(ctx, `TRUNCATE notifications, notification_attempts`); err != nil {
			b.Fatal(err)
		}
		due := time.Now().Add(-time.Second)
		stage("insert", n, func() {
			ns := make([]outbox.NewNotification, 0, insertChunk)
			for i := 0; i < n; {
				ns = ns[:0]
				for ; i < n && len(ns) < insertChunk; i++ {
					ns = append(ns, outbox.NewNotification{Channel: Channel, Recipient: recipient(i), Payload: payload,
						DueAt: due, IdempotencyKey: "daily-quiz:" + recipient(i)})
				}
				if _, err := store.Insert(ctx, ns); err != nil {
					b.Fatal(err)
				}
			}
		})
		var queued []outbox.Queued
		stage("relay (PG, 1000/stmt)", n, func() {
			for {
				got, err := store.Relay(ctx, time.Now(), config.DefaultRelayBatch)
				if err != nil {
					b.Fatal(err)
				}
				queued = append(queued, got...)
				if len(got) < config.DefaultRelayBatch {
					return
				}
			}
		})
		stage("push (Redis, 1000/call)", n, func() {
			for i := 0; i < len(queued); i += 1000 {
				items := make([]queue.Item, 0, 1000)
				for _, r := range queued[i:min(i+1000, len(queued))] {
					items = append(items, queue.Item{ID: r.ID})
				}
				if _, err := q.Push(ctx, Channel, items); err != nil {
					b.Fatal(err)
				}
			}
		})
		if err := q.Renew(ctx, Channel, inst, time.Minute); err != nil {
			b.Fatal(err)
		}
		var fetched [][]int64
		stage(fmt.Sprintf("fetch (Redis, %d/call)", batch), n, func() {
			for {
				ids, err := q.Fetch(ctx, Channel, inst, batch, 0)
				if err != nil {
					b.Fatal(err)
				}
				if len(ids) == 0 {
					return
				}
				fetched = append(fetched, ids)
			}
		})
		var claimed []outbox.Claimed
		stage(fmt.Sprintf("claim (PG, %d/stmt)", batch), n, func() {
			for _, ids := range fetched {
				cs, err := store.Claim(ctx, ids, time.Now(), time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				claimed = append(claimed, cs...)
			}
		})
		stage(fmt.Sprintf("settle SENT (PG, %d/stmt)", config.DefaultSettleBatch), n, func() {
			now := time.Now()
			for i := 0; i < len(claimed); i += config.DefaultSettleBatch {
				var ss []outbox.Settlement
				for _, c := range claimed[i:min(i+config.DefaultSettleBatch, len(claimed))] {
					ss = append(ss, outbox.Settlement{ID: c.ID, Attempt: c.Attempt, Result: outbox.ResultSent,
						Outcome: outbox.OutcomeSuccess, StartedAt: now, FinishedAt: now, ProviderStatus: 200})
				}
				if _, err := store.Settle(ctx, ss); err != nil {
					b.Fatal(err)
				}
			}
		})
		stage("ack (Redis, 1000/call)", n, func() {
			for i := 0; i < len(claimed); i += 1000 {
				var ids []int64
				for _, c := range claimed[i:min(i+1000, len(claimed))] {
					ids = append(ids, c.ID)
				}
				if err := q.Ack(ctx, Channel, inst, ids); err != nil {
					b.Fatal(err)
				}
			}
		})
		stagePlugin(b, claimed, batch, func(name string, rows int, wall, pluginCPU time.Duration) {
			results = append(results, result{name, rows, wall, pluginCPU})
		})
	}
	var total time.Duration
	for _, r := range results {
		b.Logf("%-34s %7.1f µs/row wall  %6.1f µs/row CPU  (%d rows in %s)", r.name,
			float64(r.wall.Microseconds())/float64(r.rows), float64(r.pgCPU.Microseconds())/float64(r.rows), r.rows, r.wall.Round(time.Millisecond))
		if r.name != "insert" {
			total += r.wall
		}
	}
	b.ReportMetric(float64(total.Microseconds())/float64(n), "µs/row-serial")
}

// stagePlugin sends the claimed rows through the webhook plugin (gRPC batch
// of batch, fanned out to HTTP) into a sink, DefaultConcurrency/batch
// batches at a time, as the engine does; it reports the plugin's CPU.
func stagePlugin(b *testing.B, claimed []outbox.Claimed, batch int, report func(string, int, time.Duration, time.Duration)) {
	ctx := context.Background()
	sink, err := StartSink()
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	dir := b.TempDir()
	testenv.InstallPlugin(b, dir, Plugin, "github.com/notifyd/notifyd/plugins/webhook")
	host := pluginhost.New(config.Plugins{Dir: dir}, hclog.NewNullLogger())
	defer host.Stop(ctx)
	p, err := host.Plugin(ctx, Plugin)
	if err != nil {
		b.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"url": sink.URL() + HookPath})
	if err := p.Configure(ctx, Channel, cfg); err != nil {
		b.Fatal(err)
	}
	var batches [][]sdk.Message
	for i := 0; i < len(claimed); i += batch {
		var ms []sdk.Message
		for _, c := range claimed[i:min(i+batch, len(claimed))] {
			ms = append(ms, sdk.Message{ID: c.ID, Channel: Channel, Recipient: c.Recipient, Payload: c.Payload,
				Attempt: 1, IdempotencyKey: c.IdempotencyKey, CreatedAt: c.CreatedAt, Deadline: time.Now().Add(time.Minute)})
		}
		batches = append(batches, ms)
	}
	work := make(chan []sdk.Message)
	var wg sync.WaitGroup
	pid := strconv.Itoa(p.PID())
	c0, _ := procCPU(pid)
	t0 := time.Now()
	for range max(1, DefaultConcurrency/batch) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ms := range work {
				for _, v := range p.Send(ctx, ms) {
					if v.Outcome != sdk.OutcomeSuccess {
						b.Errorf("send: %v %s", v.Outcome, v.Detail)
						return
					}
				}
			}
		}()
	}
	for _, ms := range batches {
		work <- ms
	}
	close(work)
	wg.Wait()
	wall := time.Since(t0)
	c1, _ := procCPU(pid)
	report(fmt.Sprintf("plugin send (gRPC %d + HTTP)", batch), len(claimed), wall, c1-c0)
}
