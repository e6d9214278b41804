package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Dead-letter reasons, the reason label of notifyd_dead_letters_total.
const (
	ReasonPermanent = "permanent" // the provider said the send can never succeed
	ReasonExhausted = "exhausted" // transient failures used up retry.max_attempts
)

// sendBuckets span a fast webhook on loopback (~1ms) to a send that hits a
// channel's timeout (10s by default).
var sendBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// Delivery counts what the pipeline does with notifications. Every method
// is safe for concurrent use and a no-op on a nil *Delivery, so code and
// tests that run an engine without metrics pass nil.
type Delivery struct {
	enqueued *prometheus.CounterVec
	settled  *prometheus.CounterVec
	retries  *prometheus.CounterVec
	dead     *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// unstorable counts rows a batched statement refused for their data,
	// found by splitting the batch and finished (or dropped) on their own.
	unstorable *prometheus.CounterVec
}

func newDelivery() *Delivery {
	return &Delivery{
		enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "notifications_enqueued_total",
			Help: "Notifications accepted by the HTTP API (repeats of an idempotency key not counted).",
		}, []string{"channel"}),
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "notifications_total",
			Help: "Notifications settled in a terminal state by this instance, by outcome (sent, failed).",
		}, []string{"channel", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "retries_total",
			Help: "Attempts that failed transiently and were put back with a backoff.",
		}, []string{"channel"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "dead_letters_total",
			Help: "Notifications dead-lettered (FAILED), by reason (permanent, exhausted).",
		}, []string{"channel", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "send_duration_seconds",
			Help:    "Duration of one Send call to a channel's plugin (one batch of notifications).",
			Buckets: sendBuckets,
		}, []string{"channel"}),
		unstorable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "unstorable_rows_total",
			Help: "Notifications a batched relay, claim or settle could not write, found by splitting the batch and finished on their own, and dead letters no dead-letter hook notification could be written for (stage dead_letter_hook), by stage.",
		}, []string{"channel", "stage"}),
	}
}

func (d *Delivery) register(reg prometheus.Registerer) {
	reg.MustRegister(d.enqueued, d.settled, d.retries, d.dead, d.duration, d.unstorable)
}

// Enqueued counts n notifications of channel accepted by the API.
func (d *Delivery) Enqueued(channel string, n int) {
	if d == nil || n <= 0 {
		return
	}
	d.enqueued.WithLabelValues(channel).Add(float64(n))
}

// Sent counts one notification of channel settled SENT.
func (d *Delivery) Sent(channel string) { d.sent(channel, 1) }

func (d *Delivery) sent(channel string, n int) {
	if d == nil {
		return
	}
	d.settled.WithLabelValues(channel, "sent").Add(float64(n))
}

// Retried counts one transient failure of channel put back with a backoff.
func (d *Delivery) Retried(channel string) { d.retried(channel, 1) }

func (d *Delivery) retried(channel string, n int) {
	if d == nil {
		return
	}
	d.retries.WithLabelValues(channel).Add(float64(n))
}

// Dead counts one notification of channel settled FAILED (dead-lettered);
// reason is ReasonPermanent or ReasonExhausted.
func (d *Delivery) Dead(channel, reason string) { d.deadN(channel, reason, 1) }

func (d *Delivery) deadN(channel, reason string, n int) {
	if d == nil {
		return
	}
	d.settled.WithLabelValues(channel, "failed").Add(float64(n))
	d.dead.WithLabelValues(channel, reason).Add(float64(n))
}

// Settled counts one settled attempt of channel by what the pipeline
// committed: result "sent", "retry" or "failed" (outbox.Result's String),
// and for "failed" the attempt's outcome, PERMANENT (the provider refused)
// or anything else (retries exhausted). One call for the settler, so the
// pipeline needs no branching of its own.
func (d *Delivery) Settled(channel, result, outcome string) { d.SettledN(channel, result, outcome, 1) }

// SettledN is Settled for n attempts alike: the settler counts a committed
// batch with one call per channel and kind, not a label lookup per
// notification. n < 1 counts nothing.
func (d *Delivery) SettledN(channel, result, outcome string, n int) {
	if n < 1 {
		return
	}
	switch result {
	case "sent":
		d.sent(channel, n)
	case "retry":
		d.retried(channel, n)
	case "failed":
		reason := ReasonExhausted
		if outcome == "PERMANENT" {
			reason = ReasonPermanent
		}
		d.deadN(channel, reason, n)
	}
}

// Unstorable counts one notification of channel that stage (relay, claim,
// settle, dead_letter_hook) could not write in its batch.
func (d *Delivery) Unstorable(channel, stage string) {
	if d == nil {
		return
	}
	d.unstorable.WithLabelValues(channel, stage).Inc()
}

// SendDuration records one plugin Send call of channel that took took.
func (d *Delivery) SendDuration(channel string, took time.Duration) {
	if d == nil {
		return
	}
	d.duration.WithLabelValues(channel).Observe(took.Seconds())
}

// HTTP measures API requests. Safe for concurrent use; no-op when nil.
type HTTP struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTP() *HTTP {
	return &HTTP{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "http_requests_total",
			Help: "HTTP API requests by route pattern and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "http_request_duration_seconds",
			Help:    "HTTP API request duration by route pattern.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
	}
}

func (h *HTTP) register(reg prometheus.Registerer) {
	reg.MustRegister(h.requests, h.duration)
}

// Observe records one request. route is the matched pattern ("GET
// /v1/notifications/{id}"), never the raw path, so ids do not become labels;
// "" (no route matched) is recorded as "unmatched".
func (h *HTTP) Observe(route string, code int, took time.Duration) {
	if h == nil {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	h.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	h.duration.WithLabelValues(route).Observe(took.Seconds())
}
