package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/sdk/traceparent"
	"github.com/notifyd/notifyd/sdk/wire"
)

// newSendCmd enqueues one notification through the API, or writes it
// straight into the outbox with --config, so the pipeline can be driven from
// a shell without the API.
func newSendCmd() *cobra.Command {
	var (
		path, channel, recipient, payload, key, at string
		af                                         apiFlags
	)
	cmd := &cobra.Command{
		Use:   "send [--config FILE] --channel C --recipient R --payload JSON [--idempotency-key K] [--at TIME]",
		Short: "Enqueue one notification (through the API, or directly into the outbox with --config)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return sendAPI(cmd, &af, channel, recipient, payload, key, at)
			}
			cfg, log, err := loadConfig(cmd.Context(), path)
			if err != nil {
				return err
			}
			if _, ok := cfg.Channels[channel]; !ok {
				return fmt.Errorf("--channel %q is not configured in %s", channel, path)
			}
			var due time.Time
			if at != "" {
				if due, err = parseAt(at); err != nil {
					return err
				}
			}
			ops, err := notifyd.Open(cmd.Context(), cfg, notifyd.Options{Logger: log}) // the database alone
			if err != nil {
				return err
			}
			defer func() { _ = ops.Stop(context.WithoutCancel(cmd.Context())) }()
			ctx, traced, end := startSendSpan(cmd.Context(), cfg)
			n := wire.Notification{
				Channel: channel, Recipient: recipient, Payload: json.RawMessage(payload),
				IdempotencyKey: key, SendAt: due,
			}
			var tp string
			if traced {
				tp = traceparent.FromContext(ctx)
			}
			res, err := ops.Enqueue(ctx, []wire.Notification{n}, tp)
			end(err)
			if err != nil {
				return err
			}
			if res[0].Duplicate {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%d (duplicate of an earlier send with this idempotency key; status %s)\n", res[0].ID, res[0].Status)
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), res[0].ID)
			return err
		},
	}
	configFlag(cmd, &path)
	f := cmd.Flags()
	f.StringVar(&channel, "channel", "", "channel name (required)")
	f.StringVar(&recipient, "recipient", "", "recipient address (required)")
	f.StringVar(&payload, "payload", "{}", "payload as JSON")
	f.StringVar(&key, "idempotency-key", "", "idempotency key: a repeat returns the original id")
	f.StringVar(&at, "at", "", "send at this time (RFC 3339, or a duration from now such as 10m)")
	_ = cmd.MarkFlagRequired("channel")
	_ = cmd.MarkFlagRequired("recipient")
	addAPIFlags(f, &af)
	af.direct = true // this command also takes --config
	return cmd
}

// parseAt accepts RFC 3339 or a duration from now.
func parseAt(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(d), nil
	}
	return time.Time{}, fmt.Errorf("--at %q is neither an RFC 3339 time (2026-01-02T08:00:00+09:00) nor a duration (10m)", s)
}
