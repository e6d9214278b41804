package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/sdk/client"
	"github.com/notifyd/notifyd/sdk/wire"
)

// newSubscribersCmd manages subscribers through the API, or directly in the
// database with --config.
func newSubscribersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "subscribers",
		Short: "Import, show and delete subscribers (audiences for schedules and campaigns)",
	}
	cmd.AddCommand(newSubscribersImportCmd(), newSubscribersGetCmd(), newSubscribersDeleteCmd())
	return cmd
}

// importBatch is how many subscribers go into one upsert statement, and
// importBatchBytes how much input at most: a line may be 4 MiB (what the
// scanner takes), and the store checks a subscriber's bounds (64 KiB of
// attributes…) only when the batch is written, so 5,000 lines were up to
// 20 GiB held, decoded, before any check saw the first.
const (
	importBatch      = 5000
	importBatchBytes = 16 << 20
)

func newSubscribersImportCmd() *cobra.Command {
	var path string
	var af apiFlags
	cmd := &cobra.Command{
		Use:   "import [--config FILE] [FILE|-]",
		Short: "Upsert subscribers from JSON lines: {\"external_id\":…, \"addresses\":{channel: address}, \"attributes\":{…}, \"topics\":[…]}",
		Example: `  echo '{"external_id":"u1","addresses":{"daily-quiz":"kakao-uuid-1"},"topics":["daily-quiz"]}' |
    notifyd subscribers import -c notifyd.yaml -`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := cmd.InOrStdin()
			name := "stdin"
			if len(args) == 1 && args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in, name = f, args[0]
			}
			if path == "" {
				return importSubscribersAPI(cmd, &af, in, name)
			}
			return withDaemon(cmd.Context(), path, func(ctx context.Context, d *notifyd.Daemon) error {
				n, err := importSubscribers(ctx, d, in, name)
				fmt.Fprintf(cmd.OutOrStdout(), "%d subscribers upserted\n", n)
				return err
			})
		},
	}
	configFlag(cmd, &path)
	addAPIFlags(cmd.Flags(), &af)
	af.direct = true // this command also takes --config
	return cmd
}

func importSubscribers(ctx context.Context, d *notifyd.Daemon, r io.Reader, name string) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var (
		batch []wire.Subscriber
		total int
		line  int
		size  int // input bytes in batch
	)
	flush := func() error {
		n, err := d.ImportSubscribers(ctx, batch)
		total += n
		batch, size = batch[:0], 0
		return err
	}
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var s wire.Subscriber
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return total, fmt.Errorf("%s line %d: %w", name, line, err)
		}
		batch, size = append(batch, s), size+len(sc.Bytes())
		if len(batch) == importBatch || size >= importBatchBytes {
			if err := flush(); err != nil {
				return total, fmt.Errorf("%s up to line %d: %w", name, line, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return total, fmt.Errorf("read %s: %w", name, err)
	}
	if len(batch) > 0 {
		if err := flush(); err != nil {
			return total, fmt.Errorf("%s up to line %d: %w", name, line, err)
		}
	}
	return total, nil
}

func newSubscribersGetCmd() *cobra.Command {
	var path string
	var af apiFlags
	cmd := &cobra.Command{
		Use:   "get [--config FILE] EXTERNAL_ID",
		Short: "Show a subscriber (addresses, attributes, topics); as JSON with --config or -o json",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if path == "" {
				return getSubscriberAPI(cmd, &af, args[0])
			}
			return withDaemon(cmd.Context(), path, func(ctx context.Context, d *notifyd.Daemon) error {
				s, err := d.Subscriber(ctx, args[0])
				if err != nil {
					return err
				}
				return printJSON(cmd.OutOrStdout(), s)
			})
		},
	}
	configFlag(cmd, &path)
	addAPIFlags(cmd.Flags(), &af)
	af.direct = true // this command also takes --config
	return cmd
}

func newSubscribersDeleteCmd() *cobra.Command {
	var path string
	var af apiFlags
	cmd := &cobra.Command{
		Use:   "delete [--config FILE] EXTERNAL_ID",
		Short: "Delete a subscriber and its topic subscriptions",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if path == "" {
				c, err := af.client()
				if err != nil {
					return err
				}
				return c.DeleteSubscriber(cmd.Context(), args[0])
			}
			return withDaemon(cmd.Context(), path, func(ctx context.Context, d *notifyd.Daemon) error {
				return d.DeleteSubscriber(ctx, args[0])
			})
		},
	}
	configFlag(cmd, &path)
	addAPIFlags(cmd.Flags(), &af)
	af.direct = true // this command also takes --config
	return cmd
}

// importSubscribersAPI is `subscribers import` without --config: one PUT
// per line, so a big import is faster with --config.
func importSubscribersAPI(cmd *cobra.Command, af *apiFlags, r io.Reader, name string) error {
	c, err := af.client()
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	n, line := 0, 0
	defer func() { fmt.Fprintf(cmd.OutOrStdout(), "%d subscribers upserted\n", n) }()
	for sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var s client.Subscriber
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return fmt.Errorf("%s line %d: %w", name, line, err)
		}
		if _, err := c.PutSubscriber(cmd.Context(), s); err != nil {
			return fmt.Errorf("%s line %d: %w", name, line, err)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	return nil
}

// getSubscriberAPI is `subscribers get` without --config.
func getSubscriberAPI(cmd *cobra.Command, af *apiFlags, id string) error {
	c, err := af.client()
	if err != nil {
		return err
	}
	s, err := c.Subscriber(cmd.Context(), id)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if af.json() {
		return printJSON(w, s)
	}
	tw := newTable(w)
	fmt.Fprintf(tw, "external id\t%s\n", printable(s.ExternalID))
	for _, ch := range slices.Sorted(maps.Keys(s.Addresses)) {
		fmt.Fprintf(tw, "address\t%s: %s\n", printable(ch), printable(s.Addresses[ch]))
	}
	fmt.Fprintf(tw, "topics\t%s\n", printable(orDash(strings.Join(s.Topics, ", "))))
	attrs, _ := json.Marshal(s.Attributes)
	fmt.Fprintf(tw, "attributes\t%s\n", printable(string(attrs)))
	fmt.Fprintf(tw, "created\t%s\n", s.CreatedAt.Format(time.RFC3339))
	fmt.Fprintf(tw, "updated\t%s\n", s.UpdatedAt.Format(time.RFC3339))
	return tw.Flush()
}
