package chaos

import (
	"testing"
	"time"
)

func TestStalled(t *testing.T) {
	var s stalled
	s.progress(-10) // a measure may start below zero (open work counted negative)
	if s.over(time.Hour) {
		t.Fatal("over an hour's bound at once")
	}
	time.Sleep(20 * time.Millisecond)
	s.progress(-10) // no growth
	if !s.over(10 * time.Millisecond) {
		t.Fatalf("no progress for 20ms, not over a 10ms bound (%s)", &s)
	}
	s.progress(-9)
	if s.over(time.Hour) {
		t.Fatal("over an hour's bound just after progress")
	}
	// The ceiling: progress just now, the whole wait (≥ 40ms) past
	// stallCeiling × a 12ms bound.
	time.Sleep(20 * time.Millisecond)
	s.progress(-8)
	if !s.over(12 * time.Millisecond) {
		t.Fatalf("past stallCeiling × the bound in all, not over (%s)", &s)
	}
}
