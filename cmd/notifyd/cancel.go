package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/notifyd/notifyd/sdk/client"
)

// This file holds the notification commands over the API: cancel, and the
// API mode of send and status (their direct mode is in send.go/status.go).

func newCancelCmd() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{
		Use:   "cancel ID [ID...]",
		Short: "Cancel PENDING or QUEUED notifications (through the API)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args, "notification")
			if err != nil {
				return err
			}
			c, err := af.client()
			if err != nil {
				return err
			}
			var out []client.Cancelled
			refused, err := eachID(cmd, ids, func(id int64) error {
				res, err := c.Cancel(cmd.Context(), id)
				if err == nil {
					out = append(out, *res)
				}
				return err
			})
			if af.json() {
				if err := printJSON(cmd.OutOrStdout(), out); err != nil {
					return err
				}
			} else {
				for _, r := range out {
					fmt.Fprintf(cmd.OutOrStdout(), "%d %s\n", r.ID, printable(r.Status))
				}
			}
			if err != nil {
				return err
			}
			return refusedErr(refused, len(ids), "cancelled")
		},
	}
	addAPIFlags(cmd.Flags(), &af)
	return cmd
}

// sendAPI is `notifyd send` without --config.
func sendAPI(cmd *cobra.Command, af *apiFlags, channel, recipient, payload, key, at string) error {
	if !json.Valid([]byte(payload)) {
		return fmt.Errorf("--payload is not valid JSON: %s", payload)
	}
	n := client.Notification{Channel: channel, Recipient: recipient, Payload: json.RawMessage(payload), IdempotencyKey: key}
	if at != "" {
		due, err := parseAt(at)
		if err != nil {
			return err
		}
		n.SendAt = due
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	ctx, _, end := startSendSpan(cmd.Context(), nil)
	res, err := c.Enqueue(ctx, n)
	end(err)
	if err != nil {
		return err
	}
	if res.Warning != "" { // 202 all the same: the outbox keeps it
		fmt.Fprintln(cmd.ErrOrStderr(), "warning:", printable(res.Warning))
	}
	w := cmd.OutOrStdout()
	switch {
	case af.json():
		return printJSON(w, res)
	case res.Duplicate:
		_, err = fmt.Fprintf(w, "%d (duplicate of an earlier send with this idempotency key; status %s)\n", res.ID, printable(res.Status))
	default:
		_, err = fmt.Fprintln(w, res.ID)
	}
	return err
}

// statusAPI is `notifyd status` without --config.
func statusAPI(cmd *cobra.Command, af *apiFlags, args []string, history bool) error {
	ids, err := parseIDs(args, "notification")
	if err != nil {
		return err
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	ns, err := findEach(cmd, ids, c.Notification)
	if af.json() {
		return errors.Join(printJSON(cmd.OutOrStdout(), ns), err)
	}
	if len(ns) == 0 {
		return err
	}
	tw := newTable(cmd.OutOrStdout())
	fmt.Fprintln(tw, "ID\tCHANNEL\tRECIPIENT\tSTATUS\tATTEMPTS\tLAST ERROR")
	for _, n := range ns {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\n", n.ID, printable(n.Channel), printable(n.Recipient), printable(n.Status), n.Attempts,
			printable(lastErrorCell(n.Status, n.LastError)))
		if n.Waiting != "" {
			fmt.Fprintf(tw, "\t  waiting: %s\t\t\t\t\n", printable(n.Waiting))
		}
		if history {
			prev := 0
			for _, a := range n.History {
				if a.Attempt <= prev {
					fmt.Fprintf(tw, "\t  replayed\t\t\t\t(attempts counted again from 1)\n")
				}
				prev = a.Attempt
				fmt.Fprintf(tw, "\t  attempt %d\t%s\t%s\t%d\t%s\n", a.Attempt, a.FinishedAt.Local().Format(time.TimeOnly), printable(a.Outcome), a.ProviderStatus, printable(a.Error))
			}
		}
		if r := n.Receipt; r != nil {
			receiptLine(tw, r.Outcome, r.ProviderCode, r.Detail, r.ReceivedAt.Local())
		}
	}
	return errors.Join(tw.Flush(), err)
}
