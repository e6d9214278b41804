package schedule

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// expanding is 20 numbers of 100,001 digits once Postgres prints them: 219
// bytes as written, 2 MB as read back (issue 26).
const expanding = `{"title":"Cats","a":[1e100000,1e100000,1e100000,1e100000,1e100000,1e100000,1e100000,1e100000,1e100000,1e100000,` +
	`1e100000,1e100000,1e100000,1e100000,1e100000,1e100000,1e100000,1e100000,1e100000,1e100000]}`

// Attributes are held to their bound as they read back: a number that
// expands is refused where it enters, and one written by SQL of the
// application's own is measured in Postgres and never read into memory —
// the subscriber's GET names the problem, a campaign fails that recipient
// alone.
func TestService_expandingAttributes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.service(t, "a")
	err := CheckSubscriber(wire.Subscriber{ExternalID: "x", Attributes: map[string]any{"n": json.Number("1e100000")}})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "$.n") || !strings.Contains(err.Error(), "100001 characters") {
		t.Errorf("CheckSubscriber(1e100000) = %v, want ErrInvalid naming $.n and its 100001 characters", err)
	}

	seedTopic(t, b.ctx, b.db.Pool, "quiz", "hooks", 2, 0)
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE subscribers SET attributes = '{"title":"Dogs"}' WHERE external_id = 'sub-1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE subscribers SET attributes = $1::jsonb WHERE external_id = 'sub-2'`, expanding); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetSubscriber(b.ctx, "sub-2")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "2000") || !strings.Contains(err.Error(), "PUT the subscriber again") {
		t.Errorf("GetSubscriber(expanding) = %v, want ErrInvalid with its read-back size and the repair", err)
	}
	if got, err := s.GetSubscriber(b.ctx, "sub-1"); err != nil || got.Attributes["title"] != "Dogs" {
		t.Errorf("GetSubscriber(sub-1) = %+v, %v; want its attributes", got, err)
	}

	job := b.runCampaign(t, s, wire.Audience{Topic: "quiz"}, map[string]any{"text": "{{.data.title}}"}, 1)
	reasons := b.failedReasons(t, job.ID)
	if got := reasons["addr-2"]; !strings.Contains(got, "reads back as") {
		t.Errorf("addr-2: %q, want FAILED: its data reads back past the bound", got)
	}
	if _, bad := reasons["addr-1"]; bad || len(reasons) != 1 {
		t.Errorf("failed: %v, want addr-2 alone", reasons)
	}

	// A query audience's data column is held to the same bound.
	if _, err := b.db.Pool.Exec(b.ctx, `CREATE TABLE people AS SELECT 1 AS id, 'p1' AS recipient, '{"title":"x"}'::jsonb AS data
		UNION ALL SELECT 2, 'p2', $1::jsonb`, expanding); err != nil {
		t.Fatal(err)
	}
	job = b.runCampaign(t, s, wire.Audience{Query: "SELECT id, recipient, data FROM people", Key: "id"},
		map[string]any{"text": "{{.data.title}}"}, 1)
	reasons = b.failedReasons(t, job.ID)
	if got := reasons["p2"]; !strings.Contains(got, "reads back as") || len(reasons) != 1 {
		t.Errorf("query audience failed: %v, want p2 alone, its data past the bound", reasons)
	}
}

// An address or a query audience's recipient is read back within its bound
// however long the row's value is: notifyd reads its beginning, and Postgres
// measures and hashes the whole. A 4 MB address (written by SQL: the API
// refuses one over 1,024 bytes) is FAILED with its length under a key made
// from the hash of the whole, on both paths a topic takes (rendered in
// notifyd, materialised in Postgres), as a query audience's recipient is;
// an audience query's key column past its bound fails the job, naming it.
func TestService_longRecipientsReadBackBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.service(t, "a")
	const long = 4 << 20
	sum := sha256.Sum256([]byte(strings.Repeat("x", long)))
	wantKey := "sha256:" + hex.EncodeToString(sum[:])
	wantReason := fmt.Sprintf("recipient is %d bytes long", long)

	seedTopic(t, b.ctx, b.db.Pool, "quiz", "hooks", 3, 0)
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE subscribers SET addresses = jsonb_build_object('hooks', repeat('x', $1))
		WHERE external_id = 'sub-2'`, long); err != nil {
		t.Fatal(err)
	}
	// What one page carries into this process.
	c, err := topicAudience{topic: "quiz", channel: "hooks"}.fetch(b.ctx, b.db.Pool, "", 10)
	if err != nil || len(c.rows) != 3 {
		t.Fatalf("fetch = %d rows, %v; want 3", len(c.rows), err)
	}
	if r := c.rows[1]; len(r.recipient) > 4*outbox.MaxRecipientLen || r.overLen != long || "sha256:"+r.overSum != wantKey {
		t.Errorf("long address read as %d bytes, length %d, sum %q; want at most %d bytes, %d and the whole's hash",
			len(r.recipient), r.overLen, r.overSum, 4*outbox.MaxRecipientLen, long)
	}
	if r := c.rows[0]; r.recipient != "addr-1" || r.overLen != 0 || r.problem() != "" {
		t.Errorf("short address read as %q (%d, %q)", r.recipient, r.overLen, r.problem())
	}

	failedRow := func(job int64) (recipient, key, reason string) {
		t.Helper()
		err := b.db.Pool.QueryRow(b.ctx, `SELECT recipient, idempotency_key, last_error FROM notifications
			WHERE job_id = $1 AND status = 'FAILED'`, job).Scan(&recipient, &key, &reason)
		if err != nil {
			t.Fatalf("the FAILED row of job %d: %v", job, err)
		}
		return recipient, key, reason
	}
	for _, tc := range []struct {
		name    string
		payload map[string]any
	}{
		{"rendered in notifyd", map[string]any{"text": "hi {{.recipient}}"}},
		{"materialised in Postgres", map[string]any{"text": "hi"}},
	} {
		job := b.runCampaign(t, s, wire.Audience{Topic: "quiz"}, tc.payload, 1)
		r, key, reason := failedRow(job.ID)
		if len(r) > outbox.MaxRecipientLen || !strings.HasSuffix(key, wantKey) || !strings.Contains(reason, wantReason) {
			t.Errorf("%s: FAILED row %d-byte recipient, key %q, reason %q; want it cut, key ending %s, reason %q",
				tc.name, len(r), key, reason, wantKey, wantReason)
		}
		if job.Done != 3 || b.pendingCount(t, job.ID) != 2 {
			t.Errorf("%s: job done %d, %d PENDING; want 3 read, 2 PENDING", tc.name, job.Done, b.pendingCount(t, job.ID))
		}
	}

	if _, err := b.db.Pool.Exec(b.ctx, `CREATE TABLE far AS SELECT 1 AS id, repeat('x', $1) AS r UNION ALL SELECT 2, 'fine'`, long); err != nil {
		t.Fatal(err)
	}
	job := b.runCampaign(t, s, wire.Audience{Query: "SELECT id, r AS recipient FROM far", Key: "id"},
		map[string]any{"t": "{{.recipient}}!"}, 1)
	if _, key, reason := failedRow(job.ID); !strings.HasSuffix(key, wantKey) || !strings.Contains(reason, wantReason) {
		t.Errorf("query audience: FAILED row key %q, reason %q; want key ending %s, reason %q", key, reason, wantKey, wantReason)
	}

	// A key column past its bound: the run fails, saying which column and why.
	if _, err := b.db.Pool.Exec(b.ctx, `CREATE TABLE farkey AS SELECT repeat('k', 5000) AS k, 'r1' AS recipient`); err != nil {
		t.Fatal(err)
	}
	a := newQueryAudience("SELECT k, recipient FROM farkey", "k")
	if err := a.check(b.ctx, b.db.Pool); err != nil {
		t.Fatal(err)
	}
	_, err = a.fetch(b.ctx, b.db.Pool, "", 10)
	var perm *permanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "k of 5000 bytes") || !strings.Contains(err.Error(), "1024-byte bound") {
		t.Errorf("fetch with a 5,000-byte key = %v; want a permanent error naming the column, its size and the bound", err)
	}
}

// A subscriber's GET reads its addresses back within a bound and lists at
// most MaxTopicsListed topics: a topic's Subscribe has no per-subscriber
// bound, and addresses written by SQL have none at all.
func TestService_getSubscriberBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.service(t, "a")
	seedTopic(t, b.ctx, b.db.Pool, "quiz", "hooks", 2, 0)
	if _, err := b.db.Pool.Exec(b.ctx, `
		INSERT INTO topic_subscriptions (topic, subscriber_id)
		SELECT 't' || lpad(i::text, 5, '0'), (SELECT id FROM subscribers WHERE external_id = 'sub-1')
		FROM generate_series(1, $1::int) AS i`, MaxTopicsListed+500); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSubscriber(b.ctx, "sub-1")
	if err != nil || len(got.Topics) != MaxTopicsListed || !got.TopicsCut || got.Topics[0] != "quiz" || got.Topics[1] != "t00001" {
		t.Errorf("GetSubscriber(sub-1 in %d topics) = %d topics (cut %v, first %q), %v; want the first %d in order, cut",
			MaxTopicsListed+501, len(got.Topics), got.TopicsCut, got.Topics[:min(2, len(got.Topics))], err, MaxTopicsListed)
	}
	if got, err := s.GetSubscriber(b.ctx, "sub-2"); err != nil || len(got.Topics) != 1 || got.TopicsCut || got.Addresses["hooks"] != "addr-2" {
		t.Errorf("GetSubscriber(sub-2) = %+v, %v; want its one topic, not cut, and its address", got, err)
	}

	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE subscribers SET addresses = jsonb_build_object('hooks', repeat('x', $1))
		WHERE external_id = 'sub-2'`, 4<<20); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetSubscriber(b.ctx, "sub-2")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "addresses read back as 4194") || !strings.Contains(err.Error(), "PUT the subscriber again") {
		t.Errorf("GetSubscriber(4 MB address) = %v; want ErrInvalid with the read-back size and the repair", err)
	}
}

// A job row is read back within bounds whatever SQL wrote into it: a 30 MB
// cursor, error or audience query made every page of jobs that held it
// answer 60 MB or more. The error is cut; a cursor, name or audience past
// its bound makes the job unreadable (never run on a cut value), which a
// worker finishes FAILED with the reason, as for an unreadable payload.
func TestService_jobRowReadBackBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.service(t, "a")
	seedTopic(t, b.ctx, b.db.Pool, "quiz", "hooks", 1, 0)
	big := strings.Repeat("k", 8<<20)
	cases := []struct{ name, set, want string }{
		{"cursor", `cursor = $1`, "its cursor reads back past 1024 bytes"},
		{"audience", `audience = jsonb_build_object('topic', 'quiz', 'query', $1::text)`, "the audience reads back as"},
		{"content key", `content_key = $1`, "its content_key reads back past 1024 bytes"},
		{"channel", `channel = $1`, "its channel reads back past 1024 bytes"},
	}
	for _, c := range cases {
		job, err := s.CreateCampaign(b.ctx, wire.Campaign{Channel: "hooks", Audience: wire.Audience{Topic: "quiz"}, Payload: map[string]any{"text": "hi"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.db.Pool.Exec(b.ctx, `UPDATE jobs SET `+c.set+`, last_error = $1 WHERE id = $2`, big, job.ID); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := s.GetJob(b.ctx, job.ID)
		if err != nil {
			t.Fatalf("%s: GetJob: %v", c.name, err)
		}
		enc, _ := json.Marshal(got)
		if len(enc) > 64<<10 {
			t.Errorf("%s: GetJob answered %d bytes, want within 64 KiB", c.name, len(enc))
		}
		if note := fmt.Sprint(got.Payload["notifyd_omitted"]); !strings.Contains(note, c.want) {
			t.Errorf("%s: the job's payload note = %q, want it to say %q", c.name, note, c.want)
		}
		if len(got.Error) > wire.MaxErrorLen {
			t.Errorf("%s: last_error read back as %d bytes, want at most %d", c.name, len(got.Error), wire.MaxErrorLen)
		}
	}
	page, err := s.ListJobs(b.ctx, wire.JobQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if enc, _ := json.Marshal(page); len(page) != len(cases) || len(enc) > 256<<10 {
		t.Errorf("a page of %d such jobs answered %d bytes, want %d jobs within 256 KiB", len(page), len(enc), len(cases))
	}
}
