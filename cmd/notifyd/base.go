package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/notifyd/notifyd/core/config"
	"github.com/notifyd/notifyd/core/version"
	"github.com/notifyd/notifyd/sdk"
)

// configFlag adds the --config flag every config-driven command takes.
func configFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVarP(path, "config", "c", os.Getenv("NOTIFYD_CONFIG"), "config file (YAML); env NOTIFYD_CONFIG")
}

// loadConfig reads the config and builds the logger every command passes down.
func loadConfig(path string) (*config.Config, hclog.Logger, error) {
	cfg, err := config.Load(path, nil)
	if err != nil {
		return nil, nil, err
	}
	return cfg, cfg.Log.NewLogger("notifyd", os.Stderr), nil
}

// openPostgres connects and pings, so an unreachable database is one clear line.
func openPostgres(ctx context.Context, cfg *config.Config) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(cfg.Postgres.URL)
	if err != nil {
		// pgx masks the password; other query values may be secrets too.
		return nil, fmt.Errorf("postgres.url: %s", sdk.RedactURLs(err.Error()))
	}
	pc.MaxConns = cfg.Postgres.MaxConns
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err == nil {
		if err = pool.Ping(ctx); err != nil {
			pool.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres at %s: %s", sdk.RedactURL(cfg.Postgres.URL), sdk.RedactURLs(oneLine(err)))
	}
	return pool, nil
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print notifyd's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "notifyd", version.Version)
			return err
		},
	}
}

// oneLine folds a multi-line error (pgx lists every address it tried) into
// one line without repeats.
func oneLine(err error) string {
	seen := map[string]bool{}
	var parts []string
	for _, l := range strings.Split(err.Error(), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !seen[l] {
			seen[l] = true
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}
