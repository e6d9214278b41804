package delivery_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
)

// poison installs a trigger that makes Postgres refuse, with a data error
// (SQLSTATE 22023, or code), the writes that cond selects: a row at fault inside a
// batch, as a too-long recipient once was for every settle. cond is SQL over
// NEW (and, for the attempt log, over the notification's recipient r).
func (b *bundle) poison(table, cond string) { b.poisonCode(table, cond, "22023") }

func (b *bundle) poisonCode(table, cond, code string) {
	b.t.Helper()
	fn := "poison_" + table
	sql := fmt.Sprintf(`
CREATE FUNCTION %[1]s() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
    SELECT recipient INTO r FROM notifications WHERE id = %[3]s;
    IF %[4]s THEN
        RAISE EXCEPTION 'poisoned row %%', %[3]s USING ERRCODE = '%[5]s';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER %[1]s BEFORE INSERT OR UPDATE ON %[2]s FOR EACH ROW EXECUTE FUNCTION %[1]s();`,
		fn, table, map[string]string{"notifications": "NEW.id", "notification_attempts": "NEW.notification_id"}[table], cond, code)
	if _, err := b.store.Pool().Exec(context.Background(), sql); err != nil {
		b.t.Fatalf("install poison trigger: %v", err)
	}
}

// sendBatch enqueues the recipients in one insert, so they travel together.
func (b *bundle) sendBatch(recipients ...string) map[string]int64 {
	b.t.Helper()
	ids := b.sendMany(len(recipients), func(i int) string { return recipients[i] })
	out := make(map[string]int64, len(ids))
	for i, id := range ids {
		out[recipients[i]] = id
	}
	return out
}

func recipients(poison string, n int) []string {
	out := []string{poison}
	for i := range n {
		out = append(out, fmt.Sprintf("ok-%d", i))
	}
	return out
}

// TestEngine_RowAtFault: one row that a batched statement cannot write never
// holds up the rows batched with it; it is found by splitting the batch and
// ends in a final state with the reason, visible in its status.
func TestEngine_RowAtFault(t *testing.T) {
	t.Parallel()
	wide := func(_ *config.Config, ch *config.Channel) { ch.BatchSize = 64; ch.Concurrency = 64 }

	t.Run("settle", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newSink(t, nil), wide)
		// The settle logs a provider status; the finish that ends the row
		// alone does not, so this refuses only the batched settle.
		b.poison("notification_attempts", `r = 'poison' AND NEW.provider_status IS NOT NULL`)
		ids := b.sendBatch(recipients("poison", 40)...)
		b.engine("", delivery.Hooks{})
		for r, id := range ids {
			n := b.wait(id, 20*time.Second)
			if r != "poison" {
				if n.Status != outbox.StatusSent {
					t.Errorf("%s: %s (%q), want SENT", r, n.Status, n.LastError)
				}
				continue
			}
			// The provider took it: SENT, with why its details are missing.
			if n.Status != outbox.StatusSent || len(n.Attempts) != 1 ||
				!strings.Contains(n.Attempts[0].Error, "could not be stored") || !strings.Contains(n.Attempts[0].Error, "poisoned row") {
				t.Errorf("poison: %s, attempts %+v; want SENT with one attempt saying the verdict could not be stored", n.Status, n.Attempts)
			}
		}
		if got := len(b.sink.deliveries("poison")); got != 1 {
			t.Errorf("poison delivered %d times, want 1 (never re-sent for a failed settle)", got)
		}
	})

	// A row refused before it is sent (as it is claimed, or relayed) ends
	// FAILED with the reason, in the dead letters, and is never sent.
	for _, tt := range []struct{ stage, status, reason string }{
		{"claim", "PROCESSING", "could not be claimed"},
		{"relay", "QUEUED", "could not be queued"},
	} {
		t.Run(tt.stage, func(t *testing.T) {
			t.Parallel()
			b := setup(t, newSink(t, nil), wide)
			b.poison("notifications", `NEW.recipient = 'poison' AND NEW.status = '`+tt.status+`'`)
			ids := b.sendBatch(recipients("poison", 40)...)
			b.engine("", delivery.Hooks{})
			for r, id := range ids {
				n := b.wait(id, 20*time.Second)
				want := outbox.StatusSent
				if r == "poison" {
					want = outbox.StatusFailed
				}
				if n.Status != want {
					t.Errorf("%s: %s (%q), want %s", r, n.Status, n.LastError, want)
				}
				if r == "poison" && !strings.Contains(n.LastError, tt.reason) {
					t.Errorf("poison: last_error %q, want %q", n.LastError, tt.reason)
				}
			}
			if got := len(b.sink.deliveries("poison")); got != 0 {
				t.Errorf("poison delivered %d times, want 0", got)
			}
			failed, _, err := b.store.ListFailed(context.Background(), testChannel, 0, 10)
			if err != nil || len(failed) != 1 || failed[0].ID != ids["poison"] {
				t.Errorf("dead letters = %+v (%v), want the poison row alone", failed, err)
			}
		})
	}

	t.Run("a row that cannot be written at all", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newSink(t, nil), wide)
		b.poison("notifications", `NEW.recipient = 'poison' AND NEW.status IN ('SENT', 'FAILED')`)
		ids := b.sendBatch(recipients("poison", 40)...)
		b.engine("", delivery.Hooks{})
		for r, id := range ids {
			if r != "poison" {
				if n := b.wait(id, 20*time.Second); n.Status != outbox.StatusSent {
					t.Errorf("%s: %s (%q), want SENT", r, n.Status, n.LastError)
				}
			}
		}
		n, err := b.store.Get(context.Background(), ids["poison"])
		if err != nil || n.Status != outbox.StatusProcessing {
			t.Errorf("poison = %+v (%v), want left PROCESSING for an operator", n, err)
		}
	})
}

// TestEngine_ClaimPastMaxAttempts: a message claimed beyond its retry budget
// (every earlier attempt died with its sender, so none was settled) is not
// sent again: it ends FAILED with the reason.
func TestEngine_ClaimPastMaxAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t, newSink(t, nil))
	id := b.send("crasher", "")
	// Five claims whose outcomes were lost, as five kill -9s would leave it.
	if _, err := b.store.Pool().Exec(context.Background(), `UPDATE notifications SET attempts = 5 WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	b.engine("", delivery.Hooks{})
	n := b.wait(id, 20*time.Second)
	if n.Status != outbox.StatusFailed || !strings.Contains(n.LastError, "past retry.max_attempts 5") {
		t.Errorf("got %s (%q), want FAILED past retry.max_attempts", n.Status, n.LastError)
	}
	if got := len(b.sink.deliveries("crasher")); got != 0 {
		t.Errorf("sent %d times, want 0", got)
	}
}

// TestEngine_ChannelNoQueueCanName: a notification an application's own SQL
// wrote on a channel that cannot name a Redis queue (empty, or holding { or
// }, which break its hash tag; the column bounds only the length) ends FAILED
// with the reason, and nothing else waits for it. Before, the relay moved it
// QUEUED, its push was refused, and the relay kept it to push first on every
// later pass, giving up each time: no notification enqueued afterwards, on
// any channel, was relayed again; the sweep and the resync stopped on its
// page as well.
func TestEngine_ChannelNoQueueCanName(t *testing.T) {
	t.Parallel()
	for _, channel := range []string{"", "app{x}"} {
		t.Run("relay/channel="+channel, func(t *testing.T) {
			t.Parallel()
			b := setup(t, newSink(t, nil))
			ctx := context.Background()
			var bad int64
			if err := b.store.Pool().QueryRow(ctx,
				`INSERT INTO notifications (channel, recipient, payload) VALUES ($1, 'bad-channel', '{}') RETURNING id`, channel).Scan(&bad); err != nil {
				t.Fatal(err)
			}
			b.engine("", delivery.Hooks{})
			// Enqueued once the relay has met the row, so it is not in the
			// same pass.
			waitFor(t, 20*time.Second, "the row relayed", func() bool {
				n, err := b.store.Get(ctx, bad)
				return err == nil && n.Status != outbox.StatusPending
			})
			if n := b.wait(b.send("after", ""), 20*time.Second); n.Status != outbox.StatusSent {
				t.Errorf("the notification enqueued after it: %s (%q), want SENT", n.Status, n.LastError)
			}
			n := b.wait(bad, 20*time.Second)
			if want := fmt.Sprintf("channel %q cannot name a Redis queue", channel); n.Status != outbox.StatusFailed || !strings.Contains(n.LastError, want) {
				t.Errorf("the row on channel %q: %s (%q), want FAILED saying %q", channel, n.Status, n.LastError, want)
			}
		})
	}

	// The resync at start (and the sweep: the same push) meets such rows
	// already QUEUED or PROCESSING; a row on a channel this instance does not
	// serve, whose name is good, is pushed and left as it was.
	t.Run("resync", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newSink(t, nil))
		ctx := context.Background()
		ids := map[string]int64{}
		for _, r := range []struct{ name, channel, status string }{
			{"queued", "", "QUEUED"}, {"processing", "a}b", "PROCESSING"}, {"elsewhere", "elsewhere", "QUEUED"},
		} {
			var id int64
			if err := b.store.Pool().QueryRow(ctx, `INSERT INTO notifications (channel, recipient, payload, status)
				VALUES ($1, $2, '{}', $3) RETURNING id`, r.channel, r.name, r.status).Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids[r.name] = id
		}
		b.engine("", delivery.Hooks{})
		for _, name := range []string{"queued", "processing"} {
			if n := b.wait(ids[name], 20*time.Second); n.Status != outbox.StatusFailed || !strings.Contains(n.LastError, "cannot name a Redis queue") {
				t.Errorf("%s: %s (%q), want FAILED with the reason", name, n.Status, n.LastError)
			}
		}
		if n, err := b.store.Get(ctx, ids["elsewhere"]); err != nil || n.Status != outbox.StatusQueued {
			t.Errorf("the row on a channel not served here = %+v (%v), want left QUEUED", n, err)
		}
	})
}

// TestEngine_Stalls: a settle that cannot commit for a reason other than a
// row's data (here SQLSTATE 53000, insufficient resources) is retried whole,
// and the engine reports the stage stalled once past delivery.stall_after,
// until it commits.
func TestEngine_Stalls(t *testing.T) {
	t.Parallel()
	b := setup(t, newSink(t, nil), func(c *config.Config, _ *config.Channel) { c.Delivery.StallAfter = 300 * time.Millisecond })
	b.poisonCode("notification_attempts", `r = 'stuck'`, "53000")
	e := b.engine("", delivery.Hooks{})
	id := b.send("stuck", "")
	waitFor(t, 15*time.Second, "settle reported stalled", func() bool {
		return slices.Contains(e.Stalls(), delivery.StageSettle) && e.Stalled()[delivery.StageSettle] > 300*time.Millisecond
	})
	// Held past the time a PROCESSING row's claimer is presumed dead (2 ×
	// timeout + 1 s + lease: 7 s here) and two sweeps: a held verdict's row
	// must not be claimed and sent again meanwhile (checked below).
	time.Sleep(9 * time.Second)
	if _, err := b.store.Pool().Exec(context.Background(), `DROP TRIGGER poison_notification_attempts ON notification_attempts`); err != nil {
		t.Fatal(err)
	}
	if n := b.wait(id, 15*time.Second); n.Status != outbox.StatusSent {
		t.Errorf("got %s, want SENT once the settle can commit", n.Status)
	}
	waitFor(t, 5*time.Second, "no stage stalled", func() bool { return len(e.Stalls()) == 0 })
}

// waitFor polls cond until it holds, failing the test after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s after %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEngine_RowAtFault_TriggerException: an operator's trigger that refuses
// one row with a plain RAISE EXCEPTION (SQLSTATE P0001, of no data class)
// failed its whole batch on every try: the settle worker retried it for
// good (both workers held, no channel's verdicts committed), the claim's
// batch-mates were never sent. A row of the batch committing alone now
// shows the refusal is a row's, and the batch is split as for a data
// error. A statement every row is refused by is still retried whole, not
// ended row by row: the trigger dropped, every row is SENT.
func TestEngine_RowAtFault_TriggerException(t *testing.T) {
	t.Parallel()
	wide := func(_ *config.Config, ch *config.Channel) { ch.BatchSize = 64; ch.Concurrency = 64 }
	for _, tt := range []struct{ stage, table, cond, want, reason string }{
		// Delivered: SENT without its details (finishUnstorable).
		{"settle", "notification_attempts", `r = 'poison' AND NEW.provider_status IS NOT NULL`, outbox.StatusSent, ""},
		{"claim", "notifications", `NEW.recipient = 'poison' AND NEW.status = 'PROCESSING'`, outbox.StatusFailed, "could not be claimed"},
		// The oldest due row refused as it is relayed stopped the relay for
		// every channel: a relay of one row was refused, the row at fault
		// looked for only for a data error.
		{"relay", "notifications", `NEW.recipient = 'poison' AND NEW.status = 'QUEUED'`, outbox.StatusFailed, "could not be queued"},
	} {
		t.Run(tt.stage, func(t *testing.T) {
			t.Parallel()
			b := setup(t, newSink(t, nil), wide)
			b.poisonCode(tt.table, tt.cond, "P0001")
			ids := b.sendBatch(recipients("poison", 40)...)
			b.engine("", delivery.Hooks{})
			for r, id := range ids {
				n := b.wait(id, 30*time.Second)
				want := outbox.StatusSent
				if r == "poison" {
					want = tt.want
				}
				if n.Status != want {
					t.Errorf("%s: %s (%q), want %s", r, n.Status, n.LastError, want)
				}
				if r == "poison" && !strings.Contains(n.LastError, tt.reason) {
					t.Errorf("poison: last_error %q, want %q", n.LastError, tt.reason)
				}
			}
		})
	}

	// Rows at fault where a fixed order of probes looked: the two oldest due
	// (the relay tried the oldest alone, then all the others together) and
	// the batch's first and last (the claim, the settle and the dead-letter
	// hook tried only those two alone). Before, the relay retried such rows
	// whole for good, and no channel's due rows were queued; the claim's
	// and the settle's batch was retried whole until a retry happened to
	// batch the rows differently (the claim's: a second later, in this test's
	// one fetch of all 43 ids). outbox's TestStore_TellDeadLetters_rowsAtFaultAtTheEnds
	// shows the same for a batch whose order is fixed.
	for _, tt := range []struct{ stage, table, cond, want, reason string }{
		{"settle, rows at fault at the ends", "notification_attempts", `r LIKE 'poison%' AND NEW.provider_status IS NOT NULL`, outbox.StatusSent, ""},
		{"claim, rows at fault at the ends", "notifications", `NEW.recipient LIKE 'poison%' AND NEW.status = 'PROCESSING'`, outbox.StatusFailed, "could not be claimed"},
		{"relay, rows at fault at the ends", "notifications", `NEW.recipient LIKE 'poison%' AND NEW.status = 'QUEUED'`, outbox.StatusFailed, "could not be queued"},
	} {
		t.Run(tt.stage, func(t *testing.T) {
			t.Parallel()
			b := setup(t, newSink(t, nil), wide)
			b.poisonCode(tt.table, tt.cond, "P0001")
			rs := append([]string{"poison-a"}, recipients("poison-b", 40)...)
			ids := b.sendBatch(append(rs, "poison-c")...)
			b.engine("", delivery.Hooks{})
			for r, id := range ids {
				n := b.wait(id, 30*time.Second)
				want := outbox.StatusSent
				if strings.HasPrefix(r, "poison") {
					want = tt.want
				}
				if n.Status != want || (strings.HasPrefix(r, "poison") && !strings.Contains(n.LastError, tt.reason)) {
					t.Errorf("%s: %s (%q), want %s", r, n.Status, n.LastError, want)
				}
			}
		})
	}

	// More rows at fault at the head of the due rows than one relay pass
	// tries alone (64): the next pass goes on past those the first found,
	// and once a row relays alone every one is tried alone again and ended.
	t.Run("relay, 70 rows at fault at the head", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newSink(t, nil), wide)
		b.poisonCode("notifications", `NEW.recipient LIKE 'poison%' AND NEW.status = 'QUEUED'`, "P0001")
		var rs []string
		for i := range 70 {
			rs = append(rs, fmt.Sprintf("poison-%d", i))
		}
		for i := range 5 {
			rs = append(rs, fmt.Sprintf("ok-%d", i))
		}
		ids := b.sendBatch(rs...)
		b.engine("", delivery.Hooks{})
		var wrong []string
		for r, id := range ids {
			n := b.wait(id, 60*time.Second)
			want := outbox.StatusSent
			if strings.HasPrefix(r, "poison") {
				want = outbox.StatusFailed
			}
			if n.Status != want {
				wrong = append(wrong, fmt.Sprintf("%s %s (%q), want %s", r, n.Status, n.LastError, want))
			}
		}
		if len(wrong) > 0 {
			t.Errorf("%d of %d rows wrong, e.g. %v", len(wrong), len(ids), wrong[:min(len(wrong), 5)])
		}
	})

	// Refused any write, even the finish that ends it without its details:
	// left PROCESSING for an operator (as for a data error), the others SENT.
	t.Run("settle, the row refused any write", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newSink(t, nil), wide)
		b.poisonCode("notifications", `NEW.recipient = 'poison' AND NEW.status IN ('SENT', 'FAILED')`, "P0001")
		ids := b.sendBatch(recipients("poison", 40)...)
		b.engine("", delivery.Hooks{})
		for r, id := range ids {
			if r == "poison" {
				continue
			}
			if n := b.wait(id, 30*time.Second); n.Status != outbox.StatusSent {
				t.Errorf("%s: %s (%q), want SENT", r, n.Status, n.LastError)
			}
		}
		if n, err := b.store.Get(context.Background(), ids["poison"]); err != nil || n.Status != outbox.StatusProcessing {
			t.Errorf("poison = %+v (%v), want left PROCESSING for an operator", n, err)
		}
	})

	// A statement every row is refused by is not ended row by row: refused
	// claims are tried again each second, refused relay passes try the rows
	// alone, remember them and find no row that relays; nothing ends
	// meanwhile, and with the trigger dropped every row is SENT.
	//
	// Claimed one at a time (batch_size 1), every claim is of one row
	// alone, and each row's refusals are interleaved with the others':
	// before, each was counted toward its end all the same and
	// ended FAILED after three (on a loaded host a fetch of one id did this
	// to one row of ten: rehearsal 66).
	oneAtATime := func(_ *config.Config, ch *config.Channel) { ch.BatchSize, ch.Concurrency = 1, 1 }
	for _, tt := range []struct {
		stage, status, logged string
		opt                   option
		name                  string
		refusals              int // to wait for: one at a time, past refusedAloneLimit for every row
	}{
		{"claim", outbox.StatusProcessing, "claim failed; retrying later", wide, "claim, every row refused", 4},
		{"claim", outbox.StatusProcessing, "claim failed; retrying later", oneAtATime, "claim one at a time, every row refused", 10 * 4},
		{"relay", outbox.StatusQueued, "relay: error=", wide, "relay, every row refused", 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, newSink(t, nil), tt.opt)
			b.poisonCode("notifications", fmt.Sprintf(`NEW.status = '%s'`, tt.status), "P0001")
			ids := b.sendBatch(recipients("r", 10)...)
			logs := &testenv.SyncBuffer{}
			b.start(delivery.Options{Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Warn})})
			waitFor(t, time.Minute, fmt.Sprintf("%d refused %ss", tt.refusals, tt.stage), func() bool {
				return strings.Count(logs.String(), tt.logged) >= tt.refusals
			})
			before := map[string]string{"claim": outbox.StatusQueued, "relay": outbox.StatusPending}[tt.stage]
			for r, id := range ids {
				if n, err := b.store.Get(context.Background(), id); err != nil || n.Status != before {
					t.Fatalf("%s = %+v (%v), want still %s: a statement no row can pass ended rows", r, n, err, before)
				}
			}
			if _, err := b.store.Pool().Exec(context.Background(), `DROP TRIGGER poison_notifications ON notifications`); err != nil {
				t.Fatal(err)
			}
			for r, id := range ids {
				if n := b.wait(id, 30*time.Second); n.Status != outbox.StatusSent {
					t.Errorf("%s: %s (%q), want SENT once the %s can commit", r, n.Status, n.LastError, tt.stage)
				}
			}
		})
	}
}

// TestEngine_RowAtFault_TriggerExceptionAlone: a row an operator's trigger
// refuses (RAISE EXCEPTION, P0001) with no batch-mate to commit alone had
// nothing to tell its refusal from a statement's: its claim was tried again
// each second for good, its settle held a settle worker for good (two such
// rows held both, and no channel's verdicts committed), its relay failed
// every pass. Refused alone refusedAloneLimit (3) times in a row, it is
// ended as a row at fault is. Each poison row is sent alone, on a quiet
// engine; a good row sent after them is SENT.
func TestEngine_RowAtFault_TriggerExceptionAlone(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ stage, table, cond, want, reason string }{
		{"settle", "notification_attempts", `r LIKE 'poison%' AND NEW.provider_status IS NOT NULL`, outbox.StatusSent, ""},
		{"claim", "notifications", `NEW.recipient LIKE 'poison%' AND NEW.status = 'PROCESSING'`, outbox.StatusFailed, "could not be claimed"},
		{"relay", "notifications", `NEW.recipient LIKE 'poison%' AND NEW.status = 'QUEUED'`, outbox.StatusFailed, "could not be queued"},
	} {
		t.Run(tt.stage, func(t *testing.T) {
			t.Parallel()
			b := setup(t, newSink(t, nil))
			b.poisonCode(tt.table, tt.cond, "P0001")
			b.engine("", delivery.Hooks{})
			// Two poison rows one after the other (for the settle: as many
			// as there are settle workers), then a good one. (Two refused
			// rows batched together are not ended: a statement every row
			// is refused by must not end them; see ..._TriggerException.)
			for _, r := range []string{"poison-1", "poison-2"} {
				id := b.send(r, "")
				n := b.wait(id, 30*time.Second)
				if n.Status != tt.want || !strings.Contains(n.LastError, tt.reason) {
					t.Errorf("poison %d: %s (%q), want %s with %q", id, n.Status, n.LastError, tt.want, tt.reason)
				}
			}
			if n := b.wait(b.send("ok", ""), 30*time.Second); n.Status != outbox.StatusSent {
				t.Errorf("ok: %s (%q), want SENT", n.Status, n.LastError)
			}
		})
	}
}

// TestEngine_SettleRefusedForOneChannel: an operator's trigger refusing the
// settle of every row of one channel (RAISE EXCEPTION, P0001), so no row of
// its batches commits alone, held a settle worker for each such batch: two
// batches held both, and no other channel's verdict was committed again
// (its rows stayed PROCESSING, its sends stopped at its slots). The refused
// channel's verdicts are now held apart and retried there; the other
// channel's rows are SENT meanwhile, the settle reports the stall, and with
// the trigger dropped every held row is SENT, delivered once.
func TestEngine_SettleRefusedForOneChannel(t *testing.T) {
	t.Parallel()
	b := setup(t, newSink(t, nil))
	const other = "other"
	b.cfg.Channels[other] = b.cfg.Channels[testChannel]
	b.poisonCode("notification_attempts", `r LIKE 'poison%' AND NEW.provider_status IS NOT NULL`, "P0001")
	logs := &testenv.SyncBuffer{}
	e, _ := b.start(delivery.Options{Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Warn})})

	// Two waves, so that (before) each settle worker held a batch of them;
	// 16 rows in all, the channel's concurrency: held verdicts keep their
	// send slots.
	var poisoned []int64
	for wave := range 2 {
		var rs []string
		for i := range 8 {
			rs = append(rs, fmt.Sprintf("poison-%d-%d", wave, i))
		}
		for _, id := range b.sendBatch(rs...) {
			poisoned = append(poisoned, id)
		}
		waitFor(t, 30*time.Second, fmt.Sprintf("wave %d's sends and a refused settle", wave), func() bool {
			n := 0
			for _, r := range rs {
				n += len(b.sink.deliveries(r))
			}
			return n == len(rs) && strings.Contains(logs.String(), "settle failed; retrying")
		})
	}
	waitFor(t, 30*time.Second, "the settle stage reported stalled", func() bool {
		return e.Stalled()[delivery.StageSettle] > 0
	})

	ns := make([]outbox.NewNotification, 10)
	for i := range ns {
		ns[i] = outbox.NewNotification{Channel: other, Recipient: fmt.Sprintf("ok-%d", i), Payload: []byte(`{"text":"hi"}`)}
	}
	res, err := b.store.Insert(context.Background(), ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if n := b.wait(r.ID, 30*time.Second); n.Status != outbox.StatusSent {
			t.Fatalf("other channel's %d: %s (%q), want SENT while the refused channel's verdicts wait", r.ID, n.Status, n.LastError)
		}
	}
	for _, id := range poisoned {
		if n, err := b.store.Get(context.Background(), id); err != nil || n.Status != outbox.StatusProcessing {
			t.Fatalf("%d = %+v (%v), want still PROCESSING: a statement none of its rows can pass ended rows", id, n, err)
		}
	}

	// Held past the time a PROCESSING row's claimer is presumed dead (2 ×
	// timeout + 1 s + lease: 7 s here) and two sweeps: a held verdict's row
	// must not be claimed and sent again meanwhile (checked below).
	time.Sleep(9 * time.Second)
	if _, err := b.store.Pool().Exec(context.Background(), `DROP TRIGGER poison_notification_attempts ON notification_attempts`); err != nil {
		t.Fatal(err)
	}
	for _, id := range poisoned {
		if n := b.wait(id, 30*time.Second); n.Status != outbox.StatusSent || len(n.Attempts) != 1 {
			t.Errorf("%d: %s (%q), %d attempts; want SENT once the settle can commit", id, n.Status, n.LastError, len(n.Attempts))
		}
	}
	for wave := range 2 {
		for i := range 8 {
			if got := len(b.sink.deliveries(fmt.Sprintf("poison-%d-%d", wave, i))); got != 1 {
				t.Errorf("poison-%d-%d delivered %d times, want 1", wave, i, got)
			}
		}
	}
	waitFor(t, 30*time.Second, "the settle stage no longer stalled", func() bool {
		return e.Stalled()[delivery.StageSettle] == 0
	})
}
