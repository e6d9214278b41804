package ui

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/queue"
	"github.com/notifyd/notifyd/internal/service"
)

// healthTimeout bounds a plugin health check made for a page.
const healthTimeout = 2 * time.Second

type channelsData struct {
	Instance string
	// Stopped are the configured channels that do not run on this
	// instance, named with their reason in a banner above the table.
	Stopped   []delivery.ChannelState
	Rows      []channelRow
	Plugins   []pluginRow
	CountedAt time.Time // when the Postgres counts were taken (zero = not yet)
	CountErr  string
	Statuses  []string
}

type channelRow struct {
	delivery.ChannelState
	State    string // running | paused | stopped
	Queue    queue.Stats
	QueueErr string
	Counts   map[string]int64 // Postgres rows by status
	Chart    chart
}

type pluginRow struct {
	Name     string
	Version  string
	PID      int
	Restarts int
	Healthy  bool
	Health   string // "ok" or the error
	Channels []string
}

func (s *server) channelsPage(w http.ResponseWriter, r *http.Request, sess *session) {
	ctx := r.Context()
	// The page refreshes itself: the counts are the sampler's, never
	// counted on the page's time (service.Overview).
	ov, err := s.d.Service.Overview(ctx, -1)
	data := channelsData{Instance: s.d.Engine.Instance(), CountedAt: ov.CountsAt, Statuses: service.Statuses}
	switch {
	case err != nil:
		data.CountErr = err.Error()
	case ov.CountErr != nil:
		data.CountErr = ov.CountErr.Error()
	}
	// The service's states: a stopped channel's reason is fit to show.
	states, err := s.d.Service.Channels(ctx)
	if err != nil {
		s.failErr(w, r, "channels", err)
		return
	}
	for _, st := range states {
		if !st.Running {
			data.Stopped = append(data.Stopped, st)
		}
	}
	byName := map[string]service.ChannelOverview{}
	for _, c := range ov.Channels {
		byName[c.Name] = c
	}
	rows := make([]channelRow, len(states))
	var wg sync.WaitGroup
	for i, st := range states {
		c, counted := byName[st.Name]
		rows[i] = channelRow{ChannelState: st, State: "stopped", Counts: c.Counts, Chart: newChart(s.d.Service.Rates(st.Name))}
		switch {
		case st.Running && st.Paused:
			rows[i].State = "paused"
		case st.Running:
			rows[i].State = "running"
		}
		if counted {
			rows[i].Queue = c.Queue
			if c.QueueErr != nil {
				rows[i].QueueErr = c.QueueErr.Error()
			}
			continue
		}
		wg.Go(func() { // the overview failed: read the queue anyway
			q, err := s.d.Engine.Stats(ctx, st.Name)
			rows[i].Queue = q
			if err != nil {
				rows[i].QueueErr = err.Error()
			}
		})
	}
	data.Plugins = s.pluginRows(ctx, states)
	wg.Wait()
	data.Rows = rows
	s.render(w, r, http.StatusOK, "channels", sess, view{Title: "Channels", Nav: "channels", Refresh: 5, Data: data})
}

// pluginRows checks the plugins of running channels, side by side. It never
// launches a plugin: only channels the engine reports running have one.
func (s *server) pluginRows(ctx context.Context, states []delivery.ChannelState) []pluginRow {
	if s.d.Plugins == nil {
		return nil
	}
	var names []string
	byName := map[string]*pluginRow{}
	for _, row := range states {
		if !row.Running {
			continue
		}
		p, ok := byName[row.Plugin]
		if !ok {
			p = &pluginRow{Name: row.Plugin}
			byName[row.Plugin] = p
			names = append(names, row.Plugin)
		}
		p.Channels = append(p.Channels, row.Name)
	}
	out := make([]pluginRow, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		out[i] = *byName[name]
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, healthTimeout)
			defer cancel()
			p, err := s.d.Plugins.Plugin(ctx, name)
			if err != nil {
				out[i].Health = err.Error()
				return
			}
			out[i].Version, out[i].PID, out[i].Restarts = p.Info().Version, p.PID(), p.Restarts()
			if err := p.Health(ctx); err != nil {
				out[i].Health = err.Error()
				return
			}
			out[i].Healthy, out[i].Health = true, "ok"
		})
	}
	wg.Wait()
	return out
}
