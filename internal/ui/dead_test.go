package ui_test

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
)

var deadRowRE = regexp.MustCompile(`<tr id="dead-(\d+)"`)

// deadIDs are the dead-letter rows a page shows, in order.
func deadIDs(t *testing.T, body string) []int64 {
	t.Helper()
	var ids []int64
	for _, m := range deadRowRE.FindAllStringSubmatch(body, -1) {
		id, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

var nextRE = regexp.MustCompile(`href="(/ui/dead\?[^"]*)" id="next-page"`)

// redisIDs reads a Redis list of ids.
func (b *bundle) redisIDs(key string) []int64 {
	b.t.Helper()
	vals, err := b.rc.LRange(b.ctx, key, 0, -1).Result()
	if err != nil {
		b.t.Fatal(err)
	}
	ids := make([]int64, len(vals))
	for i, v := range vals {
		ids[i], _ = strconv.ParseInt(v, 10, 64)
	}
	return ids
}

func (b *bundle) readyKey(channel string) string { return b.prefix + ":{ch:" + channel + "}:ready" }

// flash follows a POST's redirect and returns the page's flash message.
func (c *client) flash(res response) string {
	c.t.Helper()
	if res.status != http.StatusSeeOther {
		c.t.Fatalf("status %d, want 303; body:\n%s", res.status, res.body)
	}
	page := c.get(res.header.Get("Location"))
	m := regexp.MustCompile(`(?s)<div id="flash"[^>]*>(.*?)</div>`).FindStringSubmatch(page.body)
	if m == nil {
		c.t.Fatalf("no flash message on %s", res.header.Get("Location"))
	}
	return m[1]
}

func TestUI_DeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t, withChannels("hooks", "digest"))
	// Paused: replayed rows wait in Redis' ready list, where the test can
	// see them, instead of being delivered at once.
	for _, ch := range []string{"hooks", "digest"} {
		if err := b.engine.Pause(b.ctx, ch, "test"); err != nil {
			t.Fatal(err)
		}
	}
	hooks := b.forceFailed("hooks", 2100) // more than one replay/purge batch
	digest := b.forceFailed("digest", 5)
	c, csrf := b.loggedIn()

	t.Run("pages through every dead letter of a channel", func(t *testing.T) {
		got := pageDead(t, c, "/ui/dead?channel=hooks&limit=500")
		if !slices.Equal(got, hooks) {
			t.Errorf("paged %d ids (first %v), want the %d of hooks, oldest first", len(got), got[:min(5, len(got))], len(hooks))
		}
	})
	t.Run("every channel, with the last error", func(t *testing.T) {
		res := c.get("/ui/dead?limit=25")
		ids := deadIDs(t, res.body)
		if len(ids) != 25 || ids[0] != hooks[0] {
			t.Errorf("first page %v, want 25 rows from %d", ids, hooks[0])
		}
		if !strings.Contains(res.body, "test: forced into FAILED") {
			t.Error("the page does not show last_error")
		}
		res = c.get("/ui/dead?channel=digest")
		if got := deadIDs(t, res.body); !slices.Equal(got, digest) {
			t.Errorf("digest page %v, want %v", got, digest)
		}
	})
	t.Run("bad filters are named", func(t *testing.T) {
		for path, want := range map[string]string{
			"/ui/dead?channel=no%20such":  "not a channel name",
			"/ui/dead?after=-1":           "after=",
			"/ui/dead?limit=100000":       "limit=",
			"/ui/dead?after=12x":          "after=",
			"/ui/jobs?state=BORED":        "state=",
			"/ui/lookup?q=1&by=telepathy": "by=",
			"/ui/n/abc":                   "not a notification id",
		} {
			res := c.get(path)
			if res.status != http.StatusBadRequest || !strings.Contains(res.body, want) {
				t.Errorf("%s: status %d, want 400 naming %q", path, res.status, want)
			}
		}
	})

	t.Run("replay selected", func(t *testing.T) {
		picked := hooks[:3]
		sent := b.send("digest", "someone@example.com", "") // not FAILED
		form := url.Values{"csrf": {csrf}, "channel": {"hooks"}}
		for _, id := range append(slices.Clone(picked), sent, 1<<40) {
			form.Add("id", strconv.FormatInt(id, 10))
		}
		msg := c.flash(c.post("/ui/dead/replay", form))
		if !strings.Contains(msg, "Replayed 3") || !strings.Contains(msg, "2 were not replayed") {
			t.Errorf("flash %q, want 3 replayed and 2 not", msg)
		}
		for _, id := range picked {
			n, err := b.store.Get(b.ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if n.Status != outbox.StatusQueued || n.AttemptCount != 0 {
				t.Errorf("row %d is %s with %d attempts, want QUEUED with 0", id, n.Status, n.AttemptCount)
			}
		}
		ready, dead := b.redisIDs(b.readyKey("hooks")), b.redisIDs(b.deadKey("hooks"))
		for _, id := range picked {
			if !slices.Contains(ready, id) {
				t.Errorf("replayed %d is not in Redis' ready list", id)
			}
			if slices.Contains(dead, id) {
				t.Errorf("replayed %d is still in Redis' dead list", id)
			}
		}
	})
	t.Run("replay one goes to its page", func(t *testing.T) {
		id := hooks[3]
		res := c.post("/ui/dead/replay", url.Values{"csrf": {csrf}, "one": {strconv.FormatInt(id, 10)}})
		if loc := res.header.Get("Location"); loc != "/ui/n/"+strconv.FormatInt(id, 10) {
			t.Errorf("redirected to %q, want the notification's page", loc)
		}
		if got := b.status(id); got != outbox.StatusQueued {
			t.Errorf("row %d is %s, want QUEUED", id, got)
		}
	})
	t.Run("replay all of a channel", func(t *testing.T) {
		msg := c.flash(c.post("/ui/dead/replay", url.Values{"csrf": {csrf}, "channel": {"hooks"}, "all": {"1"}}))
		if want := "Replayed " + strconv.Itoa(len(hooks)-4); !strings.Contains(msg, want) {
			t.Errorf("flash %q, want %q", msg, want)
		}
		var failed int
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM notifications WHERE channel = 'hooks' AND status = 'FAILED'`).Scan(&failed); err != nil {
			t.Fatal(err)
		}
		if failed != 0 {
			t.Errorf("%d hooks rows still FAILED", failed)
		}
		if n, _ := b.rc.LLen(b.ctx, b.deadKey("hooks")).Result(); n != 0 {
			t.Errorf("Redis' dead list of hooks holds %d ids, want 0", n)
		}
		if n, _ := b.rc.LLen(b.ctx, b.readyKey("hooks")).Result(); n != int64(len(hooks)) {
			t.Errorf("Redis' ready list of hooks holds %d ids, want %d", n, len(hooks))
		}
		if got := b.status(digest[0]); got != outbox.StatusFailed {
			t.Errorf("replaying hooks touched digest: %s", got)
		}
	})
	t.Run("replay all of a channel that is not configured", func(t *testing.T) {
		res := c.post("/ui/dead/replay", url.Values{"csrf": {csrf}, "channel": {"retired"}, "all": {"1"}})
		if res.status != http.StatusBadRequest || !strings.Contains(res.body, "not configured") {
			t.Errorf("status %d, want 400 saying the channel is not configured", res.status)
		}
	})

	// A form posted from a page filtered by channel acts on that channel's
	// rows only. Before, the form's channel was ignored for ticked ids:
	// another channel's dead letters named in it were replayed, and purged
	// for good, under a page and a confirmation saying hooks.
	t.Run("selected ids of another channel are skipped, not replayed or purged", func(t *testing.T) {
		other := strconv.FormatInt(digest[2], 10)
		msg := c.flash(c.post("/ui/dead/replay", url.Values{"csrf": {csrf}, "channel": {"hooks"}, "id": {other}}))
		if !strings.Contains(msg, "Replayed 0") || !strings.Contains(msg, `on channel &#34;digest&#34;, not &#34;hooks&#34;`) {
			t.Errorf("replay flash %q, want 0 replayed, the row skipped as digest's", msg)
		}
		msg = c.flash(c.post("/ui/dead/purge", url.Values{"csrf": {csrf}, "channel": {"hooks"}, "id": {other}, "confirm": {"yes"}}))
		if !strings.Contains(msg, "Purged 0") || !strings.Contains(msg, "not &#34;hooks&#34;") {
			t.Errorf("purge flash %q, want 0 purged, the row skipped as digest's", msg)
		}
		if got := b.status(digest[2]); got != outbox.StatusFailed {
			t.Errorf("digest's row %d is %s after a hooks form named it, want FAILED", digest[2], got)
		}
		res := c.post("/ui/dead/replay", url.Values{"csrf": {csrf}, "channel": {"no such"}, "id": {other}})
		if res.status != http.StatusBadRequest || !strings.Contains(res.body, "not a channel name") {
			t.Errorf("replay with channel %q: status %d, want 400 naming it", "no such", res.status)
		}
	})
	t.Run("purge selected asks first", func(t *testing.T) {
		form := url.Values{"csrf": {csrf}, "channel": {"digest"}, "id": {strconv.FormatInt(digest[0], 10), strconv.FormatInt(digest[1], 10)}}
		res := c.post("/ui/dead/purge", form)
		if res.status != http.StatusOK || !strings.Contains(res.body, `id="confirm-purge"`) || !strings.Contains(res.body, "2 selected") {
			t.Fatalf("first POST: status %d, want the confirmation page for 2 rows", res.status)
		}
		if got := b.status(digest[0]); got != outbox.StatusFailed {
			t.Fatalf("the confirmation page changed the row: %s", got)
		}
		form.Set("confirm", "yes")
		if msg := c.flash(c.post("/ui/dead/purge", form)); !strings.Contains(msg, "Purged 2") {
			t.Errorf("flash %q, want Purged 2", msg)
		}
		for _, id := range digest[:2] {
			if _, err := b.store.Get(b.ctx, id); err == nil {
				t.Errorf("row %d survived the purge", id)
			}
			if slices.Contains(b.redisIDs(b.deadKey("digest")), id) {
				t.Errorf("purged %d is still in Redis' dead list", id)
			}
		}
	})
	t.Run("purge all needs a channel", func(t *testing.T) {
		res := c.post("/ui/dead/purge", url.Values{"csrf": {csrf}, "all": {"1"}, "confirm": {"yes"}})
		if res.status != http.StatusBadRequest || !strings.Contains(res.body, "needs a channel") {
			t.Errorf("status %d, want 400 asking for a channel", res.status)
		}
	})
	t.Run("purge all of a channel", func(t *testing.T) {
		form := url.Values{"csrf": {csrf}, "channel": {"digest"}, "all": {"1"}}
		if res := c.post("/ui/dead/purge", form); !strings.Contains(res.body, "Every dead letter of channel") {
			t.Fatalf("first POST: status %d, want the confirmation page", res.status)
		}
		form.Set("confirm", "yes")
		if msg := c.flash(c.post("/ui/dead/purge", form)); !strings.Contains(msg, "Purged 3") {
			t.Errorf("flash %q, want Purged 3", msg)
		}
		if n, _ := b.rc.LLen(b.ctx, b.deadKey("digest")).Result(); n != 0 {
			t.Errorf("Redis' dead list of digest holds %d ids, want 0", n)
		}
	})
	t.Run("nothing selected", func(t *testing.T) {
		for _, path := range []string{"/ui/dead/replay", "/ui/dead/purge"} {
			if msg := c.flash(c.post(path, url.Values{"csrf": {csrf}})); !strings.Contains(msg, "Nothing selected") {
				t.Errorf("%s: flash %q, want Nothing selected", path, msg)
			}
		}
	})
}

// TestUI_ReplayRedisDown replays while Redis is down: the row is QUEUED in
// Postgres, the page says the sweeper will queue it, and once Redis is back
// the row is delivered — nothing is lost between the two stores.
func TestUI_ReplayRedisDown(t *testing.T) {
	t.Parallel()
	rs := testenv.StartRedis(t)
	b := setup(t, withRedis(rs.URL))
	id := b.forceFailed(testChannel, 1)[0]
	c, csrf := b.loggedIn()

	rs.Stop()
	res := c.post("/ui/dead/replay", url.Values{"csrf": {csrf}, "one": {strconv.FormatInt(id, 10)}})
	msg := c.flash(res)
	if !strings.Contains(msg, "QUEUED in Postgres, but Redis failed") || !strings.Contains(msg, "sweeper") {
		t.Errorf("flash %q, want it to say Redis failed and the sweeper will queue it", msg)
	}
	if got := b.status(id); got != outbox.StatusQueued {
		t.Fatalf("row is %s, want QUEUED (Postgres first)", got)
	}
	swept, err := b.store.Sweep(b.ctx, time.Now().Add(time.Hour), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(swept, func(q outbox.Queued) bool { return q.ID == id }) {
		t.Errorf("the sweeper would not find row %d: %v", id, swept)
	}

	// A Redis that comes back empty is a new epoch: the engine resyncs from
	// Postgres and delivers the row.
	rs.Start()
	b.waitStatus(id, outbox.StatusSent, 30*time.Second)
}

// Run with:
//
//	go test ./internal/ui -run '^$' -bench . -benchtime 5x
//
// BenchmarkUI_ReplayAll replays a channel's whole dead-letter queue through
// the dashboard (keyset passes of 1,000: Postgres, then Redis) and reports
// rows/s. The channel is paused so that delivery does not compete.
func BenchmarkUI_ReplayAll(b *testing.B) {
	const rows = 20000
	bb := setup(b)
	if err := bb.engine.Pause(bb.ctx, testChannel, "benchmark"); err != nil {
		b.Fatal(err)
	}
	c, csrf := bb.loggedIn()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if _, err := bb.db.Pool.Exec(bb.ctx, `TRUNCATE notifications`); err != nil {
			b.Fatal(err)
		}
		if err := bb.rc.Del(bb.ctx, bb.readyKey(testChannel), bb.deadKey(testChannel), bb.prefix+":{ch:"+testChannel+"}:members").Err(); err != nil {
			b.Fatal(err)
		}
		bb.forceFailed(testChannel, rows)
		b.StartTimer()
		res := c.post("/ui/dead/replay", url.Values{"csrf": {csrf}, "channel": {testChannel}, "all": {"1"}})
		if res.status != http.StatusSeeOther {
			b.Fatalf("status %d", res.status)
		}
	}
	b.StopTimer()
	if n, _ := bb.rc.LLen(bb.ctx, bb.readyKey(testChannel)).Result(); n != rows {
		b.Fatalf("ready list holds %d, want %d", n, rows)
	}
	b.ReportMetric(float64(b.N*rows)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkUI_DeadPage renders a 500-row dead-letter page deep in a
// 100,000-row queue (keyset: the depth costs nothing).
func BenchmarkUI_DeadPage(b *testing.B) {
	bb := setup(b)
	if err := bb.engine.Pause(bb.ctx, testChannel, "benchmark"); err != nil {
		b.Fatal(err)
	}
	ids := bb.forceFailed(testChannel, 100000)
	c, _ := bb.loggedIn()
	path := "/ui/dead?channel=" + testChannel + "&limit=500&after=" + strconv.FormatInt(ids[90000], 10)
	b.ResetTimer()
	for range b.N {
		if res := c.get(path); res.status != http.StatusOK {
			b.Fatalf("status %d", res.status)
		}
	}
}

// TestUI_DeadLetters_pageCutBySize: dead letters with large payloads (24 of
// 1 MB, past the 16 MiB a page reads) are paged through to the last one.
// Before, a page the store cut for its size was taken for the last page:
// no "Next page" link, and the dead letters after it could not be reached.
func TestUI_DeadLetters_pageCutBySize(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rows, err := b.db.Pool.Query(b.ctx, `
INSERT INTO notifications (channel, recipient, payload, status, attempts, last_error)
SELECT $1, 'big-' || g, jsonb_build_object('text', repeat('x', 1000000)), 'FAILED', 1, 'test: forced into FAILED'
  FROM generate_series(1, 24) g
RETURNING id`, testChannel)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	c, _ := b.loggedIn()
	got := pageDead(t, c, "/ui/dead?channel="+testChannel)
	slices.Sort(ids)
	if !slices.Equal(got, ids) {
		t.Errorf("paged through %d dead letters, want all %d", len(got), len(ids))
	}
}

// pageDead follows the dead-letter list's "Next page" links from path and
// returns the ids it listed, in order (at most 10 pages).
func pageDead(t *testing.T, c *client, path string) []int64 {
	t.Helper()
	var got []int64
	for pages := 0; path != ""; pages++ {
		if pages == 10 {
			t.Fatal("more than 10 pages")
		}
		res := c.get(path)
		if res.status != http.StatusOK {
			t.Fatalf("%s: status %d", path, res.status)
		}
		got = append(got, deadIDs(t, res.body)...)
		path = ""
		if m := nextRE.FindStringSubmatch(res.body); m != nil {
			path = strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	return got
}
