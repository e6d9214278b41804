package api_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk/client"
)

func TestServer_Healthz(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	a := wantStatus(t, b.doAuth("GET", "/healthz", "", ""), 200)
	if strings.TrimSpace(string(a.body)) != `{"status":"ok"}` {
		t.Errorf("body %s", a.body)
	}
	if err := b.c.Health(b.ctx); err != nil {
		t.Errorf("client Health: %v", err)
	}
}

func TestServer_Readyz(t *testing.T) {
	t.Parallel()

	t.Run("ready: Postgres, Redis and every channel's plugin answer", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOptions{startEngine: true})
		got := decode[client.Readiness](t, wantStatus(t, b.doAuth("GET", "/readyz", "", ""), 200))
		if got.Status != "ready" || got.Checks["postgres"] != "ok" || got.Checks["redis"] != "ok" ||
			got.Checks["plugin:webhook"] != "ok" || len(got.Stopped) != 0 {
			t.Errorf("readiness %+v", got)
		}
	})

	t.Run("an engine not started: every channel stopped, not started", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOptions{})
		got := decode[client.Readiness](t, wantStatus(t, b.doAuth("GET", "/readyz", "", ""), 503))
		if got.Checks["channel:orders"] != "stopped" || got.Stopped["orders"] != service.NotStarted {
			t.Errorf("readiness %+v", got)
		}
	})

	t.Run("Redis unreachable is 503 naming the check, not the reason", func(t *testing.T) {
		t.Parallel()
		dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
		t.Cleanup(func() { _ = dead.Close() })
		b := setup(t, setupOptions{redis: dead})
		a := wantStatus(t, b.doAuth("GET", "/readyz", "", ""), 503)
		got := decode[client.Readiness](t, a)
		if got.Status != "unavailable" || got.Checks["redis"] != "failed" || got.Checks["postgres"] != "ok" {
			t.Errorf("readiness %+v", got)
		}
		if strings.Contains(string(a.body), "127.0.0.1:1") {
			t.Errorf("the open endpoint leaks connection details: %s", a.body)
		}
		if _, err := b.c.Ready(b.ctx); client.StatusCode(err) != 503 {
			t.Errorf("client Ready = %v, want a 503 error", err)
		}
	})

	t.Run("Postgres unreachable is 503", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOptions{})
		pool, err := pgxpool.New(context.Background(), b.db.URL)
		must(t, err)
		pool.Close()
		srv := newServer(t, serverOptions{Config: b.cfg, Store: testenv.Store(t, pool), Engine: b.engine, Redis: b.rds.Client})
		got := decode[client.Readiness](t, wantStatus(t, serve(t, srv, "GET", "/readyz", "", ""), 503))
		if got.Checks["postgres"] != "failed" || got.Checks["redis"] != "ok" {
			t.Errorf("readiness %+v", got)
		}
	})
}

// stalledEngine is the engine with one stage reported stalled: the delivery
// package's own tests stall a real settle (TestEngine_Stalls); this one checks
// what /readyz and the metric make of it.
type stalledEngine struct{ *delivery.Engine }

func (stalledEngine) Stalls() []string { return []string{delivery.StageSettle} }
func (stalledEngine) Stalled() map[string]time.Duration {
	return map[string]time.Duration{delivery.StageSettle: 90 * time.Second}
}

func TestServer_ReadyzStalledStage(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	srv := newServer(t, serverOptions{Config: b.cfg, Store: b.store, Engine: stalledEngine{b.engine}, Redis: b.rds.Client})
	got := decode[client.Readiness](t, wantStatus(t, serve(t, srv, "GET", "/readyz", "", ""), 503))
	if got.Status != "unavailable" || got.Checks["stage:settle"] != "stalled" || got.Checks["postgres"] != "ok" {
		t.Errorf("readiness %+v, want unavailable with stage:settle stalled", got)
	}
	metrics := string(serve(t, srv, "GET", "/metrics", "Bearer "+tokenA, "").body)
	if !strings.Contains(metrics, `notifyd_stage_stalled_seconds{stage="settle"} 90`) {
		t.Errorf("metrics lack notifyd_stage_stalled_seconds{stage=\"settle\"} 90")
	}
}

func TestServer_Metrics(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	wantStatus(t, b.do("POST", "/v1/notifications", `{"channel":"orders","recipient":"r","payload":{}}`), 202)
	wantStatus(t, b.do("GET", "/v1/notifications/424242", ""), 404)
	wantStatus(t, b.do("POST", "/v1/campaigns", `{"channel":"orders","audience":{"topic":"news"},"payload":{"t":"x"}}`), 202)
	a := wantStatus(t, b.do("GET", "/metrics", ""), 200)
	if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want the Prometheus text format", ct)
	}
	body := string(a.body)
	for _, want := range []string{
		`notifyd_notifications_enqueued_total{channel="orders"} 1`,
		`notifyd_http_requests_total{code="404",route="GET /v1/notifications/{id}"} 1`,
		`notifyd_http_requests_total{code="202",route="POST /v1/notifications"} 1`,
		`notifyd_queue_depth{channel="orders",queue="ready"} 0`,
		`notifyd_queue_depth{channel="alerts",queue="dead"} 0`,
		`notifyd_jobs{state="PENDING"} 1`,
		`notifyd_channel_breaker{channel="orders",state="closed"} 1`,
		`notifyd_channel_breaker{channel="orders",state="open"} 0`,
		`notifyd_channel_paused{channel="orders"} 0`,
		`notifyd_job_done_recipients{job="`,
		`notifyd_build_info{version="test"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, `recipient=`) {
		t.Error("a metric has a per-recipient label")
	}
}

// TestServer_StartStop serves on a real listener (port 0) and stops.
func TestServer_StartStop(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	srv := newServer(t, serverOptions{Config: b.cfg, Store: b.store, Engine: b.engine, Redis: b.rds.Client})
	must(t, srv.Start(b.ctx))
	c, err := client.New(srv.Addr().String(), tokenA)
	must(t, err)
	if err := c.Health(b.ctx); err != nil {
		t.Fatalf("health over the listener: %v", err)
	}
	if _, err := c.Channels(b.ctx); err != nil {
		t.Fatalf("channels over the listener: %v", err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	must(t, srv.Stop(ctx))
	if err := c.Health(b.ctx); err == nil {
		t.Error("health answered after Stop")
	}

	t.Run("an address in use fails Start with the key named", func(t *testing.T) {
		again := newServer(t, serverOptions{Config: b.cfg, Store: b.store, Engine: b.engine, Redis: b.rds.Client})
		must(t, again.Start(b.ctx))
		defer again.Stop(context.Background())
		cfg := *b.cfg
		cfg.HTTP = config.HTTP{Listen: again.Addr().String(), MaxBodyBytes: 1 << 20, MaxPayloadBytes: 1 << 10}
		third := newServer(t, serverOptions{Config: &cfg, Store: b.store, Engine: b.engine, Redis: b.rds.Client})
		if err := third.Start(b.ctx); err == nil || !strings.Contains(err.Error(), "http.listen") {
			t.Errorf("Start on a taken address = %v, want an error naming http.listen", err)
		}
	})
}
