package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/metrics"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/providers"
	"github.com/notifyd/notifyd/internal/queue"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
)

// benchPayload is notifyd-bench's payload (internal/bench): a daily quiz.
var benchPayload = json.RawMessage(`{"title":"Daily quiz #1042","text":"Which planet has the most moons?","choices":["Jupiter","Saturn","Uranus","Neptune"],"link":"https://quiz.example/1042"}`)

// BenchmarkEngine_Burst is the engine's own hot path in this one process:
// each op is a burst of 2,000 notifications falling due at one instant,
// relayed, pushed, fetched, claimed, sent through gRPC to an in-process
// provider that answers SUCCESS at once (the SDK's server side runs here
// too), settled and acked, until every row is SENT. No HTTP, no plugin
// process: what is left is notifyd's own work. The figures to read are
// allocs/msg and B/msg (allocations of this process per notification, the
// row inserts excluded); wall time on the shared machine is indicative only.
//
//	go test ./internal/delivery -run '^$' -bench Engine_Burst -benchtime 5x
func BenchmarkEngine_Burst(b *testing.B) {
	const n = 2000
	ctx := context.Background()
	db := testenv.NewDB(b)
	rds := testenv.NewRedis(b)
	store := testenv.Store(b, db.Pool)

	cfg := config.Default()
	cfg.Postgres.URL = db.URL
	cfg.Redis.URL = rds.URL
	cfg.Redis.Prefix = rds.Prefix
	cfg.Log.Level = "warn"
	// As notifyd-bench runs its channel.
	cfg.Channels = map[string]config.Channel{testChannel: config.FillChannel(config.Channel{
		Plugin: "ok", Concurrency: 512, BatchSize: 256, Timeout: 10 * time.Second,
	})}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "bench", Level: hclog.Warn})
	// Settled rows are counted by the engine's hook, not by querying
	// Postgres: a polling loop's own allocations would be counted too.
	var settled atomic.Int64
	allSettled := make(chan struct{}, 1)
	target := atomic.Int64{}
	hooks := delivery.Hooks{AfterSettle: func(_ string, ids []int64) error {
		if settled.Add(int64(len(ids))) == target.Load() {
			allSettled <- struct{}{}
		}
		return nil
	}}
	providers := providers.NewInProcess(map[string]sdk.Provider{"ok": okProvider{}}, log)
	b.Cleanup(providers.Close)
	const instance = "bench-1"
	q := queue.New(rds.Client, rds.Prefix)
	e, err := delivery.New(delivery.Options{Config: &cfg, Store: store, Queue: q,
		Providers: providers, Logger: log, Hooks: hooks, Instance: instance,
		Metrics: metrics.New("bench").Delivery()}) // counted, as notifyd serve counts
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Stop(ctx)
	})

	rows := make([]outbox.NewNotification, n)
	sent := 0
	var allocs, bytes uint64
	var ms runtime.MemStats
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		due := time.Now().Add(300 * time.Millisecond)
		for i := range rows {
			rows[i] = outbox.NewNotification{Channel: testChannel, Recipient: fmt.Sprintf("user-%07d", sent+i),
				Payload: benchPayload, DueAt: due}
		}
		for start := 0; start < n; start += outbox.MaxInsertBatch {
			if _, err := store.Insert(ctx, rows[start:min(n, start+outbox.MaxInsertBatch)]); err != nil {
				b.Fatal(err)
			}
		}
		sent += n
		target.Store(int64(sent))
		time.Sleep(time.Until(due))
		runtime.ReadMemStats(&ms)
		allocs0, bytes0 := ms.Mallocs, ms.TotalAlloc
		b.StartTimer()
		select {
		case <-allSettled:
		case <-time.After(2 * time.Minute):
			b.Fatalf("%d of %d settled after 2 minutes", settled.Load(), sent)
		}
		// The last flush acks its ids after the hook: wait for the backup
		// list to empty (a call or two).
		for {
			ids, err := q.Pending(ctx, testChannel, instance)
			if err != nil {
				b.Fatal(err)
			}
			if len(ids) == 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		runtime.ReadMemStats(&ms)
		allocs += ms.Mallocs - allocs0
		bytes += ms.TotalAlloc - bytes0
		b.StartTimer()
	}
	if got, failed, other := testenv.Statuses(ctx, b, db.Pool, "true"); got != sent {
		b.Fatalf("%d rows SENT (%d FAILED, %d other), want %d", got, failed, other, sent)
	}
	b.ReportMetric(float64(allocs)/float64(sent), "allocs/msg")
	b.ReportMetric(float64(bytes)/float64(sent), "B/msg")
	b.ReportMetric(float64(sent)/b.Elapsed().Seconds(), "msgs/s")
}

// okProvider answers every message SUCCESS with no result, at once.
type okProvider struct{}

func (okProvider) Describe() sdk.Info { return sdk.Info{Name: "ok", Version: "1"} }

func (okProvider) Configure(context.Context, sdk.ConfigureRequest) (sdk.Sender, error) {
	return sdk.SenderFunc(func(context.Context, sdk.Message) sdk.Verdict { return sdk.Success(nil) }), nil
}
