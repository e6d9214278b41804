package ui

import (
	"net/http"
	"time"

	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/sdk/wire"
)

type channelsData struct {
	Instance string
	// Stopped are the configured channels that do not run on this
	// instance, named with their reason in a banner above the table.
	Stopped []wire.ChannelStats
	Rows    []channelRow
	Plugins []service.PluginHealth
	// Unconfigured are channels this instance does not run that have
	// notifications waiting in the outbox (PENDING, QUEUED or PROCESSING:
	// an application's own SQL under a name nobody configured, or a channel
	// since removed): nothing here will send them, so a banner names them.
	Unconfigured []unconfiguredRow
	// Omitted is how many more unconfigured channels have rows of any
	// status that the overview did not count (service.MaxUnconfiguredChannels).
	Omitted   int
	CountedAt time.Time // when the Postgres counts were taken (zero = not yet)
	CountErr  string
	Statuses  []string
}

// unconfiguredRow is a channel nobody configured here with the
// notifications it holds that are still to be sent.
type unconfiguredRow struct {
	Name    string
	Waiting int64 // PENDING + QUEUED + PROCESSING
}

type channelRow struct {
	wire.ChannelStats
	State    string // running | paused | stopped
	QueueErr string // why its queue sizes could not be read
	Chart    chart
}

// channelsPage is the configured channels at a glance: the service's
// overview, which shows what it could read and names what it could not (a
// failed count above the table, a queue Redis did not answer in its row).
func (s *server) channelsPage(w http.ResponseWriter, r *http.Request, sess *session) {
	ctx := r.Context()
	// The page refreshes itself: the counts are the sampler's, never
	// counted on the page's time (service.Overview).
	ov, err := s.d.Ops.Overview(ctx, -1)
	if err != nil {
		s.failErr(w, r, "channels", err)
		return
	}
	data := channelsData{Instance: s.d.Ops.Instance(), CountedAt: ov.CountsAt, Statuses: service.Statuses,
		Omitted: ov.OmittedChannels}
	if err := ov.CountErr(); err != nil {
		data.CountErr = err.Error()
	}
	for _, c := range ov.Channels {
		if !c.Configured {
			// Rows left in the outbox only: named above the table while
			// any of them is still to be sent (the API lists them all).
			if w := c.Counts[wire.StatusPending] + c.Counts[wire.StatusQueued] + c.Counts[wire.StatusProcessing]; w > 0 {
				data.Unconfigured = append(data.Unconfigured, unconfiguredRow{Name: c.Name, Waiting: w})
			}
			continue
		}
		row := channelRow{ChannelStats: c, State: "stopped", Chart: newChart(s.d.Ops.Rates(c.Name))}
		switch {
		case c.Running && c.Paused:
			row.State = "paused"
		case c.Running:
			row.State = "running"
		default:
			data.Stopped = append(data.Stopped, c)
		}
		if err := ov.QueueErr(c.Name); err != nil {
			row.QueueErr = err.Error()
		}
		data.Rows = append(data.Rows, row)
	}
	data.Plugins = s.d.Ops.Plugins(ctx)
	s.render(w, r, http.StatusOK, "channels", sess, view{Title: "Channels", Nav: "channels", Refresh: 5, Data: data})
}
