package schedule

import (
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/testenv"
)

// Subscriber attributes, an audience query's data, recipient and key and an
// address are printed once a row however many times the statement reads their text, as the
// outbox's payload is (internal/outbox/printonce_test.go): a flattened
// subquery printed a hostile 1e100000 once for every read of its column.
func TestReads_PrintEachValueOnce(t *testing.T) {
	b := setup(t)
	if _, err := b.db.Pool.Exec(b.ctx, `CREATE TABLE audience_src (id bigint, recipient jsonb, data jsonb)`); err != nil {
		t.Fatal(err)
	}
	query := newQueryAudience(`SELECT id, recipient, data FROM audience_src`, "id")
	for _, c := range []struct {
		name, query, needle string
		args                []any
	}{
		{"get subscriber: attributes", getSubscriberSQL, "attributes)::text", []any{"u1"}},
		{"get subscriber: addresses", getSubscriberSQL, "addresses)::text", []any{"u1"}},
		{"topic page: attributes", topicPageSQL(1000), "attributes)::text", []any{"quiz-topic", "quiz", int64(0)}},
		{"topic page: address", topicPageSQL(1000), "addresses ->>", []any{"quiz-topic", "quiz", int64(0)}},
		{"audience query: data", query.first + "1000", "data))::text", nil},
		{"audience query: recipient", query.first + "1000", "(audience_src.recipient)::text", nil},
		{"audience query: key", query.first + "1000", "(audience_src.id)::text", nil},
		{"audience query, next page: data", query.next + "1000", "data))::text", []any{"7"}},
		{"materialise in Postgres: address", materialiseChunkSQL(1000), "addresses ->>", []any{
			"quiz-topic", "quiz", int64(0), time.Now(), int64(1), "owner", "", "quiz", `{}`, "job:1:", time.Now()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			testenv.EvaluatedOnce(t, b.db.Pool, c.query, c.needle, c.args...)
		})
	}
}
