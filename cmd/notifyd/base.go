package main

import (
	"context"
	"fmt"
	"os"
	"time"

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
// The read stops with ctx (main's Ctrl-C or SIGTERM, which main catches):
// a path naming a FIFO nothing writes to blocks in open(2), and the command
// said nothing and could only be killed. After a while it says what it
// waits for.
func loadConfig(ctx context.Context, path string) (*config.Config, hclog.Logger, error) {
	type loaded struct {
		cfg *config.Config
		err error
	}
	done := make(chan loaded, 1)
	go func() { // left behind in open(2) if ctx ends first; the process exits
		cfg, err := config.Load(path, nil)
		done <- loaded{cfg, err}
	}()
	note := time.NewTimer(configWaitNote)
	defer note.Stop()
	for {
		select {
		case r := <-done:
			if r.err != nil {
				return nil, nil, r.err
			}
			return r.cfg, r.cfg.Log.NewLogger("notifyd", os.Stderr), nil
		case <-note.C:
			fmt.Fprintf(os.Stderr, "notifyd: still reading config %s%s (Ctrl-C stops)\n", printable(path), fifoNote(path))
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("stopped while reading config %s%s", path, fifoNote(path))
		}
	}
}

// configWaitNote is how long a config read goes before the CLI says it waits.
const configWaitNote = 2 * time.Second

// fifoNote says why a config read may wait: a FIFO is opened only once
// something writes to it.
func fifoNote(path string) string {
	if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
		return ": it is a FIFO and nothing has written to it"
	}
	return ""
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
