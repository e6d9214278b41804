package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/notifyd/notifyd/internal/testenv"
)

// BenchmarkQueue_PushFetchAck measures the hot path of one id through the
// queue (push, fetch into processing, ack) in batches, as one instance
// drives it: three script calls per batch.
func BenchmarkQueue_PushFetchAck(b *testing.B) {
	for _, batch := range []int{1, 64, 512} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			bb := setup(b)
			bb.renew(b, ch, "bench")
			next := int64(1)
			batchItems := make([]Item, batch)
			b.ResetTimer()
			for range b.N {
				for i := range batchItems {
					batchItems[i] = Item{ID: next}
					next++
				}
				if _, err := bb.q.Push(bb.ctx, ch, batchItems); err != nil {
					b.Fatal(err)
				}
				got, err := bb.q.Fetch(bb.ctx, ch, "bench", batch, 0)
				if err != nil || len(got) != batch {
					b.Fatalf("Fetch = %d ids, %v; want %d", len(got), err, batch)
				}
				if err := bb.q.Ack(bb.ctx, ch, "bench", got); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "ids/s")
		})
	}
}

// BenchmarkQueue_FetchWake measures how long a Fetch blocked on an empty
// queue takes to return after a push starts: 1,000 pushes per b.N (run with
// -benchtime=1x), p50/p99 reported. max=1 is BLMOVE alone; max=64 adds the
// follow-up script that takes the rest of a batch.
func BenchmarkQueue_FetchWake(b *testing.B) {
	const rounds = 1000
	for _, max := range []int{1, 64} {
		b.Run(fmt.Sprintf("max=%d", max), func(b *testing.B) {
			bb := setup(b)
			name := "wake-" + bb.r.Prefix
			opts, err := redis.ParseURL(testenv.RedisURL())
			if err != nil {
				b.Fatal(err)
			}
			opts.ClientName, opts.PoolSize = name, 1
			fc := redis.NewClient(opts) // the fetcher's own connection, to see it block
			defer fc.Close()
			fq := New(fc, bb.r.Prefix)
			bb.renew(b, ch, "waker")

			var lat []time.Duration
			b.ResetTimer()
			for range b.N {
				for i := range rounds {
					done := make(chan time.Time, 1)
					go func() {
						ids, err := fq.Fetch(bb.ctx, ch, "waker", max, 10*time.Second)
						if err != nil || len(ids) != 1 {
							b.Errorf("Fetch = %v, %v; want one id", ids, err)
						}
						done <- time.Now()
					}()
					waitBlocked(bb.ctx, b, bb.c, name)
					pushed := time.Now()
					if _, err := bb.q.Push(bb.ctx, ch, []Item{{ID: int64(i + 1)}}); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, (<-done).Sub(pushed))
					if err := bb.q.Ack(bb.ctx, ch, "waker", []int64{int64(i + 1)}); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			pct := func(p float64) float64 {
				return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
		})
	}
}

// waitBlocked polls CLIENT LIST until the connection named name is blocked
// in BLMOVE, so each push measures a real wake-up.
func waitBlocked(ctx context.Context, b *testing.B, c *redis.Client, name string) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := c.ClientList(ctx).Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(list, "\n") {
			if strings.Contains(line, " name="+name+" ") && strings.Contains(line, " cmd=blmove") && strings.Contains(line, " flags=b") {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("the fetcher never blocked")
		}
		time.Sleep(200 * time.Microsecond)
	}
}
