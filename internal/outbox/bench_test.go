package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
)

// Run with:
//
//	go test ./internal/outbox -run '^$' -bench . -benchtime 2s
//
// Every benchmark reports rows/s: rows moved per second at the given batch
// size, one statement per batch, on one connection.

var benchSizes = []int{1, 64, 256, 1000}

// benchSetup is setup without the test's two-minute context: a benchmark
// may run longer.
func benchSetup(b *testing.B) *bundle {
	b.Helper()
	db := testenv.NewDB(b)
	return &bundle{ctx: context.Background(), db: db, store: testenv.Store(b, db.Pool)}
}

func reportRows(b *testing.B, size int) {
	b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "rows/s")
}

// seed empties the tables and writes n rows in status with attempts, due a
// minute ago, last changed an hour ago, each with an idempotency key (as
// schedule rows have), and returns their ids.
func (bb *bundle) seed(b *testing.B, n int, status string, attempts int) []int64 {
	b.Helper()
	if _, err := bb.db.Pool.Exec(bb.ctx, `TRUNCATE notifications, notification_attempts`); err != nil {
		b.Fatal(err)
	}
	rows, err := bb.db.Pool.Query(bb.ctx, `
INSERT INTO notifications (channel, recipient, payload, idempotency_key, status, attempts, due_at, updated_at)
SELECT 'bench', 'user-' || g, '{"text": "Today''s quiz", "n": 1}', 'bench:' || g, $1, $2,
       now() - interval '1 minute', now() - interval '1 hour'
  FROM generate_series(1, $3) g
RETURNING id`, status, attempts, n)
	if err != nil {
		b.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		b.Fatal(err)
	}
	if _, err := bb.db.Pool.Exec(bb.ctx, `ANALYZE notifications, notification_attempts`); err != nil {
		b.Fatal(err)
	}
	return ids
}

func BenchmarkInsert(b *testing.B) {
	bb := benchSetup(b)
	payload := json.RawMessage(`{"text": "Today's quiz", "n": 1}`)
	var seq atomic.Int64 // idempotency keys, unique across sub-benchmarks
	batch := func(size int) []outbox.NewNotification {
		ns := make([]outbox.NewNotification, size)
		for i := range ns {
			ns[i] = outbox.NewNotification{Channel: "bench", Recipient: "user", Payload: payload,
				IdempotencyKey: fmt.Sprintf("bench:%d", seq.Add(1))}
		}
		return ns
	}
	run := func(b *testing.B, size int) {
		for b.Loop() {
			if _, err := bb.store.Insert(bb.ctx, batch(size)); err != nil {
				b.Fatal(err)
			}
		}
		reportRows(b, size)
	}
	// Four inserting connections, one row per transaction: an application's
	// request handlers. Here NOTIFY's commit-time lock shows.
	parallel := func(b *testing.B) {
		b.SetParallelism(2) // 2 × GOMAXPROCS(2) goroutines
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := bb.store.Insert(bb.ctx, batch(1)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportRows(b, 1)
	}
	setWake := func(b *testing.B, wanted bool) {
		if _, err := bb.db.Pool.Exec(bb.ctx, `UPDATE outbox_relay_state SET wake_wanted = $1`, wanted); err != nil {
			b.Fatal(err)
		}
	}
	// The relay idle: every inserting statement sends a NOTIFY.
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) { run(b, size) })
	}
	b.Run("parallel/batch=1", parallel)
	// The relay busy with a backlog: the trigger reads its flag and stays quiet.
	b.Run("relay=busy", func(b *testing.B) {
		setWake(b, false)
		defer setWake(b, true)
		b.Run("batch=1", func(b *testing.B) { run(b, 1) })
		b.Run("parallel/batch=1", parallel)
	})
}

func BenchmarkRelay(b *testing.B) {
	bb := benchSetup(b)
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			bb.seed(b, b.N*size, outbox.StatusPending, 0)
			now := time.Now()
			b.ResetTimer()
			cpu := pgCPU(b)
			for range b.N {
				q, err := bb.store.Relay(bb.ctx, now, size)
				if err != nil {
					b.Fatal(err)
				}
				if len(q) != size {
					b.Fatalf("Relay returned %d rows, want %d", len(q), size)
				}
			}
			reportPGCPU(b, cpu, b.N*size)
			reportRows(b, size)
		})
	}
}

func BenchmarkClaim(b *testing.B) {
	bb := benchSetup(b)
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			ids := bb.seed(b, b.N*size, outbox.StatusQueued, 0)
			now := time.Now()
			b.ResetTimer()
			cpu := pgCPU(b)
			for i := range b.N {
				cs, err := bb.store.Claim(bb.ctx, ids[i*size:(i+1)*size], now, time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if cs[0].Kind != outbox.ClaimSend {
					b.Fatalf("Claim: %v, want send", cs[0].Kind)
				}
			}
			reportPGCPU(b, cpu, b.N*size)
			reportRows(b, size)
		})
	}
}

// BenchmarkBaseline is the machine's yardstick, run beside the others: the
// cheapest batched UPDATE there is (id = ANY($1) on a two-column table, HOT),
// at the same batch sizes. Compare the outbox's rows/s with it, not with
// figures taken on another machine or under another load.
func BenchmarkBaseline(b *testing.B) {
	bb := benchSetup(b)
	for _, sql := range []string{
		`CREATE TABLE bench_baseline (id bigint PRIMARY KEY, n int NOT NULL)`,
		`INSERT INTO bench_baseline SELECT g, 0 FROM generate_series(1, 1000000) g`,
		`VACUUM ANALYZE bench_baseline`,
	} {
		if _, err := bb.db.Pool.Exec(bb.ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("update/batch=%d", size), func(b *testing.B) {
			ids := make([]int64, size)
			cpu := pgCPU(b)
			for i := range b.N {
				for j := range ids {
					ids[j] = int64((i*size+j)%1000000 + 1)
				}
				if _, err := bb.db.Pool.Exec(bb.ctx, `UPDATE bench_baseline SET n = n + 1 WHERE id = ANY($1)`, ids); err != nil {
					b.Fatal(err)
				}
			}
			reportPGCPU(b, cpu, b.N*size)
			reportRows(b, size)
		})
	}
}

func BenchmarkSettle(b *testing.B) {
	bb := benchSetup(b)
	run := func(b *testing.B, size int) {
		ids := bb.seed(b, b.N*size, outbox.StatusProcessing, 1)
		output := json.RawMessage(`{"message_id": "m-123"}`)
		started := time.Now()
		ss := make([]outbox.Settlement, size)
		b.ResetTimer()
		cpu := pgCPU(b)
		for i := range b.N {
			for j := range ss {
				ss[j] = outbox.Settlement{ID: ids[i*size+j], Attempt: 1, Result: outbox.ResultSent, Output: output,
					ProviderStatus: 200, StartedAt: started, FinishedAt: started.Add(40 * time.Millisecond)}
			}
			applied, err := bb.store.Settle(bb.ctx, ss)
			if err != nil {
				b.Fatal(err)
			}
			if !applied[0] {
				b.Fatal("Settle did not apply")
			}
		}
		reportPGCPU(b, cpu, b.N*size)
		reportRows(b, size)
	}
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) { run(b, size) })
	}
	// Several settle flushers at once (one per channel in the pipeline), each
	// on its own connection, batches of 1,000.
	b.Run("parallel/batch=1000", func(b *testing.B) {
		const size = 1000
		ids := bb.seed(b, b.N*size, outbox.StatusProcessing, 1)
		var next atomic.Int64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ss := make([]outbox.Settlement, size)
			for pb.Next() {
				i := int(next.Add(1) - 1)
				for j := range ss {
					ss[j] = outbox.Settlement{ID: ids[i*size+j], Attempt: 1, Result: outbox.ResultSent,
						Output: json.RawMessage(`{"message_id": "m-123"}`), ProviderStatus: 200}
				}
				if _, err := bb.store.Settle(bb.ctx, ss); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportRows(b, size)
	})
	// What a foreign key from the attempt log to notifications would cost
	// (the migration has none; see 00001_outbox.sql).
	b.Run("fk=on/batch=1000", func(b *testing.B) {
		if _, err := bb.db.Pool.Exec(bb.ctx, `ALTER TABLE notification_attempts ADD CONSTRAINT bench_fk
			FOREIGN KEY (notification_id) REFERENCES notifications (id) ON DELETE CASCADE`); err != nil {
			b.Fatal(err)
		}
		defer bb.db.Pool.Exec(bb.ctx, `ALTER TABLE notification_attempts DROP CONSTRAINT bench_fk`) //nolint:errcheck
		run(b, 1000)
	})
}
