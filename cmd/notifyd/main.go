// Command notifyd is the notifyd daemon and its admin CLI: serve, migrate,
// send, plugins and the operator commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "notifyd:", plainError(err))
		var ex *exitError
		if errors.As(err, &ex) {
			os.Exit(ex.code)
		}
		os.Exit(1)
	}
}

// exitError carries a specific exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "notifyd",
		Short:         "notifyd delivers notifications at least once through provider plugins",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCmd(), newMigrateCmd(), newServeCmd(), newSendCmd(), newStatusCmd(), newPluginsCmd(), newCampaignCmd(), newJobsCmd(), newSubscribersCmd(),
		newCancelCmd(), newDLQCmd(), newChannelsCmd(), newSchedulesCmd())
	return root
}
