package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/sdk/wire"
)

// newCampaignCmd creates an ad-hoc bulk job (docs/design.md §6) through the API, or
// directly in the database with --config; a serving instance materialises
// it, or this command with --config --run.
func newCampaignCmd() *cobra.Command {
	var (
		path, channel, topic, query, key, payload string
		contentKey                                string
		run, watch                                bool
		every                                     time.Duration
		af                                        apiFlags
	)
	cmd := &cobra.Command{
		Use:   "campaign [--config FILE] --channel C (--topic T | --query SQL --key COL) --payload JSON [--watch]",
		Short: "Send a payload to a topic's subscribers (or an SQL audience) as a bulk job; prints the job id",
		Example: `  notifyd campaign -c notifyd.yaml --channel daily-quiz --topic daily-quiz \
    --payload '{"object_type":"text","text":"Hello {{.recipient}}"}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := decodeTemplate(payload)
			if err != nil {
				return err
			}
			if path == "" {
				return campaignAPI(cmd, &af, channel, topic, query, contentKey, p, run, watch, every)
			}
			return withDaemon(cmd.Context(), path, func(ctx context.Context, d *notifyd.Daemon) error {
				job, err := d.CreateCampaign(ctx, wire.Campaign{
					Channel: channel, Audience: wire.Audience{Topic: topic, Query: query, Key: key}, Payload: p,
					ContentKey: contentKey,
				})
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), job.ID)
				if !run {
					return nil
				}
				id := job.ID
				job, err = d.RunJob(ctx, id)
				if e := (*notifyd.Error)(nil); errors.As(err, &e) && e.Kind == notifyd.KindConflict {
					return fmt.Errorf("job %d was picked up by a serving instance; follow it with notifyd jobs %d", id, id)
				}
				if err != nil {
					return err
				}
				// As `jobs ID` prints it: its text (a cursor from the
				// audience's own table, an error) escaped.
				return printJob(cmd.ErrOrStderr(), job)
			})
		},
	}
	configFlag(cmd, &path)
	f := cmd.Flags()
	addAPIFlags(f, &af)
	af.direct = true // this command also takes --config
	addWatchFlags(cmd, &watch, &every)
	f.StringVar(&channel, "channel", "", "configured channel to send on (required)")
	f.StringVar(&topic, "topic", "", "topic whose subscribers receive it (their address on the channel)")
	f.StringVar(&query, "query", "", "SQL audience returning recipient, optional data and the --key column")
	f.StringVar(&key, "key", "", "unique, orderable column of --query used for keyset paging")
	f.StringVar(&payload, "payload", "", `payload JSON; string values may use {{.recipient}} and {{.data.field}} (required)`)
	f.StringVar(&contentKey, "content-key", "", "name of the content (e.g. quiz-2026-11-25): jobs naming the same content on the channel send each recipient once between them")
	f.BoolVar(&run, "run", false, "materialise the job here and now instead of leaving it to a serving instance")
	_ = cmd.MarkFlagRequired("channel")
	_ = cmd.MarkFlagRequired("payload")
	cmd.MarkFlagsMutuallyExclusive("topic", "query")
	cmd.MarkFlagsOneRequired("topic", "query")
	return cmd
}

// decodeTemplate reads --payload as the API reads a campaign's payload:
// numbers kept exact (json.Number: 12345678901234567890 is not rewritten to
// the nearest float64, 12345678901234567000) and a key given twice refused
// (wire.RepeatedKey), where a map would silently keep the last.
func decodeTemplate(payload string) (map[string]any, error) {
	dec := json.NewDecoder(strings.NewReader(payload))
	dec.UseNumber()
	var p map[string]any
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("--payload must be a JSON object: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("--payload has data after its JSON object")
	}
	if k := wire.RepeatedKey([]byte(payload), nil, "--payload"); k != nil {
		return nil, k
	}
	return p, nil
}

// withDaemon loads the config and opens notifyd on the database alone
// (notifyd.Open: no engine, no Redis) for a one-shot command in --config
// mode, under the CLI's instance name, and closes it after fn.
func withDaemon(ctx context.Context, path string, fn func(context.Context, *notifyd.Daemon) error) error {
	cfg, log, err := loadConfig(ctx, path)
	if err != nil {
		return err
	}
	c := *cfg
	c.Instance.ID = cliInstance(cfg)
	d, err := notifyd.Open(ctx, &c, notifyd.Options{Logger: log})
	if err != nil {
		return err
	}
	defer func() { _ = d.Stop(context.WithoutCancel(ctx)) }()
	return fn(ctx, d)
}

// cliInstance names a CLI process as a job owner, so `notifyd jobs` shows
// who materialised what.
func cliInstance(cfg *config.Config) string {
	if cfg.Instance.ID != "" {
		return cfg.Instance.ID + "-cli"
	}
	return ""
}
