package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/notifyd/notifyd/internal/outbox"
)

func newMigrateCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations (a no-op when they are all applied)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, err := loadConfig(path)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
			defer cancel()
			pool, err := openPostgres(ctx, cfg)
			if err != nil {
				return err
			}
			defer pool.Close()
			n, err := outbox.Migrate(ctx, pool)
			if err != nil {
				return err
			}
			log.Info("migrations applied", "applied", n)
			return nil
		},
	}
	configFlag(cmd, &path)
	return cmd
}
