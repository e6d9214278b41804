package pluginhost

import (
	"io"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// A plugin's output — its stdout and stderr pipes, which go-plugin reads
// line by line (each hclog JSON line parsed and logged), and the stdout and
// stderr go-plugin streams over gRPC once the plugin serves — is taken at
// most OutputRate bytes a second, OutputBurst at once, per process: a
// plugin that writes as fast as it can (measured: one flooding its stderr
// cost the host 112% of a core parsing it) is slowed at its own writes,
// which block once the pipe or the stream's flow-control window is full,
// and costs the host a bounded share of a core. Its sends go on; only a
// send that logs past the budget waits for it. docs/config.md (bounds).
const (
	OutputRate  = 256 << 10 // bytes a second: ≈ 1,300 log lines of 200 bytes
	OutputBurst = 1 << 20   // bytes at once, after a quiet spell
)

// maxOutputRead caps one read of a plugin's pipe, so the wait after it is at
// most maxOutputRead / OutputRate (250 ms).
const maxOutputRead = 64 << 10

// outputBudget is one plugin process's share of the host's attention for
// its output: every pipe and stream of the process draws on it.
type outputBudget struct {
	lim   *rate.Limiter
	taken atomic.Int64 // bytes taken so far (tests read it)
	// gone is closed when the process has exited: its output is then read
	// without waiting (what is left in the pipes, for pipeDrain).
	gone <-chan struct{}
}

func newOutputBudget(gone <-chan struct{}) *outputBudget {
	return &outputBudget{lim: rate.NewLimiter(rate.Limit(OutputRate), OutputBurst), gone: gone}
}

// take waits until n bytes of output (n ≤ OutputBurst) fit the budget, or
// the process is gone.
func (b *outputBudget) take(n int) {
	if b == nil || n <= 0 {
		return
	}
	b.taken.Add(int64(n))
	r := b.lim.ReserveN(time.Now(), n)
	if !r.OK() {
		return
	}
	wait := time.NewTimer(r.Delay())
	defer wait.Stop()
	select {
	case <-wait.C:
	case <-b.gone:
	}
}

// discard is a writer for the stdout and stderr go-plugin streams over gRPC
// (ClientConfig.SyncStdout, SyncStderr): it keeps nothing, and each write
// waits for the budget, so go-plugin stops reading the stream and gRPC's
// flow control holds the plugin's writes back.
type discard struct{ b *outputBudget }

func (d discard) Write(p []byte) (int, error) {
	for rest := len(p); rest > 0; rest -= min(rest, OutputBurst) {
		d.b.take(min(rest, OutputBurst))
	}
	return len(p), nil
}

var _ io.Writer = discard{}
