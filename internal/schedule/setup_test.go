package schedule

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk/wire"
)

// fakeClock is the injected clock: time moves only when a test moves it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testBundle is one test's database, config and clock.
type testBundle struct {
	db    *testenv.DB
	cfg   *config.Config
	clock *fakeClock
	ctx   context.Context
}

// setup gives a test its own schema and a config with channels "quiz" and
// "hooks", no schedules, and jobs tuned so the heartbeat never ticks by
// itself (the fake clock decides staleness).
func setup(t testing.TB) *testBundle {
	t.Helper()
	db := testenv.NewDB(t)
	cfg := config.Default()
	cfg.Postgres.URL = db.URL
	cfg.Channels = map[string]config.Channel{"quiz": {Plugin: "webhook"}, "hooks": {Plugin: "webhook"}}
	cfg.Schedules = map[string]config.Schedule{}
	cfg.Jobs.Heartbeat = time.Hour
	cfg.Jobs.StuckAfter = 2 * time.Hour
	return &testBundle{
		db: db, cfg: &cfg,
		clock: newClock(time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)),
		ctx:   testenv.Context(t),
	}
}

// service builds an instance named id on the bundle's database and clock.
func (b *testBundle) service(t testing.TB, id string) *Service {
	t.Helper()
	s, err := New(b.db.Pool, b.cfg, Options{Now: b.clock.Now, InstanceID: id})
	if err != nil {
		t.Fatalf("New(%s): %v", id, err)
	}
	return s
}

// seedTopic creates n subscribers sub-1…sub-n in topic, addressed on channel
// as addr-<i>, except every noAddrEvery-th (0: none) which has no address on
// it. One INSERT…SELECT per table.
func seedTopic(t testing.TB, ctx context.Context, pool *pgxpool.Pool, topic, channel string, n, noAddrEvery int) {
	t.Helper()
	_, err := pool.Exec(ctx, `
		INSERT INTO subscribers (external_id, addresses, attributes)
		SELECT 'sub-' || i,
		       CASE WHEN $3 > 0 AND i % $3 = 0 THEN '{}'::jsonb ELSE jsonb_build_object($2::text, 'addr-' || i) END,
		       jsonb_build_object('n', i)
		FROM generate_series(1, $1::int) AS i
		ON CONFLICT (external_id) DO NOTHING`, n, channel, noAddrEvery)
	if err != nil {
		t.Fatalf("seed subscribers: %v", err)
	}
	_, err = pool.Exec(ctx, `
		INSERT INTO topic_subscriptions (topic, subscriber_id)
		SELECT $1, id FROM subscribers WHERE external_id = ANY(SELECT 'sub-' || i FROM generate_series(1, $2::int) AS i)
		ON CONFLICT DO NOTHING`, topic, n)
	if err != nil {
		t.Fatalf("seed topic %s: %v", topic, err)
	}
}

// expectedRecipients is what seedTopic's audience is on its channel.
func expectedRecipients(n, noAddrEvery int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		if noAddrEvery > 0 && i%noAddrEvery == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("addr-%d", i))
	}
	sort.Strings(out)
	return out
}

// jobRecipients returns the recipients of a job's notifications, sorted, with
// duplicates kept (a duplicate is a failure the caller reports).
func jobRecipients(t testing.TB, ctx context.Context, pool *pgxpool.Pool, jobID int64) []string {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT recipient FROM notifications WHERE job_id = $1 ORDER BY recipient`, jobID)
	if err != nil {
		t.Fatalf("read notifications of job %d: %v", jobID, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// diffSets says who is missing and who is there twice (or should not be).
func diffSets(got, want []string) string {
	count := map[string]int{}
	for _, r := range got {
		count[r]++
	}
	var missing, extra []string
	for _, r := range want {
		if count[r] == 0 {
			missing = append(missing, r)
		}
		count[r]--
	}
	for r, c := range count {
		for ; c > 0; c-- {
			extra = append(extra, r)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return ""
	}
	sort.Strings(extra)
	trim := func(s []string) []string { return s[:min(len(s), 10)] }
	return fmt.Sprintf("%d missing (e.g. %v), %d extra or duplicated (e.g. %v)", len(missing), trim(missing), len(extra), trim(extra))
}

func mustGetJob(t testing.TB, ctx context.Context, s *Service, id int64) wire.Job {
	t.Helper()
	j, err := s.GetJob(ctx, id)
	if err != nil {
		t.Fatalf("GetJob(%d): %v", id, err)
	}
	return j
}

// jobLine is a one-line description of a job for test failures.
func jobLine(j wire.Job) string {
	var b strings.Builder
	fmt.Fprintf(&b, "job %d %s %s", j.ID, j.Kind, j.State)
	if j.Schedule != "" {
		fmt.Fprintf(&b, " schedule=%s fire_time=%s", j.Schedule, j.FireTime.Format(time.RFC3339))
	}
	total := "?"
	if j.Total != nil {
		total = fmt.Sprint(*j.Total)
	}
	fmt.Fprintf(&b, " done=%d/%s skipped=%d failed=%d cursor=%q", j.Done, total, j.Skipped, j.Failed, j.Cursor)
	if j.Owner != "" {
		fmt.Fprintf(&b, " owner=%s", j.Owner)
	}
	if j.Error != "" {
		fmt.Fprintf(&b, " error=%q", j.Error)
	}
	return b.String()
}

// lazyPool is a pool that never connects unless used: for tests of what New
// rejects before touching the database.
func lazyPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), testenv.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func writeConfig(t testing.TB, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notifyd.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
