package main

import (
	"runtime"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestSetMaxProcs: notifyd serve runs on half the CPUs it was given (at
// least one), instance.max_procs sets another number, and GOMAXPROCS in the
// environment is left as the runtime read it. Not parallel: it sets the
// process's GOMAXPROCS (restored after).
func TestSetMaxProcs(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })
	for _, tt := range []struct {
		name, gomaxprocs string
		config           int
		given, want      int
	}{
		{name: "half of 2", given: 2, want: 1},
		{name: "half of 16", given: 16, want: 8},
		{name: "half of 1", given: 1, want: 1},
		{name: "configured", config: 3, given: 2, want: 3},
		{name: "GOMAXPROCS given", gomaxprocs: "2", config: 5, given: 2, want: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GOMAXPROCS", tt.gomaxprocs)
			runtime.GOMAXPROCS(tt.given)
			setMaxProcs(tt.config, hclog.NewNullLogger())
			if got := runtime.GOMAXPROCS(0); got != tt.want {
				t.Errorf("GOMAXPROCS %d, want %d", got, tt.want)
			}
		})
	}
}
