package api_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk/client"
)

func TestServer_Subscribers(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})

	t.Run("PUT creates, GET reads it back with its topics", func(t *testing.T) {
		body := `{"addresses":{"orders":"https://hooks.example/u1"},"attributes":{"name":"Ann","visits":12345678901234567},"topics":["news","deals"]}`
		got := decode[client.Subscriber](t, wantStatus(t, b.do("PUT", "/v1/subscribers/user-1", body), 200))
		if got.ExternalID != "user-1" || got.Addresses["orders"] != "https://hooks.example/u1" || !slices.Equal(got.Topics, []string{"deals", "news"}) {
			t.Errorf("PUT answered %+v", got)
		}
		read, err := b.c.Subscriber(b.ctx, "user-1")
		if err != nil {
			t.Fatal(err)
		}
		if read.Attributes["name"] != "Ann" || read.Attributes["visits"] == nil {
			t.Errorf("attributes %v", read.Attributes)
		}
		if read.CreatedAt.IsZero() || read.UpdatedAt.IsZero() {
			t.Errorf("timestamps missing: %+v", read)
		}
	})
	t.Run("PUT again replaces addresses and adds topics", func(t *testing.T) {
		got, err := b.c.PutSubscriber(b.ctx, client.Subscriber{ExternalID: "user-1", Addresses: map[string]string{"alerts": "a1"}, Topics: []string{"vip"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got.Addresses["orders"]; ok || got.Addresses["alerts"] != "a1" || !slices.Equal(got.Topics, []string{"deals", "news", "vip"}) {
			t.Errorf("after second PUT: %+v", got)
		}
	})
	t.Run("an id with a slash, escaped in the path", func(t *testing.T) {
		if _, err := b.c.PutSubscriber(b.ctx, client.Subscriber{ExternalID: "org/7"}); err != nil {
			t.Fatal(err)
		}
		if got, err := b.c.Subscriber(b.ctx, "org/7"); err != nil || got.ExternalID != "org/7" {
			t.Errorf("Subscriber(org/7) = %+v, %v", got, err)
		}
	})
	t.Run("DELETE is 204, then GET and DELETE are 404", func(t *testing.T) {
		wantStatus(t, b.do("DELETE", "/v1/subscribers/user-1", ""), 204)
		wantError(t, b.do("GET", "/v1/subscribers/user-1", ""), 404, client.CodeNotFound, `"user-1"`)
		wantError(t, b.do("DELETE", "/v1/subscribers/user-1", ""), 404, client.CodeNotFound, `"user-1"`)
		if err := b.c.DeleteSubscriber(b.ctx, "user-1"); client.StatusCode(err) != 404 {
			t.Errorf("DeleteSubscriber of a deleted one = %v, want a 404", err)
		}
	})
	for _, tc := range []struct {
		name, path, body string
		status           int
		code             string
		mention          []string
	}{
		{"bad topic name", "/v1/subscribers/u2", `{"topics":["no spaces"]}`, 422, client.CodeInvalid, []string{"topic", `"no spaces"`}},
		{"bad address channel", "/v1/subscribers/u2", `{"addresses":{"a b":"x"}}`, 422, client.CodeInvalid, []string{"address channel"}},
		{"empty address", "/v1/subscribers/u2", `{"addresses":{"orders":""}}`, 422, client.CodeInvalid, []string{"orders"}},
		{"external_id differs from the path", "/v1/subscribers/u2", `{"external_id":"u3"}`, 422, client.CodeInvalid, []string{"external_id"}},
		{"id too long", "/v1/subscribers/" + longID(), `{}`, 422, client.CodeInvalid, []string{"subscriber id"}},
		{"addresses not an object", "/v1/subscribers/u2", `{"addresses":["x"]}`, 400, client.CodeBadRequest, []string{"addresses"}},
		{"unknown field", "/v1/subscribers/u2", `{"email":"x"}`, 400, client.CodeBadRequest, []string{`"email"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, b.do("PUT", tc.path, tc.body), tc.status, tc.code, tc.mention...)
		})
	}
}

func longID() string {
	b := make([]byte, 300)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}

func TestServer_Schedules(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})

	t.Run("list", func(t *testing.T) {
		got := decode[client.Schedules](t, wantStatus(t, b.do("GET", "/v1/schedules", ""), 200))
		if len(got.Schedules) != 1 {
			t.Fatalf("schedules %+v, want one", got)
		}
		s := got.Schedules[0]
		if s.Name != "daily" || s.Channel != "orders" || s.Cron != "0 8 * * *" || s.Timezone != "Asia/Seoul" ||
			s.Audience.Topic != "news" || time.Duration(s.Lead) != 10*time.Minute || !s.NextFire.After(time.Now()) || s.LastRun != nil {
			t.Errorf("schedule %+v", s)
		}
		if _, m := s.NextFire.Zone(); m != 9*3600 {
			t.Errorf("next_fire %s is not in Asia/Seoul's offset", s.NextFire)
		}
	})
	t.Run("run now is 202 with a PENDING job, then the last run", func(t *testing.T) {
		a := wantStatus(t, b.do("POST", "/v1/schedules/daily/run", ""), 202)
		job := decode[client.Job](t, a)
		if job.ID <= 0 || job.Kind != "schedule" || job.Schedule != "daily" || job.State != "PENDING" || job.Progress != nil {
			t.Errorf("job %+v", job)
		}
		list, err := b.c.Schedules(b.ctx)
		if err != nil || list[0].LastRun == nil || list[0].LastRun.ID != job.ID {
			t.Errorf("Schedules after a run: %+v, %v; want last_run %d", list, err, job.ID)
		}
	})
	t.Run("an unknown schedule is 404", func(t *testing.T) {
		wantError(t, b.do("POST", "/v1/schedules/weekly/run", ""), 404, client.CodeNotFound, `"weekly"`)
	})
	t.Run("a fire time: its one run, 409 once DONE, a re-run only when forced", func(t *testing.T) {
		first := decode[client.Job](t, wantStatus(t, b.do("POST", "/v1/schedules/daily/run", `{"fire_time":"last"}`), 202))
		if first.Outcome != client.RunCreated || first.FireTime.After(time.Now()) || first.FireTime.Hour() != 8 {
			t.Errorf("run of the last fire time = %+v, want created at 08:00 Seoul", first)
		}
		fire := first.FireTime.Format(time.RFC3339)
		same := decode[client.Job](t, wantStatus(t, b.do("POST", "/v1/schedules/daily/run", `{"fire_time":"`+fire+`"}`), 200))
		if same.ID != first.ID || same.Outcome != client.RunExists {
			t.Errorf("run of the same fire time = %+v, want job %d, exists", same, first.ID)
		}
		if _, err := b.db.Pool.Exec(b.ctx, `UPDATE jobs SET state = 'DONE', finished_at = now() WHERE id = $1`, first.ID); err != nil {
			t.Fatal(err)
		}
		wantError(t, b.do("POST", "/v1/schedules/daily/run", `{"fire_time":"`+fire+`"}`), 409, client.CodeConflict, "already ran", fire, "force")
		forced, err := b.c.RunSchedule(b.ctx, "daily", client.RunRequest{FireTime: fire, Force: true})
		if err != nil || forced.Rerun != 1 || forced.Outcome != client.RunCreated {
			t.Errorf("forced run = %+v, %v; want re-run 1, created", forced, err)
		}
		wantError(t, b.do("POST", "/v1/schedules/daily/run", `{"fire_time":"tomorrow"}`), 422, client.CodeInvalid, "fire_time", `"tomorrow"`)
		wantError(t, b.do("POST", "/v1/schedules/daily/run", `{"fire_time":"`+time.Now().Add(48*time.Hour).Format(time.RFC3339)+`"}`), 422, client.CodeInvalid, "future")
		wantError(t, b.do("POST", "/v1/schedules/daily/run", `{"force":"yes"}`), 400, client.CodeBadRequest, "force")
	})
	t.Run("the zero time is 422, not a run of now", func(t *testing.T) {
		// Before, 0001-01-01T00:00:00Z (Go's zero time, RunOptions' "now")
		// was 202 with a run for now, sent to the whole audience.
		before, err := b.c.Jobs(b.ctx, client.JobQuery{Schedule: "daily"})
		if err != nil {
			t.Fatal(err)
		}
		for _, zero := range []string{"0001-01-01T00:00:00Z", "0001-01-01T09:00:00+09:00"} {
			wantError(t, b.do("POST", "/v1/schedules/daily/run", `{"fire_time":"`+zero+`"}`), 422, client.CodeInvalid, "fire_time", zero, "zero time")
		}
		if after, err := b.c.Jobs(b.ctx, client.JobQuery{Schedule: "daily"}); err != nil || len(after) != len(before) {
			t.Errorf("runs of daily: %v (%v), want %v: no run created", jobIDs(after), err, jobIDs(before))
		}
	})
}

func TestServer_CampaignsAndJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	var campaign client.Job

	t.Run("a campaign is 202 with its job", func(t *testing.T) {
		a := wantStatus(t, b.do("POST", "/v1/campaigns", `{"channel":"orders","audience":{"topic":"news"},"payload":{"text":"Sale! {{.recipient}}","n":12345678901234567}}`), 202)
		campaign = decode[client.Job](t, a)
		if campaign.Kind != "campaign" || campaign.Channel != "orders" || campaign.Audience.Topic != "news" || campaign.State != "PENDING" {
			t.Errorf("job %+v", campaign)
		}
		// The number as written: before, the job's payload was read back
		// as float64, and answered (and sent) as 12345678901234568.
		if !strings.Contains(string(a.body), `"n":12345678901234567,`) {
			t.Errorf("campaign's job %s, want n exactly 12345678901234567", a.body)
		}
	})
	t.Run("through the Go client", func(t *testing.T) {
		j, err := b.c.CreateCampaign(b.ctx, client.Campaign{Channel: "alerts", Audience: client.Audience{Topic: "vip"}, Payload: map[string]any{"t": "x"}})
		if err != nil || j.Channel != "alerts" {
			t.Errorf("CreateCampaign = %+v, %v", j, err)
		}
	})
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
		mention    []string
	}{
		{"unknown channel", `{"channel":"sms","audience":{"topic":"news"},"payload":{}}`, 422, client.CodeInvalid, []string{`"sms"`}},
		{"query audience refused", `{"channel":"orders","audience":{"query":"SELECT 1","key":"id"},"payload":{}}`, 422, client.CodeInvalid, []string{"audience.query"}},
		{"no topic", `{"channel":"orders","audience":{},"payload":{}}`, 422, client.CodeInvalid, []string{"audience.topic"}},
		{"no channel", `{"audience":{"topic":"news"},"payload":{}}`, 422, client.CodeInvalid, []string{"channel"}},
		{"no payload", `{"channel":"orders","audience":{"topic":"news"}}`, 422, client.CodeInvalid, []string{"payload"}},
		{"bad template", `{"channel":"orders","audience":{"topic":"news"},"payload":{"t":"{{.nope"}}`, 422, client.CodeInvalid, nil},
		{"payload not an object", `{"channel":"orders","audience":{"topic":"news"},"payload":[1]}`, 400, client.CodeBadRequest, []string{"payload"}},
		{"unknown field", `{"channel":"orders","topic":"news","payload":{}}`, 400, client.CodeBadRequest, []string{`"topic"`}},
		// Before, both were stored (500 for the first, whose job then made
		// GET /v1/jobs answer 500; 202 for the second, which read back as
		// 1.3 MB); the list below finds no job of theirs.
		{"a number past 100 characters", `{"channel":"orders","audience":{"topic":"news"},"payload":{"text":"hi","n":1e309}}`,
			422, client.CodeInvalid, []string{"payload has a number at $.n", "310 characters"}},
		{"a template reading back past its bound", `{"channel":"orders","audience":{"topic":"news"},"payload":{"text":"hi","a":[` +
			strings.TrimSuffix(strings.Repeat("1e99,", 13_000), ",") + `]}}`,
			422, client.CodeInvalid, []string{"payload template reads back as", "at most 131072"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, b.do("POST", "/v1/campaigns", tc.body), tc.status, tc.code, tc.mention...)
		})
	}

	t.Run("list newest first, filtered, paged", func(t *testing.T) {
		run := decode[client.Job](t, wantStatus(t, b.do("POST", "/v1/schedules/daily/run", ""), 202))
		all, err := b.c.Jobs(b.ctx, client.JobQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 3 || all[0].ID != run.ID || all[2].ID != campaign.ID {
			t.Fatalf("jobs %v, want 3 newest first", jobIDs(all))
		}
		camps, err := b.c.Jobs(b.ctx, client.JobQuery{Kind: "campaign", State: "PENDING"})
		if err != nil || len(camps) != 2 {
			t.Errorf("campaign jobs %v, %v; want 2", jobIDs(camps), err)
		}
		page, err := b.c.Jobs(b.ctx, client.JobQuery{Before: all[0].ID, Limit: 1})
		if err != nil || len(page) != 1 || page[0].ID != all[1].ID {
			t.Errorf("page before %d: %v, %v; want [%d]", all[0].ID, jobIDs(page), err, all[1].ID)
		}
		sched := decode[client.Jobs](t, wantStatus(t, b.do("GET", "/v1/jobs?schedule=daily", ""), 200))
		if len(sched.Jobs) != 1 || sched.Jobs[0].ID != run.ID {
			t.Errorf("schedule=daily: %v", jobIDs(sched.Jobs))
		}
	})
	for _, q := range []string{"kind=cron", "state=DONEISH", "limit=0", "limit=1001", "before=-1", "before=x"} {
		t.Run("400 for "+q, func(t *testing.T) {
			param, _, _ := cutEq(q)
			wantError(t, b.do("GET", "/v1/jobs?"+q, ""), 400, client.CodeBadRequest, param)
		})
	}
	t.Run("get one", func(t *testing.T) {
		got, err := b.c.Job(b.ctx, campaign.ID)
		if err != nil || got.ID != campaign.ID || got.Kind != "campaign" {
			t.Errorf("Job = %+v, %v", got, err)
		}
		if a := wantStatus(t, b.do("GET", "/v1/jobs/"+strconv.FormatInt(campaign.ID, 10), ""), 200); !strings.Contains(string(a.body), `"n":12345678901234567,`) {
			t.Errorf("GET job %s, want n exactly 12345678901234567", a.body)
		}
		wantError(t, b.do("GET", "/v1/jobs/987654321", ""), 404, client.CodeNotFound, "987654321")
		wantError(t, b.do("GET", "/v1/jobs/first", ""), 400, client.CodeBadRequest, `"first"`)
	})
}

func jobIDs(js []client.Job) []int64 {
	out := make([]int64, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}
