package notifyd

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/lifecycle"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/schedule"
	"github.com/notifyd/notifyd/internal/service"
)

// Open connects to Postgres alone and returns a daemon that runs nothing: no
// engine, no schedules firing, no API, no Redis. Its operations that need
// only the database work as they do on a running daemon — a notification's
// status, enqueue (the rows wait PENDING for a running instance to deliver
// them), dead letters, subscribers, schedules, campaigns and jobs — and those
// that need the engine or Redis answer an error saying so. It is what
// `notifyd migrate` and the CLI's --config mode use. The config is validated as
// for Start (redis.url included, though it is not dialled). Of o, only Logger
// applies; migrations are not applied (Migrate does). Stop closes it.
func Open(ctx context.Context, cfg *config.Config, o Options) (_ *Daemon, err error) {
	cfg, err = filled(cfg)
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = hclog.New(&hclog.LoggerOptions{Name: "notifyd", Level: hclog.LevelFromString(cfg.Log.Level)})
	}
	// Nothing runs in the background, so there is no context to cancel.
	d := &Daemon{cfg: cfg, log: log, cancel: func() {}, parts: lifecycle.NewGroup(log), dbOnly: true}
	defer func() {
		if err != nil {
			_ = d.close(context.Background())
		}
	}()
	if d.pool, err = OpenPostgres(ctx, cfg); err != nil {
		return nil, err
	}
	d.parts.Defer("postgres", func(context.Context) error { d.pool.Close(); return nil })
	d.store = outbox.New(d.pool, outbox.WithLogger(log.Named("outbox")))
	d.parts.Defer("outbox", func(context.Context) error { d.store.Close(); return nil })
	if d.sched, err = schedule.New(d.pool, cfg, schedule.Options{Logger: log.Named("schedule"), InstanceID: cfg.Instance.ID}); err != nil {
		return nil, err
	}
	if d.ops, err = service.New(service.Options{Config: cfg, Store: d.store, Schedules: d.sched, Logger: log.Named("service")}); err != nil {
		return nil, err
	}
	return d, nil
}

// Migrate applies the database migrations that postgres.url's database does
// not have yet and returns how many it applied (0: it was up to date). Start
// applies them itself unless Options.NoMigrate.
func Migrate(ctx context.Context, cfg *config.Config) (int, error) {
	if cfg == nil {
		return 0, errors.New("notifyd: config is nil")
	}
	pool, err := OpenPostgres(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	n, err := outbox.Migrate(ctx, pool)
	if err != nil {
		return n, fmt.Errorf("migrate: %w", err)
	}
	return n, nil
}
