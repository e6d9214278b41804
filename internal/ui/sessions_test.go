package ui

import (
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
	ss.create() // the first create sweeps an empty store
	now = now.Add(sweepEvery / 2)
	ss.create()
	if n := ss.len(); n != 2 {
		t.Fatalf("%d sessions, want 2", n)
	}
	now = now.Add(2 * time.Minute) // both idle past their minute, never looked up
	ss.create()
	if n := ss.len(); n != 1 {
		t.Errorf("%d sessions after a create past sweepEvery, want 1 (the two expired ones swept)", n)
	}
	now = now.Add(2 * time.Minute)
	now2 := now
	ss.create()
	if n := ss.len(); n != 1 || !ss.lastSweep.Equal(now2) {
		t.Errorf("%d sessions, last sweep %v; want 1, swept at %v", n, ss.lastSweep, now2)
	}
	now = now.Add(sweepEvery / 2)
	ss.create()
	if n := ss.len(); n != 2 {
		t.Errorf("%d sessions within sweepEvery of the last sweep, want 2 (no sweep yet)", n)
	}
}
