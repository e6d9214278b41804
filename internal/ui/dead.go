package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/httpguard"
	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/sdk/wire"
)

const (
	deadLimitDefault = 50
	deadLimitMax     = 500
	// maxSelected bounds the ids one POST may name.
	maxSelected = 1000
	// bulkTimeout bounds a replay-all or purge-all; each step is complete
	// in itself, so one cut short leaves a consistent, partly done job.
	bulkTimeout = 10 * time.Minute
)

type deadData struct {
	Channel    string
	Rows       []deadRow
	After      int64
	Next       int64 // after= of the next page; 0 = this is the last
	Limit      int
	Failed     int64 // FAILED rows in Postgres (channel or all), as of CountedAt
	CountedAt  time.Time
	Dead       int64 // the channel's Redis dead list; -1 = not shown
	Configured bool  // the filter names a configured channel
}

type deadRow struct {
	service.Summary
	Configured bool // replayable here: its channel is configured
}

// deadPage lists FAILED rows from Postgres (the truth; Redis' dead list is
// an index of it), oldest first, by keyset pages of any depth, holding its
// share of the bound on answers in flight (holdPage) until it is rendered.
func (s *server) deadPage(w http.ResponseWriter, r *http.Request, sess *session) {
	q := r.URL.Query()
	channel := q.Get("channel")
	if channel != "" && !config.NameRE.MatchString(channel) {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("channel %s is not a channel name (%s)", quote(channel), config.NameRE))
		return
	}
	after, err := queryInt(q, "after", 0, 0, 1<<62)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	limit, err := queryInt(q, "limit", deadLimitDefault, 1, deadLimitMax)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	// One more row than the page, to know whether another page follows.
	rows, ok := s.deadRows(w, r, wire.DLQQuery{Channel: channel, After: after, Limit: int(limit) + 1})
	if !ok {
		return
	}
	data := deadData{Channel: channel, After: after, Limit: int(limit), Dead: -1, Configured: s.configured(channel)}
	if len(rows) > int(limit) {
		rows = rows[:limit]
		data.Next = rows[len(rows)-1].ID
	}
	for _, n := range rows {
		data.Rows = append(data.Rows, deadRow{Summary: n, Configured: s.configured(n.Channel)})
	}
	// The counts are the sampler's (never counted on the page's time); a
	// part the overview could not read is left out.
	if ov, err := s.d.Ops.Overview(r.Context(), -1); err == nil {
		data.CountedAt = ov.CountsAt
		for _, c := range ov.Channels {
			if channel == "" || c.Name == channel {
				data.Failed += c.Failed
			}
			if data.Configured && c.Name == channel && ov.QueueErr(channel) == nil {
				data.Dead = c.Dead
			}
		}
	}
	s.render(w, r, http.StatusOK, "dead", sess, view{Title: "Dead letters", Nav: "dead", Data: data})
}

// deadRows reads q's dead letters as the list shows them: their summaries
// (service.Operations.DeadSummaries, never cut for size), holding the page's
// bound of the bound on answers in flight (httpguard.SummaryBytes a row)
// until it is written. When it cannot, it has answered and ok is false.
func (s *server) deadRows(w http.ResponseWriter, r *http.Request, q wire.DLQQuery) (rows []service.Summary, ok bool) {
	if _, ok := s.holdPage(w, r, q.Limit, httpguard.SummaryBytes); !ok {
		return nil, false
	}
	rows, err := s.d.Ops.DeadSummaries(r.Context(), q)
	if err != nil {
		s.failErr(w, r, "list dead letters", err)
		return nil, false
	}
	return rows, true
}

// deadReplay replays the row of the "one" button, the ticked rows, or every
// dead letter of the filtered channel (all configured channels without a
// filter), through service.Replay.
func (s *server) deadReplay(w http.ResponseWriter, r *http.Request, sess *session) {
	f := r.PostForm
	back := backURL(f)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), bulkTimeout)
	defer cancel()
	var sel wire.DLQSelector
	switch {
	case f.Get("one") != "":
		id, err := strconv.ParseInt(f.Get("one"), 10, 64)
		if err != nil || id <= 0 {
			s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%s is not a notification id", quote(f.Get("one"))))
			return
		}
		sel.IDs, back = []int64{id}, "/ui/n/"+strconv.FormatInt(id, 10)
	case f.Get("all") != "":
		channel := f.Get("channel")
		if channel != "" && !s.configured(channel) {
			s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("channel %s is not configured on this instance: its dead letters cannot be replayed (purge them, or configure the channel)", quote(channel)))
			return
		}
		sel.Channel, back = channel, deadURL(channel, "")
	default:
		channel := f.Get("channel")
		if channel != "" && !config.NameRE.MatchString(channel) {
			s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("channel %s is not a channel name (%s)", quote(channel), config.NameRE))
			return
		}
		ids, err := formIDs(f)
		if err != nil {
			s.fail(w, r, http.StatusBadRequest, err.Error())
			return
		}
		if len(ids) == 0 {
			s.sessions.setFlash(sess, &flash{Text: "Nothing selected: tick the rows to replay first.", Error: true})
			redirect(w, r, back)
			return
		}
		// The rows ticked on a page filtered by channel are that channel's:
		// an id of another one is skipped with the reason.
		sel.Channel, sel.IDs = channel, ids
	}
	res, err := s.d.Ops.Replay(ctx, sel)
	s.sessions.setFlash(sess, replayFlash(res, err))
	redirect(w, r, back)
}

// replayFlash says what a replay did in each store, and what it skipped.
func replayFlash(res wire.Replayed, err error) *flash {
	var b strings.Builder
	if err != nil {
		fmt.Fprintf(&b, "Replay stopped after %d: %v.", res.Replayed, err)
	} else {
		fmt.Fprintf(&b, "Replayed %d dead letter(s).", res.Replayed)
	}
	if n := len(res.Skipped); n > 0 {
		fmt.Fprintf(&b, " %d were not replayed: notification %d %s", n, res.Skipped[0].ID, res.Skipped[0].Reason)
		if n > 1 {
			fmt.Fprintf(&b, " (and %d more)", n-1)
		}
		b.WriteString(".")
	}
	if res.Warning != "" {
		// The service's words: replayed in Postgres, queueing in Redis
		// failed, the sweeper queues them within delivery.sweep_after.
		fmt.Fprintf(&b, " They are QUEUED in Postgres, but Redis failed: %s.", res.Warning)
	}
	return &flash{Text: b.String(), Error: err != nil || res.Warning != "" || len(res.Skipped) > 0}
}

type purgeData struct {
	Channel string
	After   string
	IDs     []int64
	All     bool
	About   int64 // FAILED rows of the channel as of the last sample (All)
}

// deadPurge deletes dead letters for good, after a confirmation page: the
// first POST only shows what would go; the confirmation POSTs again with
// confirm=yes.
func (s *server) deadPurge(w http.ResponseWriter, r *http.Request, sess *session) {
	f := r.PostForm
	channel, all := f.Get("channel"), f.Get("all") != ""
	if channel != "" && !config.NameRE.MatchString(channel) {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("channel %s is not a channel name (%s)", quote(channel), config.NameRE))
		return
	}
	ids, err := formIDs(f)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	back := backURL(f)
	switch {
	case all && channel == "":
		s.fail(w, r, http.StatusBadRequest, "Purge all needs a channel: filter the list by channel first (purging every channel at once is not offered).")
		return
	case !all && len(ids) == 0:
		s.sessions.setFlash(sess, &flash{Text: "Nothing selected: tick the rows to purge first.", Error: true})
		redirect(w, r, back)
		return
	}
	if f.Get("confirm") != "yes" {
		d := purgeData{Channel: channel, After: f.Get("after"), IDs: ids, All: all}
		if all {
			if ov, err := s.d.Ops.Overview(r.Context(), -1); err == nil {
				for _, c := range ov.Channels {
					if c.Name == channel {
						d.About = c.Failed
					}
				}
			}
		}
		s.render(w, r, http.StatusOK, "purge", sess, view{Title: "Purge dead letters?", Nav: "dead", Data: d})
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), bulkTimeout)
	defer cancel()
	sel := wire.DLQSelector{Channel: channel, IDs: ids} // another channel's id is skipped
	if all {
		sel = wire.DLQSelector{Channel: channel}
	}
	res, err := s.d.Ops.Purge(ctx, sel)
	if err != nil {
		s.sessions.setFlash(sess, &flash{Text: fmt.Sprintf("Purge stopped after %d: %v", res.Purged, err), Error: true})
	} else {
		text := fmt.Sprintf("Purged %d dead letter(s).", res.Purged)
		if len(res.Skipped) > 0 {
			text += fmt.Sprintf(" %d were not purged: notification %d %s.", len(res.Skipped), res.Skipped[0].ID, res.Skipped[0].Reason)
		}
		s.sessions.setFlash(sess, &flash{Text: text, Error: len(res.Skipped) > 0})
	}
	s.log.Info("dead letters purged", "channel", channel, "all", all, "purged", res.Purged)
	redirect(w, r, deadURL(channel, ""))
}

// formIDs reads the ticked rows (id=…, repeated).
func formIDs(f url.Values) ([]int64, error) {
	vals := f["id"]
	if len(vals) > maxSelected {
		return nil, fmt.Errorf("%d rows selected; at most %d at once (use the all-of-channel buttons for more)", len(vals), maxSelected)
	}
	ids := make([]int64, 0, len(vals))
	for _, v := range vals {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("%s is not a notification id", quote(v))
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// queryInt reads an integer query parameter in [lo, hi], def when absent.
func queryInt(q url.Values, name string, def, lo, hi int64) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s=%s: want a whole number from %d to %d", name, quote(v), lo, hi)
	}
	return n, nil
}

// backURL is the dead-letter page a form was posted from.
func backURL(f url.Values) string {
	limit, err := queryInt(f, "limit", deadLimitDefault, 1, deadLimitMax)
	if err != nil {
		limit = deadLimitDefault
	}
	return deadPageURL(f.Get("channel"), f.Get("after"), int(limit))
}

// deadURL is the dead-letter list filtered by channel at page after.
func deadURL(channel, after string) string {
	return deadPageURL(channel, after, deadLimitDefault)
}

// deadPageURL is deadURL with a page size.
func deadPageURL(channel, after string, limit int) string {
	q := url.Values{}
	if channel != "" {
		q.Set("channel", channel)
	}
	if after != "" && after != "0" {
		q.Set("after", after)
	}
	if limit != deadLimitDefault {
		q.Set("limit", strconv.Itoa(limit))
	}
	if len(q) == 0 {
		return "/ui/dead"
	}
	return "/ui/dead?" + q.Encode()
}
