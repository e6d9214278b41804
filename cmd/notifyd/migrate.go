package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	notifyd "github.com/notifyd/notifyd"
)

func newMigrateCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations (a no-op when they are all applied)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, err := loadConfig(cmd.Context(), path)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
			defer cancel()
			n, err := notifyd.Migrate(ctx, cfg)
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
