// Command peers runs notifyd's 08:00 burst side by side with River, asynq
// and raw HTTP POSTs on this machine (issue 29; docs/performance.md, "Peers
// side by side"). `make bench-peers` builds and runs it with the defaults.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/notifyd/notifyd/bench/peers"
)

func main() {
	peers.MaybeChild() // the sink and the peers' workers are this binary too
	var (
		o       peers.Options
		systems string
		out     string
	)
	flag.IntVar(&o.N, "n", peers.DefaultN, "notifications in the burst, for each system")
	flag.IntVar(&o.Concurrency, "concurrency", peers.DefaultConcurrency, "deliveries in flight, for every system")
	flag.IntVar(&o.Batch, "batch", peers.DefaultBatch, "notifyd's batch_size")
	flag.StringVar(&systems, "systems", strings.Join(peers.Systems, ","), "which systems, comma-separated, in the first round's order")
	flag.IntVar(&o.Rounds, "rounds", 1, "runs of the whole set; every other round in reverse order")
	flag.StringVar(&o.PostgresURL, "postgres", peers.DefaultPostgresURL, "a Postgres database to connect to; each system gets a fresh database on the same server")
	flag.StringVar(&o.RedisAddr, "redis", peers.DefaultRedisAddr, "Redis address")
	flag.IntVar(&o.RedisDB, "redis-db", peers.DefaultRedisDB, "notifyd's Redis DB number (must be empty); asynq uses the next")
	flag.StringVar(&o.NotifydBin, "notifyd", "", "the notifyd binary (default: bin/notifyd here or above)")
	flag.StringVar(&o.PluginsDir, "plugins-dir", "", "where notifyd-plugin-webhook is (default: plugins/ beside the notifyd binary)")
	flag.DurationVar(&o.RiverFetchCooldown, "river-fetch-cooldown", peers.DefaultRiverFetchCooldown, "River's FetchCooldown")
	flag.DurationVar(&o.RiverFetchPoll, "river-fetch-poll", peers.DefaultRiverFetchPoll, "River's FetchPollInterval")
	flag.DurationVar(&o.AsynqTaskCheck, "asynq-task-check", peers.DefaultAsynqTaskCheck, "asynq's TaskCheckInterval")
	flag.DurationVar(&o.AsynqDelayedCheck, "asynq-delayed-check", peers.DefaultAsynqDelayedCheck, "asynq's DelayedTaskCheckInterval")
	flag.IntVar(&o.AsynqPoolSize, "asynq-pool-size", 0, "asynq's Redis connections (default: concurrency + 16)")
	flag.StringVar(&o.WorkDir, "workdir", "", "keep the daemon's config and every process's log here (default: a temporary directory, removed after a good run)")
	flag.StringVar(&out, "json", "", "write the report as JSON to this file")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "peers: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	for _, s := range strings.Split(systems, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.Systems = append(o.Systems, s)
		}
	}
	o.Out = os.Stdout

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := peers.Run(ctx, o)
	if out != "" && rep != nil {
		b, jerr := json.MarshalIndent(rep, "", "  ")
		if jerr == nil {
			jerr = os.WriteFile(out, append(b, '\n'), 0o644)
		}
		if jerr != nil {
			fmt.Fprintln(os.Stderr, "peers: write the report:", jerr)
			os.Exit(1)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
