package main

import (
	"runtime"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestSetMaxProcs: notifyd serve runs on the CPUs Go gives it unless
// instance.max_procs sets a number, and GOMAXPROCS in the environment is
// left as the runtime read it. Not parallel: it sets the
// process's GOMAXPROCS (restored after).
func TestSetMaxProcs(t *testing.T) {
	restore := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(restore)
	check := func(env string, configured, given, want int) {
		t.Helper()
		t.Setenv("GOMAXPROCS", env)
		runtime.GOMAXPROCS(given)
		setMaxProcs(configured, hclog.NewNullLogger())
		if got := runtime.GOMAXPROCS(0); got != want {
			t.Errorf("GOMAXPROCS=%q, instance.max_procs %d, %d CPUs given: running on %d, want %d", env, configured, given, got, want)
		}
	}
	check("", 0, 2, 2)   // Go's own
	check("", 0, 16, 16) // Go's own
	check("", 1, 2, 1)   // instance.max_procs
	check("", 3, 2, 3)   // instance.max_procs, more than given
	check("2", 5, 2, 2)  // the environment's GOMAXPROCS wins
}
