package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// failedReasons is recipient → last_error of a job's FAILED notifications.
func (b *testBundle) failedReasons(t *testing.T, job int64) map[string]string {
	t.Helper()
	rows, err := b.db.Pool.Query(b.ctx, `SELECT recipient, last_error FROM notifications WHERE job_id = $1 AND status = 'FAILED'`, job)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var r, e string
		if err := rows.Scan(&r, &e); err != nil {
			t.Fatal(err)
		}
		out[r] = e
	}
	return out
}

// runCampaign creates a campaign over audience with payload, runs it to the
// end on s and returns the job, failing the test if it is not DONE with
// failed members.
func (b *testBundle) runCampaign(t *testing.T, s *Service, audience wire.Audience, payload map[string]any, failed int64) wire.Job {
	t.Helper()
	job, err := s.CreateCampaign(b.ctx, wire.Campaign{Channel: "hooks", Audience: audience, Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	j := mustGetJob(t, b.ctx, s, job.ID)
	if j.State != jobDone || j.Failed != failed {
		t.Errorf("job = %s failed %d, want DONE with %d failed", jobLine(j), j.Failed, failed)
	}
	return j
}

func (b *testBundle) pendingCount(t *testing.T, job int64) int {
	t.Helper()
	var n int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM notifications WHERE job_id = $1 AND status = 'PENDING'`, job).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestService_hostileTemplates: the campaign from the security probe (three
// nested ranges over a subscriber's list: 8 MB from a 200-element list, out
// of memory from a larger one, and every instance that took the job over
// died again) ends that recipient's notification FAILED naming the bound;
// the other recipients get theirs and the job finishes.
func TestService_hostileTemplates(t *testing.T) {
	t.Parallel()
	list := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = "0"
		}
		return `{"l":[` + strings.Join(parts, ",") + `],"title":"ok"}`
	}
	tests := []struct {
		name, template, data, want string
	}{
		{"three ranges over 200: 8 MB",
			`{{range .data.l}}{{range $.data.l}}{{range $.data.l}}x{{end}}{{end}}{{end}}`, list(200), "render bound"},
		{"three ranges over 2,000", `{{range .data.l}}{{range $.data.l}}{{range $.data.l}}x{{end}}{{end}}{{end}}`, list(2000), "render bound"},
		{"output past the payload bound", `{{range .data.l}}{{range $.data.l}}{{printf "%0999d" 0}}{{end}}{{end}}`, list(20), "payload bound"},
		{"ranges that print nothing", `{{range .data.l}}{{range $.data.l}}{{range $.data.l}}{{end}}{{end}}{{end}}t`, list(2000), "range iterations"},
		{"ranges with two variables", `{{range $i, $a := .data.l}}{{range $j, $b := $.data.l}}{{end}}{{end}}t`, list(2000), "range iterations"},
		{"recursion that halves a list: 2^200 calls, no output, no range",
			`{{define "a"}}{{if .}}{{template "a" (slice . 1)}}{{template "a" (slice . 1)}}{{end}}{{end}}{{template "a" (index .data "l")}}`, list(200), "render bound"},
		{"a rendered NUL", `{{printf "%c" 0}}`, list(1), "NUL character"},
		{"a printf width in memory", `{{printf "%0999999999d" 1}}`, list(1), "width or precision over 1000"},
		{"a printf star width", `{{printf "%*d" 999999999 1}}`, list(1), "* width"},
		// Issue 26: strings built ×10 a variable, no range, no output.
		{"print ×10 a level to 1 GB", chainBomb("print", 8), list(1), "memory bound"},
		{"print ×10 a level, one level less: 100 MB", chainBomb("print", 7), list(1), "memory bound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			seedTopic(t, b.ctx, b.db.Pool, "news", "hooks", 3, 0)
			if _, err := b.db.Pool.Exec(b.ctx, `UPDATE subscribers SET attributes = $1::jsonb WHERE external_id = 'sub-2'`, tt.data); err != nil {
				t.Fatal(err)
			}
			s := b.service(t, "a")
			// Everyone but sub-2 has no list: the template renders "" for them
			// only when guarded, so guard on the list.
			tmpl := `{{if index .data "l"}}` + tt.template + `{{else}}plain{{end}}`
			if strings.HasPrefix(tt.template, "{{define") { // a define cannot sit inside an if; it guards itself
				tmpl = tt.template
			}
			job := b.runCampaign(t, s, wire.Audience{Topic: "news"}, map[string]any{"x": tmpl}, 1)
			reasons := b.failedReasons(t, job.ID)
			// A busy machine may reach the render's 1 s clock before the
			// step that was meant to stop it: either is the bound holding.
			if got := reasons["addr-2"]; !strings.Contains(got, tt.want) && !strings.Contains(got, "rendering took more than 1s") {
				t.Errorf("addr-2 FAILED with %q, want a reason containing %q (all: %v)", got, tt.want, reasons)
			}
			if n := b.pendingCount(t, job.ID); n != 2 {
				t.Errorf("%d PENDING notifications, want the other 2", n)
			}
		})
	}
}

// TestService_perRecipientFailure: a campaign to 2 subscribers, one without
// the field the template needs, makes 1 notification and 1 FAILED one with
// the reason; the job is DONE, and running the chunk again makes nothing
// twice.
func TestService_perRecipientFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedTopic(t, b.ctx, b.db.Pool, "quiz", "hooks", 2, 0)
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE subscribers SET attributes = '{"title":"Cats"}' WHERE external_id = 'sub-1'`); err != nil {
		t.Fatal(err)
	}
	s := b.service(t, "a")
	job, err := s.CreateCampaign(b.ctx, wire.Campaign{Channel: "hooks", Audience: wire.Audience{Topic: "quiz"},
		Payload: map[string]any{"text": "Today's quiz: {{.data.title}}"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	j := mustGetJob(t, b.ctx, s, job.ID)
	if j.State != jobDone || j.Failed != 1 || j.Done != 2 {
		t.Errorf("job = %s, failed %d; want DONE 2/2 with 1 failed", jobLine(j), j.Failed)
	}
	if got := b.failedReasons(t, job.ID)["addr-2"]; !strings.Contains(got, "title") {
		t.Errorf("addr-2: %q, want FAILED naming the missing key", got)
	}
	// The chunk again (as after a crash before the cursor moved): same keys.
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE jobs SET state = 'PENDING', cursor = NULL, owner = NULL WHERE id = $1`, job.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	var total int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM notifications WHERE job_id = $1`, job.ID).Scan(&total); err != nil || total != 2 {
		t.Errorf("%d notifications after a re-run (%v), want still 2", total, err)
	}
}

// A query audience may return a recipient no notification can hold: it is
// FAILED under a hashed key, cut to the bound, with the reason.
func TestService_overlongQueryRecipient(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.db.Pool.Exec(b.ctx, `CREATE TABLE people AS SELECT 1 AS id, repeat('r', 3200) AS r UNION ALL SELECT 2, 'fine'`); err != nil {
		t.Fatal(err)
	}
	s := b.service(t, "a")
	job := b.runCampaign(t, s, wire.Audience{Query: "SELECT id, r AS recipient FROM people", Key: "id"},
		map[string]any{"t": "{{.recipient}}!"}, 1)
	var r, key, reason string
	err := b.db.Pool.QueryRow(b.ctx, `SELECT recipient, idempotency_key, last_error FROM notifications WHERE job_id = $1 AND status = 'FAILED'`,
		job.ID).Scan(&r, &key, &reason)
	if err != nil || len(r) > outbox.MaxRecipientLen || !strings.Contains(key, "sha256:") || !strings.Contains(reason, "3200 bytes long") {
		t.Errorf("FAILED row: %d-byte recipient, key %q, reason %q (%v); want it cut, a hashed key and the reason", len(r), key, reason, err)
	}
}

// A job whose owners keep dying at the same cursor (whatever kills them):
// after a takeover its members are run one at a time, each committed before
// the next is read, so the cursor stops just before the member at fault; past
// jobs.max_takeovers takeovers there that member is quarantined — FAILED
// with the reason, never rendered — and the rest of the run goes on.
func TestService_takeoverCrashLoop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Jobs.StuckAfter = time.Minute
	b.cfg.Jobs.MaxTakeovers = 2
	seedTopic(t, b.ctx, b.db.Pool, "news", "hooks", 3, 0)
	s := b.service(t, "a")
	job, err := s.CreateCampaign(b.ctx, wire.Campaign{Channel: "hooks", Audience: wire.Audience{Topic: "news"}, Payload: map[string]any{"t": "{{.recipient}}"}})
	if err != nil {
		t.Fatal(err)
	}
	// A RUNNING job whose owner died: what a crash mid-job leaves.
	die := func(cursor string) {
		t.Helper()
		_, err := b.db.Pool.Exec(b.ctx, `UPDATE jobs SET state = 'RUNNING', owner = 'dead', cursor = nullif($2, ''),
			heartbeat_at = $3, total = 3 WHERE id = $1`, job.ID, cursor, b.clock.Now().Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
	}
	takeOver := func() *jobRow {
		t.Helper()
		got, err := s.acquire(b.ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got != nil {
			s.release(got.ID)
		}
		return got
	}
	for i := 1; i <= 2; i++ {
		die("")
		if got := takeOver(); got == nil || got.ID != job.ID || got.takeovers != i {
			t.Fatalf("takeover %d = %+v, want the job taken over, %d in a row", i, got, i)
		}
	}
	die("1") // progress since: the count starts again
	if got := takeOver(); got == nil || got.takeovers != 1 {
		t.Fatalf("takeover after progress = %+v, want the count at 1", got)
	}
	die("1")
	takeOver()
	die("1")
	// The third in a row at cursor 1: the member after it (sub-2) is
	// quarantined, and the run finishes.
	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	j := mustGetJob(t, b.ctx, s, job.ID)
	if j.State != jobDone || j.Failed != 1 {
		t.Errorf("job = %s failed %d, want DONE with the one quarantined member failed", jobLine(j), j.Failed)
	}
	reasons := b.failedReasons(t, job.ID)
	if got := reasons["addr-2"]; !strings.Contains(got, "quarantined") || !strings.Contains(got, "jobs.max_takeovers 2") || len(reasons) != 1 {
		t.Errorf("failed = %v, want addr-2 alone, quarantined", reasons)
	}
	var pending int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM notifications WHERE job_id = $1 AND status = 'PENDING'`, job.ID).Scan(&pending); err != nil || pending != 1 {
		t.Errorf("%d PENDING (%v), want addr-3's (addr-1 was before the cursor)", pending, err)
	}
}

// A chunk whose insert Postgres refuses for one row (here an operator's
// trigger) is not retried for ever: the row at fault is found, recorded
// FAILED with the reason, and the rest of the run goes on — for a static
// payload materialised inside Postgres as for a rendered one.
func TestService_chunkRowAtFault(t *testing.T) {
	t.Parallel()
	for _, payload := range []string{"static", "hello {{.recipient}}"} {
		t.Run(payload, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			seedTopic(t, b.ctx, b.db.Pool, "news", "hooks", 5, 0)
			if _, err := b.db.Pool.Exec(b.ctx, `
CREATE FUNCTION refuse_addr_2() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.recipient = 'addr-2' AND NEW.status = 'PENDING' THEN
        RAISE EXCEPTION 'addr-2 is refused here' USING ERRCODE = '23514';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_addr_2 BEFORE INSERT ON notifications FOR EACH ROW EXECUTE FUNCTION refuse_addr_2();`); err != nil {
				t.Fatal(err)
			}
			s := b.service(t, "a")
			job := b.runCampaign(t, s, wire.Audience{Topic: "news"}, map[string]any{"t": payload}, 1)
			if got := b.failedReasons(t, job.ID)["addr-2"]; !strings.Contains(got, "addr-2 is refused here") {
				t.Errorf("addr-2: %q, want FAILED with Postgres' reason", got)
			}
			if n := b.pendingCount(t, job.ID); n != 4 {
				t.Errorf("%d PENDING, want the other 4", n)
			}
		})
	}
}

// TestService_unreadableJobFails: a job whose row cannot be read (written by
// SQL, or stored before the template bounds) is finished FAILED with the
// reason by the worker that claims or takes it over, is listed meanwhile
// with a note for its payload, and frees its audience. Before, the claim
// moved it to RUNNING and then failed to read it: it was never run, every
// takeover failed the same way, GET /v1/jobs answered 500, and the next
// campaign over the same channel and topic stayed PENDING for good.
func TestService_unreadableJobFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedTopic(t, b.ctx, b.db.Pool, "news", "quiz", 2, 0)
	s := b.service(t, "a")
	poisons := []struct{ state, audience, payload, want string }{
		// What a campaign with 1e309 left before, claimed by an owner
		// that then failed to read it: RUNNING, its heartbeat stale.
		{jobRunning, `{"topic":"news"}`, `{"t":"x","n":1e309}`, "has a number that reads back past 100 characters"},
		{jobPending, `{"topic":"news"}`, `[1]`, "its payload template does not decode"},
		{jobPending, `{"topic":"news","query":["x"]}`, `{"t":"x"}`, "its audience does not decode"},
		{jobPending, `{"topic":"news"}`, `{"t":"` + strings.Repeat("x", 200_000) + `"}`, "reads back as 200009 bytes, over the 131072-byte bound"},
	}
	var ids []int64
	for _, p := range poisons {
		var id int64
		if err := b.db.Pool.QueryRow(b.ctx, `
			INSERT INTO jobs (kind, timezone, channel, audience, payload, state, owner, heartbeat_at, created_at, updated_at)
			VALUES ('campaign', 'UTC', 'quiz', $1::jsonb, $2::jsonb, $3, CASE WHEN $3 = 'RUNNING' THEN 'dead' END,
			        CASE WHEN $3 = 'RUNNING' THEN $4::timestamptz END, $4, $4)
			RETURNING id`, p.audience, p.payload, p.state, b.clock.Now().Add(-3*time.Hour)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	good, err := s.CreateCampaign(b.ctx, wire.Campaign{Channel: "quiz", Audience: wire.Audience{Topic: "news"}, Payload: map[string]any{"t": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	listed, err := s.ListJobs(b.ctx, wire.JobQuery{})
	if err != nil || len(listed) != 5 {
		t.Fatalf("ListJobs with the unreadable jobs = %d jobs, %v; want all 5", len(listed), err)
	}
	if note, _ := listed[len(listed)-1].Payload["notifyd_omitted"].(string); !strings.Contains(note, poisons[0].want) {
		t.Errorf("unreadable job listed with payload %v, want a note saying why", listed[len(listed)-1].Payload)
	}

	if err := s.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		j := mustGetJob(t, b.ctx, s, id)
		if j.State != jobFailed || !strings.Contains(j.Error, "cannot be read") || !strings.Contains(j.Error, poisons[i].want) {
			t.Errorf("unreadable job %d = %s error %q, want FAILED saying %q", i, jobLine(j), j.Error, poisons[i].want)
		}
	}
	if j := mustGetJob(t, b.ctx, s, good.ID); j.State != jobDone || j.Done != 2 {
		t.Errorf("the campaign after them over the same audience = %s, want DONE to both subscribers", jobLine(j))
	}
}

// TestService_slowAudienceQueryFails: an audience query that does not
// finish (here a pg_sleep; a join without an index over a large table, a
// generate_series of billions) held a pool connection and one of the
// instance's MaxJobs slots for as long as it ran, heartbeats and all, and
// after a restart the next instance ran it again: two such campaigns an
// instance and no other run or campaign materialised there. Each audience
// statement is held to audienceStatement (MaxAudienceStatement), and a
// query past it fails its job with the reason: retrying it asks the same.
func TestService_slowAudienceQueryFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.service(t, "a")
	s.audienceStatement = time.Second
	for _, q := range []string{
		"SELECT g AS id, 'r' || g AS recipient FROM generate_series(1, 3) g, pg_sleep(20) s", // the count and every page
		"SELECT g AS id, 'r' || g AS recipient FROM generate_series(1, 3) g WHERE g < 3 OR pg_sleep(20) IS NOT NULL",
	} {
		job, err := s.CreateCampaign(b.ctx, wire.Campaign{Channel: "hooks", Audience: wire.Audience{Query: q, Key: "id"},
			Payload: map[string]any{"t": "hi {{.recipient}}"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RunOnce(b.ctx); err != nil {
			t.Fatal(err)
		}
		j := mustGetJob(t, b.ctx, s, job.ID)
		if j.State != jobFailed || !strings.Contains(j.Error, "1s") || !strings.Contains(j.Error, "audience") {
			t.Errorf("%s: job = %s (%q); want FAILED naming the audience statement's bound", q, jobLine(j), j.Error)
		}
	}
}
