package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestPercentFor: the goal (1 + GOGC/100) × live is at least the floor, or
// the runtime's heap minimum at that GOGC (4 MiB × GOGC/100) is; GOGC never
// goes under 100 (a live heap past half the floor is collected as without
// the tuner), nor past the GOGC whose heap minimum is the floor: with GOGC
// at a million before the first collection (no live heap known), the goal
// was 40 GB and the daemon never collected.
func TestPercentFor(t *testing.T) {
	const floor = 64 << 20
	for _, tt := range []struct {
		live uint64
		want int
	}{
		{3 << 20, 1600},
		{5 << 20, 1180},
		{16 << 20, 300},
		{32 << 20, 100},
		{1 << 30, 100},
		{0, 1600},
	} {
		got := PercentFor(tt.live, floor)
		if got != tt.want {
			t.Errorf("PercentFor(%d MiB) = %d, want %d", tt.live>>20, got, tt.want)
		}
		goal := max(uint64(100+got)*tt.live/100, heapMinimum*uint64(got)/100)
		if goal < floor || (got > 100 && goal > floor+floor/100) {
			t.Errorf("PercentFor(%d MiB) = %d: goal %d MiB, want the floor (%d MiB)", tt.live>>20, got, goal>>20, floor>>20)
		}
	}
}

// TestTuner: every collection tunes GOGC from the live heap: high while it
// is small, back to 100 once it holds more than half the floor, and 100
// after Stop. Not parallel: it sets the process's GOGC.
func TestTuner(t *testing.T) {
	t.Cleanup(func() { debug.SetGCPercent(100) })
	const floor = 64 << 20
	tu := Start(floor)
	defer tu.Stop()
	waitTunes := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: after 30 s GOGC %d, %d collections seen", what, tu.Percent(), tu.Tunes())
			}
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitTunes("a small heap", func() bool { return tu.Percent() > 300 })
	if got := debug.SetGCPercent(tu.Percent()); got != tu.Percent() {
		t.Errorf("the runtime's GOGC %d, the tuner's %d", got, tu.Percent())
	}

	big := make([][]byte, 48)
	for i := range big {
		big[i] = make([]byte, 1<<20)
		big[i][0] = 1
	}
	waitTunes("48 MiB live", func() bool { return tu.Percent() == 100 })
	runtime.KeepAlive(big)

	tu.Stop()
	seen := tu.Tunes()
	runtime.GC()
	runtime.GC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC %d after Stop, want 100", got)
	}
	if tu.Tunes() > seen+1 {
		t.Errorf("tuned %d times after Stop", tu.Tunes()-seen)
	}
}
