package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/sdk/wire"
)

// newStatusCmd shows notifications by id, through the API or read from the
// outbox (--config).
func newStatusCmd() *cobra.Command {
	var path string
	var history bool
	var af apiFlags
	cmd := &cobra.Command{
		Use:   "status [--config FILE] ID [ID...]",
		Short: "Show notifications' status, attempts and last error",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if path == "" {
				return statusAPI(cmd, &af, args, history)
			}
			cfg, log, err := loadConfig(cmd.Context(), path)
			if err != nil {
				return err
			}
			ops, err := notifyd.Open(cmd.Context(), cfg, notifyd.Options{Logger: log}) // the database alone
			if err != nil {
				return err
			}
			defer func() { _ = ops.Stop(context.WithoutCancel(cmd.Context())) }()
			ids, err := parseIDs(args, "notification")
			if err != nil {
				return err
			}
			ns, err := findEach(cmd, ids, ops.Notification)
			if len(ns) == 0 {
				return err
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "ID\tCHANNEL\tRECIPIENT\tSTATUS\tATTEMPTS\tLAST ERROR")
			for _, n := range ns {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\n", n.ID, printable(n.Channel), printable(n.Recipient), printable(n.Status), n.Attempts,
					printable(lastErrorCell(n.Status, n.LastError)))
				if history {
					prev := 0
					for _, at := range n.History {
						if at.Attempt <= prev {
							fmt.Fprintf(tw, "\t  replayed\t\t\t\t(attempts counted again from 1)\n")
						}
						prev = at.Attempt
						fmt.Fprintf(tw, "\t  attempt %d\t%s\t%s\t%d\t%s\n", at.Attempt, at.FinishedAt.Format("15:04:05.000"), printable(at.Outcome), at.ProviderStatus, printable(at.Error))
					}
				}
				if r := n.Receipt; r != nil {
					receiptLine(tw, r.Outcome, r.ProviderCode, r.Detail, r.ReceivedAt)
				}
			}
			return errors.Join(tw.Flush(), err)
		},
	}
	configFlag(cmd, &path)
	cmd.Flags().BoolVar(&history, "history", false, "show every attempt")
	addAPIFlags(cmd.Flags(), &af)
	af.direct = true // this command also takes --config
	return cmd
}

// receiptLine is a notification's delivery receipt under its row, with or
// without --history: the provider's last word on a SENT notification.
func receiptLine(w io.Writer, outcome, code, detail string, at time.Time) {
	fmt.Fprintf(w, "\t  receipt\t%s\t%s\t%s\t%s\n", at.Format(time.TimeOnly), printable(outcome), printable(code), printable(detail))
}

// lastErrorCell is the LAST ERROR column: on a SENT row the error is an
// earlier attempt's, and says so.
func lastErrorCell(status, lastErr string) string {
	if status == wire.StatusSent && lastErr != "" {
		return "(earlier failure, delivered since) " + lastErr
	}
	return lastErr
}
