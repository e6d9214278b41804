package delivery

import "testing"

func TestNewInstanceID_Unique(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		id := NewInstanceID()
		if seen[id] {
			t.Fatalf("instance id %q generated twice", id)
		}
		seen[id] = true
	}
}

func TestQueueNames(t *testing.T) {
	t.Parallel()
	if got := QueueNames("quiz", 1); len(got) != 1 || got[0] != "quiz" {
		t.Errorf("QueueNames(quiz, 1) = %v, want [quiz]", got)
	}
	got := QueueNames("quiz", 3)
	want := []string{"quiz#0", "quiz#1", "quiz#2"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("QueueNames(quiz, 3) = %v, want %v", got, want)
		}
	}
}
