package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
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
