// Package metrics is notifyd's Prometheus registry and the metrics every
// part reports into, named by Prometheus conventions: a notifyd_ prefix,
// _total counters, _seconds histograms, base units, and no label that grows
// with the number of recipients or notifications.
//
// Counters the pipeline increments as things happen live in Delivery and
// HTTP; numbers that already exist elsewhere (queue depths in Redis, plugin
// restarts in the plugin host, job progress in Postgres) are read on scrape
// by the collectors in collectors.go, so they are never stale and cost
// nothing between scrapes.
//
//	notifyd_notifications_enqueued_total{channel}           accepted by the HTTP API
//	notifyd_notifications_total{channel,outcome}            settled: outcome sent | failed
//	notifyd_retries_total{channel}                          transient verdicts put back with a backoff
//	notifyd_dead_letters_total{channel,reason}              FAILED: reason permanent | exhausted
//	notifyd_send_duration_seconds{channel}                  one plugin Send call (a batch)
//	notifyd_queue_depth{channel,queue}                      ready | delayed | processing | dead (Redis, on scrape)
//	notifyd_queue_instances{channel}                        instances holding a live lease (on scrape)
//	notifyd_plugin_up{plugin}                               1 while the plugin process runs (on scrape)
//	notifyd_plugin_restarts_total{plugin}                   restarts by the supervisor (on scrape)
//	notifyd_jobs{state}                                     PENDING and RUNNING bulk jobs (on scrape)
//	notifyd_job_done_recipients{job,kind,schedule}          audience members processed, per active job
//	notifyd_job_audience_recipients{job,kind,schedule}      audience size, once counted, per active job
//	notifyd_unstorable_rows_total{channel,stage}            rows a batch could not write, finished alone
//	notifyd_stage_stalled_seconds{stage}                    relay | claim | settle without progress (on scrape)
//	notifyd_http_requests_total{route,code}                 API requests by route pattern and status
//	notifyd_http_request_duration_seconds{route}            API request latency
//	notifyd_build_info{version}                             always 1
//
// The job labels name active jobs only (a handful at a time); a finished
// job's series disappear at the next scrape.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace is the prefix of every notifyd metric.
const Namespace = "notifyd"

// Registry is one process's metrics: its own Prometheus registry (never the
// global default, so tests and several servers in one process do not
// collide), with the Go runtime and process collectors, and the metrics the
// pipeline and the API report into.
type Registry struct {
	reg      *prometheus.Registry
	delivery *Delivery
	http     *HTTP
}

// New returns a registry with the Go and process collectors, build info
// for version, and the Delivery and HTTP metrics registered.
func New(version string) *Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "build_info",
			Help:        "Always 1; the version label says which notifyd is running.",
			ConstLabels: prometheus.Labels{"version": version},
		}, func() float64 { return 1 }),
	)
	r := &Registry{reg: reg, delivery: newDelivery(), http: newHTTP()}
	r.delivery.register(reg)
	r.http.register(reg)
	return r
}

// Delivery is where the pipeline reports settled notifications.
func (r *Registry) Delivery() *Delivery { return r.delivery }

// HTTP is where the API reports its requests.
func (r *Registry) HTTP() *HTTP { return r.http }

// Register adds collectors, e.g. the scrape-time collectors of this package.
func (r *Registry) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := r.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Gatherer is the registry for tests and exporters.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Handler serves the metrics in the Prometheus exposition format. A
// collector that fails (Redis down during a scrape) is reported in the
// response and the log rather than failing the whole scrape.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{
		ErrorHandling:     promhttp.ContinueOnError,
		Registry:          r.reg, // promhttp_metric_handler_errors_total
		EnableOpenMetrics: false,
	})
}
