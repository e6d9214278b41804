package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ScrapeTimeoutDefault bounds the reads one collector makes per scrape, so a
// hung Redis or Postgres makes that collector report an error instead of
// stalling the scrape.
const ScrapeTimeoutDefault = 3 * time.Second

// QueueStats is one channel's Redis queue sizes as the queue collector
// reports them.
type QueueStats struct {
	Ready, Delayed, Processing, Dead int64
	Instances                        int // instances holding an unexpired lease
}

// QueueStatser reads one channel's queue sizes (the engine adapts its
// queue's Stats to it; metrics knows nothing of the queue).
type QueueStatser func(ctx context.Context, channel string) (QueueStats, error)

type queueCollector struct {
	q         QueueStatser
	channels  func() []string
	timeout   time.Duration
	depth     *prometheus.Desc
	instances *prometheus.Desc
}

// NewQueueCollector reads every channel's Redis queue sizes on each scrape:
// notifyd_queue_depth{channel,queue} and notifyd_queue_instances{channel}.
// channels lists the channels to read (the configured ones).
func NewQueueCollector(q QueueStatser, channels func() []string) prometheus.Collector {
	return &queueCollector{
		q: q, channels: channels, timeout: ScrapeTimeoutDefault,
		depth: prometheus.NewDesc(Namespace+"_queue_depth",
			"Notification ids in a channel's Redis queue: ready, delayed (retries waiting), processing (fetched, unsettled), dead.",
			[]string{"channel", "queue"}, nil),
		instances: prometheus.NewDesc(Namespace+"_queue_instances",
			"notifyd instances holding a live lease on the channel.", []string{"channel"}, nil),
	}
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.instances
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	for _, name := range c.channels() {
		st, err := c.q(ctx, name)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(c.depth, err)
			continue
		}
		for _, d := range []struct {
			queue string
			n     int64
		}{{"ready", st.Ready}, {"delayed", st.Delayed}, {"processing", st.Processing}, {"dead", st.Dead}} {
			ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(d.n), name, d.queue)
		}
		ch <- prometheus.MustNewConstMetric(c.instances, prometheus.GaugeValue, float64(st.Instances), name)
	}
}

// PluginState is one running plugin as the plugin collector reports it.
type PluginState struct {
	Name     string
	Up       bool // its process is running now
	Restarts int  // times the supervisor restarted it
}

type pluginCollector struct {
	plugins  func(ctx context.Context) []PluginState
	timeout  time.Duration
	up       *prometheus.Desc
	restarts *prometheus.Desc
}

// NewPluginCollector reports notifyd_plugin_up{plugin} and
// notifyd_plugin_restarts_total{plugin} for the plugins plugins returns.
func NewPluginCollector(plugins func(ctx context.Context) []PluginState) prometheus.Collector {
	return &pluginCollector{
		plugins: plugins, timeout: ScrapeTimeoutDefault,
		up: prometheus.NewDesc(Namespace+"_plugin_up",
			"1 while the plugin's process is running, 0 while it is down (being restarted).", []string{"plugin"}, nil),
		restarts: prometheus.NewDesc(Namespace+"_plugin_restarts_total",
			"Times the plugin host restarted the plugin after it exited or stopped answering.", []string{"plugin"}, nil),
	}
}

func (c *pluginCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.restarts
}

func (c *pluginCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	for _, p := range c.plugins(ctx) {
		up := 0.0
		if p.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, p.Name)
		ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(p.Restarts), p.Name)
	}
}

// JobProgress is one active (PENDING or RUNNING) bulk job.
type JobProgress struct {
	ID       int64
	Kind     string // schedule | campaign
	Schedule string // "" for a campaign
	State    string // PENDING | RUNNING
	Done     int64
	Total    int64 // audience size; -1 while not counted yet
}

type jobCollector struct {
	jobs    func(ctx context.Context) ([]JobProgress, error)
	timeout time.Duration
	states  *prometheus.Desc
	done    *prometheus.Desc
	total   *prometheus.Desc
}

// NewJobCollector reports notifyd_jobs{state} and, per active job,
// notifyd_job_done_recipients and notifyd_job_audience_recipients.
// jobs returns the active jobs (PENDING and RUNNING).
func NewJobCollector(jobs func(ctx context.Context) ([]JobProgress, error)) prometheus.Collector {
	labels := []string{"job", "kind", "schedule"}
	return &jobCollector{
		jobs: jobs, timeout: ScrapeTimeoutDefault,
		states: prometheus.NewDesc(Namespace+"_jobs",
			"Bulk jobs (schedule runs and campaigns) waiting or running, by state.", []string{"state"}, nil),
		done: prometheus.NewDesc(Namespace+"_job_done_recipients",
			"Audience members an active job has processed so far.", labels, nil),
		total: prometheus.NewDesc(Namespace+"_job_audience_recipients",
			"Audience size of an active job, once counted (the job's total).", labels, nil),
	}
}

func (c *jobCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.states
	ch <- c.done
	ch <- c.total
}

func (c *jobCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	jobs, err := c.jobs(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.states, err)
		return
	}
	count := map[string]int{"PENDING": 0, "RUNNING": 0}
	for _, j := range jobs {
		count[j.State]++
		id := strconv.FormatInt(j.ID, 10)
		ch <- prometheus.MustNewConstMetric(c.done, prometheus.GaugeValue, float64(j.Done), id, j.Kind, j.Schedule)
		if j.Total >= 0 {
			ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(j.Total), id, j.Kind, j.Schedule)
		}
	}
	for state, n := range count {
		ch <- prometheus.MustNewConstMetric(c.states, prometheus.GaugeValue, float64(n), state)
	}
}

// NewStallCollector reports notifyd_stage_stalled_seconds{stage}: how long
// each pipeline stage (relay, claim, settle) has gone without progress
// while work waited, 0 when it is fine. /readyz fails past
// delivery.stall_after.
func NewStallCollector(stalled func() map[string]time.Duration) prometheus.Collector {
	return &stallCollector{stalled: stalled, desc: prometheus.NewDesc(Namespace+"_stage_stalled_seconds",
		"How long a pipeline stage (relay, claim, settle) has made no progress while work waited; 0 when fine.",
		[]string{"stage"}, nil)}
}

type stallCollector struct {
	stalled func() map[string]time.Duration
	desc    *prometheus.Desc
}

func (c *stallCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *stallCollector) Collect(ch chan<- prometheus.Metric) {
	for stage, d := range c.stalled() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, d.Seconds(), stage)
	}
}
