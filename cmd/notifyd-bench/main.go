// Command notifyd-bench measures notifyd's delivery pipeline end to end
// (docs/performance.md). It is a binary of its own, not a subcommand of the
// daemon: the benchmark harness (internal/bench: an HTTP sink, throw-away
// Redis Cluster servers) has no place in what runs in production.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newBenchCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "notifyd-bench:", err)
		os.Exit(1)
	}
}
