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
			fmt.Fprintln(tw, "CHANNEL\tPLUGIN\tSTATE\tREADY\tDELAYED\tPROCESSING\tDEAD\tPENDING\tSENT\tFAILED")
			for _, ch := range res.Channels {
				state := "running"
				switch {
				case !ch.Configured:
					state = "not configured"
				case !ch.Running && ch.Error != "":
					state = "stopped: " + oneLineText(ch.Error, 60)
				case !ch.Running:
					state = "stopped"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", ch.Name, orDash(ch.Plugin), state,
					ch.Ready, ch.Delayed, ch.Processing, ch.Dead, ch.Counts["PENDING"], ch.Sent, ch.Failed)
			}
			return tw.Flush()
		},
	}
	addAPIFlags(cmd.Flags(), &af)
	return cmd
}
