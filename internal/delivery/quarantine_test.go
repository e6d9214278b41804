package delivery_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
)

// A poison nobody has listed: whatever in a notification kills the process
// while it is in flight (here a hook that crashes the engine whenever the
// poison is among the ids it is about to send). The row is quarantined —
// FAILED naming the quarantine — after delivery.quarantine_after crashes:
// the second with a group of suspects, the third alone, so its batch-mates
// are delivered and no other row is blamed; the daemon stops crashing.
func TestEngine_CrashLoopQuarantine(t *testing.T) {
	t.Parallel()
	s := newSink(t, nil)
	b := setup(t, s)
	ids := b.sendMany(8, func(i int) string { return fmt.Sprintf("r%d", i) })
	poison := ids[3]
	crashes := make(chan []int64, 10)
	// The hook stands for the process dying: it reports, and holds the
	// goroutine that met the poison until the engine is killed, so nothing
	// more happens in that "process" (a hook that returned at once would let
	// the lane hand the next suspect out before the kill).
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
	var seen [][]int64
	for len(seen) < b.cfg.Delivery.QuarantineAfter {
		killed := make(chan struct{})
		e := b.engine("only", delivery.Hooks{AfterClaim: crashHook(killed)})
		select {
		case in := <-crashes:
			seen = append(seen, in)
		case <-time.After(30 * time.Second):
			t.Fatalf("crash %d never came; crashes so far: %v", len(seen)+1, seen)
		}
		e.Kill()
		close(killed)
	}
	hook := crashHook(nil)
	// After the first crash the poison goes out in a group of suspects (at
	// most 16), after the second alone.
	if len(seen[1]) > 16 {
		t.Errorf("crash 2: %d ids in flight %v, want a group of at most 16", len(seen[1]), seen[1])
	}
	for i, in := range seen[2:] {
		if len(in) != 1 {
			t.Errorf("crash %d: %d ids in flight %v, want the poison alone", i+3, len(in), in)
		}
	}
	b.engine("only", delivery.Hooks{AfterClaim: hook})
	n := b.wait(poison, 30*time.Second)
	if n.Status != outbox.StatusFailed || !strings.Contains(n.LastError, "quarantined") || !strings.Contains(n.LastError, "3 times") {
		t.Errorf("poison: %s %q, want FAILED, quarantined after 3 crashes", n.Status, n.LastError)
	}
	for _, id := range ids {
		if id == poison {
			continue
		}
		if n := b.wait(id, 30*time.Second); n.Status != outbox.StatusSent {
			t.Errorf("batch-mate %d: %s %q, want SENT", id, n.Status, n.LastError)
		}
	}
	select {
	case in := <-crashes:
		t.Errorf("a crash after the quarantine: %v", in)
	default:
	}
	b.queueEmpty()
}

// A row whose payload reads back past the bound a notification may carry
// (written by SQL past the enqueue checks: 20 numbers of 100,001 digits) is
// FAILED with the reason and never read into memory; its batch-mates are
// delivered.
func TestEngine_PayloadPastReadBackBound(t *testing.T) {
	t.Parallel()
	s := newSink(t, nil)
	b := setup(t, s)
	ids := b.sendMany(5, func(i int) string { return fmt.Sprintf("r%d", i) })
	huge := `{"a":[` + strings.TrimSuffix(strings.Repeat("1e100000,", 20), ",") + `]}`
	if _, err := b.store.Pool().Exec(context.Background(), `UPDATE notifications SET payload = $1::jsonb WHERE id = $2`, huge, ids[2]); err != nil {
		t.Fatal(err)
	}
	b.engine("only", delivery.Hooks{})
	for i, id := range ids {
		n := b.wait(id, 30*time.Second)
		switch {
		case i == 2 && (n.Status != outbox.StatusFailed || !strings.Contains(n.LastError, "reads back")):
			t.Errorf("the expanding row: %s %q, want FAILED naming its read-back size", n.Status, n.LastError)
		case i != 2 && n.Status != outbox.StatusSent:
			t.Errorf("batch-mate %d: %s %q, want SENT", i, n.Status, n.LastError)
		}
	}
	if got := len(s.deliveries("r2")); got != 0 {
		t.Errorf("the expanding row was delivered %d times", got)
	}
}
