package delivery_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
)

// respondByRecipient plays the scripted answers of the acceptance tests.
func respondByRecipient(recipient string, n int, h http.Header) (int, string) {
	switch {
	case recipient == "flaky" && n <= 2:
		return http.StatusServiceUnavailable, ""
	case recipient == "reject":
		return http.StatusBadRequest, `{"error":"no such user"}`
	case recipient == "throttled" && n == 1:
		h.Set("Retry-After", "2")
		return http.StatusTooManyRequests, ""
	case recipient == "down":
		return http.StatusBadGateway, ""
	}
	return http.StatusOK, ""
}

// TestEngine_Delivery runs the end-to-end behaviours on one Redis and on a
// real Redis Cluster.
func TestEngine_Delivery(t *testing.T) {
	t.Parallel()
	for _, mode := range redisModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			s := newSink(t, respondByRecipient)
			b := mode.setup(t, s)
			b.engine("", delivery.Hooks{})

			t.Run("success", func(t *testing.T) {
				id := b.send("alice", "")
				n := b.wait(id, 10*time.Second)
				if n.Status != outbox.StatusSent || n.AttemptCount != 1 || len(n.Attempts) != 1 || n.Attempts[0].Outcome != "SUCCESS" {
					t.Errorf("got %s after %d attempts (%+v), want SENT after 1 SUCCESS", n.Status, n.AttemptCount, n.Attempts)
				}
				if got := len(s.deliveries("alice")); got != 1 {
					t.Errorf("sink saw %d deliveries to alice, want 1", got)
				}
			})

			t.Run("503 503 200 retried inside the windows", func(t *testing.T) {
				id := b.send("flaky", "")
				n := b.wait(id, 15*time.Second)
				if n.Status != outbox.StatusSent || n.AttemptCount != 3 || len(n.Attempts) != 3 {
					t.Fatalf("got %s after %d attempts, want SENT after 3", n.Status, n.AttemptCount)
				}
				// window jitter, base 200ms: after failure 1 wait 0–200ms, after 2 wait 200–400ms.
				windows := [][2]time.Duration{{0, 200 * time.Millisecond}, {200 * time.Millisecond, 400 * time.Millisecond}}
				// The window's start is the promise (never retried early);
				// past its end only the scheduler's latency is measured, which
				// a busy machine stretches (934 ms once, beside fuzzers), so
				// the slack only catches a retry parked for good.
				const slack = 10 * time.Second
				for i, w := range windows {
					gap := n.Attempts[i+1].StartedAt.Sub(n.Attempts[i].FinishedAt)
					if gap < w[0] || gap > w[1]+slack {
						t.Errorf("gap after attempt %d = %v, want inside [%v, %v] (+%v slack)", i+1, gap, w[0], w[1], slack)
					}
				}
				if n.Attempts[0].ProviderStatus != 503 || n.Attempts[0].Outcome != "TRANSIENT" {
					t.Errorf("first attempt = %+v, want TRANSIENT with status 503", n.Attempts[0])
				}
			})

			t.Run("400 dead-lettered with last_error", func(t *testing.T) {
				id := b.send("reject", "")
				n := b.wait(id, 10*time.Second)
				if n.Status != outbox.StatusFailed || n.AttemptCount != 1 {
					t.Fatalf("got %s after %d attempts, want FAILED after 1", n.Status, n.AttemptCount)
				}
				if !strings.Contains(n.LastError, "400") || !strings.Contains(n.LastError, "no such user") {
					t.Errorf("last_error = %q, want the 400 and the provider's body", n.LastError)
				}
				deadline := time.Now().Add(5 * time.Second)
				for {
					var dead []int64
					for _, q := range b.queues() {
						ids, err := b.queue.DeadList(context.Background(), q, 0, 100)
						if err != nil {
							t.Fatal(err)
						}
						dead = append(dead, ids...)
					}
					if contains(dead, id) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("dead lists of %v hold %v, lacking %d", b.queues(), dead, id)
					}
					time.Sleep(20 * time.Millisecond)
				}
			})

			t.Run("429 Retry-After 2 holds the next attempt back", func(t *testing.T) {
				id := b.send("throttled", "")
				n := b.wait(id, 15*time.Second)
				if n.Status != outbox.StatusSent || len(n.Attempts) != 2 {
					t.Fatalf("got %s after %d attempts, want SENT after 2", n.Status, len(n.Attempts))
				}
				if gap := n.Attempts[1].StartedAt.Sub(n.Attempts[0].FinishedAt); gap < 2*time.Second {
					t.Errorf("second attempt %v after the 429, want ≥ 2s (Retry-After)", gap)
				}
			})

			t.Run("same idempotency key twice delivers once", func(t *testing.T) {
				first := b.send("bob", "order-7")
				second := b.send("bob", "order-7")
				if first != second {
					t.Fatalf("ids %d and %d, want the same id for a repeated key", first, second)
				}
				b.wait(first, 10*time.Second)
				time.Sleep(300 * time.Millisecond)
				if got := s.deliveries("bob"); len(got) != 1 || got[0].webhookID != "order-7" {
					t.Errorf("bob got %+v, want one delivery with webhook-id order-7", got)
				}
			})
		})
	}
}

func TestEngine_AttemptsExhausted(t *testing.T) {
	t.Parallel()
	s := newSink(t, respondByRecipient)
	b := setup(t, s, func(_ *config.Config, ch *config.Channel) {
		ch.Retry.MaxAttempts = 3
		ch.Retry.Base = 50 * time.Millisecond
	})
	b.engine("", delivery.Hooks{})
	id := b.send("down", "")
	n := b.wait(id, 15*time.Second)
	if n.Status != outbox.StatusFailed || n.AttemptCount != 3 || !strings.Contains(n.LastError, "gave up after 3 attempts") {
		t.Errorf("got %s after %d attempts (%q), want FAILED after 3 with the reason", n.Status, n.AttemptCount, n.LastError)
	}
	if got := len(s.deliveries("down")); got != 3 {
		t.Errorf("sink saw %d attempts, want 3", got)
	}
	b.queueEmpty()
}

func TestEngine_ScheduledSend(t *testing.T) {
	t.Parallel()
	s := newSink(t, nil)
	b := setup(t, s)
	b.engine("", delivery.Hooks{})
	due := time.Now().Add(1500 * time.Millisecond)
	res, err := b.store.Insert(context.Background(), []outbox.NewNotification{{
		Channel: testChannel, Recipient: "later", Payload: []byte(`{}`), DueAt: due,
	}})
	if err != nil {
		t.Fatal(err)
	}
	b.wait(res[0].ID, 10*time.Second)
	got := s.deliveries("later")
	if len(got) != 1 {
		t.Fatalf("%d deliveries, want 1", len(got))
	}
	if got[0].at.Before(due) {
		t.Errorf("delivered at %v, before its due time %v", got[0].at, due)
	}
}

func contains(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
