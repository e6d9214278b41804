package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/notifyd/notifyd/core/api"
	"github.com/notifyd/notifyd/core/delivery"
	"github.com/notifyd/notifyd/core/metrics"
	"github.com/notifyd/notifyd/core/outbox"
	"github.com/notifyd/notifyd/core/pluginhost"
	"github.com/notifyd/notifyd/core/queue"
	"github.com/notifyd/notifyd/core/schedule"
	"github.com/notifyd/notifyd/core/ui"
	"github.com/notifyd/notifyd/core/version"
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

	cfg, log, err := loadConfig(path)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	defer cancel()

	pool, err := openPostgres(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if migrate {
		n, err := outbox.Migrate(ctx, pool)
		if err != nil {
			return err
		}
		if n > 0 {
			log.Info("migrations applied", "applied", n)
		}
	}
	rc, err := queue.Connect(cfg.Redis.URL, cfg.Redis.ClusterAddrs, cfg.Redis.PoolSize)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := rc.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("connect to Redis: %w", err)
	}

	host := pluginhost.New(cfg.Plugins, log.Named("plugins"))
	store, reg := outbox.New(pool, outbox.WithLogger(log.Named("outbox"))), metrics.New(version.Version)
	defer store.Close()
	engine, err := delivery.New(delivery.Options{
		Config: cfg, Store: store, Queue: queue.New(rc, cfg.Redis.Prefix),
		Plugins: host, Logger: log.Named("delivery"), Metrics: reg.Delivery(),
	})
	if err != nil {
		return err
	}
	if err := engine.Start(ctx); err != nil {
		_ = host.Close(ctx)
		return err
	}
	// Schedules and bulk jobs: any instance evaluates them; a run is created
	// once per fire time, and a job has one owner at a time.
	sched, err := schedule.New(pool, cfg, schedule.Options{Logger: log.Named("schedule"), InstanceID: engine.Instance()})
	if err == nil {
		err = sched.Start(ctx)
	}
	if err != nil {
		_ = engine.Stop(ctx, cfg.Shutdown.SoftTimeout)
		_ = host.Close(ctx)
		return err
	}
	defer sched.Stop()
	var dashboard http.Handler
	if len(cfg.HTTP.Tokens) > 0 {
		dashboard, err = ui.New(ui.Deps{Context: ctx, Config: cfg, Store: store, Engine: engine, Plugins: host, Schedules: sched, Logger: log.Named("ui")})
		if err != nil {
			log.Warn("dashboard disabled", "error", err)
		}
	}
	apiSrv, err := api.New(api.Options{
		Config: cfg, Store: store, Engine: engine, Redis: rc, Plugins: host, Metrics: reg, Logger: log.Named("api"),
		Schedules: sched, UI: dashboard,
	})
	if err == nil {
		err = apiSrv.Start(ctx)
	}
	if err != nil {
		_ = engine.Stop(ctx, cfg.Shutdown.SoftTimeout)
		_ = host.Close(ctx)
		return err
	}
	log.Info("notifyd serving", "instance", engine.Instance())

	<-sigs
	// The API first: no new requests while the pipeline drains.
	apiCtx, apiCancel := context.WithTimeout(ctx, cfg.Shutdown.SoftTimeout)
	if err := apiSrv.Stop(apiCtx); err != nil {
		log.Warn("stop API", "error", err)
	}
	apiCancel()
	log.Info("shutting down: finishing in-flight sends", "soft_timeout", cfg.Shutdown.SoftTimeout, "hard_timeout", cfg.Shutdown.HardTimeout)
	hardCtx, hardCancel := context.WithTimeout(ctx, cfg.Shutdown.HardTimeout)
	defer hardCancel()
	go func() {
		select {
		case <-sigs:
			log.Warn("second signal: stopping at once; unfinished work is recovered by the reaper")
			hardCancel()
		case <-hardCtx.Done():
		}
	}()
	stopErr := engine.Stop(hardCtx, cfg.Shutdown.SoftTimeout)
	if hardCtx.Err() != nil {
		engine.Kill()
	}
	closeCtx, closeCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer closeCancel()
	if err := host.Close(closeCtx); err != nil {
		log.Warn("stop plugins", "error", err)
	}
	if stopErr != nil && !errors.Is(stopErr, context.Canceled) {
		log.Warn("shutdown", "error", stopErr)
	}
	log.Info("stopped")
	return nil
}
