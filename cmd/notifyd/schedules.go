package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/notifyd/notifyd/sdk/client"
	"github.com/notifyd/notifyd/sdk/wire"
)

// This file holds the schedule commands and the API mode of campaign and
// jobs (their direct mode is in campaign.go/jobs.go), and `--watch`, the
// live progress of a bulk job, for both modes.

// watchEveryDefault is how often --watch reads the job.
const watchEveryDefault = time.Second

func newSchedulesCmd() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{
		Use:   "schedules [run NAME]",
		Short: "List the configured schedules with their next fire time and last run (through the API)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			list, err := c.Schedules(cmd.Context())
			if err != nil {
				return err
			}
			if af.json() {
				return printJSON(cmd.OutOrStdout(), list)
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "NAME\tCHANNEL\tCRON\tTIMEZONE\tAUDIENCE\tNEXT FIRE\tLAST RUN")
			for _, s := range list {
				last := "-"
				if s.LastRun != nil {
					last = fmt.Sprintf("job %d %s %s", s.LastRun.ID, printable(s.LastRun.State), progress(*s.LastRun))
				}
				aud := "topic " + printable(s.Audience.Topic)
				if s.Audience.Topic == "" {
					aud = "query"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", printable(s.Name), printable(s.Channel), printable(s.Cron), printable(s.Timezone), aud,
					s.NextFire.Format(time.RFC3339), last)
			}
			return tw.Flush()
		},
	}
	addAPIFlags(cmd.PersistentFlags(), &af)
	cmd.AddCommand(newSchedulesRunCmd(&af))
	return cmd
}

func newSchedulesRunCmd(af *apiFlags) *cobra.Command {
	var (
		watch bool
		every time.Duration
		req   client.RunRequest
	)
	cmd := &cobra.Command{
		Use:   "run NAME [--fire-time TIME|last [--force]] [--watch]",
		Short: "Run a schedule now, or one fire time again (a bulk job a serving instance materialises); prints the job id",
		Long: "Without --fire-time, a run firing now, of its own.\n\n" +
			"With --fire-time (RFC 3339, or \"last\" for the latest fire time at or before now), that fire time's run:\n" +
			"one already pending or running is left as it is; a FAILED, CANCELLED or SKIPPED one resumes from where it\n" +
			"stopped (a recipient it already reached is not sent twice); a DONE one is refused — nothing is sent twice —\n" +
			"unless --force, which sends it to everyone again as a re-run with new idempotency keys.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if req.Force && req.FireTime == "" {
				return errors.New("--force re-runs a fire time that already ran: give it with --fire-time (RFC 3339 or last)")
			}
			c, err := af.client()
			if err != nil {
				return err
			}
			job, err := c.RunSchedule(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			switch job.Outcome {
			case client.RunExists:
				fmt.Fprintf(cmd.ErrOrStderr(), "fire time %s already has job %d (%s); nothing changed\n", job.FireTime.Format(time.RFC3339), job.ID, printable(job.State))
			case client.RunResumed:
				fmt.Fprintf(cmd.ErrOrStderr(), "resumed job %d for fire time %s from its cursor\n", job.ID, job.FireTime.Format(time.RFC3339))
			}
			return startedJob(cmd, af, c, job, watch, every)
		},
	}
	cmd.Flags().StringVar(&req.FireTime, "fire-time", "", `the fire time to run: RFC 3339 (2026-11-25T08:00:00+09:00) or "last"`)
	cmd.Flags().BoolVar(&req.Force, "force", false, "with --fire-time: send a fire time that already ran to everyone again")
	addWatchFlags(cmd, &watch, &every)
	return cmd
}

func addWatchFlags(cmd *cobra.Command, watch *bool, every *time.Duration) {
	cmd.Flags().BoolVar(watch, "watch", false, "follow the job's progress until it ends")
	cmd.Flags().DurationVar(every, "every", watchEveryDefault, "how often --watch reads the job")
	// Checked before the command runs (a campaign is not created first):
	// 0 or less would have --watch read the job as fast as the API answers.
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if *every <= 0 {
			return fmt.Errorf("--every %s: --every must be positive", *every)
		}
		return nil
	}
}

// startedJob prints a job just created and follows it with --watch.
func startedJob(cmd *cobra.Command, af *apiFlags, c *client.Client, job *client.Job, watch bool, every time.Duration) error {
	w := cmd.OutOrStdout()
	if !watch {
		if af.json() {
			return printJSON(w, job)
		}
		_, err := fmt.Fprintln(w, job.ID)
		return err
	}
	return watchJob(cmd.Context(), w, apiJobFetch(c, job.ID), every, af.json())
}

// campaignAPI is `notifyd campaign` without --config. Over the API a
// campaign's audience is a topic; an SQL audience needs --config.
func campaignAPI(cmd *cobra.Command, af *apiFlags, channel, topic, query, contentKey string, payload map[string]any, run, watch bool, every time.Duration) error {
	switch {
	case query != "":
		return errors.New("--query is not accepted over the API (it is SQL); use --topic, or --config to work on the database directly")
	case run:
		return errors.New("--run materialises the job in this process and needs --config; over the API a serving instance runs it (follow it with --watch)")
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	job, err := c.CreateCampaign(cmd.Context(), client.Campaign{
		Channel: channel, Audience: client.Audience{Topic: topic}, Payload: payload, ContentKey: contentKey,
	})
	if err != nil {
		return err
	}
	return startedJob(cmd, af, c, job, watch, every)
}

// jobsAPI is `notifyd jobs` without --config.
func jobsAPI(cmd *cobra.Command, af *apiFlags, args []string, q client.JobQuery, cancel, watch bool, every time.Duration) error {
	if cancel {
		return errors.New("--cancel needs --config: the API has no route that cancels a job")
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if len(args) == 0 {
		if watch {
			return errors.New("--watch needs a job id")
		}
		jobs, err := c.Jobs(cmd.Context(), q)
		if err != nil {
			return err
		}
		if af.json() {
			return printJSON(w, jobs)
		}
		return printJobs(w, jobs)
	}
	ids, err := parseIDs(args, "job")
	if err != nil {
		return err
	}
	if watch {
		return watchJob(cmd.Context(), w, apiJobFetch(c, ids[0]), every, af.json())
	}
	job, err := c.Job(cmd.Context(), ids[0])
	if err != nil {
		return err
	}
	if af.json() {
		return printJSON(w, job)
	}
	return printJob(w, *job)
}

func apiJobFetch(c *client.Client, id int64) func(context.Context) (wire.Job, error) {
	return func(ctx context.Context) (wire.Job, error) {
		j, err := c.Job(ctx, id)
		if err != nil {
			return wire.Job{}, err
		}
		return *j, nil
	}
}

// barWidth is the progress bar's width in cells.
const barWidth = 30

// watchJob reads the job every interval until it ends. On a terminal it
// redraws one line with a progress bar; otherwise (a pipe, a log) it prints
// a line each time the progress changes; with asJSON, one JSON object per
// change. A job that ends other than DONE is an error (exit status 1).
func watchJob(ctx context.Context, w io.Writer, fetch func(context.Context) (wire.Job, error), every time.Duration, asJSON bool) error {
	tty := isTerminal(w)
	last := ""
	for {
		j, err := fetch(ctx)
		if err != nil {
			if tty && last != "" {
				fmt.Fprintln(w)
			}
			return err
		}
		line := progressLine(j)
		switch {
		case asJSON && line != last:
			b, _ := json.Marshal(j)
			fmt.Fprintln(w, string(jsonControls(b)))
		case tty:
			fmt.Fprint(w, "\r\033[K"+line)
		case line != last:
			fmt.Fprintln(w, line)
		}
		last = line
		if j.Terminal() {
			if tty && !asJSON {
				fmt.Fprintln(w)
			}
			if j.State != "DONE" {
				return fmt.Errorf("job %d ended %s%s", j.ID, printable(j.State), orEmpty(": ", printable(j.Error)))
			}
			return nil
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			if tty {
				fmt.Fprintln(w)
			}
			return ctx.Err()
		case <-t.C:
		}
	}
}

// progressLine is one job's state as a bar:
// job 12 RUNNING   [█████████░░░░░░░░░░░░░░░░░░░░░]  30%  300/1000  skipped 2
func progressLine(j wire.Job) string {
	total, frac := "?", -1.0
	if j.Total != nil {
		total, frac = fmt.Sprint(*j.Total), 1.0
		if *j.Total > 0 {
			frac = min(1, float64(j.Done)/float64(*j.Total))
		}
	}
	bar, pct := strings.Repeat("·", barWidth), "   ?"
	if frac >= 0 {
		full := int(frac*barWidth + 0.5)
		bar = strings.Repeat("█", full) + strings.Repeat("░", barWidth-full)
		pct = fmt.Sprintf("%3.0f%%", 100*frac)
	}
	return fmt.Sprintf("job %d %-9s [%s] %s  %d/%s  skipped %d", j.ID, printable(j.State), bar, pct, j.Done, total, j.Skipped)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func orEmpty(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}
