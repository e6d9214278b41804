package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/notifyd/notifyd/core/config"
	"github.com/notifyd/notifyd/core/outbox"
)

const (
	deadLimitDefault = 50
	deadLimitMax     = 500
	// batchRows is how many rows one replay-all or purge-all step moves:
	// one keyset page, one Postgres statement, one Redis call per channel.
	batchRows = 1000
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
	outbox.Notification
	Configured bool // replayable here: its channel is configured
}

// deadPage lists FAILED rows from Postgres (the truth; Redis' dead list is
// an index of it), oldest first, by keyset pages of any depth.
func (s *server) deadPage(w http.ResponseWriter, r *http.Request, sess *session) {
	q := r.URL.Query()
	channel := q.Get("channel")
	if channel != "" && !config.NameRE.MatchString(channel) {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("channel %q is not a channel name (%s)", channel, config.NameRE))
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
	rows, err := s.d.Store.ListFailed(r.Context(), channel, after, int(limit)+1)
	if err != nil {
		s.failErr(w, r, "list dead letters", err)
		return
	}
	data := deadData{Channel: channel, After: after, Limit: int(limit), Dead: -1, Configured: s.configured(channel)}
	if len(rows) > int(limit) {
		rows = rows[:limit]
		data.Next = rows[len(rows)-1].ID
	}
	for _, n := range rows {
		data.Rows = append(data.Rows, deadRow{Notification: n, Configured: s.configured(n.Channel)})
	}
	counts, at, _ := s.sampler.counts()
	data.CountedAt = at
	for ch, byStatus := range counts {
		if channel == "" || ch == channel {
			data.Failed += byStatus[outbox.StatusFailed]
		}
	}
	if data.Configured {
		if st, err := s.d.Engine.Stats(r.Context(), channel); err == nil {
			data.Dead = st.Dead
		}
	}
	s.render(w, r, http.StatusOK, "dead", sess, view{Title: "Dead letters", Nav: "dead", Data: data})
}

// deadReplay replays the row of the "one" button, the ticked rows, or every
// dead letter of the filtered channel (all configured channels without a
// filter).
func (s *server) deadReplay(w http.ResponseWriter, r *http.Request, sess *session) {
	f := r.PostForm
	back := backURL(f)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), bulkTimeout)
	defer cancel()
	switch {
	case f.Get("one") != "":
		id, err := strconv.ParseInt(f.Get("one"), 10, 64)
		if err != nil || id <= 0 {
			s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a notification id", f.Get("one")))
			return
		}
		res, err := s.replaySelected(ctx, []int64{id})
		if err != nil {
			s.failErr(w, r, "replay dead letter", err)
			return
		}
		s.sessions.setFlash(sess, res.flash())
		redirect(w, r, "/ui/n/"+strconv.FormatInt(id, 10))
	case f.Get("all") != "":
		channels, err := s.replayChannels(f.Get("channel"))
		if err != nil {
			s.fail(w, r, http.StatusBadRequest, err.Error())
			return
		}
		res, err := s.replayAll(ctx, channels)
		if err != nil {
			s.sessions.setFlash(sess, &flash{Text: fmt.Sprintf("Replay stopped after %d: %v", res.replayed, err), Error: true})
		} else {
			s.sessions.setFlash(sess, res.flash())
		}
		redirect(w, r, deadURL(f.Get("channel"), ""))
	default:
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
		res, err := s.replaySelected(ctx, ids)
		if err != nil {
			s.failErr(w, r, "replay dead letters", err)
			return
		}
		s.sessions.setFlash(sess, res.flash())
		redirect(w, r, back)
	}
}

// replayChannels is the channels a replay-all covers: the filtered one, or
// every configured channel. A channel that is not configured has nobody to
// deliver it, so its rows are not replayed.
func (s *server) replayChannels(channel string) ([]string, error) {
	if channel == "" {
		return s.channels, nil
	}
	if !s.configured(channel) {
		return nil, fmt.Errorf("channel %q is not configured on this instance: its dead letters cannot be replayed (purge them, or configure the channel)", channel)
	}
	return []string{channel}, nil
}

// replayResult says what a replay did in each store.
type replayResult struct {
	replayed     int   // FAILED → QUEUED in Postgres
	notFailed    int   // asked for, but not FAILED (any more) or gone
	unconfigured int   // FAILED on a channel this instance does not have
	redisErr     error // the first Redis error after the Postgres commit
	sweep        time.Duration
}

func (res replayResult) flash() *flash {
	var b strings.Builder
	fmt.Fprintf(&b, "Replayed %d dead letter(s).", res.replayed)
	if res.notFailed > 0 {
		fmt.Fprintf(&b, " %d were not replayed: no longer FAILED.", res.notFailed)
	}
	if res.unconfigured > 0 {
		fmt.Fprintf(&b, " %d were not replayed: their channel is not configured here.", res.unconfigured)
	}
	if res.redisErr != nil {
		fmt.Fprintf(&b, " They are QUEUED in Postgres, but Redis failed (%v): the sweeper queues them again within %s.", res.redisErr, res.sweep)
	}
	return &flash{Text: b.String(), Error: res.redisErr != nil || res.notFailed+res.unconfigured > 0}
}

// replaySelected replays the FAILED rows among ids whose channel is
// configured here (a replayed row of an unknown channel would wait in a
// queue nobody reads), and says what it left alone.
func (s *server) replaySelected(ctx context.Context, ids []int64) (replayResult, error) {
	st, err := s.d.Store.Statuses(ctx, ids)
	if err != nil {
		return replayResult{}, err
	}
	var ok []int64
	var notFailed, unconfigured int
	for _, id := range ids {
		cur, found := st[id]
		switch {
		case !found || cur.Status != outbox.StatusFailed:
			notFailed++
		case !s.configured(cur.Channel):
			unconfigured++
		default:
			ok = append(ok, id)
		}
	}
	res, err := s.replayIDs(ctx, ok)
	res.notFailed += notFailed + len(ok) - res.replayed
	res.unconfigured = unconfigured
	return res, err
}

// replayIDs replays ids: Postgres first (FAILED → QUEUED, attempts reset),
// then Redis (out of the dead list, onto ready). A crash or a Redis error
// between the two loses nothing: the rows are QUEUED in Postgres, and the
// sweeper pushes QUEUED rows it does not see moving.
func (s *server) replayIDs(ctx context.Context, ids []int64) (replayResult, error) {
	res := replayResult{sweep: s.d.Config.Delivery.SweepAfter}
	if len(ids) == 0 {
		return res, nil
	}
	qs, err := s.d.Store.Replay(ctx, ids)
	if err != nil {
		return res, err
	}
	res.replayed = len(qs)
	res.redisErr = s.d.Engine.Revive(ctx, qs)
	if res.redisErr != nil {
		s.log.Warn("replay: rows QUEUED in Postgres, Redis push failed; the sweeper will push them",
			"rows", len(qs), "error", res.redisErr)
	}
	return res, nil
}

// replayAll replays every FAILED row of channels in keyset passes: each row
// is visited once, so a row that fails again during the pass is not
// replayed twice and the pass always ends.
func (s *server) replayAll(ctx context.Context, channels []string) (replayResult, error) {
	total := replayResult{sweep: s.d.Config.Delivery.SweepAfter}
	for _, ch := range channels {
		for after := int64(0); ; {
			rows, err := s.d.Store.ListFailed(ctx, ch, after, batchRows)
			if err != nil {
				return total, err
			}
			if len(rows) == 0 {
				break
			}
			res, err := s.replayIDs(ctx, notificationIDs(rows))
			total.replayed += res.replayed
			if total.redisErr == nil {
				total.redisErr = res.redisErr
			}
			if err != nil {
				return total, err
			}
			if len(rows) < batchRows {
				break
			}
			after = rows[len(rows)-1].ID
		}
	}
	return total, nil
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
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("channel %q is not a channel name (%s)", channel, config.NameRE))
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
			counts, _, _ := s.sampler.counts()
			d.About = counts[channel][outbox.StatusFailed]
		}
		s.render(w, r, http.StatusOK, "purge", sess, view{Title: "Purge dead letters?", Nav: "dead", Data: d})
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), bulkTimeout)
	defer cancel()
	var n int64
	if all {
		n, err = s.purgeChannel(ctx, channel)
	} else {
		n, err = s.purgeIDs(ctx, ids)
	}
	if err != nil {
		s.sessions.setFlash(sess, &flash{Text: fmt.Sprintf("Purge stopped after %d: %v", n, err), Error: true})
	} else {
		s.sessions.setFlash(sess, &flash{Text: fmt.Sprintf("Purged %d dead letter(s).", n)})
	}
	s.log.Info("dead letters purged", "channel", channel, "all", all, "purged", n)
	redirect(w, r, deadURL(channel, ""))
}

// purgeIDs deletes the given FAILED rows, then drops them from their
// channels' dead lists. A Redis failure only leaves stale ids in a dead
// list, which nothing reads as the truth.
func (s *server) purgeIDs(ctx context.Context, ids []int64) (int64, error) {
	st, err := s.d.Store.Statuses(ctx, ids)
	if err != nil {
		return 0, err
	}
	n, err := s.d.Store.PurgeFailed(ctx, "", ids)
	if err != nil {
		return 0, err
	}
	byChannel := map[string][]int64{}
	for id, cur := range st {
		if cur.Status == outbox.StatusFailed {
			byChannel[cur.Channel] = append(byChannel[cur.Channel], id)
		}
	}
	for ch, chIDs := range byChannel {
		if err := s.d.Engine.DeadRemove(ctx, ch, chIDs); err != nil {
			s.log.Warn("purge: drop ids from the Redis dead list", "channel", ch, "error", err)
		}
	}
	return n, nil
}

// purgeChannel deletes every FAILED row of channel in keyset passes of
// bounded transactions.
func (s *server) purgeChannel(ctx context.Context, channel string) (int64, error) {
	var total int64
	for after := int64(0); ; {
		rows, err := s.d.Store.ListFailed(ctx, channel, after, batchRows)
		if err != nil || len(rows) == 0 {
			return total, err
		}
		ids := notificationIDs(rows)
		n, err := s.d.Store.PurgeFailed(ctx, channel, ids)
		total += n
		if err != nil {
			return total, err
		}
		if err := s.d.Engine.DeadRemove(ctx, channel, ids); err != nil {
			s.log.Warn("purge: drop ids from the Redis dead list", "channel", channel, "error", err)
		}
		if len(rows) < batchRows {
			return total, nil
		}
		after = rows[len(rows)-1].ID
	}
}

func notificationIDs(rows []outbox.Notification) []int64 {
	ids := make([]int64, len(rows))
	for i := range rows {
		ids[i] = rows[i].ID
	}
	return ids
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
			return nil, fmt.Errorf("%q is not a notification id", v)
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
		return 0, fmt.Errorf("%s=%q: want a whole number from %d to %d", name, v, lo, hi)
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
