package outbox_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
)

// deadLetters writes FAILED notifications on the hooked channel "ch" straight
// into the table (as a row written before today's bounds could be), one per
// recipient, each with lastError; the trigger records their events.
func (b *bundle) deadLetters(t *testing.T, lastError string, recipients ...string) []int64 {
	t.Helper()
	var ids []int64
	err := b.db.Pool.QueryRow(b.ctx, `
		WITH ins AS (
			INSERT INTO notifications (channel, recipient, payload, status, attempts, last_error)
			SELECT 'ch', r, '{}', 'FAILED', 1, $2 FROM unnest($1::text[]) WITH ORDINALITY AS u(r, ord) ORDER BY ord
			RETURNING id)
		SELECT array_agg(id ORDER BY id) FROM ins`, recipients, lastError).Scan(&ids)
	if err != nil {
		t.Fatalf("write %d dead letters: %v", len(recipients), err)
	}
	return ids
}

// hookSetup is a store whose channel "ch" tells its dead letters to "oncall".
func hookSetup(t *testing.T) (*bundle, outbox.DeadLetterHook) {
	t.Helper()
	b := setup(t)
	if err := b.store.SyncDeadLetterHooks(b.ctx, []string{"ch"}); err != nil {
		t.Fatal(err)
	}
	return b, outbox.DeadLetterHook{Channel: "ch", Hook: "oncall", Recipient: "https://oncall.example/hook", Batch: 500}
}

// tellAll calls TellDeadLetters until nothing more is waiting.
func tellAll(t *testing.T, b *bundle, h outbox.DeadLetterHook) []outbox.DeadLettersTold {
	t.Helper()
	var all []outbox.DeadLettersTold
	for range 100 {
		res, err := b.store.TellDeadLetters(b.ctx, h)
		if err != nil {
			t.Fatalf("TellDeadLetters after %d calls: %v", len(all), err)
		}
		all = append(all, res)
		if !res.More {
			return all
		}
	}
	t.Fatalf("TellDeadLetters still has more after %d calls", len(all))
	return nil
}

// hookPayload is one hook notification as stored: its payload, decoded, and
// the size of the payload as Postgres renders it.
type hookPayload struct {
	batch outbox.DeadLetterBatch
	text  int // octet_length(payload::text)
}

func (b *bundle) hookPayloads(t *testing.T) []hookPayload {
	t.Helper()
	rows, err := b.db.Pool.Query(b.ctx, `SELECT payload::text, octet_length(payload::text) FROM notifications WHERE channel = 'oncall' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []hookPayload
	for rows.Next() {
		var (
			text string
			p    hookPayload
		)
		if err := rows.Scan(&text, &p.text); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(text), &p.batch); err != nil {
			t.Fatalf("hook payload %.200s: %v", text, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// toldOnce checks every id in want was listed exactly once across payloads.
func toldOnce(t *testing.T, payloads []hookPayload, want []int64) {
	t.Helper()
	seen := map[int64]int{}
	for _, p := range payloads {
		if p.batch.Count != len(p.batch.DeadLetters) {
			t.Errorf("hook payload count %d, lists %d", p.batch.Count, len(p.batch.DeadLetters))
		}
		for _, d := range p.batch.DeadLetters {
			seen[d.ID]++
		}
	}
	var bad []string
	for _, id := range want {
		if seen[id] != 1 {
			bad = append(bad, fmt.Sprintf("%d told %d times", id, seen[id]))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d dead letters not told exactly once, e.g. %v", len(bad), len(want), bad[:min(len(bad), 5)])
	}
}

func (b *bundle) eventsWaiting(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM dead_letter_events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStore_TellDeadLetters_encodedSize: dead letters whose text JSON
// escaping blows up six times ('<' is \u003c) are told in as many hook
// notifications as it takes, each under the payload bound as stored and as
// Postgres renders it; none is left waiting and none blocks the rest.
func TestStore_TellDeadLetters_encodedSize(t *testing.T) {
	t.Parallel()

	t.Run("250 recipients of 1,000 '<'", func(t *testing.T) {
		t.Parallel()
		b, h := hookSetup(t)
		recipients := make([]string, 250)
		for i := range recipients {
			recipients[i] = strings.Repeat("<", 1000-4) + fmt.Sprintf("%04d", i)
		}
		ids := b.deadLetters(t, "webhook http://127.0.0.1/reject: 400 "+strings.Repeat("<", 4000), recipients...)
		calls := tellAll(t, b, h)
		payloads := b.hookPayloads(t)
		toldOnce(t, payloads, ids)
		if len(payloads) < 2 || len(payloads) > 4 {
			t.Errorf("%d hook notifications; want 2 to 4 (250 such dead letters, ~4.6 KB each encoded, exceed one payload)", len(payloads))
		}
		for i, p := range payloads {
			if p.text > outbox.MaxPayloadBytes {
				t.Errorf("hook notification %d renders to %d bytes, over the bound %d", i, p.text, outbox.MaxPayloadBytes)
			}
		}
		told := 0
		for _, c := range calls {
			told += c.Told
			if len(c.Untold) > 0 {
				t.Errorf("untold dead letters %v; want every one told", c.Untold)
			}
		}
		if told != len(ids) || b.eventsWaiting(t) != 0 {
			t.Errorf("told %d of %d, %d events left waiting", told, len(ids), b.eventsWaiting(t))
		}
	})

	// The largest the database holds (migration 15's bounds: a longer one
	// cannot be written, even by SQL).
	t.Run("the largest dead letter is cut, the next ones go through", func(t *testing.T) {
		t.Parallel()
		b, h := hookSetup(t)
		huge := b.deadLetters(t, strings.Repeat("<", outbox.MaxErrorLen), strings.Repeat("<", outbox.MaxRecipientLen))
		next := b.deadLetters(t, "no such recipient", "a", "b", "c")
		tellAll(t, b, h)
		payloads := b.hookPayloads(t)
		toldOnce(t, payloads, append(huge, next...))
		for _, p := range payloads {
			for _, d := range p.batch.DeadLetters {
				if d.ID == huge[0] && (!strings.HasSuffix(d.Error, "[truncated]") || len(d.Error) > 512 ||
					!strings.HasSuffix(d.Recipient, "[truncated]") || len(d.Recipient) > 256) {
					t.Errorf("huge dead letter listed with a %d-byte error %q…, a %d-byte recipient; want both cut and marked",
						len(d.Error), d.Error[max(0, len(d.Error)-20):], len(d.Recipient))
				}
			}
		}
	})
}

// TestStore_TellDeadLetters_rowAtFault: a hook notification Postgres refuses
// for its data (here an operator's constraint) is split until the dead
// letter at fault stands alone; it is recorded as told with the reason
// (Untold), the others are told, and a later dead letter is told too. The
// same failing insert is never retried.
func TestStore_TellDeadLetters_rowAtFault(t *testing.T) {
	t.Parallel()
	b, h := hookSetup(t)
	if _, err := b.db.Pool.Exec(b.ctx, `ALTER TABLE notifications ADD CONSTRAINT no_poison
		CHECK (channel <> 'oncall' OR position('poison' in payload::text) = 0)`); err != nil {
		t.Fatal(err)
	}
	ids := b.deadLetters(t, "no such recipient", "a", "b", "poison", "d", "e", "f", "g")
	res, err := b.store.TellDeadLetters(b.ctx, h)
	if err != nil {
		t.Fatalf("TellDeadLetters: %v", err)
	}
	if res.Told != 6 || len(res.Untold) != 1 || res.Untold[0].ID != ids[2] || !strings.Contains(res.Untold[0].Reason, "no_poison") || res.More {
		t.Errorf("told %d, untold %+v, more %v; want 6 told and %d untold naming the constraint, nothing more", res.Told, res.Untold, res.More, ids[2])
	}
	if len(res.Notifications) < 2 {
		t.Errorf("%d hook notifications; want the batch split", len(res.Notifications))
	}
	later := b.deadLetters(t, "no such recipient", "later")
	tellAll(t, b, h)
	toldOnce(t, b.hookPayloads(t), append(append(append([]int64{}, ids[:2]...), ids[3:]...), later...))
	if n := b.eventsWaiting(t); n != 0 {
		t.Errorf("%d events left waiting, want 0", n)
	}
}

// TestStore_TellDeadLetters_timeOutOfRange: a dead letter whose updated_at
// an application's SQL wrote as 'infinity' or past year 9999 (both valid
// timestamptz) is told with its time clamped (failed_at 9999-12-31), and
// the channel's later dead letters with it. Before, the first failed the
// scan and the second json.Marshal, on every call: the transaction rolled
// back, and no later dead letter of the channel was ever told.
func TestStore_TellDeadLetters_timeOutOfRange(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"infinity", "12000-01-01"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			b, h := hookSetup(t)
			var bad int64
			if err := b.db.Pool.QueryRow(b.ctx, `
				INSERT INTO notifications (channel, recipient, payload, status, attempts, last_error, updated_at)
				VALUES ('ch', 'app', '{}', 'FAILED', 1, 'written by SQL', $1) RETURNING id`, v).Scan(&bad); err != nil {
				t.Fatal(err)
			}
			later := b.deadLetters(t, "later", "a", "b", "c")
			told := 0
			for _, c := range tellAll(t, b, h) {
				told += c.Told
				if len(c.Untold) > 0 {
					t.Errorf("untold dead letters %v; want every one told", c.Untold)
				}
			}
			payloads := b.hookPayloads(t)
			toldOnce(t, payloads, append([]int64{bad}, later...))
			if told != 4 || b.eventsWaiting(t) != 0 {
				t.Errorf("told %d of 4, %d events left waiting", told, b.eventsWaiting(t))
			}
			for _, p := range payloads {
				for _, d := range p.batch.DeadLetters {
					if want := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC); d.ID == bad && !d.FailedAt.Equal(want) {
						t.Errorf("failed_at %v, want %v", d.FailedAt, want)
					}
				}
			}
		})
	}
}

// TestStore_TellDeadLetters_replayedBeforeTold: a dead letter an operator
// replays before the hook's next call is no dead letter any more, and one
// replayed and FAILED again is told once, with its latest failure. Before,
// the replayed one was told as dead all the same (status QUEUED, attempts
// 0, failed_at the replay's time), and the one failed twice was listed
// twice in the same hook notification.
func TestStore_TellDeadLetters_replayedBeforeTold(t *testing.T) {
	t.Parallel()
	b, h := hookSetup(t)
	ids := b.deadLetters(t, "first failure", "replayed", "failed-again", "dead")
	if _, err := b.store.Replay(b.ctx, ids[:2]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET status = 'FAILED', attempts = 1, last_error = 'second failure' WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	told := 0
	for _, c := range tellAll(t, b, h) {
		told += c.Told
	}
	payloads := b.hookPayloads(t)
	toldOnce(t, payloads, ids[1:])
	for _, p := range payloads {
		for _, d := range p.batch.DeadLetters {
			switch d.ID {
			case ids[0]:
				t.Errorf("replayed notification %d told as a dead letter: %+v", d.ID, d)
			case ids[1]:
				if d.Error != "second failure" || d.Attempts != 1 {
					t.Errorf("notification failed again told as %+v; want its second failure", d)
				}
			}
		}
	}
	if told != 2 || b.eventsWaiting(t) != 0 {
		t.Errorf("told %d, want 2; %d events left waiting, want 0", told, b.eventsWaiting(t))
	}
}

// TestStore_TellDeadLetters_rowAtFault_triggerException: an operator's
// trigger that refuses the hook notification listing one dead letter with a
// plain RAISE EXCEPTION (SQLSTATE P0001, of no data class) failed every
// call: the channel's oldest events were taken again each time, and no dead
// letter of the channel was ever told. A hook notification of the batch
// written alone shows the refusal is a dead letter's, and the batch is split
// as for a data error. One refused alone, with no batch-mate, is an error
// (the caller's to bound).
func TestStore_TellDeadLetters_rowAtFault_triggerException(t *testing.T) {
	t.Parallel()
	b, h := hookSetup(t)
	if _, err := b.db.Pool.Exec(b.ctx, testenv.RefuseHookPoisonSQL); err != nil {
		t.Fatal(err)
	}
	ids := b.deadLetters(t, "no such recipient", "a", "b", "poison", "d", "e", "f", "g")
	res, err := b.store.TellDeadLetters(b.ctx, h)
	if err != nil {
		t.Fatalf("TellDeadLetters: %v", err)
	}
	if res.Told != 6 || len(res.Untold) != 1 || res.Untold[0].ID != ids[2] || !strings.Contains(res.Untold[0].Reason, "poisoned dead letter") || res.More {
		t.Errorf("told %d, untold %+v, more %v; want 6 told and %d untold naming the refusal, nothing more", res.Told, res.Untold, res.More, ids[2])
	}
	later := b.deadLetters(t, "no such recipient", "later")
	tellAll(t, b, h)
	toldOnce(t, b.hookPayloads(t), append(append(append([]int64{}, ids[:2]...), ids[3:]...), later...))
	if n := b.eventsWaiting(t); n != 0 {
		t.Errorf("%d events left waiting, want 0", n)
	}
}

// TestStore_TellDeadLetters_refusedAlone: the hook notification of a lone
// dead letter refused by an operator's trigger (P0001), with no other dead
// letter to compare, is a RefusedAloneError naming its event and the dead
// notification, and nothing is told or deleted; named in EndRefused, it is
// recorded as told without a notification (Untold, with the refusal), so a
// later dead letter is told. Before, it was returned as a plain error on
// every call, and the channel's hook was stuck on it while it was alone.
func TestStore_TellDeadLetters_refusedAlone(t *testing.T) {
	t.Parallel()
	b, h := hookSetup(t)
	if _, err := b.db.Pool.Exec(b.ctx, testenv.RefuseHookPoisonSQL); err != nil {
		t.Fatal(err)
	}
	ids := b.deadLetters(t, "no such recipient", "poison")
	var event int64
	for range 2 { // the same answer every call, and nothing changed by it
		_, err := b.store.TellDeadLetters(b.ctx, h)
		var lone *outbox.RefusedAloneError
		if !errors.As(err, &lone) || lone.ID != ids[0] || lone.Event == 0 || !strings.Contains(err.Error(), "poisoned dead letter") {
			t.Fatalf("TellDeadLetters = %v; want a RefusedAloneError for dead letter %d naming the refusal", err, ids[0])
		}
		event = lone.Event
		if n := b.eventsWaiting(t); n != 1 {
			t.Fatalf("%d events waiting after a refused call, want 1", n)
		}
	}
	h.EndRefused = event
	res, err := b.store.TellDeadLetters(b.ctx, h)
	if err != nil {
		t.Fatalf("TellDeadLetters with EndRefused: %v", err)
	}
	if res.Told != 0 || len(res.Untold) != 1 || res.Untold[0].ID != ids[0] || !strings.Contains(res.Untold[0].Reason, "poisoned dead letter") {
		t.Errorf("told %d, untold %+v; want dead letter %d untold with the refusal", res.Told, res.Untold, ids[0])
	}
	later := b.deadLetters(t, "no such recipient", "later")
	tellAll(t, b, h)
	toldOnce(t, b.hookPayloads(t), later)
	if n := b.eventsWaiting(t); n != 0 {
		t.Errorf("%d events left waiting, want 0", n)
	}
}

// TestStore_TellDeadLetters_rowsAtFaultAtTheEnds: a trigger refuses (P0001)
// the hook notifications listing the first and the last of the dead letters
// taken. Both told alone are refused, as the whole is; an earlier version
// tried only those two alone and returned the refusal as the statement's,
// every call, and no dead letter of the channel was told. A dead letter
// between them told alone shows the refusal is theirs (outbox.ProbeOrder).
func TestStore_TellDeadLetters_rowsAtFaultAtTheEnds(t *testing.T) {
	t.Parallel()
	b, h := hookSetup(t)
	if _, err := b.db.Pool.Exec(b.ctx, testenv.RefuseHookPoisonSQL); err != nil {
		t.Fatal(err)
	}
	ids := b.deadLetters(t, "no such recipient", "poison-a", "b", "c", "d", "e", "poison-f")
	res, err := b.store.TellDeadLetters(b.ctx, h)
	if err != nil {
		t.Fatalf("TellDeadLetters: %v", err)
	}
	var untold []int64
	for _, u := range res.Untold {
		untold = append(untold, u.ID)
	}
	if res.Told != 4 || !slices.Equal(untold, []int64{ids[0], ids[5]}) {
		t.Errorf("told %d, untold %v; want 4 told and %v untold", res.Told, untold, []int64{ids[0], ids[5]})
	}
	toldOnce(t, b.hookPayloads(t), ids[1:5])
	if n := b.eventsWaiting(t); n != 0 {
		t.Errorf("%d events left waiting, want 0", n)
	}
}

// TestProbeOrder: the first and the last come first; every position of a
// batch of up to AloneProbes rows is named once; a larger batch gets
// AloneProbes distinct positions in range, the middle ones drawn afresh.
func TestProbeOrder(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1} {
		if got := outbox.ProbeOrder(n); got != nil {
			t.Errorf("ProbeOrder(%d) = %v, want nil", n, got)
		}
	}
	for _, n := range []int{2, 3, 17, outbox.AloneProbes} {
		got := outbox.ProbeOrder(n)
		if len(got) != n || got[0] != 0 || got[1] != n-1 {
			t.Errorf("ProbeOrder(%d) = %v, want all %d positions, the first and last first", n, got, n)
		}
		seen := map[int]bool{}
		for _, k := range got {
			seen[k] = true
		}
		if len(seen) != n {
			t.Errorf("ProbeOrder(%d) = %v names a position twice", n, got)
		}
	}
	drawn := map[int]bool{}
	for range 20 {
		n := 256
		got := outbox.ProbeOrder(n)
		if len(got) != outbox.AloneProbes || got[0] != 0 || got[1] != n-1 {
			t.Fatalf("ProbeOrder(%d) = %v, want %d positions, the first and last first", n, got, outbox.AloneProbes)
		}
		seen := map[int]bool{}
		for _, k := range got {
			if k < 0 || k >= n || seen[k] {
				t.Fatalf("ProbeOrder(%d) = %v: %d out of range or named twice", n, got, k)
			}
			seen[k] = true
			drawn[k] = true
		}
	}
	if len(drawn) < 3*outbox.AloneProbes {
		t.Errorf("20 orders of 256 named %d positions in all; want the middle ones drawn afresh each time", len(drawn))
	}
}
