package schedule

import (
	"context"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/sdk/wire"
)

// BenchmarkMaterialise_topic1M materialises a 1,000,000-subscriber topic into
// PENDING rows: one campaign job per iteration, run start to end by one
// instance in chunks of jobs.chunk_size (1,000). Seeding is not timed.
//
//	go test ./internal/schedule -run '^$' -bench Materialise -benchtime 1x
func BenchmarkMaterialise_topic1M(b *testing.B) {
	const n = 1_000_000
	tb := setup(b)
	// Seeding a million rows on a busy machine outlasts testenv's two minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	tb.ctx = ctx
	tb.cfg.Jobs.ChunkSize = config.DefaultJobChunkSize
	start := time.Now()
	seedTopic(b, tb.ctx, tb.db.Pool, "everyone", "quiz", n, 0)
	for _, table := range []string{"subscribers", "topic_subscriptions"} {
		if _, err := tb.db.Pool.Exec(tb.ctx, `VACUUM ANALYZE `+table); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("seeded %d subscribers in %s", n, time.Since(start).Round(time.Millisecond))
	payloads := map[string]map[string]any{
		"static":   {"object_type": "text", "text": "Today's quiz is out"},
		"template": {"object_type": "text", "text": "Today's quiz for {{.recipient}}: #{{.data.n}}"},
	}
	for _, name := range []string{"static", "template"} {
		b.Run(name, func(b *testing.B) {
			s := tb.service(b, "bench")
			s.now = time.Now
			// Start from an empty outbox and a fresh checkpoint, so the
			// previous run's (or the seeding's) dirty pages are not
			// flushed on this run's time.
			for _, stmt := range []string{`TRUNCATE notifications`, `CHECKPOINT`} {
				if _, err := tb.db.Pool.Exec(tb.ctx, stmt); err != nil {
					b.Fatal(err)
				}
			}
			var rows int64
			b.ResetTimer()
			for range b.N {
				job, err := s.CreateCampaign(tb.ctx, wire.Campaign{Channel: "quiz", Audience: wire.Audience{Topic: "everyone"}, Payload: payloads[name]})
				if err != nil {
					b.Fatal(err)
				}
				done, err := s.RunJob(tb.ctx, job.ID)
				if err != nil {
					b.Fatal(err)
				}
				if done.State != jobDone || done.Done != n {
					b.Fatalf("job = %s, want DONE %d/%d", jobLine(done), n, n)
				}
				rows += done.Done
			}
			b.StopTimer()
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/1M")
		})
	}
}
