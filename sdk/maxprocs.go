package sdk

import (
	"os"
	"runtime"
	"strconv"

	"github.com/hashicorp/go-hclog"
)

// EnvMaxProcs names the environment variable that sets how many CPUs a
// plugin's Go runtime runs goroutines on at once (its GOMAXPROCS). A plugin
// inherits notifyd's environment, so it is set where notifyd runs.
const EnvMaxProcs = "NOTIFYD_PLUGIN_MAXPROCS"

// setMaxProcs runs a plugin binary (Serve, never ServeInProcess) on half
// the CPUs Go gives the process, at least one, unless EnvMaxProcs or
// GOMAXPROCS says otherwise. A plugin shares its machine with notifyd,
// Postgres and Redis, and spends a send mostly waiting on the network: with
// as many Ps as CPUs its idle threads spin looking for work and wake each
// other, which on two cores cost a webhook plugin 12% more CPU a message
// in the 08:00 burst than one P did (docs/performance.md, "A plugin on half
// the CPUs"). A plugin whose sends are CPU-bound can be given more.
func setMaxProcs(log hclog.Logger) {
	if os.Getenv("GOMAXPROCS") != "" {
		return // the runtime read it at start
	}
	n := max(runtime.GOMAXPROCS(0)/2, 1)
	if v := os.Getenv(EnvMaxProcs); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 || k > 4096 {
			log.Warn("ignoring "+EnvMaxProcs+": want a whole number of CPUs from 1 to 4096", "value", v, "running_on", n)
		} else {
			n = k
		}
	}
	runtime.GOMAXPROCS(n)
}
