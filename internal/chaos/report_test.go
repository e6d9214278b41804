package chaos

import (
	"strings"
	"testing"
	"time"
)

// Each duplicate is counted to the fault injected last before it went out,
// whatever order the events are listed in; those before the first fault
// are counted apart, and a notification delivered more often than the
// sink keeps times for still counts every duplicate.
func TestReport_attributesDuplicates(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	r := &Report{N: 10, Events: []Event{
		{Kind: RedisFlushAll, At: at(20), HealedAt: at(21)},
		{Kind: KillNotifyd, At: at(10), HealedAt: at(12)},
		{Kind: KillNotifyd, At: at(30), HealedAt: at(31)},
	}}
	r.duplicates(Deliveries{Accepted: 1, FirstOK: at(1)}) // not a duplicate
	r.duplicates(Deliveries{Accepted: 2, FirstOK: at(1), Again: []time.Time{at(5)}})
	r.duplicates(Deliveries{Accepted: 3, FirstOK: at(9), Again: []time.Time{at(11), at(19.9)}})
	r.duplicated(Deliveries{Accepted: 2, FirstOK: at(20), Again: []time.Time{at(20)}}) // a daily one, at the fault's instant
	many := Deliveries{Accepted: maxAgain + 4, FirstOK: at(25)}
	for range maxAgain {
		many.Again = append(many.Again, at(35))
	}
	r.duplicates(many)
	r.summarize()

	if r.Duplicates != 1+2+maxAgain+3 {
		t.Errorf("Duplicates = %d, want %d (load only)", r.Duplicates, 1+2+maxAgain+3)
	}
	if r.DupsBeforeFaults != 1 {
		t.Errorf("DupsBeforeFaults = %d, want 1 (the one at 5 s)", r.DupsBeforeFaults)
	}
	want := map[string]int{KillNotifyd: 2 + maxAgain + 3, RedisFlushAll: 1}
	for _, k := range r.Kinds {
		if k.Duplicates != want[k.Kind] {
			t.Errorf("%s: %d duplicates, want %d", k.Kind, k.Duplicates, want[k.Kind])
		}
	}
	if got := []int{r.Events[0].Duplicates, r.Events[1].Duplicates, r.Events[2].Duplicates}; got[0] != 1 || got[1] != 2 || got[2] != maxAgain+3 {
		t.Errorf("per event (as listed: flush at 20, kill at 10, kill at 30) = %v, want [1 2 %d]", got, maxAgain+3)
	}
	if s := r.String(); !strings.Contains(s, "(1 before the first)") || !strings.Contains(s, " dups") {
		t.Errorf("report does not show the attribution:\n%s", s)
	}
	if s := r.Timeline(); !strings.Contains(s, "2 duplicates after it") {
		t.Errorf("timeline does not show each fault's duplicates:\n%s", s)
	}
}
