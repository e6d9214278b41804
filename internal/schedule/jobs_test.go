package schedule

import (
	"testing"

	"github.com/notifyd/notifyd/sdk/wire"
)

// TestJobRowOut: a row's wire form carries its progress, Done/Total in
// [0, 1], once the total is known — an empty audience is complete, and a
// Done past a Total counted earlier still reads 1 — and nil before.
func TestJobRowOut(t *testing.T) {
	t.Parallel()
	total := func(n int64) *int64 { return &n }
	tests := []struct {
		name  string
		done  int64
		total *int64
		want  *float64
	}{
		{"total unknown", 5, nil, nil},
		{"half", 5, total(10), ptr(0.5)},
		{"empty audience", 0, total(0), ptr(1)},
		{"done past total", 12, total(10), ptr(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := jobRow{Job: wire.Job{ID: 7, State: jobRunning, Done: tt.done, Total: tt.total}, takeovers: 2}
			got := r.out()
			switch {
			case (got.Progress == nil) != (tt.want == nil):
				t.Fatalf("Progress = %v, want %v", got.Progress, tt.want)
			case got.Progress != nil && *got.Progress != *tt.want:
				t.Errorf("Progress = %v, want %v", *got.Progress, *tt.want)
			}
			if got.ID != 7 || got.State != jobRunning || got.Done != tt.done || got.Outcome != "" {
				t.Errorf("out() = %+v, want the row's fields as they are", got)
			}
		})
	}
}

func ptr(f float64) *float64 { return &f }
