package schedule

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Environment of the child process TestService_killNine starts: this test
// binary again, materialising one job until it is killed.
const (
	envChildDB  = "SCHEDULE_TEST_CHILD_DB"
	envChildJob = "SCHEDULE_TEST_CHILD_JOB"
)

func TestMain(m *testing.M) {
	if os.Getenv(envChildDB) != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

// runChild materialises the job named by the environment, slowly (a pause
// after every chunk), as instance "child", until the parent kills it.
func runChild() int {
	ctx := context.Background()
	id, err := strconv.ParseInt(os.Getenv(envChildJob), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	pc, err := pgxpool.ParseConfig(os.Getenv(envChildDB))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	pc.ConnConfig.RuntimeParams["application_name"] = childAppName(id)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	cfg := config.Default()
	cfg.Channels = map[string]config.Channel{"hooks": {Plugin: "webhook"}}
	cfg.Jobs.ChunkSize = 100
	cfg.Jobs.Heartbeat, cfg.Jobs.StuckAfter = time.Hour, 2*time.Hour
	s, err := New(pool, &cfg, Options{InstanceID: "child"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	s.afterChunk = func(int64, int) error { time.Sleep(10 * time.Millisecond); return nil }
	if _, err := s.RunJob(ctx, id); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// childAppName names the child's Postgres sessions, so the parent can wait
// for them to end.
func childAppName(job int64) string { return "schedule-kill-child-" + strconv.FormatInt(job, 10) }

// TestService_killNine kills -9 a process half-way through a job (its
// connection drops, maybe mid-chunk), then checks that an instance in this
// process takes the job over once its heartbeat is older than stuck_after
// and that the rows equal the audience exactly.
func TestService_killNine(t *testing.T) {
	t.Parallel()
	const n = 20_000
	b := setup(t)
	seedTopic(t, b.ctx, b.db.Pool, "news", "hooks", n, 13)
	s := b.service(t, "survivor")
	job, err := s.CreateCampaign(b.ctx, wire.Campaign{Channel: "hooks", Audience: wire.Audience{Topic: "news"}, Payload: map[string]any{"m": "{{.recipient}}"}})
	if err != nil {
		t.Fatal(err)
	}

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), envChildDB+"="+b.db.URL, envChildJob+"="+strconv.FormatInt(job.ID, 10))
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	var mid wire.Job
	for {
		mid = mustGetJob(t, b.ctx, s, job.ID)
		if mid.Done >= n/4 || mid.Terminal() || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := child.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = child.Wait()
	// A COMMIT the child sent just before it died still lands (a chunk more,
	// a newer heartbeat, once after a slow chunk more than the second the
	// clock below allows): the job is read once its sessions are gone.
	for {
		var sessions int
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, childAppName(job.ID)).Scan(&sessions); err != nil {
			t.Fatal(err)
		}
		if sessions == 0 {
			break
		}
		if time.Now().After(deadline.Add(time.Minute)) {
			t.Fatalf("the killed child's %d Postgres sessions still open", sessions)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mid = mustGetJob(t, b.ctx, s, job.ID)
	if mid.State != jobRunning || mid.Owner != "child" || mid.Done == 0 || mid.Done >= n {
		t.Fatalf("after kill -9: %s, want RUNNING, owned by child, part done", jobLine(mid))
	}

	// Now on the heartbeat's clock: fresh, then stale.
	b.clock.Set(mid.Heartbeat.Add(time.Minute))
	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	if j := mustGetJob(t, b.ctx, s, job.ID); j.Owner != "child" {
		t.Fatalf("taken over before stuck_after: %s", jobLine(j))
	}
	b.clock.Set(mid.Heartbeat.Add(b.cfg.Jobs.StuckAfter + time.Second))
	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	end := mustGetJob(t, b.ctx, s, job.ID)
	if end.State != jobDone || end.Done != n || end.Skipped != n/13 {
		t.Errorf("end: %s, want DONE %d/%d, %d skipped", jobLine(end), n, n, n/13)
	}
	if d := diffSets(jobRecipients(t, b.ctx, b.db.Pool, job.ID), expectedRecipients(n, 13)); d != "" {
		t.Errorf("notifications differ from the audience: %s", d)
	}
	t.Logf("killed at %d/%d (cursor %s); survivor resumed and finished", mid.Done, n, mid.Cursor)
}
