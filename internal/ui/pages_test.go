package ui_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/queue"
)

func TestUI_Lookup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, csrf := b.loggedIn()
	id := b.send(testChannel, "bob@example.com", "order:42:shipped")
	b.waitStatus(id, outbox.StatusSent, 15*time.Second)
	var many []outbox.NewNotification
	for i := range 60 {
		many = append(many, outbox.NewNotification{Channel: testChannel, Recipient: "carol@example.com",
			Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), DueAt: time.Now().Add(time.Hour)})
	}
	ins, err := b.store.Insert(b.ctx, many)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("NUL, invalid UTF-8 and an over-long recipient are a 400 page, not a database error", func(t *testing.T) {
		for _, q := range []string{"q=a%00b", "q=%FF%FE&by=key", "q=x&by=%FF", "q=" + strings.Repeat("r", 1100) + "&by=recipient"} {
			res := c.get("/ui/lookup?" + q)
			if res.status < 400 || res.status >= 500 || strings.Contains(res.body, "SQLSTATE") {
				t.Errorf("%.40s: status %d, want a 4xx page without database text", q, res.status)
			}
		}
		res := c.post("/ui/dead/replay", url.Values{"csrf": {csrf}, "channel": {"a\x00b"}})
		if res.status != http.StatusBadRequest {
			t.Errorf("replay form with a NUL: status %d, want 400", res.status)
		}
	})
	t.Run("by id and by key go to the notification", func(t *testing.T) {
		want := "/ui/n/" + strconv.FormatInt(id, 10)
		for _, q := range []string{"q=" + strconv.FormatInt(id, 10), "q=" + strconv.FormatInt(id, 10) + "&by=id", "q=order:42:shipped", "q=order:42:shipped&by=key"} {
			res := c.get("/ui/lookup?" + q)
			if res.status != http.StatusSeeOther || res.header.Get("Location") != want {
				t.Errorf("%s: status %d Location %q, want 303 to %s", q, res.status, res.header.Get("Location"), want)
			}
		}
	})
	t.Run("by recipient, newest first, in pages", func(t *testing.T) {
		res := c.get("/ui/lookup?q=carol@example.com")
		rows := regexp.MustCompile(`<tr id="result-(\d+)"`).FindAllStringSubmatch(res.body, -1)
		if res.status != http.StatusOK || len(rows) != 50 {
			t.Fatalf("status %d, %d rows, want 200 and a page of 50", res.status, len(rows))
		}
		if first := rows[0][1]; first != strconv.FormatInt(ins[59].ID, 10) {
			t.Errorf("first row %s, want the newest, %d", first, ins[59].ID)
		}
		older := regexp.MustCompile(`href="(/ui/lookup\?[^"]*before=[^"]*)">Older`).FindStringSubmatch(res.body)
		if older == nil {
			t.Fatal("no link to the older page")
		}
		res = c.get(strings.ReplaceAll(older[1], "&amp;", "&"))
		if rows := regexp.MustCompile(`<tr id="result-`).FindAllString(res.body, -1); len(rows) != 10 {
			t.Errorf("older page has %d rows, want 10", len(rows))
		}
	})
	t.Run("nothing found says what was looked for", func(t *testing.T) {
		res := c.get("/ui/lookup?q=nobody@example.com")
		if res.status != http.StatusNotFound || !strings.Contains(res.body, "nobody@example.com") {
			t.Errorf("status %d, want 404 naming the query", res.status)
		}
		res = c.get("/ui/lookup?q=abc&by=id")
		if res.status != http.StatusBadRequest || !strings.Contains(res.body, "not a notification id") {
			t.Errorf("by=id abc: status %d, want 400", res.status)
		}
		if res := c.get("/ui/n/999999999"); res.status != http.StatusNotFound {
			t.Errorf("unknown notification: status %d, want 404", res.status)
		}
	})
	t.Run("notification page with history", func(t *testing.T) {
		res := c.get("/ui/n/" + strconv.FormatInt(id, 10))
		for _, want := range []string{`data-status="SENT"`, "bob@example.com", "order:42:shipped", "SUCCESS", `id="attempts"`, "Today&#39;s quiz is up"} {
			if !strings.Contains(res.body, want) {
				t.Errorf("the page lacks %q", want)
			}
		}
		if strings.Contains(res.body, "data-refresh") {
			t.Error("a SENT notification's page refreshes itself")
		}
		res = c.get("/ui/n/" + strconv.FormatInt(ins[0].ID, 10))
		if !strings.Contains(res.body, `data-refresh="2"`) || !strings.Contains(res.body, `id="cancel"`) {
			t.Error("a PENDING notification's page neither refreshes nor offers Cancel")
		}
	})
	t.Run("notification page shows its receipt", func(t *testing.T) {
		if strings.Contains(c.get("/ui/n/"+strconv.FormatInt(id, 10)).body, `id="receipt"`) {
			t.Error("the page shows a receipt before there is one")
		}
		_, err := b.store.ApplyReceipts(b.ctx, testChannel, []outbox.Receipt{{
			NotificationID: id, Outcome: outbox.ReceiptFailedAfterSend, Detail: "handset <off>", ProviderCode: "E-9",
		}})
		if err != nil {
			t.Fatal(err)
		}
		res := c.get("/ui/n/" + strconv.FormatInt(id, 10))
		for _, want := range []string{`id="receipt"`, `data-outcome="FAILED_AFTER_SEND"`, "handset &lt;off&gt;", "E-9", `id="receipt-row"`, `data-status="SENT"`} {
			if !strings.Contains(res.body, want) {
				t.Errorf("the page lacks %q", want)
			}
		}
	})
	t.Run("a replayed notification's history says where attempts start again", func(t *testing.T) {
		// A channel no engine runs here: the test claims and settles by hand.
		res, err := b.store.Insert(b.ctx, []outbox.NewNotification{{Channel: "offline", Recipient: "dan", Payload: json.RawMessage(`{}`)}})
		if err != nil {
			t.Fatal(err)
		}
		rid := res[0].ID
		attempt := func(result outbox.Result, msg string) {
			t.Helper()
			cl, err := b.store.Claim(b.ctx, []int64{rid}, time.Now().Add(time.Hour), time.Minute)
			if err != nil || len(cl) != 1 || cl[0].Kind != outbox.ClaimSend {
				t.Fatalf("claim: %+v, %v", cl, err)
			}
			if _, err := b.store.Settle(b.ctx, []outbox.Settlement{{ID: rid, Attempt: cl[0].Attempt, Result: result, Error: msg}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := b.store.Relay(b.ctx, time.Now().Add(time.Hour), 1000); err != nil {
			t.Fatal(err)
		}
		attempt(outbox.ResultFailed, "HTTP 400: unknown recipient")
		if _, err := b.store.Replay(b.ctx, []int64{rid}); err != nil {
			t.Fatal(err)
		}
		attempt(outbox.ResultSent, "")
		page := c.get("/ui/n/" + strconv.FormatInt(rid, 10)).body
		i, j := strings.Index(page, "unknown recipient"), strings.Index(page, `class="replayed"`)
		if i < 0 || j < i || !strings.Contains(page[j:], "SUCCESS") {
			t.Errorf("the page does not show the failed attempt, the replay, then the success in that order")
		}
		if strings.Contains(c.get("/ui/n/"+strconv.FormatInt(id, 10)).body, `class="replayed"`) {
			t.Error("a notification never replayed shows a replay")
		}
	})
	t.Run("cancel and replay from the notification page", func(t *testing.T) {
		path := "/ui/n/" + strconv.FormatInt(ins[0].ID, 10)
		if msg := c.flash(c.post(path+"/cancel", url.Values{"csrf": {csrf}})); msg != "Cancelled." {
			t.Errorf("cancel: flash %q", msg)
		}
		if got := b.status(ins[0].ID); got != outbox.StatusCancelled {
			t.Errorf("row is %s, want CANCELLED", got)
		}
		if msg := c.flash(c.post(path+"/cancel", url.Values{"csrf": {csrf}})); !strings.Contains(msg, "Already cancelled") {
			t.Errorf("second cancel: flash %q", msg)
		}
		if msg := c.flash(c.post(path+"/replay", url.Values{"csrf": {csrf}})); !strings.Contains(msg, "is CANCELLED, not FAILED") {
			t.Errorf("replay of a CANCELLED row: flash %q", msg)
		}
	})
}

// TestUI_Jobs: the jobs page shows jobs in every shape. The daemon runs no
// schedule and no job here (withStillJobs), so the jobs the test writes, a
// stuck one and a pending one among them, stay as written.
func TestUI_Jobs(t *testing.T) {
	t.Parallel()
	b := setup(t, withSchedule(), withStillJobs())
	c, _ := b.loggedIn()
	b.jobs()

	res := c.get("/ui/jobs")
	if res.status != http.StatusOK {
		t.Fatalf("status %d", res.status)
	}
	row := func(id int) string {
		m := regexp.MustCompile(fmt.Sprintf(`(?s)<tr id="job-%d"[^>]*>.*?</tr>`, id)).FindString(res.body)
		if m == "" {
			t.Fatalf("no row for job %d", id)
		}
		return m
	}
	for _, tc := range []struct {
		id    int
		want  []string
		stuck bool
	}{
		{1, []string{"DONE", `value="120000" max="120000"`, "312 skipped", "120000"}, false},
		{2, []string{"RUNNING", `value="48000" max="120000"`, "(40%)", "48211", "notifyd-a-1f3e"}, false},
		{3, []string{"RUNNING", `value="9000" max="25000"`, "(36%)", "9120", "heartbeat 14m"}, true},
		{4, []string{"PENDING", "audience not counted yet"}, false},
	} {
		r := row(tc.id)
		for _, w := range tc.want {
			if !strings.Contains(r, w) {
				t.Errorf("job %d row lacks %q:\n%s", tc.id, w, r)
			}
		}
		if got := strings.Contains(r, `class="stuck"`); got != tc.stuck {
			t.Errorf("job %d flagged stuck: %v, want %v", tc.id, got, tc.stuck)
		}
	}
	if !strings.Contains(res.body, `id="stuck-summary"`) {
		t.Error("no stuck-job warning")
	}
	if !strings.Contains(res.body, "0 8 * * *") || !strings.Contains(res.body, "KST") {
		t.Error("the schedule with its next fire time in its own zone is missing")
	}
	res = c.get("/ui/jobs?kind=campaign&state=PENDING")
	if strings.Count(res.body, `<tr id="job-`) != 1 || !strings.Contains(res.body, `id="job-4"`) {
		t.Errorf("filtered list: want only job 4")
	}
}

func TestUI_Channels(t *testing.T) {
	t.Parallel()
	b := setup(t, withChannels("hooks", "digest"))
	if err := b.engine.Pause(b.ctx, "digest", "provider maintenance"); err != nil {
		t.Fatal(err)
	}
	q := queue.New(b.rc, b.prefix)
	if _, err := q.Push(b.ctx, "digest", []queue.Item{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 4, Due: time.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	b.forceFailed("hooks", 2)
	c, _ := b.loggedIn()

	// The chart needs two samples; the sampler spaces them by at least the
	// interval (more when counting is slow on this busy machine: beside the
	// suite and two CPU burners 15 s did not see two, rehearsal 65). The
	// wait ends as soon as both charts are drawn.
	var res response
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		res = c.get("/ui/")
		if strings.Count(res.body, "<svg") >= 2 || time.Now().After(deadline) {
			break
		}
	}
	if res.status != http.StatusOK || !strings.Contains(res.body, `data-refresh="5"`) {
		t.Fatalf("status %d, want 200 and a live page", res.status)
	}
	row := func(id string) string {
		m := regexp.MustCompile(`(?s)<tr id="` + id + `">.*?</tr>`).FindString(res.body)
		if m == "" {
			t.Fatalf("no row %s", id)
		}
		return m
	}
	num := regexp.MustCompile(`<td class="num">(?:<a [^>]*>)?(\d+)`)
	depth := func(r string) []string {
		var out []string
		for _, m := range num.FindAllStringSubmatch(r, -1) {
			out = append(out, m[1])
		}
		return out
	}
	digest := row("channel-digest")
	if got := strings.Join(depth(digest), " "); got != "3 1 0 0" {
		t.Errorf("digest ready/delayed/processing/dead %q, want 3 1 0 0", got)
	}
	if !strings.Contains(digest, "paused") || !strings.Contains(digest, "provider maintenance") {
		t.Errorf("digest row does not say it is paused and why:\n%s", digest)
	}
	hooks := row("channel-hooks")
	if got := strings.Join(depth(hooks), " "); got != "0 0 0 2" {
		t.Errorf("hooks ready/delayed/processing/dead %q, want 0 0 0 2", got)
	}
	if !strings.Contains(hooks, "FAILED <b>2</b>") {
		t.Errorf("hooks row lacks the Postgres FAILED count:\n%s", hooks)
	}
	if !strings.Contains(hooks, "<svg") {
		t.Errorf("hooks row has no throughput chart after several samples:\n%s", hooks)
	}
	if p := row("plugin-webhook"); !strings.Contains(p, "healthy") || !strings.Contains(p, "digest, hooks") {
		t.Errorf("plugin row:\n%s", p)
	}
	if strings.Contains(res.body, "unconfigured-channels") {
		t.Error("an unconfigured-channels banner with every channel configured")
	}
}

// A channel whose plugin cannot start is named with its reason in a banner
// at the top of the front page, and its row says stopped; with none
// stopped there is no banner.
func TestUI_Channels_Stopped(t *testing.T) {
	t.Parallel()
	b := setup(t, withChannels("hooks"), withMissingPlugin("relay"))
	c, _ := b.loggedIn()
	res := c.get("/ui/")
	if res.status != http.StatusOK {
		t.Fatalf("status %d", res.status)
	}
	banner := regexp.MustCompile(`(?s)<div class="banner error" id="stopped-channels" role="alert">.*?</div>`).FindString(res.body)
	if banner == "" {
		t.Fatalf("no stopped-channels banner on the front page:\n%.2000s", res.body)
	}
	for _, want := range []string{"1 channel stopped", "<strong>relay</strong>", "plugin relay", "no such plugin executable", "notifyd-plugin-relay"} {
		if !strings.Contains(banner, want) {
			t.Errorf("the banner lacks %q:\n%s", want, banner)
		}
	}
	if strings.Contains(banner, "hooks") {
		t.Errorf("the banner names the running channel hooks:\n%s", banner)
	}
	row := regexp.MustCompile(`(?s)<tr id="channel-relay">.*?</tr>`).FindString(res.body)
	if !strings.Contains(row, `<span class="badge stopped">stopped</span>`) || !strings.Contains(row, "no such plugin executable") {
		t.Errorf("relay's row does not say stopped and why:\n%s", row)
	}

	ok := setup(t, withChannels("hooks"))
	c2, _ := ok.loggedIn()
	if body := c2.get("/ui/").body; strings.Contains(body, "stopped-channels") {
		t.Error("a banner with every channel running")
	}
}

// Notifications written under a channel name this instance does not run
// (an application's own SQL, or a channel removed from the config) are
// never sent by it: the front page names each such channel that still has
// some to send, leaves out one with only finished rows, and says how many
// more unconfigured channels the overview did not count.
func TestUI_Channels_Unconfigured(t *testing.T) {
	t.Parallel()
	b := setup(t, withChannels("hooks"))
	if _, err := b.db.Pool.Exec(b.ctx, `
		INSERT INTO notifications (channel, recipient, payload, status, due_at)
		SELECT 'typo-channel', 'r' || g, '{}', 'PENDING', now() + interval '1 day' FROM generate_series(1, 3) g;
		INSERT INTO notifications (channel, recipient, payload, status, attempts, sent_at)
		SELECT 'old-channel', 'r' || g, '{}', 'SENT', 1, now() FROM generate_series(1, 2) g;
		INSERT INTO notifications (channel, recipient, payload, status, attempts, sent_at)
		SELECT 'zz-extra-' || lpad(g::text, 3, '0'), 'r', '{}', 'SENT', 1, now() FROM generate_series(0, 104) g;`); err != nil {
		t.Fatal(err)
	}
	c, _ := b.loggedIn()
	bannerRe := regexp.MustCompile(`(?s)<div class="banner warn" id="unconfigured-channels" role="status">.*?</div>`)
	var banner string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		// The counts are the sampler's: wait until it has counted the rows.
		banner = bannerRe.FindString(c.get("/ui/").body)
		if strings.Contains(banner, "typo-channel") || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range []string{"1 channel not configured on this instance holds notifications still to be sent",
		`<li id="unconfigured-typo-channel"><strong>typo-channel</strong>: 3 waiting</li>`, "7 more channels not configured here have rows"} {
		if !strings.Contains(banner, want) {
			t.Errorf("the banner lacks %q:\n%s", want, banner)
		}
	}
	if strings.Contains(banner, "old-channel") || strings.Contains(banner, "hooks") {
		t.Errorf("the banner names a channel with nothing to send, or a configured one:\n%s", banner)
	}
}

// A query string net/url cannot read whole (a `;` between parameters, a bad
// escape, more than 10,000 parameters) was read as no query, or without the
// part at fault: /ui/dead?channel=nope;limit=5 showed every channel's dead
// letters as if unfiltered, and a NUL among 10,001 parameters was never
// seen. It is a 400 page naming the query.
func TestUI_UnreadableQuery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, _ := b.loggedIn()
	for _, path := range []string{
		"/ui/dead?channel=nope;limit=5",
		"/ui/dead?channel=nope%zz",
		"/ui/lookup?q=a%00b" + strings.Repeat("&x=1", 10_001),
	} {
		res := c.get(path)
		if res.status != http.StatusBadRequest || !strings.Contains(res.body, "query") {
			t.Errorf("%.40s: status %d, want a 400 page naming the query", path, res.status)
		}
	}
	if res := c.get("/ui/dead?channel=nope&limit=5"); res.status != http.StatusOK {
		t.Errorf("a query that reads: status %d, want 200", res.status)
	}
}
