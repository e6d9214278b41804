package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newChannelsCmd shows every channel's queue sizes and outbox counts
// through the API.
func newChannelsCmd() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{
		Use:   "channels",
		Short: "Show each channel's plugin, queue sizes (ready, delayed, processing, dead) and sent/failed counts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			res, err := c.Channels(cmd.Context())
			if err != nil {
				return err
			}
			if af.json() {
				return printJSON(cmd.OutOrStdout(), res)
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "CHANNEL\tPLUGIN\tSTATE\tBREAKER\tREADY\tDELAYED\tPROCESSING\tDEAD\tPENDING\tSENT\tFAILED")
			for _, ch := range res.Channels {
				state := "running"
				switch {
				case !ch.Configured:
					state = "not configured"
				case !ch.Running && ch.Error != "":
					state = "stopped: " + oneLineText(ch.Error, 60)
				case !ch.Running:
					state = "stopped"
				case ch.Paused && ch.PauseReason != "":
					state = "paused: " + oneLineText(ch.PauseReason, 40)
				case ch.Paused:
					state = "paused"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", printable(ch.Name), printable(orDash(ch.Plugin)), state, printable(orDash(ch.Breaker)),
					ch.Ready, ch.Delayed, ch.Processing, ch.Dead, ch.Counts["PENDING"], ch.Sent, ch.Failed)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			// The table cuts a reason to fit; a stopped channel is a config
			// mistake to fix, so its whole reason follows.
			for _, ch := range res.Channels {
				if ch.Configured && !ch.Running {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: channel %s (plugin %s) is stopped on this instance; its notifications wait in the outbox: %s\n",
						printable(ch.Name), printable(ch.Plugin), printable(ch.Error))
				}
			}
			return nil
		},
	}
	addAPIFlags(cmd.Flags(), &af)
	cmd.AddCommand(newChannelPauseCmd(true), newChannelPauseCmd(false))
	return cmd
}

// newChannelPauseCmd is `channels pause NAME [--reason R]` or `channels resume NAME`.
func newChannelPauseCmd(pause bool) *cobra.Command {
	var af apiFlags
	var reason string
	use, short := "resume NAME", "Let a paused channel send again"
	if pause {
		use, short = "pause NAME [--reason R]", "Stop every instance sending on a channel; its notifications wait in the queue"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			if pause {
				err = c.PauseChannel(cmd.Context(), args[0], reason)
			} else {
				err = c.ResumeChannel(cmd.Context(), args[0])
			}
			if err != nil {
				return err
			}
			verb := "resumed"
			if pause {
				verb = "paused"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "channel %s %s\n", args[0], verb)
			return err
		},
	}
	addAPIFlags(cmd.Flags(), &af)
	if pause {
		cmd.Flags().StringVar(&reason, "reason", "", "why, shown with the channel's state")
	}
	return cmd
}
