package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"

	"github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/api"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/pluginhost"
	"github.com/notifyd/notifyd/internal/providers"
	"github.com/notifyd/notifyd/internal/queue"
	"github.com/notifyd/notifyd/internal/schedule"
	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/internal/testdaemon"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk/client"
	"github.com/notifyd/notifyd/sdk/txoutbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

const cliToken = "cli-token-0123456789abcdef"

// apiBundle is a real API (real Postgres and Redis) for the CLI to talk
// to: by default the door alone, over an engine that is not started and
// schedules that never run, so rows and jobs stay where a test puts them;
// with apiStarted the whole daemon.
type apiBundle struct {
	t     *testing.T
	addr  string
	path  string // the config file, for --config
	cfg   *config.Config
	db    *testenv.DB
	store *outbox.Store
	svc   *schedule.Service // the door's schedules; nil with apiStarted (the daemon runs its own)
}

// apiStarted starts the whole daemon through the root package
// (notifyd.Start, as `notifyd serve` does) with the webhook plugin
// installed, and a second channel, relay, whose plugin is missing: it stays
// stopped.
const apiStarted = "started"

func setupAPI(t *testing.T, opts ...string) *apiBundle {
	t.Helper()
	db := testenv.NewDB(t)
	rds := testenv.NewRedis(t)
	dir := t.TempDir()
	started := slices.Contains(opts, apiStarted)
	extra := ""
	if started {
		testenv.InstallPlugin(t, dir, "webhook", "github.com/notifyd/notifyd/plugins/webhook")
		extra = "  relay: {plugin: relay}\n"
	}
	path := filepath.Join(dir, "notifyd.yaml")
	yaml := fmt.Sprintf(`
postgres: {url: %q}
redis: {url: %q, prefix: %q}
plugins: {dir: %q}
http: {listen: "127.0.0.1:0", tokens: [%q]}
log: {level: error}
channels:
  quiz: {plugin: webhook, config: {url: "http://127.0.0.1:9/"}}
%sschedules:
  morning: {channel: quiz, cron: "0 8 * * *", audience: {topic: daily}, payload: {text: "Hi {{.data.name}}"}}
`, db.URL, rds.URL, rds.Prefix, dir, cliToken, extra)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, []string{})
	if err != nil {
		t.Fatal(err)
	}
	log := hclog.NewNullLogger()
	if started {
		d := testdaemon.Start(t, testenv.Context(t), cfg, notifyd.Options{Logger: log})
		return &apiBundle{t: t, addr: "http://" + d.Addr().String(), path: path, cfg: cfg, db: db, store: d.Store()}
	}
	// The door: the API over a service whose engine and schedules are built
	// but never started (a test of the CLI against the API, not of the
	// daemon).
	store := testenv.Store(t, db.Pool)
	host := pluginhost.New(cfg.Plugins, log)
	t.Cleanup(func() { _ = host.Stop(context.Background()) })
	engine, err := delivery.New(delivery.Options{Config: cfg, Store: store, Queue: queue.New(rds.Client, rds.Prefix), Providers: providers.Host(host), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := schedule.New(db.Pool, cfg, schedule.Options{Logger: log, InstanceID: "cli-test"})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := service.New(service.Options{Config: cfg, Store: store, Engine: engine, Schedules: svc, Plugins: host, Redis: rds.Client, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{Config: cfg, Ops: ops})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &apiBundle{t: t, addr: hs.URL, path: path, cfg: cfg, db: db, store: store, svc: svc}
}

// run executes notifyd with the API flags added and returns stdout and
// stderr.
func (b *apiBundle) run(args ...string) (string, string, error) {
	b.t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(""))
	root.SetArgs(append(args, "--addr", b.addr, "--token", cliToken))
	err := root.ExecuteContext(testenv.Context(b.t))
	return out.String(), errOut.String(), err
}

// ok runs and fails the test on an error.
func (b *apiBundle) ok(args ...string) string {
	b.t.Helper()
	out, errOut, err := b.run(args...)
	if err != nil {
		b.t.Fatalf("notifyd %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// failed runs and fails the test unless the error mentions want.
func (b *apiBundle) failed(want string, args ...string) {
	b.t.Helper()
	out, _, err := b.run(args...)
	if err == nil || !strings.Contains(err.Error(), want) {
		b.t.Errorf("notifyd %s: %v (stdout %q), want an error containing %q", strings.Join(args, " "), err, out, want)
	}
}

func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestCLI_NotificationsOverAPI(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)

	out := b.ok("send", "--channel", "quiz", "--recipient", "kim", "--payload", `{"text":"hi"}`, "--idempotency-key", "k1")
	id, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("send printed %q, want the id", out)
	}
	again := b.ok("send", "--channel", "quiz", "--recipient", "kim", "--payload", `{"text":"hi"}`, "--idempotency-key", "k1")
	wantLines(t, again, fmt.Sprint(id), "duplicate")

	var got client.Enqueued
	js := b.ok("send", "--channel", "quiz", "--recipient", "lee", "--payload", `{}`, "--at", "1h", "-o", "json")
	if err := json.Unmarshal([]byte(js), &got); err != nil || got.Status != "PENDING" {
		t.Errorf("send -o json printed %q (%v)", js, err)
	}

	wantLines(t, b.ok("status", fmt.Sprint(id)), "ID", "STATUS", "kim", "PENDING")
	var infos []client.NotificationInfo
	if err := json.Unmarshal([]byte(b.ok("status", fmt.Sprint(id), "-o", "json")), &infos); err != nil || len(infos) != 1 || infos[0].ID != id {
		t.Errorf("status -o json: %+v, %v", infos, err)
	}

	wantLines(t, b.ok("cancel", fmt.Sprint(id)), fmt.Sprintf("%d CANCELLED", id))
	b.failed("is not a notification id", "status", "nope")

	// A delivery receipt shows under its notification, through the API and
	// with --config, with or without --history.
	rid, err := strconv.ParseInt(strings.TrimSpace(b.ok("send", "--channel", "quiz", "--recipient", "ann", "--payload", `{}`, "--at", "1h")), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Pool().Exec(context.Background(), `UPDATE notifications SET status = 'SENT', attempts = 1 WHERE id = $1`, rid); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.ApplyReceipts(context.Background(), "quiz", []outbox.Receipt{{NotificationID: rid, Outcome: outbox.ReceiptFailedAfterSend, ProviderCode: "E-9", Detail: "unreachable"}}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"status", fmt.Sprint(rid)}, {"status", "--history", fmt.Sprint(rid)}, {"status", "--config", b.path, fmt.Sprint(rid)}} {
		wantLines(t, b.ok(args...), "SENT", "receipt", "FAILED_AFTER_SEND", "E-9", "unreachable")
	}
	out, errOut, err := b.run("cancel", fmt.Sprint(got.ID), "987654321")
	if !strings.Contains(out, fmt.Sprintf("%d CANCELLED", got.ID)) || !strings.Contains(errOut, "error: notification 987654321 does not exist") ||
		exitCode(err) != 1 || !strings.Contains(err.Error(), "1 of 2 notification(s) not cancelled") {
		t.Errorf("cancel of one good and one unknown id: %q, %q, %v; want the good one cancelled, an error line for the other and exit 1", out, errOut, err)
	}

	t.Run("bad input is refused before calling", func(t *testing.T) {
		b.failed("not valid JSON", "send", "--channel", "quiz", "--recipient", "r", "--payload", "{")
		b.failed("422", "send", "--channel", "sms", "--recipient", "r", "--payload", "{}")
		b.failed(`"x" is not a notification id`, "cancel", "x")
		b.failed("-o \"yaml\"", "channels", "-o", "yaml")
	})
	t.Run("--config still writes directly to the outbox", func(t *testing.T) {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs([]string{"send", "--config", b.path, "--channel", "quiz", "--recipient", "direct", "--payload", "{}"})
		if err := root.ExecuteContext(testenv.Context(t)); err != nil {
			t.Fatal(err)
		}
		id, _ := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
		if n, err := b.store.Get(testenv.Context(t), id); err != nil || n.Recipient != "direct" {
			t.Errorf("direct send: row %+v, %v", n, err)
		}
	})
}

func TestCLI_NoToken(t *testing.T) {
	t.Setenv(envToken, "")
	root := newRoot()
	root.SetOut(&bytes.Buffer{})
	root.SetArgs([]string{"channels", "--addr", "http://127.0.0.1:9"})
	err := root.ExecuteContext(testenv.Context(t))
	if err == nil || !strings.Contains(err.Error(), envToken) {
		t.Errorf("channels without a token: %v, want an error naming %s", err, envToken)
	}
}

func TestCLI_DLQAndChannels(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	ctx := testenv.Context(t)
	ids := make([]int64, 3)
	for i := range ids {
		res, err := b.store.Insert(ctx, []outbox.NewNotification{{Channel: "quiz", Recipient: fmt.Sprint("r", i), Payload: json.RawMessage(`{}`)}})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = res[0].ID
	}
	if _, err := b.store.Relay(ctx, time.Now().Add(time.Minute), 100); err != nil {
		t.Fatal(err)
	}
	claimed, err := b.store.Claim(ctx, ids, time.Now().Add(time.Minute), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var ss []outbox.Settlement
	for _, c := range claimed {
		ss = append(ss, outbox.Settlement{ID: c.ID, Attempt: c.Attempt, Result: outbox.ResultFailed, Error: "HTTP 404:\n  no such   hook"})
	}
	if _, err := b.store.Settle(ctx, ss); err != nil {
		t.Fatal(err)
	}

	list := b.ok("dlq", "list")
	wantLines(t, list, "LAST ERROR", "r0", "r2", "HTTP 404: no such hook")
	out, errOut, err := b.run("dlq", "list", "--limit", "2")
	if err != nil || strings.Contains(out, "r2") || !strings.Contains(errOut, fmt.Sprintf("--after %d", ids[1])) {
		t.Errorf("dlq list --limit 2: %v\n%s\n%s", err, out, errOut)
	}
	all := b.ok("dlq", "list", "--limit", "1", "--all", "-o", "json")
	var page client.DLQPage
	if err := json.Unmarshal([]byte(all), &page); err != nil || len(page.Notifications) != 3 {
		t.Errorf("dlq list --all -o json: %d rows, %v", len(page.Notifications), err)
	}

	wantLines(t, b.ok("dlq", "replay", fmt.Sprint(ids[0])), "replayed 1")
	// QUEUED now: skipped with the reason on stderr, and exit 1.
	if out, errOut, err := b.run("dlq", "replay", fmt.Sprint(ids[0])); err == nil || !strings.Contains(err.Error(), "1 notification(s) not replayed") ||
		!strings.Contains(errOut, fmt.Sprintf("not replayed: notification %d is QUEUED, not FAILED", ids[0])) || !strings.Contains(out, "replayed 0") {
		t.Errorf("replay of a replayed id: %v\n%s\n%s", err, out, errOut)
	}
	// Sent after the replay: the history counts attempts again from 1 and
	// says where it started again.
	again, err := b.store.Claim(ctx, ids[:1], time.Now().Add(time.Minute), time.Minute)
	if err != nil || len(again) != 1 || again[0].Attempt != 1 {
		t.Fatalf("claim after the replay: %+v, %v", again, err)
	}
	if _, err := b.store.Settle(ctx, []outbox.Settlement{{ID: ids[0], Attempt: 1, Result: outbox.ResultSent}}); err != nil {
		t.Fatal(err)
	}
	hist := b.ok("status", "--history", fmt.Sprint(ids[0]))
	if i, j, k := strings.Index(hist, "HTTP 404"), strings.Index(hist, "replayed"), strings.LastIndex(hist, "attempt 1"); i < 0 || j < i || k < j {
		t.Errorf("status --history after a replay: want the failed attempt 1, a replayed line, then attempt 1 again:\n%s", hist)
	}
	b.failed("give notification ids or --channel", "dlq", "replay")
	b.failed("not both", "dlq", "replay", "--channel", "quiz", "5")
	b.failed("--yes", "dlq", "purge", "--channel", "quiz")
	wantLines(t, b.ok("dlq", "purge", fmt.Sprint(ids[1])), "purged 1")
	wantLines(t, b.ok("dlq", "purge", "--channel", "quiz", "--yes"), "purged 1")

	ch := b.ok("channels")
	wantLines(t, ch, "CHANNEL", "quiz", "webhook", "stopped")
	var chs client.Channels
	if err := json.Unmarshal([]byte(b.ok("channels", "-o", "json")), &chs); err != nil || len(chs.Channels) != 1 {
		t.Errorf("channels -o json: %+v, %v", chs, err)
	}
}

// Stored text reaches the terminal escaped: a recipient any API client
// chose, and a provider's error as last_error and as an attempt's error,
// in status (through the API and with --config), status --history,
// dlq list and -o json. Before, status and dlq list printed them raw: OSC 52
// wrote the operator's clipboard, CSI cleared the screen, \r overwrote the
// row with FAKE.
func TestCLI_StoredTextEscaped(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	ctx := testenv.Context(t)

	id := strings.TrimSpace(b.ok("send", "--channel", "quiz", "--recipient", "user"+hostileText, "--payload", `{}`, "--at", "1h"))
	res, err := b.store.Insert(ctx, []outbox.NewNotification{{Channel: "quiz", Recipient: "r1", Payload: json.RawMessage(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	failed := res[0].ID
	if _, err := b.store.Relay(ctx, time.Now().Add(time.Minute), 100); err != nil {
		t.Fatal(err)
	}
	claimed, err := b.store.Claim(ctx, []int64{failed}, time.Now().Add(time.Minute), time.Minute)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if _, err := b.store.Settle(ctx, []outbox.Settlement{{ID: failed, Attempt: claimed[0].Attempt, Result: outbox.ResultFailed, Error: "provider said: " + hostileText}}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"status", id},
		{"status", "--config", b.path, id},
		{"status", "--history", fmt.Sprint(failed)},
		{"status", "--history", "--config", b.path, fmt.Sprint(failed)},
		{"dlq", "list"},
		{"status", id, fmt.Sprint(failed), "-o", "json"},
	} {
		out := b.ok(args...)
		if hasControl(out) {
			t.Errorf("notifyd %s printed stored control characters raw:\n%q", strings.Join(args, " "), out)
		}
		if !strings.Contains(out, `\x1b]52;c;`) && !strings.Contains(out, `\u001b]52;c;`) {
			t.Errorf("notifyd %s does not show the stored text (escaped):\n%s", strings.Join(args, " "), out)
		}
	}
}

// `notifyd send` refused a payload key given twice through the API (400
// naming the key) but `send --config` stored the last one silently: one
// reader of the row saw "approved", jsonb kept "denied". Both refuse it.
func TestCLI_SendRepeatedPayloadKey(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	b.failed(`key "text" is given twice`, "send", "--channel", "quiz", "--recipient", "r", "--payload", `{"text":"approved","text":"denied"}`)
	b.failed(`payload.m: key "text" is given twice`, "send", "--config", b.path, "--channel", "quiz", "--recipient", "r", "--payload", `{"m":{"text":"approved","text":"denied"}}`)
	var n int
	if err := b.store.Pool().QueryRow(testenv.Context(t), `SELECT count(*) FROM notifications`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d notifications stored (%v), want none", n, err)
	}
}

// A send_at past year 9999 was stored, by EnqueueTx (it checked none) and
// by the API when an offset carried it past (9999-12-31T23:00:00-05:00 is
// year 10000 in UTC), and such a row could never be shown: `notifyd status`
// answered 500 "encode answer" for ever. Every entrance refuses it now,
// naming send_at, before any SQL.
func TestCLI_SendAtPastYear9999(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	ctx := testenv.Context(t)
	err := pgx.BeginFunc(ctx, b.store.Pool(), func(tx pgx.Tx) error {
		_, err := txoutbox.EnqueueTx(ctx, tx, wire.Notification{Channel: "quiz", Recipient: "r", Payload: json.RawMessage(`{}`),
			SendAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "send_at") {
		t.Errorf("EnqueueTx with send_at in year 10000: %v, want it refused naming send_at", err)
	}
	const past = "9999-12-31T23:00:00-05:00"
	b.failed("send_at", "send", "--channel", "quiz", "--recipient", "r", "--payload", "{}", "--at", past)
	b.failed("send_at", "send", "--config", b.path, "--channel", "quiz", "--recipient", "r", "--payload", "{}", "--at", past)
	// The last time that is in range is shown.
	id := strings.TrimSpace(b.ok("send", "--channel", "quiz", "--recipient", "r", "--payload", "{}", "--at", "9999-12-30T23:59:59Z"))
	wantLines(t, b.ok("status", id), "PENDING")
}

func TestCLI_AudiencesOverAPI(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	ctx := testenv.Context(t)

	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetIn(strings.NewReader(`{"external_id":"u1","addresses":{"quiz":"k1"},"attributes":{"name":"Kim"},"topics":["daily"]}
{"external_id":"u2","addresses":{"quiz":"k2"},"attributes":{"name":"Lee"},"topics":["daily"]}
`))
	root.SetArgs([]string{"subscribers", "import", "-", "--addr", b.addr, "--token", cliToken})
	if err := root.ExecuteContext(ctx); err != nil || !strings.Contains(out.String(), "2 subscribers upserted") {
		t.Fatalf("subscribers import over the API: %v\n%s", err, out.String())
	}
	wantLines(t, b.ok("subscribers", "get", "u1"), "external id", "quiz: k1", "daily", `"name":"Kim"`)
	var sub client.Subscriber
	if err := json.Unmarshal([]byte(b.ok("subscribers", "get", "u2", "-o", "json")), &sub); err != nil || sub.Addresses["quiz"] != "k2" {
		t.Errorf("subscribers get -o json: %+v, %v", sub, err)
	}
	b.ok("subscribers", "delete", "u2")
	b.failed("404", "subscribers", "get", "u2")

	wantLines(t, b.ok("schedules"), "NAME", "morning", "0 8 * * *", "topic daily", "-")
	runID := strings.TrimSpace(b.ok("schedules", "run", "morning"))
	wantLines(t, b.ok("schedules"), "job "+runID+" PENDING")
	b.failed("404", "schedules", "run", "evening")

	campaign := strings.TrimSpace(b.ok("campaign", "--channel", "quiz", "--topic", "daily", "--payload", `{"text":"Hi {{.data.name}}"}`))
	b.failed("--query is not accepted over the API", "campaign", "--channel", "quiz", "--query", "SELECT 1", "--key", "id", "--payload", `{"t":"x"}`)
	b.failed("--run", "campaign", "--channel", "quiz", "--topic", "daily", "--payload", `{"t":"x"}`, "--run")

	jobs := b.ok("jobs")
	wantLines(t, jobs, "DONE/TOTAL", campaign, runID, "PENDING")
	wantLines(t, b.ok("jobs", campaign), "kind        campaign", "topic daily")
	b.failed("--cancel needs --config", "jobs", campaign, "--cancel")

	t.Run("--watch follows a job to DONE", func(t *testing.T) {
		id, _ := strconv.ParseInt(campaign, 10, 64)
		go func() {
			time.Sleep(300 * time.Millisecond)
			if _, err := b.svc.RunJob(context.Background(), id); err != nil {
				t.Errorf("run job %d: %v", id, err)
			}
		}()
		out := b.ok("jobs", campaign, "--watch", "--every", "50ms")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		first, last := lines[0], lines[len(lines)-1]
		if !strings.Contains(first, "PENDING") || !strings.Contains(last, "DONE") || !strings.Contains(last, "100%") || !strings.Contains(last, "1/1") {
			t.Errorf("watch printed\n%s\nwant PENDING first and DONE 100%% 1/1 last (u2 was deleted)", out)
		}
		if !strings.Contains(last, "[██████████████████████████████]") {
			t.Errorf("last line %q has no full progress bar", last)
		}
	})
	t.Run("--watch of a job that fails exits with an error", func(t *testing.T) {
		id, _ := strconv.ParseInt(runID, 10, 64)
		if _, _, err := b.svc.CancelJob(ctx, id); err != nil {
			t.Fatal(err)
		}
		b.failed("ended CANCELLED", "jobs", runID, "--watch", "--every", "10ms")
	})
}
