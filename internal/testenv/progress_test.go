package testenv

import (
	"testing"
	"time"
)

func TestProgress(t *testing.T) {
	var s Progress
	s.Observe(-10) // a measure may start below zero (open work counted negative)
	if s.Stalled(time.Hour, 3) {
		t.Fatal("over an hour's bound at once")
	}
	time.Sleep(20 * time.Millisecond)
	s.Observe(-10) // no growth
	if !s.Stalled(10*time.Millisecond, 3) {
		t.Fatalf("no progress for 20ms, not over a 10ms bound (%s)", &s)
	}
	s.Observe(-9)
	if s.Stalled(time.Hour, 3) {
		t.Fatal("over an hour's bound just after progress")
	}
	// The ceiling: progress just now, the whole wait (≥ 40ms) past
	// 3 × a 12ms bound.
	time.Sleep(20 * time.Millisecond)
	s.Observe(-8)
	if !s.Stalled(12*time.Millisecond, 3) {
		t.Fatalf("past 3 × the bound in all, not over (%s)", &s)
	}
}
