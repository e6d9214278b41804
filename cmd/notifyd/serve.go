package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/internal/gcfloor"
	"github.com/notifyd/notifyd/sdk"
)

func newServeCmd() *cobra.Command {
	var (
		path      string
		noMigrate bool
	)
	cmd := &cobra.Command{
		Use:   "serve --config FILE",
		Short: "Run notifyd: the delivery pipeline for every configured channel",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), path, !noMigrate)
		},
	}
	configFlag(cmd, &path)
	cmd.Flags().BoolVar(&noMigrate, "no-migrate", false, "do not apply database migrations at start")
	return cmd
}

func serve(parent context.Context, path string, migrate bool) error {
	// Our own signal handling: the first SIGTERM/SIGINT stops gracefully, a
	// second stops at once.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	cfg, log, err := loadConfig(parent, path)
	if err != nil {
		return err
	}
	setMaxProcs(cfg.Instance.MaxProcs, log)
	if os.Getenv("GOGC") == "" {
		// A heap goal of at least 64 MiB: the daemon's live heap is a few
		// MB, and at GOGC=100 a burst collected every 35 ms (gcfloor).
		defer gcfloor.Start(gcfloor.DefaultFloor).Stop()
	}
	// go-redis prints each failed dial itself, several lines per attempt
	// while Redis is down; notifyd reports those failures at WARN, once per
	// attempt (waiting.go, the engine), so the library's lines are DEBUG.
	redis.SetLogger(redisLog{log.Named("redis")})
	// Postgres or Redis down at start delays notifyd, it does not stop it:
	// /healthz answers at once, /readyz says what it waits for, and the
	// pipeline starts when they answer (docs/operations in README).
	d, err := notifyd.Start(parent, cfg, notifyd.Options{Logger: log, NoMigrate: !migrate, WaitForServices: true})
	if err != nil {
		return err
	}
	var failed error
	select {
	case <-sigs:
	case failed = <-d.Failed():
		log.Error("notifyd could not start", "error", failed)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	defer cancel()
	go func() {
		select {
		case <-sigs:
			log.Warn("second signal: stopping at once; unfinished work is recovered by the reaper")
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := d.Stop(ctx); err != nil {
		log.Warn("shutdown", "error", err)
	}
	return failed
}

// setMaxProcs runs the daemon on n CPUs (instance.max_procs) unless
// GOMAXPROCS is in the environment (the runtime read it at start); 0 leaves
// Go's own choice, every CPU the process is given. One CPU on a host shared
// with Postgres and Redis took 18% off the daemon's CPU a notification in the
// 08:00 burst on two cores (docs/performance.md, "The daemon on half the
// CPUs, and a floor under its heap"), but on a machine whose CPUs are
// oversubscribed it also halves the daemon's share of them, and a slow live
// instance's claims are taken over as if it had died: so it is the
// operator's to choose. The plugins choose their own (sdk.Serve); the
// environment they inherit is not changed.
func setMaxProcs(n int, log hclog.Logger) {
	if n == 0 || os.Getenv("GOMAXPROCS") != "" {
		return
	}
	runtime.GOMAXPROCS(n)
	log.Debug("running goroutines on CPUs", "max_procs", n)
}

// redisLog is go-redis's logger (redis.SetLogger) on hclog at DEBUG.
type redisLog struct{ log hclog.Logger }

func (l redisLog) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug(sdk.RedactURLs(fmt.Sprintf(format, v...)))
}
