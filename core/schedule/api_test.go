package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/core/config"
)

func TestService_RunNow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Schedules["daily-quiz"] = dailyQuiz("0 8 * * *", "Asia/Seoul")
	seedTopic(t, b.ctx, b.db.Pool, "daily-quiz", "quiz", 30, 0)
	s := b.service(t, "a")
	b.clock.Set(utc("2024-03-01T03:04:05.678Z"))

	first, err := s.RunNow(b.ctx, "daily-quiz")
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.RunNow(b.ctx, "daily-quiz")
	if err != nil || again.ID != first.ID {
		t.Errorf("RunNow twice in one second = job %v, %v; want the same job %d", again, err, first.ID)
	}
	if !first.FireTime.Equal(utc("2024-03-01T03:04:05Z")) || first.FireTime.Location().String() != "Asia/Seoul" {
		t.Errorf("fire time = %s, want 2024-03-01T03:04:05Z shown in Asia/Seoul", first.FireTime)
	}
	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	if j := mustGetJob(t, b.ctx, s, first.ID); j.State != JobDone || j.Done != 30 {
		t.Errorf("run = %s, want DONE 30/30", j)
	}
	if _, err := s.RunNow(b.ctx, "nope"); !errors.Is(err, ErrUnknownSchedule) || !strings.Contains(err.Error(), `"nope"`) {
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
	run, err := s.RunNow(b.ctx, "hourly")
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
	if got[0].Lead != 10*time.Minute || got[0].Timezone != "America/New_York" {
		t.Errorf("daily-quiz lead %s tz %s, want 10m America/New_York", got[0].Lead, got[0].Timezone)
	}
}

func TestService_CreateCampaign_invalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.service(t, "a")
	ok := map[string]any{"t": "x"}
	tests := []struct {
		name string
		c    Campaign
		want string
	}{
		{"unknown channel", Campaign{Channel: "sms", Audience: config.Audience{Topic: "t"}, Payload: ok}, `channel "sms" is not configured`},
		{"no audience", Campaign{Channel: "quiz", Payload: ok}, "give exactly one of topic or query"},
		{"both audiences", Campaign{Channel: "quiz", Audience: config.Audience{Topic: "t", Query: "SELECT 1", Key: "k"}, Payload: ok}, "give exactly one of topic or query"},
		{"bad topic", Campaign{Channel: "quiz", Audience: config.Audience{Topic: "a b"}, Payload: ok}, `topic "a b"`},
		{"query without key", Campaign{Channel: "quiz", Audience: config.Audience{Query: "SELECT 1"}, Payload: ok}, "audience.key is required"},
		{"query fails", Campaign{Channel: "quiz", Audience: config.Audience{Query: "SELEC 1", Key: "k"}, Payload: ok}, "audience query fails"},
		{"query lacks key", Campaign{Channel: "quiz", Audience: config.Audience{Query: "SELECT 'r' AS recipient", Key: "id"}, Payload: ok}, `returns no column "id"`},
		{"empty payload", Campaign{Channel: "quiz", Audience: config.Audience{Topic: "t"}}, "payload is empty"},
		{"bad template", Campaign{Channel: "quiz", Audience: config.Audience{Topic: "t"}, Payload: map[string]any{"t": "{{if}}"}}, "payload t"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.CreateCampaign(b.ctx, tt.c)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CreateCampaign = %v, want ErrInvalid containing %q", err, tt.want)
			}
		})
	}
	if jobs, err := s.ListJobs(b.ctx, JobFilter{}); err != nil || len(jobs) != 0 {
		t.Errorf("ListJobs = %v, %v; want no job created", jobs, err)
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
		job, err := s.CreateCampaign(b.ctx, Campaign{Channel: "hooks", Audience: config.Audience{Topic: "news"},
			Payload: map[string]any{"t": "{{.data.missing}}"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RunOnce(b.ctx); err != nil {
			t.Fatal(err)
		}
		j := mustGetJob(t, b.ctx, s, job.ID)
		if j.State != JobDone || j.Failed != 10 {
			t.Errorf("job = %s failed %d, want DONE with 10 failed", j, j.Failed)
		}
		var reason string
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT last_error FROM notifications WHERE job_id = $1 AND recipient = 'addr-1' AND status = 'FAILED'`,
			job.ID).Scan(&reason); err != nil || !strings.Contains(reason, `render payload t for "addr-1"`) || !strings.Contains(reason, "missing") {
			t.Errorf("addr-1's notification: %q (%v), want FAILED naming the leaf, recipient and key", reason, err)
		}
	})
	t.Run("query broken after creation", func(t *testing.T) {
		job, err := s.CreateCampaign(b.ctx, Campaign{Channel: "hooks", Audience: config.Audience{Query: "SELECT id, r AS recipient FROM people", Key: "id"},
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
		if j.State != JobFailed || !strings.Contains(j.Error, "people") {
			t.Errorf("job = %s error %q, want FAILED naming the missing table", j, j.Error)
		}
	})
}

// TestService_oneRunningPerSchedule: a second run of a schedule waits while
// the first is RUNNING; a campaign does not.
func TestService_oneRunningPerSchedule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Jobs.ChunkSize = 5
	b.cfg.Schedules["daily-quiz"] = dailyQuiz("0 8 * * *", "UTC")
	seedTopic(t, b.ctx, b.db.Pool, "daily-quiz", "quiz", 40, 0)
	a, other := b.service(t, "a"), b.service(t, "b")
	first, err := a.RunNow(b.ctx, "daily-quiz")
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	second, err := a.RunNow(b.ctx, "daily-quiz")
	if err != nil {
		t.Fatal(err)
	}
	a.afterChunk = func(int64, int) error { return errAbandon } // a dies holding the first run
	if err := a.RunOnce(b.ctx); !errors.Is(err, errAbandon) {
		t.Fatalf("a RunOnce = %v, want errAbandon", err)
	}
	campaign, err := other.CreateCampaign(b.ctx, Campaign{Channel: "quiz", Audience: config.Audience{Topic: "daily-quiz"}, Payload: map[string]any{"t": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	if j := mustGetJob(t, b.ctx, other, second.ID); j.State != JobPending {
		t.Errorf("second run = %s, want PENDING while the first is RUNNING", j)
	}
	if j := mustGetJob(t, b.ctx, other, campaign.ID); j.State != JobDone {
		t.Errorf("campaign = %s, want DONE (campaigns are not limited)", j)
	}
	b.clock.Advance(b.cfg.Jobs.StuckAfter + time.Second)
	if err := other.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{first.ID, second.ID} {
		if j := mustGetJob(t, b.ctx, other, id); j.State != JobDone || j.Done != 40 {
			t.Errorf("run %d = %s, want DONE 40/40 after takeover", id, j)
		}
	}
	var running int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM jobs WHERE state = 'RUNNING'`).Scan(&running); err != nil || running != 0 {
		t.Errorf("%d jobs still RUNNING (%v), want 0", running, err)
	}
}
