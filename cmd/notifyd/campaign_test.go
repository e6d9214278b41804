package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/notifyd/notifyd/internal/testenv"
)

// runCLI executes the notifyd command line and returns its stdout.
func runCLI(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.ExecuteContext(testenv.Context(t))
	return out.String(), err
}

func TestCampaignAndJobs(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	path := filepath.Join(t.TempDir(), "notifyd.yaml")
	yaml := `postgres: {url: "` + db.URL + `"}
redis: {url: "redis://127.0.0.1:6379/0"}
log: {level: error}
channels: {quiz: {plugin: webhook}}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	subs := `{"external_id":"u1","addresses":{"quiz":"k1"},"attributes":{"name":"Kim"},"topics":["daily"]}
{"external_id":"u2","addresses":{},"topics":["daily"]}

{"external_id":"u3","addresses":{"quiz":"k3"},"attributes":{"name":"Lee"},"topics":["daily"]}
`
	out, err := runCLI(t, subs, "subscribers", "import", "-c", path, "-")
	if err != nil || !strings.Contains(out, "3 subscribers upserted") {
		t.Fatalf("subscribers import: %q, %v; want 3 upserted", out, err)
	}

	out, err = runCLI(t, "", "campaign", "-c", path, "--channel", "quiz", "--topic", "daily",
		"--payload", `{"text":"Hi {{.data.name}}"}`, "--run")
	if err != nil || strings.TrimSpace(out) != "1" {
		t.Fatalf("campaign --run: %q, %v; want job id 1", out, err)
	}
	var text string
	if err := db.Pool.QueryRow(testenv.Context(t), `SELECT payload->>'text' FROM notifications WHERE recipient = 'k3'`).Scan(&text); err != nil || text != "Hi Lee" {
		t.Errorf("k3's payload text = %q, %v; want Hi Lee", text, err)
	}

	out, err = runCLI(t, "", "jobs", "-c", path, "1")
	for _, want := range []string{"state       DONE", "done/total  3/3 (100%)", "skipped     1", "cursor      3"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("jobs 1: %v\n%s\nwant a line %q", err, out, want)
		}
	}
	out, err = runCLI(t, "", "jobs", "-c", path)
	if err != nil || !strings.Contains(out, "DONE/TOTAL") || !strings.Contains(out, "3/3 (100%)") {
		t.Errorf("jobs: %v\n%s\nwant a table with 3/3", err, out)
	}

	t.Run("bad input", func(t *testing.T) {
		tests := []struct {
			args []string
			want string
		}{
			{[]string{"campaign", "-c", path, "--channel", "sms", "--topic", "daily", "--payload", `{"t":"x"}`}, `channel "sms" is not configured`},
			{[]string{"campaign", "-c", path, "--channel", "quiz", "--topic", "daily", "--payload", `[1]`}, "--payload must be a JSON object"},
			{[]string{"campaign", "-c", path, "--channel", "quiz", "--query", "SELECT 1 AS id", "--key", "id", "--payload", `{"t":"x"}`}, `returns no column "recipient"`},
			{[]string{"jobs", "-c", path, "x"}, `"x" is not a job id`},
			{[]string{"jobs", "-c", path, "99"}, "job 99 does not exist"},
			{[]string{"jobs", "-c", path, "--cancel"}, "--cancel needs a job id"},
			{[]string{"jobs", "-c", path, "1", "--cancel"}, "it is DONE"},
		}
		for _, tt := range tests {
			if _, err := runCLI(t, "", tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("notifyd %s: %v, want an error containing %q", strings.Join(tt.args, " "), err, tt.want)
			}
		}
	})
}

// campaign read --payload into map[string]any as float64 numbers and the
// last of a repeated key: 12345678901234567890 was sent as
// 12345678901234567000, and {"text":"refund approved","text":"refund
// denied"} as denied, where the API refuses a key given twice. It reads the
// template as the API does, on both paths (--config decides nothing here:
// the repeat is refused before the config is read).
func TestCampaign_PayloadAsTheAPIReadsIt(t *testing.T) {
	t.Parallel()
	var body atomic.Value
	addr, n := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body.Store(string(b))
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"id":3,"kind":"campaign","channel":"quiz","state":"PENDING"}`)
	})
	ctx := testenv.Context(t)
	if _, _, err := runAt(ctx, addr, "campaign", "--channel", "quiz", "--topic", "daily", "--payload", `{"order_id":12345678901234567890,"text":"x"}`); err != nil {
		t.Fatal(err)
	}
	if sent, _ := body.Load().(string); !strings.Contains(sent, `"order_id":12345678901234567890`) {
		t.Errorf("campaign --payload order_id 12345678901234567890 was sent as %s", sent)
	}
	n.Store(0)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--payload", `{"text":"refund approved","text":"refund denied"}`}, `--payload: key "text" is given twice`},
		{[]string{"--payload", `{"m":[{"k":1,"k":2}]}`, "-c", filepath.Join(t.TempDir(), "none.yaml")}, `--payload.m[0]: key "k" is given twice`},
		{[]string{"--payload", `{"t":"x"} {"t":"y"}`}, "--payload has data after its JSON object"},
	} {
		_, _, err := runAt(ctx, addr, append([]string{"campaign", "--channel", "quiz", "--topic", "daily"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("campaign %s: %v, want an error containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	if got := n.Load(); got != 0 {
		t.Errorf("%d campaigns sent for a --payload refused", got)
	}
}

// `campaign --config F --run` printed the finished job with fmt's %v: the
// struct as Go writes it, its strings raw, so a cursor (the last member's key
// column, from the audience's own table) or an error holding terminal
// controls reached the operator's terminal as they were (the clipboard
// written, the screen cleared). It prints the job as `jobs ID` does, every
// text escaped.
func TestCampaign_RunConfigJobEscaped(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	path := filepath.Join(t.TempDir(), "notifyd.yaml")
	yaml := `postgres: {url: "` + db.URL + `"}
redis: {url: "redis://127.0.0.1:6379/0"}
log: {level: error}
channels: {quiz: {plugin: webhook}}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE members (addr text, k text)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO members VALUES ('a1', $1)`, "k"+hostileText); err != nil {
		t.Fatal(err)
	}
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(""))
	root.SetArgs([]string{"campaign", "-c", path, "--channel", "quiz", "--query", "SELECT addr AS recipient, k FROM members",
		"--key", "k", "--payload", `{"text":"hi"}`, "--run"})
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("campaign --run: %v\n%s", err, errOut.String())
	}
	for what, text := range map[string]string{"stdout": out.String(), "stderr": errOut.String()} {
		if hasControl(text) {
			t.Errorf("campaign --run wrote the member's control characters raw to %s:\n%q", what, text)
		}
	}
	if !strings.Contains(errOut.String(), `\x1b]52;c;`) {
		t.Errorf("campaign --run does not show the job's cursor (escaped):\n%s", errOut.String())
	}
}
