package schedule

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

func TestService_RunNow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Schedules["daily-quiz"] = dailyQuiz("0 8 * * *", "Asia/Seoul")
	seedTopic(t, b.ctx, b.db.Pool, "daily-quiz", "quiz", 30, 0)
	s := b.service(t, "a")
	b.clock.Set(utc("2024-03-01T03:04:05.678Z"))

	first, err := s.RunNow(b.ctx, "daily-quiz", RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.RunNow(b.ctx, "daily-quiz", RunOptions{})
	if err != nil || again.ID != first.ID {
		t.Errorf("RunNow twice in one second = job %v, %v; want the same job %d", again, err, first.ID)
	}
	if !first.FireTime.Equal(utc("2024-03-01T03:04:05Z")) || first.FireTime.Location().String() != "Asia/Seoul" {
		t.Errorf("fire time = %s, want 2024-03-01T03:04:05Z shown in Asia/Seoul", first.FireTime)
	}
	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	if j := mustGetJob(t, b.ctx, s, first.ID); j.State != jobDone || j.Done != 30 {
		t.Errorf("run = %s, want DONE 30/30", jobLine(j))
	}
	if _, err := s.RunNow(b.ctx, "nope", RunOptions{}); !errors.Is(err, ErrUnknownSchedule) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("RunNow(nope) = %v, want ErrUnknownSchedule naming it", err)
	}
}

func TestService_Schedules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Schedules["daily-quiz"] = dailyQuiz("0 8 * * *", "America/New_York")
	b.cfg.Schedules["hourly"] = dailyQuiz("30 * * * *", "UTC")
	s := b.service(t, "a")
	b.clock.Set(utc("2024-03-09T14:00:00Z"))
	run, err := s.RunNow(b.ctx, "hourly", RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Schedules(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "daily-quiz" || got[1].Name != "hourly" {
		t.Fatalf("Schedules = %+v, want daily-quiz then hourly", got)
	}
	if !got[0].NextFire.Equal(utc("2024-03-10T12:00:00Z")) || got[0].LastRun != nil {
		t.Errorf("daily-quiz: next %s, last %v; want 2024-03-10T12:00:00Z (08:00 EDT), no run", got[0].NextFire, got[0].LastRun)
	}
	if !got[1].NextFire.Equal(utc("2024-03-09T14:30:00Z")) || got[1].LastRun == nil || got[1].LastRun.ID != run.ID {
		t.Errorf("hourly: next %s, last %v; want 14:30Z and job %d", got[1].NextFire, got[1].LastRun, run.ID)
	}
	if got[0].Lead != wire.Duration(10*time.Minute) || got[0].Timezone != "America/New_York" {
		t.Errorf("daily-quiz lead %s tz %s, want 10m America/New_York", time.Duration(got[0].Lead), got[0].Timezone)
	}
}

func TestService_CreateCampaign_invalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.service(t, "a")
	ok := map[string]any{"t": "x"}
	tests := []struct {
		name string
		c    wire.Campaign
		want string
	}{
		{"unknown channel", wire.Campaign{Channel: "sms", Audience: wire.Audience{Topic: "t"}, Payload: ok}, `channel "sms" is not configured`},
		{"no audience", wire.Campaign{Channel: "quiz", Payload: ok}, "give exactly one of topic or query"},
		{"both audiences", wire.Campaign{Channel: "quiz", Audience: wire.Audience{Topic: "t", Query: "SELECT 1", Key: "k"}, Payload: ok}, "give exactly one of topic or query"},
		{"bad topic", wire.Campaign{Channel: "quiz", Audience: wire.Audience{Topic: "a b"}, Payload: ok}, `topic "a b"`},
		{"query without key", wire.Campaign{Channel: "quiz", Audience: wire.Audience{Query: "SELECT 1"}, Payload: ok}, "audience.key is required"},
		{"query fails", wire.Campaign{Channel: "quiz", Audience: wire.Audience{Query: "SELEC 1", Key: "k"}, Payload: ok}, "audience query fails"},
		{"query lacks key", wire.Campaign{Channel: "quiz", Audience: wire.Audience{Query: "SELECT 'r' AS recipient", Key: "id"}, Payload: ok}, `returns no column "id"`},
		{"empty payload", wire.Campaign{Channel: "quiz", Audience: wire.Audience{Topic: "t"}}, "payload is empty"},
		{"bad template", wire.Campaign{Channel: "quiz", Audience: wire.Audience{Topic: "t"}, Payload: map[string]any{"t": "{{if}}"}}, "payload t"},
		// Before, both were stored: the first could not be read back
		// (scanJob decoded it as float64), failing every list of jobs and
		// holding its audience; the second read back as 1.3 MB, 20× the
		// template bound.
		{"a number past 100 characters", wire.Campaign{Channel: "quiz", Audience: wire.Audience{Topic: "t"},
			Payload: map[string]any{"t": "x", "n": json.Number("1e309")}}, "payload has a number at $.n"},
		{"a template reading back past its bound", wire.Campaign{Channel: "quiz", Audience: wire.Audience{Topic: "t"},
			Payload: map[string]any{"t": "x", "a": manyNumbers(13_000, json.Number("1e99"))}}, "payload template reads back as"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.CreateCampaign(b.ctx, tt.c)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CreateCampaign = %v, want ErrInvalid containing %q", err, tt.want)
			}
		})
	}
	if jobs, err := s.ListJobs(b.ctx, wire.JobQuery{}); err != nil || len(jobs) != 0 {
		t.Errorf("ListJobs = %v, %v; want no job created", jobs, err)
	}
}

// TestService_campaignNumbersExact: a template's numbers, kept exact by the
// door (json.Number), stay exact in the job and in what it sends, on both
// paths a topic takes (a static payload materialised in Postgres, a
// rendered one). Before, the job's payload was read back as float64:
// 12345678901234567890 was answered and sent as 12345678901234567000.
func TestService_campaignNumbersExact(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedTopic(t, b.ctx, b.db.Pool, "news", "hooks", 2, 0)
	s := b.service(t, "a")
	const n = "12345678901234567890"
	for name, text := range map[string]string{"static": "hi", "rendered": "hi {{.recipient}}"} {
		t.Run(name, func(t *testing.T) {
			job := b.runCampaign(t, s, wire.Audience{Topic: "news"}, map[string]any{"text": text, "n": json.Number(n)}, 0)
			if got := job.Payload["n"]; got != json.Number(n) {
				t.Errorf("job's payload n = %#v, want json.Number(%s)", got, n)
			}
			rows, err := b.db.Pool.Query(b.ctx, `SELECT payload->>'n' FROM notifications WHERE job_id = $1`, job.ID)
			if err != nil {
				t.Fatal(err)
			}
			sent, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil || len(sent) != 2 || sent[0] != n || sent[1] != n {
				t.Errorf("notifications' n = %v, %v; want %s twice", sent, err, n)
			}
		})
	}
}

// TestService_ListJobs_pageBound: a page of jobs stops at
// outbox.MaxPageBytes past its first job, as a dead-letter page does, and
// paging on with the last id reads every job once. Each template reads back
// within 128 KiB, but before, a page of 1,000 such jobs was read whole.
func TestService_ListJobs_pageBound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.service(t, "a")
	const jobs = 150 // of 120 KB each: 18 MB
	if _, err := b.db.Pool.Exec(b.ctx, `
		INSERT INTO jobs (kind, timezone, channel, audience, payload)
		SELECT 'campaign', 'UTC', 'quiz', '{"topic":"news"}', jsonb_build_object('t', repeat('x', 120000))
		FROM generate_series(1, $1)`, jobs); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	pages, before := 0, int64(0)
	for ; pages < jobs; pages++ {
		page, err := s.ListJobs(b.ctx, wire.JobQuery{Before: before, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if pages == 0 && len(page) > outbox.MaxPageBytes/120_000+1 {
			t.Errorf("first page: %d jobs of 120 KB, want it to stop past %d bytes", len(page), outbox.MaxPageBytes)
		}
		for _, j := range page {
			if seen[j.ID] || j.Payload["t"] == nil {
				t.Fatalf("job %d listed twice or without its payload", j.ID)
			}
			seen[j.ID] = true
		}
		before = page[len(page)-1].ID
	}
	if len(seen) != jobs || pages < 2 {
		t.Errorf("paged through %d jobs in %d pages, want all %d in more than one", len(seen), pages, jobs)
	}
}

func TestService_runFailures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedTopic(t, b.ctx, b.db.Pool, "news", "hooks", 10, 0)
	if _, err := b.db.Pool.Exec(b.ctx, `CREATE TABLE people (id int, r text)`); err != nil {
		t.Fatal(err)
	}
	s := b.service(t, "a")
	t.Run("template that does not render: each recipient FAILED, the run goes on", func(t *testing.T) {
		job, err := s.CreateCampaign(b.ctx, wire.Campaign{Channel: "hooks", Audience: wire.Audience{Topic: "news"},
			Payload: map[string]any{"t": "{{.data.missing}}"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RunOnce(b.ctx); err != nil {
			t.Fatal(err)
		}
		j := mustGetJob(t, b.ctx, s, job.ID)
		if j.State != jobDone || j.Failed != 10 {
			t.Errorf("job = %s failed %d, want DONE with 10 failed", jobLine(j), j.Failed)
		}
		var reason string
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT last_error FROM notifications WHERE job_id = $1 AND recipient = 'addr-1' AND status = 'FAILED'`,
			job.ID).Scan(&reason); err != nil || !strings.Contains(reason, `render payload t for "addr-1"`) || !strings.Contains(reason, "missing") {
			t.Errorf("addr-1's notification: %q (%v), want FAILED naming the leaf, recipient and key", reason, err)
		}
	})
	t.Run("query broken after creation", func(t *testing.T) {
		job, err := s.CreateCampaign(b.ctx, wire.Campaign{Channel: "hooks", Audience: wire.Audience{Query: "SELECT id, r AS recipient FROM people", Key: "id"},
			Payload: map[string]any{"t": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.db.Pool.Exec(b.ctx, `DROP TABLE people`); err != nil {
			t.Fatal(err)
		}
		if err := s.RunOnce(b.ctx); err != nil {
			t.Fatal(err)
		}
		j := mustGetJob(t, b.ctx, s, job.ID)
		if j.State != jobFailed || !strings.Contains(j.Error, "people") {
			t.Errorf("job = %s error %q, want FAILED naming the missing table", jobLine(j), j.Error)
		}
	})
}

// TestService_oneRunningPerAudience: a job waits while another over the same
// audience (channel and topic) is RUNNING — a second run of the schedule and
// a campaign to the same topic alike; a campaign to another topic, or to the
// same topic on another channel, does not.
func TestService_oneRunningPerAudience(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Jobs.ChunkSize = 5
	b.cfg.Channels["sms"] = config.Channel{Plugin: "webhook"}
	b.cfg.Schedules["daily-quiz"] = dailyQuiz("0 8 * * *", "UTC")
	seedTopic(t, b.ctx, b.db.Pool, "daily-quiz", "quiz", 40, 0)
	seedTopic(t, b.ctx, b.db.Pool, "other", "quiz", 10, 0)
	a, other := b.service(t, "a"), b.service(t, "b")
	first, err := a.RunNow(b.ctx, "daily-quiz", RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	second, err := a.RunNow(b.ctx, "daily-quiz", RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.afterChunk = func(int64, int) error { return errAbandon } // a dies holding the first run
	if err := a.RunOnce(b.ctx); !errors.Is(err, errAbandon) {
		t.Fatalf("a RunOnce = %v, want errAbandon", err)
	}
	camp := func(channel, topic string) wire.Job {
		t.Helper()
		j, err := other.CreateCampaign(b.ctx, wire.Campaign{Channel: channel, Audience: wire.Audience{Topic: topic}, Payload: map[string]any{"t": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	sameAudience, otherTopic, otherChannel := camp("quiz", "daily-quiz"), camp("quiz", "other"), camp("sms", "daily-quiz")
	if err := other.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{second.ID, sameAudience.ID} {
		if j := mustGetJob(t, b.ctx, other, id); j.State != jobPending {
			t.Errorf("job %d = %s, want PENDING while run %d over the same audience is RUNNING", id, jobLine(j), first.ID)
		}
	}
	if j := mustGetJob(t, b.ctx, other, otherTopic.ID); j.State != jobDone || j.Done != 10 {
		t.Errorf("campaign to another topic = %s, want DONE 10/10", jobLine(j))
	}
	if j := mustGetJob(t, b.ctx, other, otherChannel.ID); j.State != jobDone {
		t.Errorf("campaign to the topic on another channel = %s, want DONE", jobLine(j))
	}
	b.clock.Advance(b.cfg.Jobs.StuckAfter + time.Second)
	if err := other.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{first.ID, second.ID, sameAudience.ID} {
		if j := mustGetJob(t, b.ctx, other, id); j.State != jobDone || j.Done != 40 {
			t.Errorf("job %d = %s, want DONE 40/40 after the takeover", id, jobLine(j))
		}
	}
	var running int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM jobs WHERE state = 'RUNNING'`).Scan(&running); err != nil || running != 0 {
		t.Errorf("%d jobs still RUNNING (%v), want 0", running, err)
	}
	// The index holds against any race: a second RUNNING job over the same
	// audience cannot exist.
	_, err = b.db.Pool.Exec(b.ctx, `UPDATE jobs SET state = 'RUNNING', owner = 'x' WHERE id = ANY($1)`, []int64{first.ID, sameAudience.ID})
	if !isUniqueViolation(err) {
		t.Errorf("two RUNNING jobs over one audience: err = %v, want a unique violation", err)
	}
}

// notificationsOf counts the notifications whose idempotency key starts with
// prefix.
func notificationsOf(t *testing.T, b *testBundle, prefix string) int {
	t.Helper()
	var n int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM notifications WHERE starts_with(idempotency_key, $1)`, prefix).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestService_RunNowFireTime: "run now" of a fire time is that fire time's
// one run. Asked again, a DONE run is refused and nothing is sent twice; a
// run that failed part-way resumes where it stopped, without duplicates; a
// forced re-run sends to everyone again, once, under keys of its own; "last"
// finds the latest fire time and a future one is refused.
func TestService_RunNowFireTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Jobs.ChunkSize = 5
	b.cfg.Schedules["daily-quiz"] = dailyQuiz("0 8 * * *", "Asia/Seoul")
	seedTopic(t, b.ctx, b.db.Pool, "daily-quiz", "quiz", 23, 0)
	s := b.service(t, "a")
	b.clock.Set(utc("2024-03-01T05:00:00Z")) // 14:00 in Seoul: today's 08:00 has passed
	fire := utc("2024-02-29T23:00:00Z")      // 08:00 KST

	last, err := s.RunNow(b.ctx, "daily-quiz", RunOptions{Last: true})
	if err != nil || last.Outcome != RunCreated || !last.FireTime.Equal(fire) {
		t.Fatalf("RunNow(last) = %s, %q, %v; want a new run at %s", jobLine(last), last.Outcome, err, fire)
	}
	again, err := s.RunNow(b.ctx, "daily-quiz", RunOptions{FireTime: fire})
	if err != nil || again.Outcome != RunExists || again.ID != last.ID {
		t.Fatalf("RunNow(fire) while PENDING = %s, %q, %v; want job %d, exists", jobLine(again), again.Outcome, err, last.ID)
	}
	// The run dies after two chunks and an operator's cancel ends it.
	s.afterChunk = func(_ int64, chunk int) error {
		if chunk == 2 {
			return errAbandon
		}
		return nil
	}
	if err := s.RunOnce(b.ctx); !errors.Is(err, errAbandon) {
		t.Fatalf("RunOnce = %v, want errAbandon", err)
	}
	s.afterChunk = nil
	if _, _, err := s.CancelJob(b.ctx, last.ID); err != nil {
		t.Fatal(err)
	}
	prefix := "schedule:daily-quiz:2024-02-29T23:00:00Z:"
	made := notificationsOf(t, b, prefix)
	if made == 0 || made >= 23 {
		t.Fatalf("%d notifications after two chunks, want some but not all", made)
	}
	resumed, err := s.RunNow(b.ctx, "daily-quiz", RunOptions{FireTime: fire.In(time.FixedZone("KST", 9*3600))})
	if err != nil || resumed.Outcome != RunResumed || resumed.ID != last.ID || resumed.State != jobPending {
		t.Fatalf("RunNow(fire) after a cancel = %s, %q, %v; want job %d resumed, PENDING", jobLine(resumed), resumed.Outcome, err, last.ID)
	}
	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	if j := mustGetJob(t, b.ctx, s, last.ID); j.State != jobDone || j.Done != 23 {
		t.Errorf("resumed run = %s, want DONE 23/23", jobLine(j))
	}
	if n := notificationsOf(t, b, prefix); n != 23 {
		t.Errorf("%d notifications for the fire time, want 23: one per subscriber", n)
	}
	_, err = s.RunNow(b.ctx, "daily-quiz", RunOptions{FireTime: fire})
	if !errors.Is(err, ErrAlreadyRan) || !strings.Contains(err.Error(), "2024-03-01T08:00:00+09:00") || !strings.Contains(err.Error(), "force") {
		t.Errorf("RunNow(fire) after DONE = %v, want ErrAlreadyRan naming the fire time and force", err)
	}
	if n := notificationsOf(t, b, prefix); n != 23 {
		t.Errorf("%d notifications after a refused run, want 23", n)
	}
	forced, err := s.RunNow(b.ctx, "daily-quiz", RunOptions{FireTime: fire, Force: true})
	if err != nil || forced.Outcome != RunCreated || forced.Rerun != 1 {
		t.Fatalf("forced RunNow = %s, %q, %v; want re-run 1, created", jobLine(forced), forced.Outcome, err)
	}
	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	if n := notificationsOf(t, b, prefix+"rerun1:"); n != 23 {
		t.Errorf("%d notifications for the re-run, want 23", n)
	}
	if _, err := s.RunNow(b.ctx, "daily-quiz", RunOptions{FireTime: b.clock.Now().Add(time.Hour)}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "future") {
		t.Errorf("RunNow(future) = %v, want ErrInvalid saying it is in the future", err)
	}
	if _, err := s.RunNow(b.ctx, "daily-quiz", RunOptions{FireTime: fire, Last: true}); !errors.Is(err, ErrInvalid) {
		t.Errorf("RunNow(fire and last) = %v, want ErrInvalid", err)
	}
	// The schedule's own evaluation finds the fire time taken and creates
	// no second run of it.
	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	var runs int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM jobs WHERE schedule = 'daily-quiz' AND fire_time = $1 AND rerun = 0`, fire).Scan(&runs); err != nil || runs != 1 {
		t.Errorf("%d runs of the fire time (%v), want 1", runs, err)
	}
}

// TestService_contentKey: two schedules over overlapping topics that name the
// same content send each recipient once between them, and so does a
// campaign naming it; without a content key each run is its own content.
func TestService_contentKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedTopic(t, b.ctx, b.db.Pool, "early", "quiz", 30, 0) // sub-1 … sub-30
	seedTopic(t, b.ctx, b.db.Pool, "all", "quiz", 50, 0)   // sub-1 … sub-50
	key := `quiz-{{.fire_time.Format "2006-01-02"}}`
	for name, topic := range map[string]string{"early-quiz": "early", "all-quiz": "all"} {
		sc := dailyQuiz("0 8 * * *", "Asia/Seoul")
		sc.Audience.Topic, sc.ContentKey = topic, key
		b.cfg.Schedules[name] = sc
	}
	s := b.service(t, "a")
	b.clock.Set(utc("2024-03-01T05:00:00Z"))
	for _, name := range []string{"early-quiz", "all-quiz"} {
		j, err := s.RunNow(b.ctx, name, RunOptions{Last: true})
		if err != nil {
			t.Fatal(err)
		}
		if j.ContentKey != "quiz-2024-03-01" {
			t.Errorf("%s content key = %q, want quiz-2024-03-01 (the fire time's date in Seoul)", name, j.ContentKey)
		}
	}
	camp, err := s.CreateCampaign(b.ctx, wire.Campaign{Channel: "quiz", Audience: wire.Audience{Topic: "early"},
		Payload: map[string]any{"t": "x"}, ContentKey: "quiz-2024-03-01"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	if n := notificationsOf(t, b, "content:quiz:quiz-2024-03-01:"); n != 50 {
		t.Errorf("%d notifications for the content, want 50: each of the 50 distinct recipients once", n)
	}
	if j := mustGetJob(t, b.ctx, s, camp.ID); j.State != jobDone || j.Done != 30 {
		t.Errorf("campaign = %s, want DONE 30/30 (every member already had the content)", jobLine(j))
	}
	if _, err := s.CreateCampaign(b.ctx, wire.Campaign{Channel: "quiz", Audience: wire.Audience{Topic: "early"},
		Payload: map[string]any{"t": "x"}, ContentKey: strings.Repeat("k", config.MaxContentKeyLen+1)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("campaign with a %d-byte content key: %v, want ErrInvalid", config.MaxContentKeyLen+1, err)
	}
	bad := dailyQuiz("0 8 * * *", "UTC")
	bad.ContentKey = "{{.nope}}"
	b.cfg.Schedules["bad"] = bad
	if _, err := New(b.db.Pool, b.cfg, Options{}); err == nil || !strings.Contains(err.Error(), "content_key") {
		t.Errorf("New with content_key {{.nope}} = %v, want an error naming content_key", err)
	}
}
