package delivery_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
)

// A notification whose attempts an application's SQL wrote as -2^31 (the
// column is a plain integer), its provider failing it transiently each time:
// the claim carried the count on (-2147483647), which the plugin was sent as
// the attempt number and the settle then refused (attempt < 1), so the row
// ended FAILED after one transient failure, its retries never made, with a
// reason about an unstorable verdict. It gets its retry.max_attempts
// attempts, counted from 1, then FAILED with the provider's reason.
func TestEngine_NegativeAttemptsBounded(t *testing.T) {
	t.Parallel()
	s := newSink(t, func(string, int, http.Header) (int, string) { return http.StatusServiceUnavailable, "busy" })
	b := setup(t, s)
	ctx := context.Background()
	id := b.send("neg", "neg")
	if _, err := b.store.Pool().Exec(ctx, `UPDATE notifications SET attempts = -2147483648 WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	b.engine("", delivery.Hooks{})
	limit := b.cfg.Channels[testChannel].Retry.MaxAttempts
	deadline := time.Now().Add(90 * time.Second)
	for {
		n, err := b.store.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		sent := len(s.deliveries("neg"))
		if n.Status == outbox.StatusFailed {
			if sent != limit || n.AttemptCount != limit {
				t.Errorf("FAILED after %d sends, attempts %d (%q); want retry.max_attempts %d", sent, n.AttemptCount, n.LastError, limit)
			}
			t.Logf("FAILED after %d sends: %s", sent, n.LastError)
			return
		}
		if sent > limit {
			t.Fatalf("sent %d times, past retry.max_attempts %d, still %s at attempts %d: retried without end", sent, limit, n.Status, n.AttemptCount)
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s after 90 s (attempts %d, %d sends)", n.Status, n.AttemptCount, sent)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A notification that kills the process each time it is in flight, whose
// attempts and crashes an application's SQL wrote as -2^31 and -32,768 (both
// within their columns): the claim carried both counts on, so neither
// delivery.quarantine_after (3 crashes in a row) nor the claim past
// retry.max_attempts ever caught it, and it would have killed its daemon
// about 2^31 times. It is FAILED within quarantine_after crashes.
func TestEngine_NegativeCountersCrashLoopBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, newSink(t, nil))
	ctx := context.Background()
	poison := b.send("poison", "poison")
	if _, err := b.store.Pool().Exec(ctx, `UPDATE notifications SET attempts = -2147483648, crashes = -32768 WHERE id = $1`, poison); err != nil {
		t.Fatal(err)
	}
	crashes := make(chan []int64, 20)
	crashHook := func(killed <-chan struct{}) func(string, []int64) error {
		return func(_ string, in []int64) error {
			if !slices.Contains(in, poison) {
				return nil
			}
			crashes <- append([]int64(nil), in...)
			<-killed
			return delivery.ErrCrash
		}
	}
	bound := b.cfg.Delivery.QuarantineAfter
	for crash := 0; ; crash++ {
		killed := make(chan struct{})
		e := b.engine("only", delivery.Hooks{AfterClaim: crashHook(killed)})
		deadline := time.Now().Add(60 * time.Second)
		crashed := false
		for !crashed {
			select {
			case <-crashes:
				crashed = true
				continue
			case <-time.After(50 * time.Millisecond):
			}
			n, err := b.store.Get(ctx, poison)
			if err != nil {
				t.Fatal(err)
			}
			if n.Status == outbox.StatusFailed {
				if crash > bound {
					t.Errorf("FAILED after %d crashes; want at most delivery.quarantine_after %d", crash, bound)
				}
				t.Logf("FAILED after %d crashes: %s", crash, n.LastError)
				e.Kill()
				close(killed)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %d crashes: neither a crash nor FAILED within 60 s (%s, attempts %d)", crash, n.Status, n.AttemptCount)
			}
		}
		e.Kill()
		close(killed)
		if crash+1 > bound+2 {
			n, _ := b.store.Get(ctx, poison)
			t.Fatalf("the poison killed its engine %d times, past delivery.quarantine_after %d; still %s at attempts %d",
				crash+1, bound, n.Status, n.AttemptCount)
		}
	}
}
