package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/sdk/client"
	"github.com/notifyd/notifyd/sdk/wire"
)

// newJobsCmd shows bulk jobs (schedule runs and campaigns) and their
// progress, through the API or read from the database (--config), follows
// one live (--watch), and cancels one (--config).
func newJobsCmd() *cobra.Command {
	var (
		path, state, sched, kind string
		limit                    int
		cancel, watch            bool
		every                    time.Duration
		af                       apiFlags
	)
	cmd := &cobra.Command{
		Use:   "jobs [--config FILE] [ID [--watch]]",
		Short: "List bulk jobs (schedule runs, campaigns) or show one's progress; --watch follows it, --cancel stops one",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if path == "" {
				q := client.JobQuery{Kind: kind, Schedule: sched, State: state, Limit: limit}
				return jobsAPI(cmd, &af, args, q, cancel, watch, every)
			}
			return withDaemon(cmd.Context(), path, func(ctx context.Context, ops *notifyd.Daemon) error {
				out := cmd.OutOrStdout()
				if len(args) == 0 {
					if cancel {
						return fmt.Errorf("--cancel needs a job id")
					}
					jobs, err := ops.Jobs(ctx, wire.JobQuery{Kind: kind, Schedule: sched, State: state, Limit: limit})
					if err != nil {
						return err
					}
					return printJobs(out, jobs.Jobs)
				}
				id, err := strconv.ParseInt(args[0], 10, 64)
				if err != nil {
					return fmt.Errorf("%q is not a job id", args[0])
				}
				if watch {
					return watchJob(ctx, out, func(ctx context.Context) (wire.Job, error) { return ops.Job(ctx, id) }, every, false)
				}
				if cancel {
					job, n, err := ops.CancelJob(ctx, id)
					if err != nil {
						return err
					}
					fmt.Fprintf(out, "cancelled job %d; %d pending notifications cancelled\n", job.ID, n)
					return nil
				}
				job, err := ops.Job(ctx, id)
				if err != nil {
					return err
				}
				return printJob(out, job)
			})
		},
	}
	configFlag(cmd, &path)
	f := cmd.Flags()
	addAPIFlags(f, &af)
	af.direct = true // this command also takes --config
	addWatchFlags(cmd, &watch, &every)
	f.StringVar(&state, "state", "", "only jobs in this state (PENDING, RUNNING, DONE, FAILED, CANCELLED, SKIPPED)")
	f.StringVar(&sched, "schedule", "", "only runs of this schedule")
	f.StringVar(&kind, "kind", "", "only schedule or campaign jobs")
	f.IntVar(&limit, "limit", 50, "how many jobs to list, newest first")
	f.BoolVar(&cancel, "cancel", false, "cancel job ID and its notifications still PENDING")
	return cmd
}

func progress(j wire.Job) string {
	if j.Total == nil {
		return fmt.Sprintf("%d/?", j.Done)
	}
	if *j.Total == 0 {
		return "0/0"
	}
	return fmt.Sprintf("%d/%d (%.0f%%)", j.Done, *j.Total, 100*float64(j.Done)/float64(*j.Total))
}

func printJobs(w io.Writer, jobs []wire.Job) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSCHEDULE\tFIRE TIME\tCHANNEL\tSTATE\tDONE/TOTAL\tSKIPPED\tCURSOR\tOWNER")
	for _, j := range jobs {
		fire := "-"
		if !j.FireTime.IsZero() {
			fire = j.FireTime.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", j.ID, printable(j.Kind), printable(orDash(j.Schedule)), fire, printable(j.Channel),
			printable(j.State), progress(j), j.Skipped, printable(orDash(j.Cursor)), printable(orDash(j.Owner)))
	}
	return tw.Flush()
}

func printJob(w io.Writer, j wire.Job) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, printable(v)) }
	row("id", strconv.FormatInt(j.ID, 10))
	row("kind", j.Kind)
	if j.Schedule != "" {
		row("schedule", j.Schedule)
		row("fire time", j.FireTime.Format(time.RFC3339))
	}
	row("channel", j.Channel)
	if j.Audience.Topic != "" {
		row("audience", "topic "+j.Audience.Topic)
	} else {
		row("audience", "query (key "+j.Audience.Key+")")
	}
	row("state", j.State)
	row("done/total", progress(j))
	row("skipped", strconv.FormatInt(j.Skipped, 10)+" (no address on the channel)")
	row("failed", strconv.FormatInt(j.Failed, 10)+" (FAILED at birth: template error or over a bound; see dlq list)")
	row("cursor", orDash(j.Cursor))
	row("owner", orDash(j.Owner))
	if j.State == "RUNNING" && !j.Heartbeat.IsZero() {
		row("heartbeat", j.Heartbeat.Format(time.RFC3339)+" ("+time.Since(j.Heartbeat).Round(time.Second).String()+" ago)")
	}
	row("created", j.CreatedAt.Format(time.RFC3339))
	if !j.StartedAt.IsZero() {
		row("started", j.StartedAt.Format(time.RFC3339))
	}
	if !j.FinishedAt.IsZero() {
		row("finished", j.FinishedAt.Format(time.RFC3339))
	}
	if j.Error != "" {
		row("error", j.Error)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
