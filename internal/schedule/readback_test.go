package schedule

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

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
