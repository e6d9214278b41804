package sdk

import (
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestSetMaxProcs: a plugin binary runs on half the CPUs it was given (at
// least one), EnvMaxProcs sets another number, a bad one is ignored with a
// warning, and GOMAXPROCS in the environment is left as the runtime read
// it. Not parallel: it sets the process's GOMAXPROCS (restored after).
func TestSetMaxProcs(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })
	for _, tt := range []struct {
		name, gomaxprocs, env string
		given, want           int
		warns                 bool
	}{
		{name: "half of 2", given: 2, want: 1},
		{name: "half of 16", given: 16, want: 8},
		{name: "half of 1", given: 1, want: 1},
		{name: "set", env: "3", given: 2, want: 3},
		{name: "not a number", env: "many", given: 8, want: 4, warns: true},
		{name: "zero", env: "0", given: 8, want: 4, warns: true},
		{name: "too many", env: "100000", given: 8, want: 4, warns: true},
		{name: "GOMAXPROCS given", gomaxprocs: "2", env: "5", given: 2, want: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GOMAXPROCS", tt.gomaxprocs)
			t.Setenv(EnvMaxProcs, tt.env)
			runtime.GOMAXPROCS(tt.given)
			var logs strings.Builder
			setMaxProcs(hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn}))
			if got := runtime.GOMAXPROCS(0); got != tt.want {
				t.Errorf("GOMAXPROCS %d, want %d", got, tt.want)
			}
			if warned := strings.Contains(logs.String(), EnvMaxProcs); warned != tt.warns {
				t.Errorf("warned %v (%q), want %v", warned, logs.String(), tt.warns)
			}
		})
	}
}
