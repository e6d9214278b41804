package ui

import (
	"fmt"
	"testing"
	"time"
)

// TestSessions_SweepOnCreate: expired sessions nobody looks up again are
// dropped when a later one is created (the only thing that grows the
// store), at most every sweepEvery, with no goroutine to stop.
func TestSessions_SweepOnCreate(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	ss := newSessions(time.Minute, time.Hour, func() time.Time { return now })
	ss.create("client") // the first create sweeps an empty store
	now = now.Add(sweepEvery / 2)
	ss.create("client")
	if n := ss.len(); n != 2 {
		t.Fatalf("%d sessions, want 2", n)
	}
	now = now.Add(2 * time.Minute) // both idle past their minute, never looked up
	ss.create("client")
	if n := ss.len(); n != 1 {
		t.Errorf("%d sessions after a create past sweepEvery, want 1 (the two expired ones swept)", n)
	}
	now = now.Add(2 * time.Minute)
	now2 := now
	ss.create("client")
	if n := ss.len(); n != 1 || !ss.lastSweep.Equal(now2) {
		t.Errorf("%d sessions, last sweep %v; want 1, swept at %v", n, ss.lastSweep, now2)
	}
	now = now.Add(sweepEvery / 2)
	ss.create("client")
	if n := ss.len(); n != 2 {
		t.Errorf("%d sessions within sweepEvery of the last sweep, want 2 (no sweep yet)", n)
	}
}

// A client keeps at most maxClientSessions sessions, and the store at most
// maxSessions: past either, a login drops the least recently used one (the
// client's own first), so logins with a valid token cannot grow the store
// without bound, nor log out another client's operator until the whole
// store is churned. Before, every login added a session kept for
// SessionIdle.
func TestSessions_Bounded(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	ss := newSessions(time.Hour, 24*time.Hour, func() time.Time { return now })
	operator, _ := ss.create("10.0.0.9")
	var first string
	for i := range maxClientSessions + 50 {
		now = now.Add(time.Millisecond)
		_, id := ss.create("10.0.0.1")
		if i == 0 {
			first = id
		}
		if i == maxClientSessions-1 {
			now = now.Add(time.Millisecond)
			ss.lookup(first) // used since: the client's least recently used go first
		}
	}
	if n := ss.len(); n != maxClientSessions+1 {
		t.Errorf("%d sessions after %d logins of one client and one of another, want %d", n, maxClientSessions+51, maxClientSessions+1)
	}
	if ss.lookup(first) == nil {
		t.Errorf("the client's session used since was dropped before its unused ones")
	}
	now = now.Add(time.Millisecond)
	if ss.m[operator.key] == nil {
		t.Fatalf("another client's session was dropped by one client's logins")
	}
	for i := range maxSessions {
		now = now.Add(time.Microsecond)
		ss.create(fmt.Sprintf("10.1.%d.%d", i/250, i%250))
	}
	if n := ss.len(); n != maxSessions {
		t.Errorf("%d sessions after %d logins from many clients, want at most %d", n, 1+maxClientSessions+50+maxSessions, maxSessions)
	}
}
