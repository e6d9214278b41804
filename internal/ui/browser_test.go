package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/notifyd/notifyd/internal/outbox"
)

// EnvScreenshots, set to 1, makes the browser test (re)write the README's
// screenshots under docs/screenshots/:
//
//	NOTIFYD_SCREENSHOTS=1 go test ./internal/ui -run TestBrowser
const EnvScreenshots = "NOTIFYD_SCREENSHOTS"

// screenshotDir is docs/screenshots, from this package's directory.
var screenshotDir = filepath.Join("..", "..", "docs", "screenshots")

// chromiumPath finds Debian's Chromium ($NOTIFYD_CHROMIUM, else chromium on
// PATH). A missing browser fails the test: it is part of the test setup,
// like Postgres, and scripts/browser installs it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("NOTIFYD_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: run scripts/browser (it installs Debian's chromium; `make test` runs it first), or set NOTIFYD_CHROMIUM to a Chromium binary")
	return ""
}

// browser is a headless Chromium tab, with whatever its pages write to the
// console collected.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	profile := t.TempDir() // removed after the browser below has exited (cleanups run last-in first-out)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		// Root, no network, no display: the flags this machine needs.
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1360, 900),
	)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancel)
	b := &browser{t: t, ctx: ctx}
	// The first Run starts the browser; it must not carry a timeout (that
	// would end the browser with it).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v (scripts/browser installs Debian's chromium)", path, err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, m)
			b.mu.Unlock()
		}
	}()
	return b
}

// do runs steps, failing the test with what was being done.
func (b *browser) do(what string, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		loc, _ := chromedp.Run(b.ctx, chromedp.Location())
		b.t.Fatalf("%s: %v (page %s)", what, err, loc)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func (b *browser) location() string {
	b.t.Helper()
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		b.t.Fatal(err)
	}
	return loc
}

func (b *browser) cookies() []*network.Cookie {
	b.t.Helper()
	res, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		b.t.Fatal(err)
	}
	return res.Cookies
}

// screenshot saves the page as docs/screenshots/<name>.png when
// NOTIFYD_SCREENSHOTS=1.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	if os.Getenv(EnvScreenshots) != "1" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join(screenshotDir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("wrote %s (%d bytes)", path, len(png))
}

// problems are the console messages that mean a page is broken: uncaught
// exceptions, and errors from the browser such as a Content-Security-Policy
// refusal of the dashboard's own script or style, or a missing asset. The
// 401 of the deliberately refused login is expected.
func (b *browser) problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.console {
		if m.Source == "network" && strings.Contains(m.Text, "401") && strings.HasSuffix(m.URL, "/ui/login") {
			continue
		}
		if m.IsException() || m.Type == chromedp.ConsoleError {
			out = append(out, fmt.Sprintf("%s (%s %s:%d)", m, m.Source, m.URL, m.Line))
		}
	}
	return out
}

// TestBrowser_ReplayDeadLetter is the dashboard's acceptance test, in a real
// browser against a real notifyd (Postgres, Redis, the webhook plugin, the
// delivery engine): a wrong token is refused; log in; see a dead-lettered
// notification; replay it; watch it become SENT (the sink accepts it the
// second time). On the way it purges another dead letter through the
// confirmation and visits every page (screenshots with NOTIFYD_SCREENSHOTS=1).
func TestBrowser_ReplayDeadLetter(t *testing.T) {
	t.Parallel()
	// The jobs written below stay as written (a stuck one among them) for
	// the jobs page: the daemon runs no schedule and no job.
	b := setup(t, withChannels("hooks", "digest"), withSchedule(), withStillJobs(), withSample(250*time.Millisecond))
	br := newBrowser(t)
	base := b.url

	// Something to look at: a steady trickle of sends on both channels
	// (the throughput chart), a recipient with history, jobs in every shape.
	trafficDone := b.traffic(7 * time.Second)
	for i, ch := range []string{"hooks", "digest", "hooks"} {
		b.send(ch, "alice@example.com", fmt.Sprintf("welcome:alice:%d", i))
	}
	b.jobs()
	dead := b.deadLetter("hooks", "fail-first@example.com")
	var doomed []int64
	for i := range 3 {
		doomed = append(doomed, b.deadLetter("digest", fmt.Sprintf("fail-always-%d@example.com", i)))
	}

	// A wrong token is refused, and gives no session.
	br.do("open the dashboard", 20*time.Second,
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(chromedp.ID("token")),
	)
	if loc := br.location(); !strings.HasPrefix(loc, base+"/ui/login") {
		t.Fatalf("without a session /ui/ shows %s, want the login form", loc)
	}
	br.screenshot("login")
	br.do("log in with a wrong token", 20*time.Second,
		chromedp.SendKeys(chromedp.ID("token"), "not-the-right-token"),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("login-error")),
	)
	if got := br.text("#login-error"); !strings.Contains(got, "not one of the API tokens") {
		t.Errorf("login error says %q, want it to say the token is wrong", got)
	}
	for _, c := range br.cookies() {
		if c.Name == "notifyd_ui_session" {
			t.Errorf("a refused login set the session cookie %q", c.Value)
		}
	}

	// The right one.
	br.do("log in", 20*time.Second,
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("channels")),
	)
	var session *network.Cookie
	for _, c := range br.cookies() {
		if c.Name == "notifyd_ui_session" {
			session = c
		}
	}
	if session == nil || !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict {
		t.Errorf("session cookie %+v, want HttpOnly and SameSite=Strict", session)
	}

	// Channels: depths, throughput chart, plugin health.
	<-time.After(time.Until(b.started.Add(4 * time.Second)))
	br.do("channels page with a throughput chart", 20*time.Second,
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#channel-hooks td.spark svg")),
		chromedp.WaitVisible(chromedp.CSS("#plugin-webhook")),
	)
	if got := br.text("#plugin-webhook"); !strings.Contains(got, "healthy") {
		t.Errorf("plugin row says %q, want healthy", got)
	}
	if got := br.text("#channel-digest"); !strings.Contains(got, "running") {
		t.Errorf("digest row says %q, want running", got)
	}
	br.screenshot("channels")

	// Dead letters: the failed notification with its last error.
	row := fmt.Sprintf("#dead-%d", dead)
	br.do("dead letters page", 20*time.Second,
		chromedp.Navigate(base+"/ui/dead"),
		chromedp.WaitVisible(chromedp.CSS(row)),
	)
	if got := br.text(row); !strings.Contains(got, "fail-first@example.com") || !strings.Contains(got, "400") {
		t.Errorf("dead letter row says %q, want the recipient and the sink's 400", got)
	}
	br.screenshot("dead-letters")

	// Purge one, through the confirmation.
	br.do("ask to purge one", 20*time.Second,
		chromedp.Click(chromedp.CSS(fmt.Sprintf("#dead-%d input[name=id]", doomed[0]))),
		chromedp.Click(chromedp.ID("purge-selected")),
		chromedp.WaitVisible(chromedp.ID("confirm-purge")),
	)
	if got := br.text("#purge-what"); !strings.Contains(got, "1 selected") || !strings.Contains(got, "cannot be undone") {
		t.Errorf("confirmation says %q", got)
	}
	if _, err := b.store.Get(b.ctx, doomed[0]); err != nil {
		t.Fatalf("the confirmation page alone deleted the row: %v", err)
	}
	br.screenshot("purge-confirm")
	br.do("confirm the purge", 20*time.Second,
		chromedp.Click(chromedp.ID("confirm-purge")),
		chromedp.WaitVisible(chromedp.ID("flash")),
	)
	if got := br.text("#flash"); !strings.Contains(got, "Purged 1") {
		t.Errorf("after the purge the page says %q, want Purged 1", got)
	}
	if _, err := b.store.Get(b.ctx, doomed[0]); err == nil {
		t.Errorf("notification %d still exists after the purge", doomed[0])
	}

	// Replay the dead letter and watch it become SENT.
	br.do("replay it", 20*time.Second,
		chromedp.Click(chromedp.ID(fmt.Sprintf("replay-%d", dead))),
		chromedp.WaitVisible(chromedp.ID("status")),
	)
	if loc := br.location(); loc != fmt.Sprintf("%s/ui/n/%d", base, dead) {
		t.Errorf("after replay the browser is on %s, want the notification's page", loc)
	}
	br.do("watch it become SENT", 30*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#status[data-status="SENT"]`)),
		chromedp.WaitVisible(chromedp.CSS("#attempts")),
	)
	if got := b.status(dead); got != outbox.StatusSent {
		t.Errorf("outbox says %s, want SENT", got)
	}
	if got := b.sink.deliveries("fail-first@example.com"); got != 2 {
		t.Errorf("the sink saw %d deliveries, want 2 (refused, then accepted after the replay)", got)
	}
	if got := br.text("#attempts"); !strings.Contains(got, "PERMANENT") || !strings.Contains(got, "SUCCESS") {
		t.Errorf("attempt history %q, want the refused attempt and the successful one", got)
	}
	br.screenshot("notification")

	// Jobs and lookup.
	br.do("jobs page", 20*time.Second,
		chromedp.Navigate(base+"/ui/jobs"),
		chromedp.WaitVisible(chromedp.ID("schedule-morning-quiz")),
		chromedp.WaitVisible(chromedp.ID("stuck-summary")),
	)
	br.screenshot("jobs")
	br.do("look up a recipient", 20*time.Second,
		chromedp.Navigate(base+"/ui/lookup"),
		chromedp.SendKeys(chromedp.ID("q"), "alice@example.com"),
		chromedp.Click(chromedp.ID("find")),
		chromedp.WaitVisible(chromedp.ID("results")),
	)
	sent, err := chromedp.Run(br.ctx, chromedp.Evaluate[int](`document.querySelectorAll("#results tbody .badge.sent").length`))
	if err != nil || sent != 3 {
		t.Errorf("lookup shows %d SENT notifications (%v), want alice's 3:\n%s", sent, err, br.text("#results"))
	}
	<-trafficDone
	br.screenshot("lookup")

	// Log out: the session is gone.
	br.do("log out", 20*time.Second,
		chromedp.Click(chromedp.ID("logout")),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.Navigate(base+"/ui/dead"),
		chromedp.WaitVisible(chromedp.ID("token")),
	)
	if p := br.problems(); len(p) > 0 {
		t.Errorf("the pages wrote errors to the console:\n%s", strings.Join(p, "\n"))
	}
}

// traffic sends a varying trickle of notifications on hooks and digest for
// d, so the throughput chart has a shape. The channel closes when it ends.
func (b *bundle) traffic(d time.Duration) <-chan struct{} {
	b.started = time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; time.Since(b.started) < d && b.ctx.Err() == nil; i++ {
			var ns []outbox.NewNotification
			for j := range 4 + 3*(i%5) {
				ch := "hooks"
				if j%3 == 0 {
					ch = "digest"
				}
				ns = append(ns, outbox.NewNotification{Channel: ch, Recipient: fmt.Sprintf("user-%d-%d@example.com", i, j),
					Payload: json.RawMessage(`{"text":"Today's quiz is up"}`)})
			}
			if _, err := b.store.Insert(b.ctx, ns); err != nil && b.ctx.Err() == nil {
				b.t.Errorf("traffic: %v", err)
				return
			}
			time.Sleep(150 * time.Millisecond)
		}
	}()
	return done
}

// jobs writes bulk jobs in every shape the Jobs page shows: a finished run,
// a run in progress, a stuck campaign, a pending one.
func (b *bundle) jobs() {
	b.t.Helper()
	_, err := b.db.Pool.Exec(b.ctx, `
INSERT INTO jobs (kind, schedule, fire_time, timezone, channel, audience, payload, state, cursor, done, skipped, total,
                  owner, heartbeat_at, created_at, started_at, finished_at)
VALUES
 ('schedule', 'morning-quiz', now() - interval '1 day', 'Asia/Seoul', 'hooks', '{"topic":"quiz"}', '{}', 'DONE',
  '120000', 120000, 312, 120000, NULL, NULL, now() - interval '1 day 10 minutes', now() - interval '1 day 10 minutes', now() - interval '1 day 2 minutes'),
 ('schedule', 'morning-quiz', now() + interval '4 minutes', 'Asia/Seoul', 'hooks', '{"topic":"quiz"}', '{}', 'RUNNING',
  '48211', 48000, 97, 120000, 'notifyd-a-1f3e', now() - interval '2 seconds', now() - interval '6 minutes', now() - interval '6 minutes', NULL),
 ('campaign', NULL, NULL, 'UTC', 'digest', '{"topic":"spring-sale"}', '{}', 'RUNNING',
  '9120', 9000, 0, 25000, 'notifyd-b-77c2', now() - interval '14 minutes', now() - interval '20 minutes', now() - interval '20 minutes', NULL),
 ('campaign', NULL, NULL, 'UTC', 'digest', '{"topic":"newsletter"}', '{}', 'PENDING',
  NULL, 0, 0, NULL, NULL, NULL, now() - interval '30 seconds', NULL, NULL)`)
	if err != nil {
		b.t.Fatalf("write jobs: %v", err)
	}
}
