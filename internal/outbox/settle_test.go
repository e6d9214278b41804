package outbox_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
)

func TestStore_Settle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := time.Now().Add(-time.Second).Truncate(time.Microsecond)
	finish := start.Add(250 * time.Millisecond)

	t.Run("sent, retry and failed in one batch, attempt rows for each", func(t *testing.T) {
		cs := b.claim(t, 3)
		next := time.Now().Add(time.Minute).Truncate(time.Microsecond)
		got := settle(t, b,
			outbox.Settlement{ID: cs[0].ID, Attempt: 1, Result: outbox.ResultSent, Output: json.RawMessage(`{"message_id":"m1"}`),
				ProviderStatus: 200, StartedAt: start, FinishedAt: finish},
			outbox.Settlement{ID: cs[1].ID, Attempt: 1, Result: outbox.ResultRetry, NextAttemptAt: next, Error: "429 slow down",
				ProviderStatus: 429, ProviderCode: "rate_limited", Output: json.RawMessage(`{"ignored":true}`), StartedAt: start, FinishedAt: finish},
			outbox.Settlement{ID: cs[2].ID, Attempt: 1, Result: outbox.ResultFailed, Error: "400 bad recipient",
				ProviderStatus: 400, Output: json.RawMessage(`{"error":"x"}`), StartedAt: start, FinishedAt: finish},
		)
		if want := []bool{true, true, true}; !slices.Equal(got, want) {
			t.Fatalf("Settle = %v, want %v", got, want)
		}

		sent, _ := b.store.Get(b.ctx, cs[0].ID)
		if sent.Status != outbox.StatusSent || !sent.SentAt.Equal(finish) || string(sent.Result) != `{"message_id": "m1"}` || sent.LastError != "" {
			t.Errorf("sent row = %+v (result %s), want SENT at %v with the output", sent, sent.Result, finish)
		}
		if want := []outbox.Attempt{{Attempt: 1, StartedAt: start, FinishedAt: finish, Outcome: outbox.OutcomeSuccess, ProviderStatus: 200}}; !equalAttempts(sent.Attempts, want) {
			t.Errorf("sent attempts = %+v, want %+v", sent.Attempts, want)
		}
		if d := sent.Attempts[0].Duration(); d != 250*time.Millisecond {
			t.Errorf("Duration = %v, want 250ms", d)
		}

		retry, _ := b.store.Get(b.ctx, cs[1].ID)
		if retry.Status != outbox.StatusQueued || !retry.NextAttemptAt.Equal(next) || retry.LastError != "429 slow down" ||
			retry.Result != nil || !retry.SentAt.IsZero() || retry.AttemptCount != 1 {
			t.Errorf("retried row = %+v, want QUEUED until %v, last_error kept, no result", retry, next)
		}
		if want := []outbox.Attempt{{Attempt: 1, StartedAt: start, FinishedAt: finish, Outcome: outbox.OutcomeTransient,
			ProviderStatus: 429, ProviderCode: "rate_limited", Error: "429 slow down"}}; !equalAttempts(retry.Attempts, want) {
			t.Errorf("retry attempts = %+v, want %+v", retry.Attempts, want)
		}

		failed, _ := b.store.Get(b.ctx, cs[2].ID)
		if failed.Status != outbox.StatusFailed || failed.LastError != "400 bad recipient" || string(failed.Result) != `{"error": "x"}` {
			t.Errorf("failed row = %+v, want FAILED with last_error and result", failed)
		}
		if len(failed.Attempts) != 1 || failed.Attempts[0].Outcome != outbox.OutcomePermanent {
			t.Errorf("failed attempts = %+v, want one PERMANENT", failed.Attempts)
		}
	})

	t.Run("guard: stale attempt changes nothing", func(t *testing.T) {
		c := b.claim(t, 1)[0]
		// The claimer is presumed dead; another worker reclaims (attempt 2).
		res, err := b.store.ClaimSuspects(b.ctx, []int64{c.ID}, time.Now().Add(time.Hour), time.Minute)
		if err != nil || len(res) != 1 || res[0].Kind != outbox.ClaimSend || res[0].Attempt != 2 {
			t.Fatalf("reclaim = %+v, %v; want send attempt 2", res, err)
		}
		// The first worker comes back late with attempt 1.
		late := settle(t, b, outbox.Settlement{ID: c.ID, Attempt: 1, Result: outbox.ResultFailed, Error: "late"})
		if late[0] {
			t.Errorf("late Settle applied, want not")
		}
		if r := b.row(t, c.ID); r != (row{outbox.StatusProcessing, 2}) {
			t.Errorf("row = %+v, want unchanged PROCESSING attempt 2", r)
		}
		// The reclaim recorded attempt 1 as UNKNOWN (its outcome was lost
		// with its claimer); the late settle added nothing to it.
		if n := b.count(t, `SELECT count(*) FROM notification_attempts WHERE notification_id = $1 AND outcome <> 'UNKNOWN'`, c.ID); n != 0 {
			t.Errorf("attempt rows = %d, want none for a settle that did not apply", n)
		}
		if n := b.count(t, `SELECT count(*) FROM notification_attempts WHERE notification_id = $1 AND outcome = 'UNKNOWN' AND attempt = 1`, c.ID); n != 1 {
			t.Errorf("UNKNOWN attempt rows = %d, want the reclaim's one for attempt 1", n)
		}
		ok := settle(t, b, outbox.Settlement{ID: c.ID, Attempt: 2, Result: outbox.ResultSent})
		if !ok[0] {
			t.Errorf("Settle with the current attempt did not apply")
		}
	})

	t.Run("guard: settled twice, or from a state other than PROCESSING, changes nothing", func(t *testing.T) {
		c := b.claim(t, 1)[0]
		settle(t, b, outbox.Settlement{ID: c.ID, Attempt: 1, Result: outbox.ResultSent})
		again := settle(t, b, outbox.Settlement{ID: c.ID, Attempt: 1, Result: outbox.ResultFailed, Error: "repeat"})
		if again[0] {
			t.Errorf("second Settle applied, want not")
		}
		n, _ := b.store.Get(b.ctx, c.ID)
		if n.Status != outbox.StatusSent || n.LastError != "" || len(n.Attempts) != 1 {
			t.Errorf("row = %+v, want still SENT with one attempt row", n)
		}
		for _, status := range []string{outbox.StatusPending, outbox.StatusQueued, outbox.StatusFailed, outbox.StatusCancelled} {
			id := b.insert(t, notif(1))
			b.force(t, status, 1, time.Now(), id...)
			if got := settle(t, b, outbox.Settlement{ID: id[0], Attempt: 1, Result: outbox.ResultSent}); got[0] {
				t.Errorf("Settle of a %s row applied", status)
			}
			if r := b.row(t, id[0]); r.Status != status {
				t.Errorf("row = %+v, want unchanged %s", r, status)
			}
		}
		if got := settle(t, b, outbox.Settlement{ID: 1 << 60, Attempt: 1, Result: outbox.ResultSent}); got[0] {
			t.Error("Settle of a missing id applied")
		}
	})

	t.Run("an id twice in a batch: only the first applies", func(t *testing.T) {
		c := b.claim(t, 1)[0]
		got := settle(t, b,
			outbox.Settlement{ID: c.ID, Attempt: 1, Result: outbox.ResultRetry, Error: "first"},
			outbox.Settlement{ID: c.ID, Attempt: 1, Result: outbox.ResultSent})
		if !slices.Equal(got, []bool{true, false}) {
			t.Errorf("Settle = %v, want [true false]", got)
		}
		if r := b.row(t, c.ID); r.Status != outbox.StatusQueued {
			t.Errorf("row = %+v, want QUEUED (the first settlement)", r)
		}
	})

	t.Run("exhausted retries: failed with a transient outcome", func(t *testing.T) {
		c := b.claim(t, 1)[0]
		settle(t, b, outbox.Settlement{ID: c.ID, Attempt: 1, Result: outbox.ResultFailed, Outcome: outbox.OutcomeTransient, Error: "timeout"})
		n, _ := b.store.Get(b.ctx, c.ID)
		if n.Status != outbox.StatusFailed || n.Attempts[0].Outcome != outbox.OutcomeTransient {
			t.Errorf("row = %+v, want FAILED with a TRANSIENT attempt", n)
		}
	})

	t.Run("provider text Postgres cannot hold is cleaned, not fatal", func(t *testing.T) {
		cs := b.claim(t, 2)
		got := settle(t, b,
			outbox.Settlement{ID: cs[0].ID, Attempt: 1, Result: outbox.ResultFailed, Error: "bad\x00byte \xff", ProviderCode: "c\x00"},
			outbox.Settlement{ID: cs[1].ID, Attempt: 1, Result: outbox.ResultSent, Output: json.RawMessage(`not json`)})
		if !slices.Equal(got, []bool{true, true}) {
			t.Fatalf("Settle = %v, want both applied", got)
		}
		failed, _ := b.store.Get(b.ctx, cs[0].ID)
		if strings.ContainsRune(failed.LastError, 0) || !strings.HasPrefix(failed.LastError, "bad") {
			t.Errorf("last_error = %q, want cleaned text", failed.LastError)
		}
		sent, _ := b.store.Get(b.ctx, cs[1].ID)
		if string(sent.Result) != `"not json"` {
			t.Errorf("result = %s, want the output as a JSON string", sent.Result)
		}
	})

	t.Run("bad settlements name the index", func(t *testing.T) {
		tests := []struct {
			s    outbox.Settlement
			want string
		}{
			{outbox.Settlement{ID: 1, Attempt: 0}, "settlement 1 (id 1): attempt 0"},
			{outbox.Settlement{ID: 0, Attempt: 1}, "settlement 1 (id 0): id 0"},
			{outbox.Settlement{ID: 1, Attempt: 1, Result: 9}, "settlement 1 (id 1): result Result(9)"},
			{outbox.Settlement{ID: 1, Attempt: 1, Outcome: "MAYBE"}, `settlement 1 (id 1): outcome "MAYBE"`},
		}
		for _, tt := range tests {
			_, err := b.store.Settle(b.ctx, []outbox.Settlement{{ID: 1, Attempt: 1}, tt.s})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Settle(%+v) = %v, want an error containing %q", tt.s, err, tt.want)
			}
		}
	})
}

func equalAttempts(got, want []outbox.Attempt) bool {
	return slices.EqualFunc(got, want, func(a, b outbox.Attempt) bool {
		return a.Attempt == b.Attempt && a.StartedAt.Equal(b.StartedAt) && a.FinishedAt.Equal(b.FinishedAt) &&
			a.Outcome == b.Outcome && a.ProviderStatus == b.ProviderStatus && a.ProviderCode == b.ProviderCode && a.Error == b.Error
	})
}
