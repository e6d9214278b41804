package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/sdk/wire"
)

func dailyQuiz(cron, tz string) config.Schedule {
	return config.Schedule{
		Channel: "quiz", Cron: cron, Timezone: tz, Lead: 10 * time.Minute, MaxLate: time.Hour, ChunkSize: 7,
		Audience: config.Audience{Topic: "daily-quiz"},
		Payload:  map[string]any{"object_type": "text", "text": "Quiz #{{.data.n}} for {{.recipient}} at {{.fire_time.Format \"15:04 MST\"}}"},
	}
}

// runs lists a schedule's runs, oldest fire time first.
func runs(t *testing.T, b *testBundle, s *Service, schedule string) []wire.Job {
	t.Helper()
	jobs, err := s.ListJobs(b.ctx, wire.JobQuery{Schedule: schedule})
	if err != nil {
		t.Fatalf("ListJobs: %v", err)
	}
	for i, j := 0, len(jobs)-1; i < j; i, j = i+1, j-1 {
		jobs[i], jobs[j] = jobs[j], jobs[i]
	}
	return jobs
}

func TestService_RunOnce_firesInZoneAcrossDST(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Schedules["daily-quiz"] = dailyQuiz("0 8 * * *", "America/New_York")
	seedTopic(t, b.ctx, b.db.Pool, "daily-quiz", "quiz", 20, 0)
	s := b.service(t, "a")

	steps := []struct {
		now       string
		wantRuns  int
		wantFire  string // of the newest run
		wantLocal string
	}{
		{"2024-03-09T12:00:00Z", 0, "", ""}, // first seen at 07:00 EST
		{"2024-03-09T12:49:59Z", 0, "", ""}, // a second before the lead
		{"2024-03-09T12:50:00Z", 1, "2024-03-09T13:00:00Z", "08:00 EST"},
		{"2024-03-09T12:59:00Z", 1, "2024-03-09T13:00:00Z", "08:00 EST"}, // not created twice
		// Spring forward: 08:00 EDT is an hour earlier in UTC.
		{"2024-03-10T11:49:59Z", 1, "2024-03-09T13:00:00Z", "08:00 EST"},
		{"2024-03-10T11:50:00Z", 2, "2024-03-10T12:00:00Z", "08:00 EDT"},
	}
	for _, st := range steps {
		b.clock.Set(utc(st.now))
		if err := s.RunOnce(b.ctx); err != nil {
			t.Fatalf("RunOnce at %s: %v", st.now, err)
		}
		got := runs(t, b, s, "daily-quiz")
		if len(got) != st.wantRuns {
			t.Fatalf("at %s: %d runs, want %d", st.now, len(got), st.wantRuns)
		}
		if st.wantRuns == 0 {
			continue
		}
		last := got[len(got)-1]
		if f := last.FireTime.UTC().Format(time.RFC3339); f != st.wantFire {
			t.Errorf("at %s: newest run fires %s, want %s", st.now, f, st.wantFire)
		}
		if last.State != jobDone || last.Done != 20 || last.Total == nil || *last.Total != 20 {
			t.Errorf("at %s: run %s, want DONE 20/20", st.now, jobLine(last))
		}
		// The rows: due at the fire time, keyed by schedule, fire time and
		// recipient, payload rendered with the subscriber's attributes.
		var (
			n              int
			due            time.Time
			key, text, obj string
		)
		err := b.db.Pool.QueryRow(b.ctx, `
			SELECT count(*) OVER (), due_at, idempotency_key, payload->>'text', payload->>'object_type'
			FROM notifications WHERE job_id = $1 AND recipient = 'addr-3'`, last.ID).Scan(&n, &due, &key, &text, &obj)
		if err != nil {
			t.Fatalf("read row of addr-3: %v", err)
		}
		if !due.Equal(utc(st.wantFire)) {
			t.Errorf("due_at = %s, want the fire time %s", due.UTC(), st.wantFire)
		}
		if want := "schedule:daily-quiz:" + st.wantFire + ":addr-3"; key != want {
			t.Errorf("idempotency_key = %q, want %q", key, want)
		}
		if want := "Quiz #3 for addr-3 at " + st.wantLocal; text != want || obj != "text" {
			t.Errorf("payload = {text: %q, object_type: %q}, want {text: %q, object_type: text}", text, obj, want)
		}
	}
	var status string
	var total int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT min(status), count(*) FROM notifications`).Scan(&status, &total); err != nil {
		t.Fatal(err)
	}
	if status != "PENDING" || total != 40 {
		t.Errorf("notifications: %d rows, min status %s; want 40 PENDING", total, status)
	}
}

func TestService_RunOnce_missedFireTimes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Schedules["daily-quiz"] = dailyQuiz("0 8 * * *", "Asia/Seoul") // 23:00Z the day before
	seedTopic(t, b.ctx, b.db.Pool, "daily-quiz", "quiz", 10, 0)
	s := b.service(t, "a")

	b.clock.Set(utc("2024-03-01T12:00:00Z")) // first seen
	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	t.Run("within max_late fires late", func(t *testing.T) {
		// Every instance was down over 2024-03-01T23:00Z; back 30 minutes late.
		b.clock.Set(utc("2024-03-01T23:30:00Z"))
		if err := s.RunOnce(b.ctx); err != nil {
			t.Fatal(err)
		}
		got := runs(t, b, s, "daily-quiz")
		if len(got) != 1 || got[0].State != jobDone || !got[0].FireTime.Equal(utc("2024-03-01T23:00:00Z")) {
			t.Fatalf("runs = %v, want one DONE run at 2024-03-01T23:00:00Z", got)
		}
		var late int
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM notifications WHERE job_id = $1 AND due_at <= $2`,
			got[0].ID, b.clock.Now()).Scan(&late); err != nil || late != 10 {
			t.Errorf("rows due already (go out at once): %d, %v; want 10", late, err)
		}
	})
	t.Run("over max_late is recorded as skipped", func(t *testing.T) {
		// Down from before 2024-03-02T23:00Z until 2024-03-05T01:00Z: the
		// latest missed fire (03-04T23:00Z) is two hours late.
		b.clock.Set(utc("2024-03-05T01:00:00Z"))
		if err := s.RunOnce(b.ctx); err != nil {
			t.Fatal(err)
		}
		got := runs(t, b, s, "daily-quiz")
		if len(got) != 2 {
			t.Fatalf("runs = %v, want 2", got)
		}
		sk := got[1]
		if sk.State != jobSkipped || !sk.FireTime.Equal(utc("2024-03-04T23:00:00Z")) || !strings.Contains(sk.Error, "max_late") {
			t.Errorf("second run = %s (%q), want SKIPPED at 2024-03-04T23:00:00Z naming max_late", jobLine(sk), sk.Error)
		}
		if n := len(jobRecipients(t, b.ctx, b.db.Pool, sk.ID)); n != 0 {
			t.Errorf("skipped run has %d notifications, want 0", n)
		}
	})
	t.Run("back on time afterwards", func(t *testing.T) {
		b.clock.Set(utc("2024-03-05T22:50:00Z"))
		if err := s.RunOnce(b.ctx); err != nil {
			t.Fatal(err)
		}
		got := runs(t, b, s, "daily-quiz")
		if len(got) != 3 || got[2].State != jobDone || !got[2].FireTime.Equal(utc("2024-03-05T23:00:00Z")) {
			t.Fatalf("runs = %v, want a third, DONE, at 2024-03-05T23:00:00Z", got)
		}
	})
}

func TestService_RunOnce_threeInstancesCreateOneRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Schedules["daily-quiz"] = dailyQuiz("0 8 * * *", "Europe/Berlin")
	const n = 500
	seedTopic(t, b.ctx, b.db.Pool, "daily-quiz", "quiz", n, 0)
	svcs := []*Service{b.service(t, "a"), b.service(t, "b"), b.service(t, "c")}
	b.clock.Set(utc("2024-03-30T12:00:00Z"))
	if err := svcs[0].RunOnce(b.ctx); err != nil { // first seen
		t.Fatal(err)
	}
	// Berlin switches to CEST on 2024-03-31: 08:00 is 06:00Z, lead from 05:50Z.
	b.clock.Set(utc("2024-03-31T05:50:00Z"))
	for round := range 3 {
		var wg sync.WaitGroup
		errs := make([]error, len(svcs))
		for i, s := range svcs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.RunOnce(b.ctx)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	got := runs(t, b, svcs[0], "daily-quiz")
	if len(got) != 1 || !got[0].FireTime.Equal(utc("2024-03-31T06:00:00Z")) || got[0].State != jobDone {
		t.Fatalf("runs = %v, want exactly one DONE run at 2024-03-31T06:00:00Z", got)
	}
	if d := diffSets(jobRecipients(t, b.ctx, b.db.Pool, got[0].ID), expectedRecipients(n, 0)); d != "" {
		t.Errorf("notifications differ from the audience: %s", d)
	}
}

// TestService_takeOver kills the instance running a job after k chunks (it
// stops dead: no release, no heartbeat), and checks that another instance
// leaves the job alone while its heartbeat is fresh, takes it over once it
// is older than stuck_after, resumes at the cursor, and that the rows equal
// the audience exactly.
func TestService_takeOver(t *testing.T) {
	t.Parallel()
	// A static payload to a topic is materialised inside Postgres, a
	// template in Go: both must resume alike.
	for name, payload := range map[string]map[string]any{
		"template": {"msg": "hello {{.recipient}}"},
		"static":   {"msg": "hello"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testTakeOver(t, payload)
		})
	}
}

func testTakeOver(t *testing.T, payload map[string]any) {
	const (
		n           = 2000
		noAddrEvery = 9
		chunk       = 100
		killAfter   = 7
	)
	b := setup(t)
	b.cfg.Jobs.ChunkSize = chunk
	seedTopic(t, b.ctx, b.db.Pool, "news", "hooks", n, noAddrEvery)
	a, other := b.service(t, "a"), b.service(t, "b")
	a.afterChunk = func(_ int64, k int) error {
		if k == killAfter {
			return errAbandon
		}
		return nil
	}
	job, err := a.CreateCampaign(b.ctx, wire.Campaign{Channel: "hooks", Audience: wire.Audience{Topic: "news"},
		Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.RunOnce(b.ctx); !errors.Is(err, errAbandon) {
		t.Fatalf("instance a RunOnce = %v, want it killed (errAbandon)", err)
	}
	mid := mustGetJob(t, b.ctx, a, job.ID)
	if mid.State != jobRunning || mid.Owner != "a" || mid.Done != killAfter*chunk || mid.Cursor == "" {
		t.Fatalf("after the kill: %s, want RUNNING owned by a with %d done and a cursor", jobLine(mid), killAfter*chunk)
	}
	inserted := len(jobRecipients(t, b.ctx, b.db.Pool, job.ID))

	var resumedAt []string
	other.beforeChunk = func(int64, int) {
		if len(resumedAt) == 0 {
			j := mustGetJob(t, b.ctx, other, job.ID)
			resumedAt = append(resumedAt, j.Cursor)
		}
	}
	b.clock.Advance(b.cfg.Jobs.StuckAfter - time.Second)
	if err := other.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	if j := mustGetJob(t, b.ctx, other, job.ID); j.Owner != "a" || j.State != jobRunning {
		t.Fatalf("before stuck_after: %s, want still RUNNING and a's", jobLine(j))
	}
	b.clock.Advance(2 * time.Second)
	if err := other.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	end := mustGetJob(t, b.ctx, other, job.ID)
	if end.State != jobDone || end.Done != n || end.Total == nil || *end.Total != n || end.Skipped != n/noAddrEvery {
		t.Errorf("end: %s, want DONE %d/%d with %d skipped", jobLine(end), n, n, n/noAddrEvery)
	}
	if len(resumedAt) != 1 || resumedAt[0] != mid.Cursor {
		t.Errorf("b resumed at cursor %v, want %q (where a stopped)", resumedAt, mid.Cursor)
	}
	if inserted == 0 || inserted >= len(expectedRecipients(n, noAddrEvery)) {
		t.Errorf("a inserted %d rows before dying, want some but not all", inserted)
	}
	if d := diffSets(jobRecipients(t, b.ctx, b.db.Pool, job.ID), expectedRecipients(n, noAddrEvery)); d != "" {
		t.Errorf("notifications differ from the audience: %s", d)
	}
}

// TestService_deposedOwnerCommitsNothing lets an instance stall before its
// chunk commit while another takes the job over and finishes it: the
// stalled commit must change nothing.
func TestService_deposedOwnerCommitsNothing(t *testing.T) {
	t.Parallel()
	const n, chunk = 1000, 50
	b := setup(t)
	b.cfg.Jobs.ChunkSize = chunk
	seedTopic(t, b.ctx, b.db.Pool, "news", "hooks", n, 0)
	a, other := b.service(t, "a"), b.service(t, "b")
	job, err := a.CreateCampaign(b.ctx, wire.Campaign{Channel: "hooks", Audience: wire.Audience{Topic: "news"},
		Payload: map[string]any{"msg": "static"}})
	if err != nil {
		t.Fatal(err)
	}
	var otherErr error
	a.beforeChunk = func(_ int64, k int) {
		if k == 3 { // a has 3 chunks committed and is about to commit the 4th
			b.clock.Advance(b.cfg.Jobs.StuckAfter + time.Second)
			otherErr = other.RunOnce(b.ctx)
		}
	}
	if err := a.RunOnce(b.ctx); err != nil {
		t.Fatalf("a RunOnce = %v, want nil (it stops quietly when deposed)", err)
	}
	if otherErr != nil {
		t.Fatalf("b RunOnce: %v", otherErr)
	}
	end := mustGetJob(t, b.ctx, a, job.ID)
	if end.State != jobDone || end.Done != n {
		t.Errorf("end: %s, want DONE %d/%d", jobLine(end), n, n)
	}
	if d := diffSets(jobRecipients(t, b.ctx, b.db.Pool, job.ID), expectedRecipients(n, 0)); d != "" {
		t.Errorf("notifications differ from the audience: %s", d)
	}
}

func TestService_CancelJob(t *testing.T) {
	t.Parallel()
	const n, chunk = 1000, 100
	b := setup(t)
	b.cfg.Jobs.ChunkSize = chunk
	seedTopic(t, b.ctx, b.db.Pool, "news", "hooks", n, 0)
	s := b.service(t, "a")
	job, err := s.CreateCampaign(b.ctx, wire.Campaign{Channel: "hooks", Audience: wire.Audience{Topic: "news"},
		Payload: map[string]any{"msg": "m"}})
	if err != nil {
		t.Fatal(err)
	}
	var cancelled int64
	s.afterChunk = func(_ int64, k int) error {
		if k == 3 {
			_, cancelled, err = s.CancelJob(b.ctx, job.ID)
		}
		return nil
	}
	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("CancelJob: %v", err)
	}
	j := mustGetJob(t, b.ctx, s, job.ID)
	if j.State != jobCancelled || j.Done != 3*chunk {
		t.Errorf("job = %s, want CANCELLED after 3 chunks", jobLine(j))
	}
	var pending, cancelledRows int64
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FILTER (WHERE status = 'PENDING'), count(*) FILTER (WHERE status = 'CANCELLED')
		FROM notifications WHERE job_id = $1`, job.ID).Scan(&pending, &cancelledRows); err != nil {
		t.Fatal(err)
	}
	if pending != 0 || cancelledRows != 3*chunk || cancelled != 3*chunk {
		t.Errorf("rows: %d PENDING, %d CANCELLED (CancelJob said %d); want 0, %d, %d", pending, cancelledRows, cancelled, 3*chunk, 3*chunk)
	}
	t.Run("finished job", func(t *testing.T) {
		_, _, err := s.CancelJob(b.ctx, job.ID)
		if !errors.Is(err, ErrJobFinished) || !strings.Contains(err.Error(), "CANCELLED") {
			t.Errorf("CancelJob again = %v, want ErrJobFinished naming the state", err)
		}
	})
	t.Run("unknown job", func(t *testing.T) {
		if _, _, err := s.CancelJob(b.ctx, 424242); !errors.Is(err, ErrNotFound) {
			t.Errorf("CancelJob(424242) = %v, want ErrNotFound", err)
		}
	})
}

// TestService_queryAudienceKeysNullOrRepeated: an audience query whose key
// column holds a NULL or a repeated value. Before, keyset paging (key > the
// last chunk's) passed over a NULL past the first chunk and over a repeat
// falling past a chunk's end: the job was DONE 19/20 and 16/20, the missing
// members never told. Now the job is FAILED naming the column, nothing sent.
func TestService_queryAudienceKeysNullOrRepeated(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, rows, want string }{
		{"a NULL key in the last chunk", `SELECT CASE WHEN i = 20 THEN NULL ELSE i END, 'r' || i FROM generate_series(1, 20) i`,
			"audience query returned 1 of 20 rows with a NULL id: the key column must not be NULL"},
		{"keys repeated across chunk ends", `SELECT i / 2, 'r' || i FROM generate_series(1, 20) i`,
			"audience query returned 9 of 20 rows whose id repeats another row's: the key column must be unique"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			if _, err := b.db.Pool.Exec(b.ctx, `CREATE TABLE members (id int, r text); INSERT INTO members `+tt.rows); err != nil {
				t.Fatal(err)
			}
			b.cfg.Schedules["members"] = config.Schedule{Channel: "quiz", Cron: "0 8 * * *", Timezone: "Asia/Seoul", ChunkSize: 3,
				Audience: config.Audience{Key: "id", Query: `SELECT id, r AS recipient FROM members`}, Payload: map[string]any{"text": "hi"}}
			s := b.service(t, "a")
			run, err := s.RunNow(b.ctx, "members", RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_ = s.RunOnce(b.ctx)
			j := mustGetJob(t, b.ctx, s, run.ID)
			if j.State != jobFailed || !strings.Contains(j.Error, tt.want) {
				t.Errorf("job = %s, want FAILED with %q", jobLine(j), tt.want)
			}
			if got := jobRecipients(t, b.ctx, b.db.Pool, run.ID); len(got) != 0 {
				t.Errorf("%d notifications written, want none", len(got))
			}
		})
	}
}

func TestService_queryAudience(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The application's own users table, in the same database, as the seeds have.
	if _, err := b.db.Pool.Exec(b.ctx, `
		CREATE TABLE app_users (user_id uuid PRIMARY KEY, kakao_uuid text, alarm boolean, title text);
		INSERT INTO app_users
		SELECT md5(i::text)::uuid, CASE WHEN i % 10 = 0 THEN NULL ELSE 'kakao-' || i END, i % 4 <> 0, 'quiz ' || i
		FROM generate_series(1, 300) AS i`); err != nil {
		t.Fatal(err)
	}
	b.cfg.Jobs.ChunkSize = 16
	b.cfg.Schedules["alarm"] = config.Schedule{
		Channel: "quiz", Cron: "0 8 * * *", Timezone: "Asia/Seoul", ChunkSize: 16,
		Audience: config.Audience{Key: "user_id", Query: `
			SELECT user_id, kakao_uuid AS recipient, json_build_object('title', title) AS data
			FROM app_users WHERE alarm;`},
		Payload: map[string]any{"text": "Today's quiz: {{.data.title}}", "n": 1},
	}
	s := b.service(t, "a")
	if err := s.CheckAudiences(b.ctx); err != nil {
		t.Fatalf("CheckAudiences: %v", err)
	}
	run, err := s.RunNow(b.ctx, "alarm", RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 1; i <= 300; i++ {
		if i%4 != 0 && i%10 != 0 {
			want = append(want, fmt.Sprintf("kakao-%d", i))
		}
	}
	j := mustGetJob(t, b.ctx, s, run.ID)
	if j.State != jobDone || j.Total == nil || *j.Total != 225 || j.Done != 225 || j.Skipped != 225-int64(len(want)) {
		t.Errorf("job = %s, want DONE 225/225 with %d skipped (NULL recipients)", jobLine(j), 225-len(want))
	}
	if d := diffSets(jobRecipients(t, b.ctx, b.db.Pool, run.ID), slices.Sorted(slices.Values(want))); d != "" {
		t.Errorf("notifications differ from the query's rows: %s", d)
	}
	var payload []byte
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT payload FROM notifications WHERE recipient = 'kakao-7'`).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(payload, &got); err != nil || got["text"] != "Today's quiz: quiz 7" || got["n"] != 1.0 {
		t.Errorf("payload = %s, want text \"Today's quiz: quiz 7\" and n 1", payload)
	}
}

func TestService_CheckAudiences_badQuery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.db.Pool.Exec(b.ctx, `CREATE TABLE app_users (id bigint, kakao text)`); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, query, key string
		want             []string
	}{
		{"query fails", "SELECT id, kakao AS recipient FROM no_such_table", "id",
			[]string{`schedule "alarm"`, "audience query fails", "no_such_table"}},
		{"lacks the key column", "SELECT kakao AS recipient FROM app_users", "id",
			[]string{`schedule "alarm"`, `returns no column "id"`, "returns: recipient"}},
		{"lacks recipient", "SELECT id, kakao FROM app_users", "id",
			[]string{`schedule "alarm"`, `returns no column "recipient"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := *b.cfg
			cfg.Schedules = map[string]config.Schedule{"alarm": {
				Channel: "quiz", Cron: "0 8 * * *", Timezone: "UTC", ChunkSize: 10,
				Audience: config.Audience{Query: tt.query, Key: tt.key}, Payload: map[string]any{"t": "x"},
			}}
			s, err := New(b.db.Pool, &cfg, Options{Now: b.clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Start(b.ctx)
			if err == nil {
				_ = s.Stop(context.Background())
				t.Fatal("Start succeeded, want an error naming the schedule")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Start error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestService_StartStop(t *testing.T) {
	t.Parallel()
	const n, chunk = 3000, 100
	b := setup(t)
	b.cfg.Jobs.ChunkSize = chunk
	seedTopic(t, b.ctx, b.db.Pool, "news", "hooks", n, 0)
	s, err := New(b.db.Pool, b.cfg, Options{Now: b.clock.Now, InstanceID: "a", PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	var once sync.Once
	s.beforeChunk = func(_ int64, k int) {
		if k == 5 {
			once.Do(func() {
				go func() { _ = s.Stop(context.Background()); close(stopped) }()
				time.Sleep(50 * time.Millisecond) // let Stop cancel the context first
			})
		}
	}
	job, err := s.CreateCampaign(b.ctx, wire.Campaign{Channel: "hooks", Audience: wire.Audience{Topic: "news"}, Payload: map[string]any{"m": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(b.ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	case <-time.After(time.Minute):
		t.Fatal("Stop did not return")
	}
	mid := mustGetJob(t, b.ctx, s, job.ID)
	if mid.State != jobPending || mid.Owner != "" || mid.Done != 5*chunk || mid.Cursor == "" {
		t.Fatalf("after Stop: %s, want PENDING, no owner, %d done, cursor kept", jobLine(mid), 5*chunk)
	}
	// Any instance resumes a released job at once, without waiting for stuck_after.
	other := b.service(t, "b")
	if err := other.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	end := mustGetJob(t, b.ctx, other, job.ID)
	if end.State != jobDone || end.Done != n {
		t.Errorf("end: %s, want DONE %d/%d", jobLine(end), n, n)
	}
	if d := diffSets(jobRecipients(t, b.ctx, b.db.Pool, job.ID), expectedRecipients(n, 0)); d != "" {
		t.Errorf("notifications differ from the audience: %s", d)
	}
}

// TestService_commitChunk_guards: a chunk from a worker that is not the
// owner, or whose cursor is not the job's, or for a job no longer RUNNING,
// inserts nothing and moves nothing.
func TestService_commitChunk_guards(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.service(t, "a")
	job, err := s.CreateCampaign(b.ctx, wire.Campaign{Channel: "hooks", Audience: wire.Audience{Topic: "news"}, Payload: map[string]any{"m": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := s.acquire(b.ctx, job.ID)
	if err != nil || claimed == nil {
		t.Fatalf("acquire = %v, %v", claimed, err)
	}
	conn, release, err := s.chunkConn(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	chunk := renderedChunk{recipients: []string{"intruder"}, payloads: []string{`{"m":"x"}`}, processed: 1, cursor: "5"}
	intruders := func() int {
		var n int
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM notifications WHERE recipient = 'intruder'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	other := b.service(t, "b")
	if err := other.commitChunk(b.ctx, conn, claimed, chunk); !errors.Is(err, errDeposed) {
		t.Errorf("commit by a non-owner = %v, want errDeposed", err)
	}
	stale := *claimed
	stale.Cursor = "3"
	if err := s.commitChunk(b.ctx, conn, &stale, chunk); !errors.Is(err, errDeposed) {
		t.Errorf("commit from a stale cursor = %v, want errDeposed", err)
	}
	if n := intruders(); n != 0 {
		t.Fatalf("%d rows inserted by refused chunks, want 0", n)
	}
	if err := s.commitChunk(b.ctx, conn, claimed, chunk); err != nil || intruders() != 1 {
		t.Fatalf("commit by the owner = %v with %d rows, want nil and 1", err, intruders())
	}
	if _, _, err := s.CancelJob(b.ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	chunk.recipients, chunk.cursor = []string{"late"}, "6"
	if err := s.commitChunk(b.ctx, conn, claimed, chunk); !errors.Is(err, errDeposed) {
		t.Errorf("commit after cancel = %v, want errDeposed", err)
	}
	if j := mustGetJob(t, b.ctx, s, job.ID); j.Cursor != "5" || j.Done != 1 || j.State != jobCancelled {
		t.Errorf("job = %s, want CANCELLED at cursor 5 with 1 done", jobLine(j))
	}
}

// TestService_materialiseInDB_guards: the in-Postgres chunk of a static
// payload to a topic refuses a non-owner and a stale cursor too.
func TestService_materialiseInDB_guards(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedTopic(t, b.ctx, b.db.Pool, "news", "hooks", 50, 0)
	s, other := b.service(t, "a"), b.service(t, "b")
	job, err := s.CreateCampaign(b.ctx, wire.Campaign{Channel: "hooks", Audience: wire.Audience{Topic: "news"}, Payload: map[string]any{"m": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := s.acquire(b.ctx, job.ID)
	if err != nil || claimed == nil {
		t.Fatalf("acquire = %v, %v", claimed, err)
	}
	conn, release, err := s.chunkConn(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	aud := topicAudience{topic: "news", channel: "hooks"}
	notOwner := *claimed
	if err := other.materialiseInDB(b.ctx, conn, &notOwner, aud, `{"m":"x"}`); !errors.Is(err, errDeposed) {
		t.Errorf("non-owner = %v, want errDeposed", err)
	}
	stale := *claimed
	stale.Cursor = "7"
	if err := s.materialiseInDB(b.ctx, conn, &stale, aud, `{"m":"x"}`); !errors.Is(err, errDeposed) {
		t.Errorf("stale cursor = %v, want errDeposed", err)
	}
	if got := jobRecipients(t, b.ctx, b.db.Pool, job.ID); len(got) != 0 {
		t.Fatalf("refused chunks inserted %d rows, want 0", len(got))
	}
	if err := s.materialiseInDB(b.ctx, conn, claimed, aud, `{"m":"x"}`); err != nil {
		t.Fatal(err)
	}
	if d := diffSets(jobRecipients(t, b.ctx, b.db.Pool, job.ID), expectedRecipients(50, 0)); d != "" {
		t.Errorf("owner's run: %s", d)
	}
}

// TestService_RunOnce_fireTimesAheadOfTheClock: the run an instance creates
// is at most lead ahead of its clock, so a recorded fire time (or a first
// sight) far ahead of now comes from another instance's clock (a VM resumed
// with a wrong clock, an NTP step) or from SQL. The schedule's next fire
// was sought after the latest recorded one, so one instance whose clock read
// 2030 for a moment stopped the schedule on every instance until 2030,
// silently; a first_seen_at of -infinity stopped every schedule's
// evaluation ("cannot scan"). Times past the instance's own horizon (now +
// lead) are not taken for the schedule's last fire time.
func TestService_RunOnce_fireTimesAheadOfTheClock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Schedules["daily-quiz"] = dailyQuiz("0 8 * * *", "Asia/Seoul") // 23:00Z the day before
	b.cfg.Schedules["other"] = dailyQuiz("0 9 * * *", "Asia/Seoul")
	seedTopic(t, b.ctx, b.db.Pool, "daily-quiz", "quiz", 3, 0)
	s := b.service(t, "a")
	b.clock.Set(utc("2024-03-01T12:00:00Z")) // first seen
	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	// Another instance, its clock at 2030 for a moment, made the run of
	// the fire time it saw in its lead.
	only := *b.cfg
	only.Schedules = map[string]config.Schedule{"daily-quiz": b.cfg.Schedules["daily-quiz"]}
	skewed, err := New(b.db.Pool, &only, Options{Now: func() time.Time { return utc("2030-06-01T22:55:00Z") }, InstanceID: "skewed"})
	if err != nil {
		t.Fatal(err)
	}
	if err := skewed.evaluate(b.ctx, utc("2030-06-01T22:55:00Z")); err != nil {
		t.Fatal(err)
	}
	// A first sight written as -infinity (by SQL of your own).
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE schedules SET first_seen_at = '-infinity' WHERE name = 'other'`); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(utc("2024-03-01T22:55:00Z")) // in the lead of 2024-03-01T23:00Z
	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	for name, fire := range map[string]string{"daily-quiz": "2024-03-01T23:00:00Z", "other": "2024-03-02T00:00:00Z"} {
		if name == "other" {
			b.clock.Set(utc("2024-03-01T23:55:00Z"))
			if err := s.RunOnce(b.ctx); err != nil {
				t.Fatalf("RunOnce: %v", err)
			}
		}
		var fires []string
		for _, j := range runs(t, b, s, name) {
			fires = append(fires, j.FireTime.UTC().Format(time.RFC3339)+" "+j.State)
		}
		if !slices.Contains(fires, fire+" "+jobDone) {
			t.Errorf("%s: runs %v; want the run of %s DONE", name, fires, fire)
		}
	}
}

// TestService_RunOnce_firstSeenLongAgo: a schedule first seen by an
// instance whose clock read 1970 (a machine that booted without its clock
// set), or whose first_seen_at SQL wrote long ago. The planner walked the
// fire times since then one at a time, at most a million a tick (2 s of CPU
// for a five-field cron), recorded the millionth as SKIPPED, and created
// the one after it — 1971, an age past — as a run that was materialised and
// sent to the whole audience; the next tick walked the next million, every
// tick until it caught up. Now the planner goes to the latest missed fire
// time at once: that one runs (or is SKIPPED past max_late, saying how many
// were missed before it), the next is created in its lead, and nothing
// older is created at all.
func TestService_RunOnce_firstSeenLongAgo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Schedules["minutely"] = dailyQuiz("* * * * *", "UTC")
	b.cfg.Schedules["daily-quiz"] = dailyQuiz("0 8 * * *", "UTC")
	b.cfg.Schedules["every-second"] = dailyQuiz("@every 1s", "UTC")
	seedTopic(t, b.ctx, b.db.Pool, "daily-quiz", "quiz", 3, 0)
	s := b.service(t, "a")
	if _, err := b.db.Pool.Exec(b.ctx, `INSERT INTO schedules (name, first_seen_at)
		SELECT unnest(ARRAY['minutely', 'daily-quiz', 'every-second']), '1970-01-01T00:00:00Z'`); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(utc("2024-03-01T12:00:30Z"))
	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]string{
		// 30 s late: runs; the next one is in its lead.
		"minutely": {"2024-03-01T12:00:00Z DONE", "2024-03-01T12:01:00Z DONE"},
		// 4 h late, past max_late: SKIPPED, and says what was missed before.
		"daily-quiz":   {"2024-03-01T08:00:00Z SKIPPED"},
		"every-second": {"2024-03-01T12:00:30Z DONE", "2024-03-01T12:00:31Z DONE"},
	} {
		var got []string
		for _, j := range runs(t, b, s, name) {
			got = append(got, j.FireTime.UTC().Format(time.RFC3339)+" "+j.State)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: runs %v, want %v", name, got, want)
		}
	}
	if got := runs(t, b, s, "daily-quiz"); len(got) == 1 {
		if want := "19783 earlier fire times from 1970-01-01T08:00:00Z"; !strings.Contains(got[0].Error, want) {
			t.Errorf("SKIPPED run says %q; want it to name %q", got[0].Error, want)
		}
	}
	var old int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM notifications WHERE due_at < '2024-03-01'`).Scan(&old); err != nil || old != 0 {
		t.Errorf("notifications due before 2024: %d (%v); want 0", old, err)
	}
}

// TestService_RunOnce_runsAheadBounded: a run is created lead before its
// fire time, one a tick, and materialised at once. With a long lead on a
// frequent cron (lead 24h, every minute) each tick created one more run
// ahead, each the whole audience written PENDING: 1,440 of them a day
// ahead. At most MaxRunsAhead runs wait ahead of now; the next is created
// as the first of them fires.
func TestService_RunOnce_runsAheadBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sc := dailyQuiz("* * * * *", "UTC")
	sc.Lead = 24 * time.Hour
	b.cfg.Schedules["minutely"] = sc
	seedTopic(t, b.ctx, b.db.Pool, "daily-quiz", "quiz", 2, 0)
	s := b.service(t, "a")
	b.clock.Set(utc("2024-03-01T12:00:30Z"))
	for range MaxRunsAhead + 5 {
		if err := s.RunOnce(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := runs(t, b, s, "minutely"); len(got) != MaxRunsAhead ||
		!got[len(got)-1].FireTime.Equal(utc("2024-03-01T12:10:00Z")) {
		t.Fatalf("after %d ticks: %d runs ahead (the last at %s); want %d, the last at 12:10", MaxRunsAhead+5, len(got),
			got[len(got)-1].FireTime.UTC().Format(time.RFC3339), MaxRunsAhead)
	}
	b.clock.Set(utc("2024-03-01T12:01:00Z")) // the first fires: one more
	for range 3 {
		if err := s.RunOnce(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := runs(t, b, s, "minutely"); len(got) != MaxRunsAhead+1 || !got[len(got)-1].FireTime.Equal(utc("2024-03-01T12:11:00Z")) {
		t.Errorf("once the first fired: %d runs; want %d, the last at 12:11", len(got), MaxRunsAhead+1)
	}
}
