package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/testenv"
)

// testConfig points the bench at the test services and a freshly built
// webhook plugin.
func testConfig(t testing.TB) *config.Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Postgres.URL = testenv.DatabaseURL()
	cfg.Redis.URL = testenv.RedisURL()
	cfg.Plugins.Dir = t.TempDir()
	testenv.InstallPlugin(t, cfg.Plugins.Dir, Plugin, "github.com/notifyd/notifyd/plugins/webhook")
	return cfg
}

func TestRun(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	const n, idle = 500, 5
	var progress bytes.Buffer
	rep, err := Run(ctx, Options{Config: testConfig(t), N: n, Concurrency: 16, Batch: 16, Idle: idle, Progress: &progress})
	if err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, progress.String())
	}

	t.Run("burst", func(t *testing.T) {
		b := rep.Burst
		if b.N != n || b.Delivered != n {
			t.Errorf("burst delivered %d of %d, want %d of %d", b.Delivered, b.N, n, n)
		}
		if b.Duplicates != 0 {
			t.Errorf("burst duplicates = %d, want 0", b.Duplicates)
		}
		if b.Sent != n || b.Failed != 0 {
			t.Errorf("rows SENT %d, FAILED %d; want %d, 0", b.Sent, b.Failed, n)
		}
		if b.Latency.Count != n {
			t.Errorf("latency samples = %d, want %d", b.Latency.Count, n)
		}
		// The tracer follows a batch by its first id: a batch whose first id
		// the claim dropped (fetched twice, e.g. by the start-up resync
		// racing the relay) is not timed past that stage, so a stage may
		// miss a few batches, never more than it had before it.
		if st := b.Stages; st.Batches == 0 || st.Claim.Count > st.Batches || st.Send.Count > st.Claim.Count ||
			st.Send.Count < st.Batches*9/10 || st.MeanBatch > 16 {
			t.Errorf("stages: %d batches of %.1f, %d claims, %d sends; want claims and sends timed for (nearly) every batch, at most 16 per batch",
				st.Batches, st.MeanBatch, st.Claim.Count, st.Send.Count)
		}
		if b.Throughput <= 0 || b.LastMs < b.FirstMs || b.Latency.P99 > b.Latency.Max || b.Latency.P50 > b.Latency.P99 {
			t.Errorf("inconsistent figures: throughput %.0f, first %.1fms, last %.1fms, p50 %.1f, p99 %.1f, max %.1f",
				b.Throughput, b.FirstMs, b.LastMs, b.Latency.P50, b.Latency.P99, b.Latency.Max)
		}
		// Nothing may arrive before it is due.
		if b.FirstMs < 0 {
			t.Errorf("first delivery %.1fms before T", -b.FirstMs)
		}
	})
	t.Run("raw", func(t *testing.T) {
		r := rep.Raw
		if r.Requests != 2*n || r.Errors != 0 || r.Throughput <= 0 || r.Latency.Count != 2*n {
			t.Errorf("raw: requests %d, errors %d, throughput %.0f, samples %d; want %d, 0, > 0, %d",
				r.Requests, r.Errors, r.Throughput, r.Latency.Count, 2*n, 2*n)
		}
		if len(r.Runs) != 2 || r.Runs[0].When != "before" || r.Runs[1].When != "after" {
			t.Errorf("raw runs = %+v, want one before and one after the burst", r.Runs)
		}
		if r.Concurrency != 16 {
			t.Errorf("raw concurrency = %d, want the channel's 16", r.Concurrency)
		}
		if want := rep.Burst.Throughput / r.Throughput; rep.Ratio != want {
			t.Errorf("ratio = %v, want %v", rep.Ratio, want)
		}
	})
	t.Run("idle", func(t *testing.T) {
		i := rep.Idle
		if i.K != idle || i.Latency.Count != idle || i.Duplicates != 0 {
			t.Errorf("idle: k %d, samples %d, duplicates %d; want %d, %d, 0", i.K, i.Latency.Count, i.Duplicates, idle, idle)
		}
		if i.FromInsert.P50 < i.Latency.P50 || i.FromInsert.Max < i.Latency.Max {
			t.Errorf("insert→received (p50 %.2fms, max %.2fms) is below committed→received (p50 %.2fms, max %.2fms)",
				i.FromInsert.P50, i.FromInsert.Max, i.Latency.P50, i.Latency.Max)
		}
		if bd := i.Breakdown; bd.ToFetch.Count != idle || bd.Claim.Count != idle || bd.ToSink.Count != idle {
			t.Errorf("breakdown samples: to fetch %d, claim %d, to sink %d; want %d each", bd.ToFetch.Count, bd.Claim.Count, bd.ToSink.Count, idle)
		}
	})
	t.Run("cleaned up", func(t *testing.T) {
		pool, err := pgxpool.New(ctx, testenv.DatabaseURL())
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		var schemas int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1`, rep.Setup.Schema).Scan(&schemas); err != nil {
			t.Fatal(err)
		}
		if schemas != 0 {
			t.Errorf("schema %s still exists after Run", rep.Setup.Schema)
		}
		opts, err := redis.ParseURL(testenv.RedisURL())
		if err != nil {
			t.Fatal(err)
		}
		rc := redis.NewClient(opts)
		defer rc.Close()
		keys, _, err := rc.Scan(ctx, 0, rep.Setup.RedisPrefix+":*", 1000).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 0 {
			t.Errorf("Redis keys left under %s: %v", rep.Setup.RedisPrefix, keys)
		}
	})
	t.Run("report", func(t *testing.T) {
		var text bytes.Buffer
		if err := rep.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"500 notifications due at one instant", "duplicates 0", "concurrency 16, batch 16", "ratio end-to-end / raw", "idle pick-up: 5 single"} {
			if !strings.Contains(text.String(), want) {
				t.Errorf("text report lacks %q:\n%s", want, text.String())
			}
		}
		var js bytes.Buffer
		if err := rep.WriteJSON(&js); err != nil {
			t.Fatal(err)
		}
		var back Report
		if err := json.Unmarshal(js.Bytes(), &back); err != nil {
			t.Fatalf("JSON report does not decode: %v", err)
		}
		if back.Burst.Delivered != n || back.Setup.Batch != 16 {
			t.Errorf("JSON round trip: delivered %d, batch %d; want %d, 16", back.Burst.Delivered, back.Setup.Batch, n)
		}
	})
}

// TestRun_scaleOut runs two engines on a channel of four partitions on a
// Redis Cluster the bench starts itself: every notification delivered once,
// both instances sharing the work, and the cluster gone afterwards.
func TestRun_scaleOut(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	const n = 300
	var progress bytes.Buffer
	rep, err := Run(ctx, Options{Config: testConfig(t), N: n, Concurrency: 16, Batch: 16, Idle: 3,
		Instances: 2, Partitions: 4, RedisCluster: true, Progress: &progress})
	if err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, progress.String())
	}

	t.Run("setup", func(t *testing.T) {
		s := rep.Setup
		if s.Instances != 2 || s.Partitions != 4 {
			t.Errorf("setup: %d instances, %d partitions; want 2, 4", s.Instances, s.Partitions)
		}
		if !strings.HasPrefix(s.Redis, "cluster") || len(s.RedisClusterAddrs) != 3 {
			t.Errorf("setup: redis %q on %v; want a cluster of 3 masters", s.Redis, s.RedisClusterAddrs)
		}
	})
	t.Run("burst", func(t *testing.T) {
		b := rep.Burst
		if b.Delivered != n || b.Duplicates != 0 {
			t.Errorf("burst delivered %d of %d with %d duplicates; want all, 0 duplicates", b.Delivered, n, b.Duplicates)
		}
		if b.Sent != n || b.Failed != 0 {
			t.Errorf("rows SENT %d, FAILED %d; want %d, 0", b.Sent, b.Failed, n)
		}
		if len(b.ByInstance) != 2 {
			t.Fatalf("by instance = %v, want two counts", b.ByInstance)
		}
		if b.ByInstance[0]+b.ByInstance[1] < n || b.ByInstance[0] == 0 || b.ByInstance[1] == 0 {
			t.Errorf("by instance = %v; want both instances to send, %d in all", b.ByInstance, n)
		}
	})
	t.Run("idle", func(t *testing.T) {
		if i := rep.Idle; i.K != 3 || i.Latency.Count != 3 || i.Duplicates != 0 {
			t.Errorf("idle: k %d, samples %d, duplicates %d; want 3, 3, 0", i.K, i.Latency.Count, i.Duplicates)
		}
	})
	t.Run("report", func(t *testing.T) {
		var text bytes.Buffer
		if err := rep.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"2 delivery engines in this one process", "partitions 4; redis cluster", "by instance    #1 "} {
			if !strings.Contains(text.String(), want) {
				t.Errorf("text report lacks %q:\n%s", want, text.String())
			}
		}
	})
	t.Run("cluster stopped", func(t *testing.T) {
		for _, addr := range rep.Setup.RedisClusterAddrs {
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				t.Errorf("cluster node %s still answers after Run", addr)
			}
		}
	})
}

func TestStartCluster(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	c, err := StartCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = c.Close()
		}
	}()
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	defer rc.Close()
	// Keys in different slots land on different masters; each must work.
	for i := range 20 {
		k := "bench-cluster-test:" + strconv.Itoa(i)
		if err := rc.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	var masters atomic.Int32 // ForEachMaster calls in parallel
	if err := rc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		masters.Add(1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if masters := masters.Load(); masters != 3 {
		t.Errorf("masters = %d, want 3", masters)
	}
	dir := c.dir
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	closed = true
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s after Close: %v, want it removed", dir, err)
	}
}

func TestRun_badOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, tc := range map[string]struct {
		o    Options
		want string
	}{
		"no config":        {Options{}, "Config is required"},
		"negative n":       {Options{Config: DefaultConfig(), N: -1}, "-n -1"},
		"huge batch":       {Options{Config: DefaultConfig(), Batch: 5000}, "--batch 5000"},
		"zero concurrency": {Options{Config: DefaultConfig(), Concurrency: -3}, "--concurrency -3"},
		"negative quiet":   {Options{Config: DefaultConfig(), Quiet: -time.Second}, "--quiet -1s"},
		"many instances":   {Options{Config: DefaultConfig(), Instances: 17}, "--instances 17"},
		"bad partitions":   {Options{Config: DefaultConfig(), Partitions: 300}, "--partitions 300"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Run(ctx, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run error = %v, want one containing %q", err, tc.want)
			}
		})
	}
	t.Run("missing plugin", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Postgres.URL = testenv.DatabaseURL()
		cfg.Redis.URL = testenv.RedisURL()
		cfg.Plugins.Dir = t.TempDir()
		_, err := Run(testenv.Context(t), Options{Config: cfg, N: 10})
		if err == nil || !strings.Contains(err.Error(), "make build") {
			t.Errorf("Run error = %v, want one saying how to build the plugin", err)
		}
	})
}

func TestSink_ServeHTTP(t *testing.T) {
	t.Parallel()
	s, err := StartSink()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	post := func(path, id string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.URL()+path, strings.NewReader(`{"id":1}`))
		if id != "" {
			req.Header.Set("Idempotency-Key", id)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, id := range []string{"a", "b", "a", "a"} {
		if got := post(HookPath, id); got != http.StatusOK {
			t.Fatalf("POST %s: status %d, want 200", id, got)
		}
	}
	post(RawPath, "r1")
	if got := post(HookPath, ""); got != http.StatusBadRequest {
		t.Errorf("POST without an Idempotency-Key: status %d, want 400", got)
	}
	got := s.Counts()
	want := SinkCounts{Distinct: 2, Deliveries: 4, Duplicates: 2, Raw: 1, Bad: 1}
	if got != want {
		t.Errorf("Counts = %+v, want %+v", got, want)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.WaitDistinct(ctx, 2); err != nil {
		t.Errorf("WaitDistinct(2) with 2 seen: %v", err)
	}
	done := make(chan time.Time, 1)
	go func() {
		at, _ := s.Wait(ctx, "c")
		done <- at
	}()
	time.Sleep(20 * time.Millisecond)
	before := time.Now()
	post(HookPath, "c")
	if at := <-done; at.Before(before) {
		t.Errorf("Wait(c) = %v, want an arrival after %v", at, before)
	}
	if err := s.WaitDistinct(ctx, 3); err != nil {
		t.Errorf("WaitDistinct(3): %v", err)
	}

	s.Reset()
	if got := s.Counts(); got != (SinkCounts{}) {
		t.Errorf("Counts after Reset = %+v, want zero", got)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	if err := s.WaitDistinct(short, 1); err == nil {
		t.Error("WaitDistinct(1) on an empty sink returned without error before its deadline")
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(d, tc.p); got != tc.want {
			t.Errorf("percentile(1..100ms, %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile([]time.Duration{7}, 99); got != 7 {
		t.Errorf("percentile of one sample = %v, want it", got)
	}
	if got := distOf(nil); got != (Dist{}) {
		t.Errorf("distOf(nil) = %+v, want zero", got)
	}
}

func TestEnvelope(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 3, 1, 8, 0, 0, 123456000, time.UTC)
	b := envelope(42, "user-0000042", created)
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("envelope is not JSON: %v\n%s", err, b)
	}
	for k, want := range map[string]any{"id": 42.0, "channel": Channel, "recipient": "user-0000042", "attempt": 1.0, "created_at": "2026-03-01T08:00:00.123456Z"} {
		if got[k] != want {
			t.Errorf("envelope[%q] = %v, want %v", k, got[k], want)
		}
	}
	if _, ok := got["payload"].(map[string]any); !ok {
		t.Errorf("envelope payload = %v, want the bench payload object", got["payload"])
	}
}

// BenchmarkPipeline runs the whole bench (N from NOTIFYD_BENCH_N, default
// 20,000) and reports its figures as metrics, for `go test -bench`.
func BenchmarkPipeline(b *testing.B) {
	n := 20_000
	if v := os.Getenv("NOTIFYD_BENCH_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("NOTIFYD_BENCH_N=%q: %v", v, err)
		}
	}
	cfg := testConfig(b)
	var rep *Report
	for b.Loop() {
		var err error
		if rep, err = Run(context.Background(), Options{Config: cfg, N: n, Idle: 100}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(rep.Burst.Throughput, "notifications/s")
	b.ReportMetric(rep.Raw.Throughput, "raw-posts/s")
	b.ReportMetric(rep.Ratio, "ratio")
	b.ReportMetric(rep.Burst.Latency.P50, "due-p50-ms")
	b.ReportMetric(rep.Burst.Latency.P99, "due-p99-ms")
	b.ReportMetric(rep.Idle.Latency.P50, "idle-p50-ms")
	b.ReportMetric(rep.Idle.Latency.P99, "idle-p99-ms")
	b.ReportMetric(float64(rep.Burst.Duplicates), "duplicates")
}

func TestWithSession(t *testing.T) {
	t.Parallel()
	got, err := withSession("postgres://u@h:5432/db?sslmode=disable&options=-c%20a%3Db%20-c%20c%3Dd", "bench_x", "bench-x")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"search_path=bench_x", "application_name=bench-x", "options=-c%20a%3Db%20-c%20c%3Dd", "sslmode=disable"} {
		if !strings.Contains(got, want) {
			t.Errorf("withSession = %s, want it to contain %s", got, want)
		}
	}
	if _, err := withSession("postgres://u@h:bad-port/db", "s", "a"); err == nil || !strings.Contains(err.Error(), "postgres.url") {
		t.Errorf("withSession of a bad URL: error %v, want one naming postgres.url", err)
	}
}
