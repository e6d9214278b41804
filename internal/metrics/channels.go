package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ChannelFlow is a channel's flow control as the channel collector reports it.
type ChannelFlow struct {
	Name string
	// Up: the channel runs on this instance; false when it is stopped (its
	// plugin could not start, or refused its config).
	Up      bool
	Paused  bool
	Breaker string // closed, open or half-open
}

// BreakerStates are the values notifyd_channel_breaker's state label takes.
var BreakerStates = []string{"closed", "open", "half-open"}

type channelCollector struct {
	channels func(ctx context.Context) []ChannelFlow
	timeout  time.Duration
	up       *prometheus.Desc
	breaker  *prometheus.Desc
	paused   *prometheus.Desc
}

// NewChannelCollector reports notifyd_channel_up{channel} (1 running, 0
// stopped: the reason is in /readyz and /v1/channels, never in a label),
// notifyd_channel_breaker{channel,state} (1 for the breaker's current state,
// 0 for the others, so alerts can match state="open") and
// notifyd_channel_paused{channel}.
func NewChannelCollector(channels func(ctx context.Context) []ChannelFlow) prometheus.Collector {
	return &channelCollector{
		channels: channels, timeout: ScrapeTimeoutDefault,
		up: prometheus.NewDesc(Namespace+"_channel_up",
			"1 while the channel runs on this instance, 0 while it is stopped (its plugin could not start or refused its config; the reason is in /readyz and /v1/channels).",
			[]string{"channel"}, nil),
		breaker: prometheus.NewDesc(Namespace+"_channel_breaker",
			"The channel's circuit breaker: 1 for its current state (closed, open, half-open), 0 for the others.",
			[]string{"channel", "state"}, nil),
		paused: prometheus.NewDesc(Namespace+"_channel_paused",
			"1 while an operator has paused the channel.", []string{"channel"}, nil),
	}
}

func (c *channelCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.breaker
	ch <- c.paused
}

func (c *channelCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	for _, f := range c.channels(ctx) {
		up := 0.0
		if f.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, f.Name)
		for _, st := range BreakerStates {
			v := 0.0
			if st == f.Breaker {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.breaker, prometheus.GaugeValue, v, f.Name, st)
		}
		p := 0.0
		if f.Paused {
			p = 1
		}
		ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, p, f.Name)
	}
}
