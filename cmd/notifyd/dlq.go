package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/notifyd/notifyd/sdk/client"
)

// newDLQCmd works on the dead-letter queue (FAILED notifications) through
// the API.
func newDLQCmd() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{
		Use:   "dlq list|replay|purge",
		Short: "List, replay or purge dead-lettered (FAILED) notifications (through the API)",
	}
	addAPIFlags(cmd.PersistentFlags(), &af)
	cmd.AddCommand(newDLQListCmd(&af), newDLQReplayCmd(&af), newDLQPurgeCmd(&af))
	return cmd
}

func newDLQListCmd(af *apiFlags) *cobra.Command {
	var (
		q   client.DLQQuery
		all bool
	)
	cmd := &cobra.Command{
		Use:   "list [--channel C] [--limit N] [--after ID] [--all]",
		Short: "List FAILED notifications with their last error, lowest id first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			// Each page is printed as it comes and then dropped: --all over
			// a dead-letter queue of a million rows held them all before.
			w := cmd.OutOrStdout()
			out := newDLQPrinter(w, af.json())
			var next int64
			for {
				page, err := c.DLQ(cmd.Context(), q)
				if err != nil {
					return err
				}
				if err := out.page(page.Notifications); err != nil {
					return err
				}
				next = page.NextAfter
				if !all || next == 0 {
					break
				}
				// Ids only grow: a next_after that does not would have
				// --all ask for the same page for ever. And the API's
				// next_after is its page's last id: one that names no row
				// of the page (an empty page's, one that skips ahead) is
				// not paging through rows, and could go on for ever too.
				if next <= q.After {
					return fmt.Errorf("the API answered next_after %d for the page after %d: it does not move on, so --all stops here", next, q.After)
				}
				if rows := page.Notifications; len(rows) == 0 || rows[len(rows)-1].ID != next {
					return fmt.Errorf("the API answered next_after %d for a page of %d notification(s) that does not end with it: not a page of dead letters, so --all stops here", next, len(rows))
				}
				q.After = next
			}
			if err := out.end(next); err != nil {
				return err
			}
			if next != 0 && !af.json() {
				fmt.Fprintf(cmd.ErrOrStderr(), "more: --after %d (or --all)\n", next)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&q.Channel, "channel", "", "only this channel")
	f.IntVar(&q.Limit, "limit", 100, "rows per page, at most 1000")
	f.Int64Var(&q.After, "after", 0, "start after this id (the next page)")
	f.BoolVar(&all, "all", false, "follow every page")
	return cmd
}

func newDLQReplayCmd(af *apiFlags) *cobra.Command {
	var channel string
	cmd := &cobra.Command{
		Use:   "replay (--channel C | ID...)",
		Short: "Queue FAILED notifications again with a fresh retry budget",
		Long: `Queue FAILED notifications again with a fresh retry budget: the given ids (every one
must be FAILED, or nothing changes) or every FAILED notification of --channel.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			sel, err := dlqSelector(channel, args, false)
			if err != nil {
				return err
			}
			c, err := af.client()
			if err != nil {
				return err
			}
			res, err := c.ReplayDLQ(cmd.Context(), sel)
			if err != nil {
				return err
			}
			if af.json() {
				return printJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "replayed %d\n", res.Replayed)
			if res.Warning != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", printable(res.Warning))
			}
			return skippedErr(cmd, "replayed", res.Skipped)
		},
	}
	cmd.Flags().StringVar(&channel, "channel", "", "replay every FAILED notification of this channel")
	return cmd
}

func newDLQPurgeCmd(af *apiFlags) *cobra.Command {
	var (
		channel string
		yes     bool
	)
	cmd := &cobra.Command{
		Use:   "purge (--channel C --yes | ID... [--channel C])",
		Short: "Delete FAILED notifications and their attempt history",
		RunE: func(cmd *cobra.Command, args []string) error {
			sel, err := dlqSelector(channel, args, true)
			if err != nil {
				return err
			}
			if len(sel.IDs) == 0 && !yes {
				return fmt.Errorf("purging every FAILED notification of %q deletes them for good: add --yes", channel)
			}
			c, err := af.client()
			if err != nil {
				return err
			}
			res, err := c.PurgeDLQ(cmd.Context(), sel)
			if err != nil {
				return err
			}
			if af.json() {
				return printJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "purged %d\n", res.Purged)
			return skippedErr(cmd, "purged", res.Skipped)
		},
	}
	cmd.Flags().StringVar(&channel, "channel", "", "the channel (every FAILED notification of it when no ids are given)")
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm purging a whole channel")
	return cmd
}

// skippedErr lists the ids the server left alone on stderr, one a line
// with the reason, and makes the command exit 1 when there are any: a
// script that named an id learns it was not acted on.
func skippedErr(cmd *cobra.Command, what string, skipped []client.Skipped) error {
	for _, sk := range skipped {
		fmt.Fprintf(cmd.ErrOrStderr(), "not %s: notification %d %s\n", what, sk.ID, printable(sk.Reason))
	}
	if len(skipped) == 0 {
		return nil
	}
	return &exitError{code: 1, err: fmt.Errorf("%d notification(s) not %s (see above)", len(skipped), what)}
}

// dlqSelector builds the request from --channel and id arguments; a purge
// may take both.
func dlqSelector(channel string, args []string, both bool) (client.DLQSelector, error) {
	ids, err := parseIDs(args, "notification")
	if err != nil {
		return client.DLQSelector{}, err
	}
	switch {
	case channel == "" && len(ids) == 0:
		return client.DLQSelector{}, errors.New("give notification ids or --channel")
	case !both && channel != "" && len(ids) > 0:
		return client.DLQSelector{}, errors.New("give either notification ids or --channel, not both")
	}
	return client.DLQSelector{IDs: ids, Channel: channel}, nil
}

// oneLineText fits a provider's error into a table cell: whitespace
// folded, control characters escaped (printable), cut to max runes.
func oneLineText(s string, max int) string {
	s = printable(strings.Join(strings.Fields(s), " "))
	if r := []rune(s); len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}

// dlqPrinter writes dead letters a page at a time: a table (its columns
// aligned within each page) or one JSON document, {"notifications": [...],
// "next_after": N}, as the API's page reads.
type dlqPrinter struct {
	w     io.Writer
	json  bool
	begun bool
	rows  int
}

func newDLQPrinter(w io.Writer, asJSON bool) *dlqPrinter { return &dlqPrinter{w: w, json: asJSON} }

func (p *dlqPrinter) page(rows []client.NotificationInfo) error {
	if p.json {
		if !p.begun {
			if _, err := io.WriteString(p.w, "{\n  \"notifications\": ["); err != nil {
				return err
			}
			p.begun = true
		}
		for _, n := range rows {
			b, err := json.Marshal(n)
			if err != nil {
				return err
			}
			sep := ",\n    "
			if p.rows == 0 {
				sep = "\n    "
			}
			p.rows++
			if _, err := p.w.Write(append([]byte(sep), jsonControls(b)...)); err != nil {
				return err
			}
		}
		return nil
	}
	tw := newTable(p.w)
	if !p.begun {
		fmt.Fprintln(tw, "ID\tCHANNEL\tRECIPIENT\tATTEMPTS\tFAILED AT\tLAST ERROR")
		p.begun = true
	}
	for _, n := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", n.ID, printable(n.Channel), printable(n.Recipient), n.Attempts,
			n.UpdatedAt.Local().Format(time.DateTime), oneLineText(n.LastError, 120))
	}
	return tw.Flush()
}

func (p *dlqPrinter) end(next int64) error {
	if !p.json {
		return nil
	}
	if !p.begun {
		if _, err := io.WriteString(p.w, "{\n  \"notifications\": ["); err != nil {
			return err
		}
	}
	tail := "\n  ]"
	if p.rows == 0 {
		tail = "]"
	}
	_, err := fmt.Fprintf(p.w, "%s,\n  \"next_after\": %d\n}\n", tail, next)
	return err
}
