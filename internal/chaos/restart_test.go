package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/chaos"
	"github.com/notifyd/notifyd/internal/testenv"
)

// TestRestartResumesOwnWork: an instance without instance.id keeps its id
// across restarts on the host, so after kill -9 and a restart it takes back
// what it had in flight at once, from its own backup list, instead of
// waiting for the claims to go stale (timeout + lease: 5 s here) or its
// lease to lapse. The figure is logged and recorded in docs/reliability.md.
func TestRestartResumesOwnWork(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := *bin
	if bin == "" {
		bin = testenv.BuildPlugin(t, "github.com/notifyd/notifyd/cmd/notifyd")
	}
	testenv.InstallPlugin(t, dir, "webhook", "github.com/notifyd/notifyd/plugins/webhook")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// n2 has no instance.id: its id is derived, and held while it lives.
	c, err := chaos.Start(ctx, chaos.Setup{Bin: bin, PluginDir: dir, Instances: 2, LeaseTTL: 3 * time.Second,
		SinkMaxDelay: 400 * time.Millisecond, Logf: t.Logf, KeepLogs: *keep})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, ok := c.Instances[0].Terminate(5 * time.Second); !ok {
		t.Fatal("stop n1")
	}
	n2 := c.Instances[1]
	enq := &chaos.DBEnqueuer{Channel: chaos.Channel, Pool: c.DB}
	batch := make([]chaos.Notification, 2000)
	for i := range batch {
		batch[i] = chaos.Notification{Key: fmt.Sprintf("restart-%d", i), Recipient: fmt.Sprintf("user-%d", i), Payload: json.RawMessage(`{}`)}
	}
	if err := enq.Enqueue(ctx, batch); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if accepted, _, _ := c.Sink.Counts(); accepted >= 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("n2 delivered nothing in 60 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	n2.Kill9()
	var inFlight []int64
	if err := c.DB.QueryRow(ctx, `SELECT coalesce(array_agg(id), '{}') FROM notifications WHERE status = 'PROCESSING'`).Scan(&inFlight); err != nil {
		t.Fatal(err)
	}
	if len(inFlight) == 0 {
		t.Fatal("nothing in flight at the kill; the test needs a slower sink")
	}
	if err := n2.Start(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	deadline = restarted.Add(60 * time.Second)
	for {
		var left int
		if err := c.DB.QueryRow(ctx, `SELECT count(*) FROM notifications WHERE id = ANY($1) AND status <> 'SENT'`, inFlight).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d in-flight notifications not SENT 60 s after the restart", left, len(inFlight))
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(restarted)
	t.Logf("all %d notifications in flight at the kill -9 were SENT %s after the restart", len(inFlight), took.Round(time.Millisecond))
	// Without the stable id they would wait for their claims to go stale
	// (the channel's timeout plus the lease) and be taken over as anyone's.
	// The restarted instance takes back its own at once: the attempt its
	// predecessor lost is recorded as taken over after 1ns, not after the
	// staleness — checked on the rows rather than by the clock, which a busy
	// machine stretches.
	var slow []string
	rows, err := c.DB.Query(ctx, `SELECT notification_id, error FROM notification_attempts
		WHERE notification_id = ANY($1) AND outcome = 'UNKNOWN' AND error NOT LIKE '%taken over after 1ns'`, inFlight)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var e string
		if err := rows.Scan(&id, &e); err != nil {
			t.Fatal(err)
		}
		if len(slow) < 3 {
			slow = append(slow, fmt.Sprintf("%d: %s", id, e))
		}
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if len(slow) > 0 {
		t.Errorf("in-flight work waited for staleness instead of being taken back at once by its own instance; e.g. %v", slow)
	}
	// Every one has its lost attempt recorded — or was settled by the killed
	// instance itself: a settle whose COMMIT reached Postgres just before
	// the kill is carried out after it, and the rows read as PROCESSING
	// above may include it (its one attempt is then a SUCCESS that finished
	// before the restart).
	var lost, settledDying int
	if err := c.DB.QueryRow(ctx, `SELECT count(DISTINCT notification_id) FILTER (WHERE outcome = 'UNKNOWN'),
		count(DISTINCT notification_id) FILTER (WHERE outcome = 'SUCCESS' AND finished_at < $2)
		FROM notification_attempts WHERE notification_id = ANY($1)`, inFlight, restarted).Scan(&lost, &settledDying); err != nil || lost+settledDying != len(inFlight) {
		t.Errorf("%d of the %d in-flight notifications have their lost attempt recorded and %d were settled by the killed instance (%v), want all one or the other",
			lost, len(inFlight), settledDying, err)
	}
}
