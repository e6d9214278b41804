package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/pluginhost"
)

func newPluginsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugins",
		Short: "List and check provider plugins",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newPluginsListCmd(), newPluginsCheckCmd())
	return cmd
}

func newPluginsListCmd() *cobra.Command {
	var path, dir string
	cmd := &cobra.Command{
		Use:   "list [--dir DIR | --config FILE]",
		Short: "List the plugins in plugins.dir: name, version, SHA-256, path",
		Long: "List every notifyd-plugin-<name> executable in the plugin directory (--dir, else plugins.dir\n" +
			"of --config, else " + config.DefaultPluginsDir + "). Each is started once to ask its version;\n" +
			"checksums pinned in the config's plugins.checksums are enforced.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pc := config.Plugins{Dir: config.DefaultPluginsDir}
			log := hclog.NewNullLogger()
			if path != "" {
				cfg, l, err := loadConfig(cmd.Context(), path)
				if err != nil {
					return err
				}
				pc, log = cfg.Plugins, l
			}
			if dir != "" {
				pc.Dir = dir
			}
			return pluginsList(cmd.Context(), cmd.OutOrStdout(), pc, log)
		},
	}
	configFlag(cmd, &path)
	cmd.Flags().StringVar(&dir, "dir", "", "plugin directory (overrides plugins.dir)")
	return cmd
}

func pluginsList(ctx context.Context, out io.Writer, pc config.Plugins, log hclog.Logger) error {
	host := pluginhost.New(pc, log)
	defer closeHost(host)
	found, err := host.Discover()
	if err != nil {
		return err
	}
	if len(found) == 0 {
		_, err := fmt.Fprintf(out, "no plugins (notifyd-plugin-<name> executables) in %s\n", printable(pc.Dir))
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tSHA256\tPATH")
	var (
		failed  []error
		renamed []string
	)
	for _, f := range found {
		version := "?"
		sctx, cancel := context.WithTimeout(ctx, cmp.Or(pc.StartTimeout, pluginhost.DefaultStartTimeout)+5*time.Second)
		p, err := host.Plugin(sctx, f.Name)
		cancel()
		if err != nil {
			failed = append(failed, err)
		} else {
			version = p.Info().Version
			if d := p.Info().Name; d != f.Name {
				renamed = append(renamed, fmt.Sprintf("warning: %s describes itself as %q; channels name it by its file (plugin: %s)", f.Path, d, f.Name))
			}
		}
		// What a plugin says of itself, and a path, are printed as other
		// text the CLI did not write: its terminal controls escaped.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", printable(f.Name), printable(version), f.SHA256, printable(f.Path))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, w := range renamed {
		fmt.Fprintln(out, w)
	}
	if len(failed) > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d plugin(s) did not start:\n%w", len(failed), errors.Join(failed...))}
	}
	return nil
}

func newPluginsCheckCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "check NAME --config FILE",
		Short: "Start a plugin, configure it for every channel that uses it, and check its health",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, log, err := loadConfig(cmd.Context(), path)
			if err != nil {
				return err
			}
			return pluginsCheck(cmd.Context(), cmd.OutOrStdout(), cfg, log, args[0])
		},
	}
	configFlag(cmd, &path)
	return cmd
}

// pluginsCheck does what serve does with one plugin, and reports each step;
// it fails (exit 1) if any step did.
func pluginsCheck(ctx context.Context, out io.Writer, cfg *config.Config, log hclog.Logger, name string) error {
	host := pluginhost.New(cfg.Plugins, log)
	defer closeHost(host)

	sctx, cancel := context.WithTimeout(ctx, cmp.Or(cfg.Plugins.StartTimeout, pluginhost.DefaultStartTimeout)+5*time.Second)
	defer cancel()
	p, err := host.Plugin(sctx, name)
	if err != nil {
		return err
	}
	info := p.Info()
	// What the plugin says (its name, version, a refused config's reason, a
	// failed health check) is printed with its terminal controls escaped,
	// as all text the CLI did not write.
	fmt.Fprintf(out, "plugin %s: started %s %s (%s, pid %d)\n", printable(name), printable(info.Name), printable(info.Version), printable(p.Path()), p.PID())
	if info.Name != name {
		fmt.Fprintf(out, "  note: it calls itself %q; channels name it %q (the file name)\n", info.Name, name)
	}

	var channels []string
	for ch, c := range cfg.Channels {
		if c.Plugin == name {
			channels = append(channels, ch)
		}
	}
	sort.Strings(channels)
	if len(channels) == 0 {
		fmt.Fprintf(out, "  no channel in the config uses plugin %s\n", printable(name))
	}
	failures := 0
	for _, ch := range channels {
		raw, err := cfg.Channels[ch].ConfigJSON()
		if err == nil {
			err = p.Configure(sctx, ch, raw)
		}
		if err != nil {
			failures++
			fmt.Fprintf(out, "  channel %s: FAILED: %s\n", printable(ch), printable(err.Error()))
			continue
		}
		fmt.Fprintf(out, "  channel %s: configured; %s\n", printable(ch), sendRule(cfg.Channels[ch], p.Batches(ch)))
	}
	if err := p.Health(sctx); err != nil {
		failures++
		fmt.Fprintf(out, "  health: FAILED: %s\n", printable(err.Error()))
	} else {
		fmt.Fprintln(out, "  health: ok")
	}
	if failures > 0 {
		return &exitError{code: 1, err: fmt.Errorf("plugin %s: %d check(s) failed", name, failures)}
	}
	return nil
}

// sendRule says what a channel's concurrency counts and how many messages a
// plugin call carries, as the engine applies them (internal/delivery: slotsFor, Prefetch).
func sendRule(c config.Channel, batches bool) string {
	if batches {
		rule := fmt.Sprintf("batches (sdk.BatchSender): concurrency %d counts plugin calls in flight, each of up to batch_size %d messages",
			c.Concurrency, c.BatchSize)
		if n := c.Slots(true); n < c.Concurrency {
			rule += fmt.Sprintf(" (%d calls at most: %d messages in flight is the bound)", n, config.MaxConcurrency)
		}
		return rule
	}
	least := min(c.BatchSize, c.Concurrency)
	return fmt.Sprintf("one message per Send: concurrency %d counts messages in flight, so a plugin call carries at most %d (the smaller of batch_size %d and concurrency); up to %d more are claimed ahead of the sends (%d until a call has returned, or while calls take %s, half the timeout, or more)",
		c.Concurrency, least, c.BatchSize, delivery.Prefetch(c), least, c.Timeout/2)
}

func closeHost(h *pluginhost.Host) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Stop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "notifyd: stop plugins:", err)
	}
}
