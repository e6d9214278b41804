package service_test

import (
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/limit"
	"github.com/notifyd/notifyd/internal/outbox"
)

// TestService_Waiting: a queued notification on a channel whose breaker is
// open says until when; on a paused channel, the pause's reason; otherwise,
// and once finished, nothing.
func TestService_Waiting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	queued := b.rows(t, "orders", outbox.StatusQueued, 1)[0]
	sent := b.rows(t, "orders", outbox.StatusSent, 1)[0]
	other := b.rows(t, "quiz", outbox.StatusQueued, 1)[0]
	waiting := func(id int64) string {
		t.Helper()
		n, err := b.ops.Notification(b.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return n.Waiting
	}
	if w := waiting(queued); w != "" {
		t.Errorf("waiting %q with nothing holding the channel back, want none", w)
	}
	if err := limit.NewBreaker(b.rds.Client, b.rds.Prefix, "orders").Trip(b.ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // past the engine's cached view of the breaker
	w := waiting(queued)
	if !strings.HasPrefix(w, "channel breaker open until ") {
		t.Errorf("waiting %q with the breaker open, want it to say until when", w)
	} else if until, err := time.Parse(time.RFC3339, strings.Fields(w)[4]); err != nil || until.Before(time.Now().Add(50*time.Second)) {
		t.Errorf("waiting %q: the time is not the breaker's end a minute from now (%v)", w, err)
	}
	if w := waiting(sent); w != "" {
		t.Errorf("a SENT notification is waiting %q", w)
	}
	if err := b.ops.Pause(b.ctx, "quiz", "provider maintenance"); err != nil {
		t.Fatal(err)
	}
	if w := waiting(other); w != "channel paused: provider maintenance" {
		t.Errorf("waiting %q on a paused channel, want its reason", w)
	}
}
