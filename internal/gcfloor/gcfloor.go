// Package gcfloor keeps the Go heap's goal from falling under a floor, so a
// process whose live heap is small does not collect every few megabytes it
// allocates.
//
// notifyd's live heap in the 08:00 burst is about 3 MB: with GOGC at 100 the
// runtime aimed at 7 MB and ran a collection every 35 ms, a quarter of the
// daemon's CPU (docs/performance.md, "The daemon on half the CPUs, and a floor under
// its heap").
// Go has no minimum heap setting, so this is the tuner Uber described
// ("How We Saved 70K Cores Across 30 Mission-Critical Services", 2021): after
// each collection, GOGC is set so the next goal is max(2 × live, floor). The
// heap may then hold up to floor bytes of garbage more than GOGC=100 would
// let it, never more; above floor / 2 of live heap nothing changes.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// DefaultFloor is notifyd serve's floor: 64 MiB.
const DefaultFloor = 64 << 20

// Tuner sets GOGC after every collection until Stop.
type Tuner struct {
	floor   uint64
	stopped atomic.Bool
	percent atomic.Int64 // the GOGC last set
	tunes   atomic.Int64 // collections seen
	sample  []metrics.Sample
}

// sentinel is what each collection frees, running the tuner: large enough
// never to share a tiny-allocator block (whose cleanups may never run).
type sentinel struct{ _ [32]byte }

// Start tunes the heap goal to at least floor bytes from the next collection
// on, and returns the Tuner; Stop gives GOGC back to 100.
func Start(floor uint64) *Tuner {
	t := &Tuner{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.percent.Store(100)
	t.tune()
	t.arm()
	return t
}

// arm has the next collection call tune (runtime.AddCleanup runs after the
// collection that finds the sentinel unreachable), which arms the next one.
func (t *Tuner) arm() {
	runtime.AddCleanup(new(sentinel), func(t *Tuner) {
		if t.stopped.Load() {
			return
		}
		t.tune()
		t.arm()
	}, t)
}

// Percent returns the GOGC the tuner set last.
func (t *Tuner) Percent() int { return int(t.percent.Load()) }

// Tunes returns how many collections the tuner has seen.
func (t *Tuner) Tunes() int64 { return t.tunes.Load() }

// Stop stops tuning and sets GOGC back to 100.
func (t *Tuner) Stop() {
	t.stopped.Store(true)
	debug.SetGCPercent(100)
}

// PercentFor is the GOGC whose goal, (1 + GOGC/100) × live, is at least
// floor: at least 100, and at most the GOGC whose heap minimum is floor (the
// runtime's goal is never under 4 MiB × GOGC/100, whatever the live heap:
// past that bound a process that had not collected yet would wait for a goal
// of gigabytes).
func PercentFor(live, floor uint64) int {
	most := max(floor*100/heapMinimum, 100)
	if live == 0 {
		return int(most)
	}
	if live >= floor/2 {
		return 100
	}
	return int(min((floor*100+live-1)/live-100, most))
}

// heapMinimum is the Go runtime's least heap goal at GOGC=100.
const heapMinimum = 4 << 20

func (t *Tuner) tune() {
	t.tunes.Add(1)
	metrics.Read(t.sample)
	var live uint64
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = t.sample[0].Value.Uint64()
	}
	p := PercentFor(live, t.floor)
	// SetGCPercent only on a change of more than a tenth: each call
	// recomputes the pacer's goal under the heap lock.
	if old := int(t.percent.Load()); p*10 > old*11 || p*11 < old*10 {
		debug.SetGCPercent(p)
		t.percent.Store(int64(p))
	}
}
