package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/notifyd/notifyd/internal/metrics"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/queue"
	"github.com/notifyd/notifyd/internal/testenv"
)

func TestDelivery_Counters(t *testing.T) {
	t.Parallel()
	r := metrics.New("test")
	d := r.Delivery()
	d.Enqueued("orders", 3)
	d.Enqueued("orders", 0) // ignored
	d.Sent("orders")
	d.Sent("orders")
	d.Retried("orders")
	d.Dead("orders", metrics.ReasonPermanent)
	d.Dead("alerts", metrics.ReasonExhausted)
	d.SendDuration("orders", 25*time.Millisecond)

	want := `
# HELP notifyd_notifications_total Notifications settled in a terminal state by this instance, by outcome (sent, failed).
# TYPE notifyd_notifications_total counter
notifyd_notifications_total{channel="alerts",outcome="failed"} 1
notifyd_notifications_total{channel="orders",outcome="failed"} 1
notifyd_notifications_total{channel="orders",outcome="sent"} 2
# HELP notifyd_dead_letters_total Notifications dead-lettered (FAILED), by reason (permanent, exhausted).
# TYPE notifyd_dead_letters_total counter
notifyd_dead_letters_total{channel="alerts",reason="exhausted"} 1
notifyd_dead_letters_total{channel="orders",reason="permanent"} 1
# HELP notifyd_retries_total Attempts that failed transiently and were put back with a backoff.
# TYPE notifyd_retries_total counter
notifyd_retries_total{channel="orders"} 1
# HELP notifyd_notifications_enqueued_total Notifications accepted by the HTTP API (repeats of an idempotency key not counted).
# TYPE notifyd_notifications_enqueued_total counter
notifyd_notifications_enqueued_total{channel="orders"} 3
`
	names := []string{"notifyd_notifications_total", "notifyd_dead_letters_total", "notifyd_retries_total", "notifyd_notifications_enqueued_total"}
	if err := testutil.GatherAndCompare(r.Gatherer(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if got, err := testutil.GatherAndCount(r.Gatherer(), "notifyd_send_duration_seconds"); err != nil || got != 1 {
		t.Errorf("send_duration_seconds series = %d (%v), want 1", got, err)
	}
}

func TestDelivery_Settled(t *testing.T) {
	t.Parallel()
	r := metrics.New("test")
	d := r.Delivery()
	// The pipeline passes outbox.Result's String and the attempt outcome.
	d.Settled("c", outbox.ResultSent.String(), outbox.OutcomeSuccess)
	d.Settled("c", outbox.ResultRetry.String(), outbox.OutcomeTransient)
	d.Settled("c", outbox.ResultFailed.String(), outbox.OutcomePermanent)
	d.Settled("c", outbox.ResultFailed.String(), outbox.OutcomeTransient)
	d.Settled("c", "bogus", "")
	// The settler's batched form: n alike at once; none for n < 1.
	d.SettledN("c", outbox.ResultSent.String(), outbox.OutcomeSuccess, 3)
	d.SettledN("c", outbox.ResultFailed.String(), outbox.OutcomeTransient, 2)
	d.SettledN("c", outbox.ResultRetry.String(), outbox.OutcomeTransient, 0)
	want := `
# HELP notifyd_dead_letters_total Notifications dead-lettered (FAILED), by reason (permanent, exhausted).
# TYPE notifyd_dead_letters_total counter
notifyd_dead_letters_total{channel="c",reason="exhausted"} 3
notifyd_dead_letters_total{channel="c",reason="permanent"} 1
# HELP notifyd_notifications_total Notifications settled in a terminal state by this instance, by outcome (sent, failed).
# TYPE notifyd_notifications_total counter
notifyd_notifications_total{channel="c",outcome="failed"} 4
notifyd_notifications_total{channel="c",outcome="sent"} 4
# HELP notifyd_retries_total Attempts that failed transiently and were put back with a backoff.
# TYPE notifyd_retries_total counter
notifyd_retries_total{channel="c"} 1
`
	if err := testutil.GatherAndCompare(r.Gatherer(), strings.NewReader(want), "notifyd_dead_letters_total", "notifyd_notifications_total", "notifyd_retries_total"); err != nil {
		t.Error(err)
	}
}

func TestDelivery_NilIsNoOp(t *testing.T) {
	t.Parallel()
	var d *metrics.Delivery
	d.Enqueued("c", 1)
	d.Sent("c")
	d.Retried("c")
	d.Dead("c", metrics.ReasonPermanent)
	d.SettledN("c", "sent", "", 5)
	d.SendDuration("c", time.Second)
	d.Settled("c", "sent", "SUCCESS")
	var h *metrics.HTTP
	h.Observe("GET /x", 200, time.Millisecond)
}

func TestHTTP_Observe(t *testing.T) {
	t.Parallel()
	r := metrics.New("test")
	r.HTTP().Observe("GET /v1/notifications/{id}", 404, time.Millisecond)
	r.HTTP().Observe("", 404, time.Millisecond)
	want := `
# HELP notifyd_http_requests_total HTTP API requests by route pattern and status code.
# TYPE notifyd_http_requests_total counter
notifyd_http_requests_total{code="404",route="GET /v1/notifications/{id}"} 1
notifyd_http_requests_total{code="404",route="unmatched"} 1
`
	if err := testutil.GatherAndCompare(r.Gatherer(), strings.NewReader(want), "notifyd_http_requests_total"); err != nil {
		t.Error(err)
	}
}

func TestQueueCollector_Collect(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rds := testenv.NewRedis(t)
	q := queue.New(rds.Client, rds.Prefix)
	if _, err := q.Push(ctx, "orders", []queue.Item{{ID: 1}, {ID: 2}, {ID: 3, Due: time.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	r := metrics.New("test")
	if err := r.Register(metrics.NewQueueCollector(fromQueue(q), func() []string { return []string{"empty", "orders"} })); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP notifyd_queue_depth Notification ids in a channel's Redis queue: ready, delayed (retries waiting), processing (fetched, unsettled), dead.
# TYPE notifyd_queue_depth gauge
notifyd_queue_depth{channel="empty",queue="dead"} 0
notifyd_queue_depth{channel="empty",queue="delayed"} 0
notifyd_queue_depth{channel="empty",queue="processing"} 0
notifyd_queue_depth{channel="empty",queue="ready"} 0
notifyd_queue_depth{channel="orders",queue="dead"} 0
notifyd_queue_depth{channel="orders",queue="delayed"} 1
notifyd_queue_depth{channel="orders",queue="processing"} 0
notifyd_queue_depth{channel="orders",queue="ready"} 2
`
	if err := testutil.GatherAndCompare(r.Gatherer(), strings.NewReader(want), "notifyd_queue_depth"); err != nil {
		t.Error(err)
	}
}

func TestQueueCollector_ErrorKeepsScrapeGoing(t *testing.T) {
	t.Parallel()
	r := metrics.New("test")
	failing := metrics.QueueStatser(func(context.Context, string) (metrics.QueueStats, error) {
		return metrics.QueueStats{}, errors.New("redis down")
	})
	if err := r.Register(metrics.NewQueueCollector(failing, func() []string { return []string{"orders"} })); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != 200 {
		t.Fatalf("status %d, want 200 (ContinueOnError)", rec.Code)
	}
	if !strings.Contains(string(body), "notifyd_build_info") {
		t.Errorf("scrape lost the other metrics when one collector failed:\n%s", body)
	}
}

// fromQueue reads a real queue the way the API server adapts the engine's.
func fromQueue(q *queue.Queue) metrics.QueueStatser {
	return func(ctx context.Context, ch string) (metrics.QueueStats, error) {
		st, err := q.Stats(ctx, ch)
		return metrics.QueueStats{Ready: st.Ready, Delayed: st.Delayed, Processing: st.Processing, Dead: st.Dead, Instances: st.Instances}, err
	}
}

func TestPluginCollector_Collect(t *testing.T) {
	t.Parallel()
	r := metrics.New("test")
	err := r.Register(metrics.NewPluginCollector(func(context.Context) []metrics.PluginState {
		return []metrics.PluginState{{Name: "webhook", Up: true, Restarts: 2}, {Name: "kakao", Up: false}}
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP notifyd_plugin_restarts_total Times the plugin host restarted the plugin after it exited or stopped answering.
# TYPE notifyd_plugin_restarts_total counter
notifyd_plugin_restarts_total{plugin="kakao"} 0
notifyd_plugin_restarts_total{plugin="webhook"} 2
# HELP notifyd_plugin_up 1 while the plugin's process is running, 0 while it is down (being restarted).
# TYPE notifyd_plugin_up gauge
notifyd_plugin_up{plugin="kakao"} 0
notifyd_plugin_up{plugin="webhook"} 1
`
	if err := testutil.GatherAndCompare(r.Gatherer(), strings.NewReader(want), "notifyd_plugin_restarts_total", "notifyd_plugin_up"); err != nil {
		t.Error(err)
	}
}

func TestChannelCollector_Collect(t *testing.T) {
	t.Parallel()
	r := metrics.New("test")
	err := r.Register(metrics.NewChannelCollector(func(context.Context) []metrics.ChannelFlow {
		return []metrics.ChannelFlow{{Name: "orders", Up: true, Breaker: "closed"}, {Name: "relay", Up: false, Breaker: "closed", Paused: true}}
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP notifyd_channel_up 1 while the channel runs on this instance, 0 while it is stopped (its plugin could not start or refused its config; the reason is in /readyz and /v1/channels).
# TYPE notifyd_channel_up gauge
notifyd_channel_up{channel="orders"} 1
notifyd_channel_up{channel="relay"} 0
# HELP notifyd_channel_paused 1 while an operator has paused the channel.
# TYPE notifyd_channel_paused gauge
notifyd_channel_paused{channel="orders"} 0
notifyd_channel_paused{channel="relay"} 1
`
	if err := testutil.GatherAndCompare(r.Gatherer(), strings.NewReader(want), "notifyd_channel_up", "notifyd_channel_paused"); err != nil {
		t.Error(err)
	}
}

func TestJobCollector_Collect(t *testing.T) {
	t.Parallel()
	r := metrics.New("test")
	err := r.Register(metrics.NewJobCollector(func(context.Context) ([]metrics.JobProgress, error) {
		return []metrics.JobProgress{
			{ID: 7, Kind: "schedule", Schedule: "daily", State: "RUNNING", Done: 40, Total: 100},
			{ID: 8, Kind: "campaign", State: "PENDING", Total: -1},
		}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP notifyd_jobs Bulk jobs (schedule runs and campaigns) waiting or running, by state.
# TYPE notifyd_jobs gauge
notifyd_jobs{state="PENDING"} 1
notifyd_jobs{state="RUNNING"} 1
# HELP notifyd_job_done_recipients Audience members an active job has processed so far.
# TYPE notifyd_job_done_recipients gauge
notifyd_job_done_recipients{job="7",kind="schedule",schedule="daily"} 40
notifyd_job_done_recipients{job="8",kind="campaign",schedule=""} 0
# HELP notifyd_job_audience_recipients Audience size of an active job, once counted (the job's total).
# TYPE notifyd_job_audience_recipients gauge
notifyd_job_audience_recipients{job="7",kind="schedule",schedule="daily"} 100
`
	if err := testutil.GatherAndCompare(r.Gatherer(), strings.NewReader(want), "notifyd_jobs", "notifyd_job_done_recipients", "notifyd_job_audience_recipients"); err != nil {
		t.Error(err)
	}
}

// TestRegistry_Lint runs promlint over every notifyd metric: names, units,
// _total on counters, help texts.
func TestRegistry_Lint(t *testing.T) {
	t.Parallel()
	r := metrics.New("test")
	r.Delivery().Sent("c")
	r.Delivery().Retried("c")
	r.Delivery().Dead("c", metrics.ReasonExhausted)
	r.Delivery().Enqueued("c", 1)
	r.Delivery().SendDuration("c", time.Millisecond)
	r.HTTP().Observe("GET /healthz", 200, time.Millisecond)
	_ = r.Register(
		metrics.NewPluginCollector(func(context.Context) []metrics.PluginState {
			return []metrics.PluginState{{Name: "p", Up: true}}
		}),
		metrics.NewJobCollector(func(context.Context) ([]metrics.JobProgress, error) {
			return []metrics.JobProgress{{ID: 1, Kind: "campaign", State: "RUNNING", Total: 3}}, nil
		}),
		metrics.NewQueueCollector(func(context.Context, string) (metrics.QueueStats, error) { return metrics.QueueStats{}, nil },
			func() []string { return []string{"c"} }),
	)
	problems, err := testutil.GatherAndLint(r.Gatherer())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, metrics.Namespace+"_") {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
	// Every notifyd metric name must carry the prefix.
	mfs, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var seen int
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "notifyd_") {
			seen++
		}
	}
	if seen < 14 {
		t.Errorf("gathered %d notifyd_ metric families, want at least 14", seen)
	}
}

var _ prometheus.Collector = metrics.NewJobCollector(nil)
