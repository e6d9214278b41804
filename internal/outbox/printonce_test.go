package outbox_test

import (
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
)

// A payload is walked for expanding numbers and printed once per row by the
// claim and by every read, however many times the statement reads its text
// (to measure it, to bound it, to return it). The planner flattens a plain
// subquery into its readers, copying the expression into each: the claim
// walked and printed every payload three times (6 µs of its 26 µs a row),
// and a GET walked a hostile payload five times. Each statement's plan must
// compute the expression once (testenv.EvaluatedOnce).
func TestStore_PayloadWalkedAndPrintedOnce(t *testing.T) {
	b := setup(t)
	now := time.Now()
	claimArgs := []any{[]int64{1, 2}, now, now.Add(-time.Minute), "1m0s", outbox.MaxPayloadBytes}
	takeoverArgs := append(claimArgs[:len(claimArgs):len(claimArgs)], now.Add(outbox.MaxClockAhead))
	for _, c := range []struct {
		name, query, needle string
		args                []any
	}{
		{"claim: the walk", outbox.ClaimBatchSQL, "jsonb_path_exists", claimArgs},
		{"claim: the print", outbox.ClaimBatchSQL, "payload)::text", claimArgs},
		{"takeover claim: the walk", outbox.ClaimAloneSQL, "jsonb_path_exists", takeoverArgs},
		{"get: the payload's walk", `SELECT ` + outbox.NotificationColumns + ` FROM notifications WHERE id = $1`, "jsonb_path_exists", []any{int64(1)}},
		{"get: the payload's print", `SELECT ` + outbox.NotificationColumns + ` FROM notifications WHERE id = $1`, "payload)::text", []any{int64(1)}},
		{"get: the result's print", `SELECT ` + outbox.NotificationColumns + ` FROM notifications WHERE id = $1`, "result)::text", []any{int64(1)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			testenv.EvaluatedOnce(t, b.db.Pool, c.query, c.needle, c.args...)
		})
	}
}
