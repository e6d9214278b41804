package delivery_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
)

// pager records what the hook channel is told.
type pager struct {
	mu       sync.Mutex
	payloads []outbox.DeadLetterBatch
	to       []string
}

func (*pager) Describe() sdk.Info { return sdk.Info{Name: "pager", Version: "1"} }

func (p *pager) Configure(context.Context, sdk.ConfigureRequest) (sdk.Sender, error) {
	return sdk.SenderFunc(func(_ context.Context, msg sdk.Message) sdk.Verdict {
		var b outbox.DeadLetterBatch
		if err := json.Unmarshal(msg.Payload, &b); err != nil {
			return sdk.Permanent("not a dead-letter batch: " + err.Error())
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.payloads = append(p.payloads, b)
		p.to = append(p.to, msg.Recipient)
		return sdk.Success(nil)
	}), nil
}

// hookConfig is b's config with the test channel on the in-process "memo"
// provider telling its dead letters, 3 a notification every 100 ms, to the
// channel "oncall" on "pager".
func hookConfig(t *testing.T, b *bundle) config.Config {
	t.Helper()
	cfg := *b.cfg
	cfg.Channels = map[string]config.Channel{
		testChannel: {Plugin: "memo", DeadLetterHook: config.DeadLetterHook{
			Channel: "oncall", Recipient: "https://oncall.example/hook", Batch: 3, Every: 100 * time.Millisecond}},
		"oncall": {Plugin: "pager"},
	}
	for name, ch := range cfg.Channels {
		cfg.Channels[name] = config.FillChannel(ch)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// told is how many times each dead letter was told so far.
func (p *pager) told() map[int64]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[int64]int{}
	for _, batch := range p.payloads {
		for _, d := range batch.DeadLetters {
			seen[d.ID]++
		}
	}
	return seen
}

// TestEngine_DeadLetterHook: a channel's dead letters — from a provider's
// final answer, and one failed at insert — are told to its hook channel in
// batches of at most dead_letter_hook.batch, each exactly once, with the
// reason; a delivered notification is never told, a dead letter replayed and
// failing again is told again, and nothing is left waiting.
func TestEngine_DeadLetterHook(t *testing.T) {
	t.Parallel()
	b := setup(t, newSink(t, nil))
	cfg := hookConfig(t, b)
	p := &pager{}
	e := b.startInProcess(&cfg, map[string]sdk.Provider{"memo": &memo{}, "pager": p})
	ok := b.send("somebody", "")
	var dead []int64
	for range 7 {
		dead = append(dead, b.send("nobody", ""))
	}
	for _, id := range append([]int64{ok}, dead...) {
		b.wait(id, 15*time.Second)
	}
	// Failed at insert (as a schedule's unrenderable recipient is): the
	// insert trigger tells it too.
	var atBirth int64
	if err := b.store.Pool().QueryRow(context.Background(), `
		INSERT INTO notifications (channel, recipient, payload, status, last_error)
		VALUES ($1, 'r', '{}', 'FAILED', 'template: missing key') RETURNING id`, testChannel).Scan(&atBirth); err != nil {
		t.Fatal(err)
	}
	dead = append(dead, atBirth)

	told := func(want int) map[int64]int {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			seen := p.told()
			n := 0
			for _, c := range seen {
				n += c
			}
			if n >= want || time.Now().After(deadline) {
				return seen
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	seen := told(len(dead))
	for _, id := range dead {
		if seen[id] != 1 {
			t.Errorf("dead letter %d told %d times, want once", id, seen[id])
		}
	}
	if seen[ok] != 0 {
		t.Errorf("delivered notification %d was told as a dead letter", ok)
	}
	p.mu.Lock()
	for i, batch := range p.payloads {
		if batch.Type != "notifyd.dead_letters" || batch.Channel != testChannel || batch.Count != len(batch.DeadLetters) ||
			batch.Count == 0 || batch.Count > 3 || p.to[i] != "https://oncall.example/hook" {
			t.Errorf("hook notification %d = %+v to %q; want at most 3 of %s's dead letters to the hook's recipient", i, batch, p.to[i], testChannel)
		}
		for _, d := range batch.DeadLetters {
			if slices.Contains(dead[:7], d.ID) && (d.Recipient != "nobody" || d.Error != "no such recipient" || d.Attempts != 1 || d.FailedAt.IsZero()) {
				t.Errorf("dead letter %+v, want recipient nobody, the reason, 1 attempt, a time", d)
			}
		}
	}
	batches := len(p.payloads)
	p.mu.Unlock()
	if batches < (len(dead)+2)/3 {
		t.Errorf("%d hook notifications for %d dead letters, want at least %d (batch 3)", batches, len(dead), (len(dead)+2)/3)
	}

	// Replayed, it fails again and is told again.
	rows, err := b.store.Replay(context.Background(), dead[:1])
	if err != nil || len(rows) != 1 {
		t.Fatalf("replay %d: %v, %v", dead[0], rows, err)
	}
	if err := e.Revive(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	seen = told(len(dead) + 1)
	if seen[dead[0]] != 2 {
		t.Errorf("replayed dead letter %d told %d times, want twice", dead[0], seen[dead[0]])
	}
	var waiting int
	if err := b.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM dead_letter_events`).Scan(&waiting); err != nil || waiting != 0 {
		t.Errorf("%d dead-letter events left waiting (%v), want 0", waiting, err)
	}
}

// TestEngine_DeadLetterHook_refusedAlone: an operator's trigger refuses
// (RAISE EXCEPTION) the hook notification of a channel's only waiting dead
// letter. After refusedAloneLimit calls refused alone in a row it is
// recorded as told without a notification, and the channel's later dead
// letters are told. Before, the lone one failed the hook on every call for
// as long as it was alone, and stayed waiting for good.
func TestEngine_DeadLetterHook_refusedAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, newSink(t, nil))
	cfg := hookConfig(t, b)
	ctx := context.Background()
	if _, err := b.store.Pool().Exec(ctx, testenv.RefuseHookPoisonSQL); err != nil {
		t.Fatal(err)
	}
	p := &pager{}
	b.startInProcess(&cfg, map[string]sdk.Provider{"memo": &memo{}, "pager": p})
	// Failed at insert once the engine has recorded the hooked channels, so
	// the insert trigger writes its event (checked in the same transaction,
	// before the hook can see it).
	deadline := time.Now().Add(15 * time.Second)
	for {
		var hooked bool
		if err := b.store.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM dead_letter_hooks WHERE channel = $1)`, testChannel).Scan(&hooked); err != nil {
			t.Fatal(err)
		}
		if hooked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the engine did not record %s's dead_letter_hook within 15 s", testChannel)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var poison int64
	var events int
	if err := pgx.BeginFunc(ctx, b.store.Pool(), func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `
			INSERT INTO notifications (channel, recipient, payload, status, last_error)
			VALUES ($1, 'poison', '{}', 'FAILED', 'failed at insert') RETURNING id`, testChannel).Scan(&poison); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT count(*) FROM dead_letter_events WHERE notification_id = $1`, poison).Scan(&events)
	}); err != nil {
		t.Fatal(err)
	}
	if events != 1 {
		t.Fatalf("%d dead-letter events written for %d, want 1", events, poison)
	}
	waiting := func() int {
		t.Helper()
		var n int
		if err := b.store.Pool().QueryRow(ctx, `SELECT count(*) FROM dead_letter_events WHERE notification_id = $1`, poison).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline = time.Now().Add(15 * time.Second)
	for waiting() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := waiting(); n != 0 {
		t.Fatalf("the lone refused dead letter %d still waits to be told after 15 s (%d events)", poison, n)
	}
	later := b.send("nobody", "")
	b.wait(later, 15*time.Second)
	for {
		seen := p.told()
		if seen[later] > 0 || time.Now().After(deadline.Add(15*time.Second)) {
			if seen[later] != 1 || seen[poison] != 0 {
				t.Errorf("later dead letter %d told %d times (want once), the refused one %d told %d times (want never)", later, seen[later], poison, seen[poison])
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
