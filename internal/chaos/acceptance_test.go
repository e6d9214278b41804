package chaos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/chaos"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk/client"
)

// TestDailySendAcceptance is issue 18's black-box acceptance: a schedule
// over 10,000 subscribers, 10 of whom lack the field the template needs,
// fires while notifyd is killed -9 twice and Redis is flushed once: 9,990
// are delivered at least once, 10 are FAILED with the reason, the job
// finishes, and running that fire time again sends nothing. Then serve is
// started while Postgres is down and becomes ready within seconds of
// Postgres coming back.
func TestDailySendAcceptance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := *bin
	if bin == "" {
		bin = testenv.BuildPlugin(t, "github.com/notifyd/notifyd/cmd/notifyd")
	}
	testenv.InstallPlugin(t, dir, "webhook", "github.com/notifyd/notifyd/plugins/webhook")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c, err := chaos.Start(ctx, chaos.Setup{
		Bin: bin, PluginDir: dir, Instances: 2, LeaseTTL: 3 * time.Second, Logf: t.Logf, KeepLogs: *keep,
		SinkTransient: 0.01, SinkMaxDelay: 100 * time.Millisecond, // slow enough that the faults land mid-run
		Daily: 10_000, DailyEvery: 30 * time.Second, DailyUntitledEvery: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// The first run: wait until its notifications start arriving, then hit it.
	var job int64
	var fire time.Time
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := c.DB.QueryRow(ctx, `SELECT id, fire_time FROM jobs WHERE schedule = 'daily' ORDER BY fire_time LIMIT 1`).Scan(&job, &fire)
		accepted, _, _ := c.Sink.Counts()
		if err == nil && accepted > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no daily run delivering after 90 s (%v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("run %d for %s is delivering: kill -9 n1, FLUSHALL, kill -9 n2", job, fire.Format(time.RFC3339))
	for i, step := range []func() error{
		func() error { c.Instances[0].Kill9(); return nil },
		func() error { return c.Instances[0].Start() },
		func() error { return c.Redis[0].FlushAll(ctx) },
		func() error { c.Instances[1].Kill9(); return nil },
		func() error { return c.Instances[1].Start() },
	} {
		if err := step(); err != nil {
			t.Fatalf("fault step %d: %v", i, err)
		}
		time.Sleep(700 * time.Millisecond)
	}

	prefix := "schedule:daily:" + fire.UTC().Format(time.RFC3339) + ":"
	count := func() (sent, failed, other int) {
		return testenv.Statuses(ctx, t, c.DB, "starts_with(idempotency_key, $1)", prefix)
	}
	deadline = time.Now().Add(3 * time.Minute)
	for {
		sent, failed, other := count()
		var state string
		_ = c.DB.QueryRow(ctx, `SELECT state FROM jobs WHERE id = $1`, job).Scan(&state)
		if state == "DONE" && other == 0 && sent+failed == 10_000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("3 min after the faults: job %s, SENT %d, FAILED %d, unfinished %d", state, sent, failed, other)
		}
		time.Sleep(250 * time.Millisecond)
	}
	seen := c.Sink.Snapshot()
	delivered, duplicates := 0, 0
	for i := 1; i <= 10_000; i++ {
		if d := seen[fmt.Sprintf("%sdaily-%d", prefix, i)]; d.Accepted > 0 {
			delivered++
			duplicates += d.Accepted - 1
		}
	}
	rows, err := c.DB.Query(ctx, `SELECT recipient, last_error FROM notifications WHERE starts_with(idempotency_key, $1) AND status = 'FAILED'`, prefix)
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for rows.Next() {
		var rcpt, e string
		if err := rows.Scan(&rcpt, &e); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(e, "title") {
			t.Errorf("%s FAILED with %q, want the reason to name the missing title", rcpt, e)
		}
		failed = append(failed, rcpt)
	}
	rows.Close()
	t.Logf("delivered %d (duplicates %d), FAILED %d", delivered, duplicates, len(failed))
	if delivered != 9_990 || len(failed) != 10 {
		t.Errorf("delivered %d and FAILED %d, want 9,990 and 10", delivered, len(failed))
	}

	// "Run now" for that fire time: refused, nothing new.
	cl, err := client.New("http://"+c.Instances[0].HTTPAddr, chaos.Token)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cl.RunSchedule(ctx, "daily", client.RunRequest{FireTime: fire.Format(time.RFC3339)})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict {
		t.Errorf("run now for the fire time that ran = %v, want 409 already ran", err)
	}
	time.Sleep(2 * time.Second)
	if sent, failedN, other := count(); sent+failedN+other != 10_000 {
		t.Errorf("%d notifications for the fire time after running it again, want 10,000", sent+failedN+other)
	}

	// serve started while Postgres is down: it waits, then becomes ready.
	c.PGProxy.Stop()
	c.Instances[0].Kill9()
	if err := c.Instances[0].Start(); err != nil {
		t.Fatal(err)
	}
	ready := func() (int, string) {
		resp, err := http.Get("http://" + c.Instances[0].HTTPAddr + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, fmt.Sprint(body)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		code, body := ready()
		if code == http.StatusServiceUnavailable && strings.Contains(body, "postgres") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve with Postgres down: /readyz %d %s, want 503 naming postgres", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // down a while: several retries
	if code, body := ready(); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz %d %s while Postgres is still down", code, body)
	}
	if err := c.PGProxy.Start(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	deadline = up.Add(30 * time.Second)
	for {
		if code, _ := ready(); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			code, body := ready()
			t.Fatalf("not ready 30 s after Postgres came back: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("serve became ready %s after Postgres came back", time.Since(up).Round(time.Millisecond))
}
