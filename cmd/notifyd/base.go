package main

import (
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/version"
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
