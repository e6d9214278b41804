package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/bench"
)

// newBenchCmd measures the delivery pipeline end to end against an
// in-process sink, beside a raw HTTP baseline (internal/bench).
func newBenchCmd() *cobra.Command {
	var (
		path, pluginsDir, output, cpuProfile, memProfile string
		o                                                bench.Options
	)
	cmd := &cobra.Command{
		Use:   "notifyd-bench [--config FILE] [-n 100000] [--concurrency C] [--batch B] [--quiet D] [--instances N] [--partitions K] [--history N] [--redis-cluster] [--plugins-dir DIR]",
		Short: "Benchmark delivery end to end: a burst of N notifications, a raw HTTP baseline, idle pick-up latency",
		Long: `notifyd-bench runs the real pipeline — Postgres outbox, Redis queues, the webhook plugin —
against an HTTP sink inside this process, in its own Postgres schema (bench_<random>)
and Redis key prefix (bench-<random>), both removed afterwards. Only postgres, redis,
plugins, delivery and log are read from the config; without --config the services on
loopback are used. It reports:

  burst         N notifications all due at one instant: throughput, due→delivered p50/p99, duplicates
  raw baseline  plain HTTP POSTs of the same size to the same sink at the same concurrency
  idle pick-up  single notifications inserted one at a time: insert→received p50/p99

For scale-out, --instances N runs N delivery engines in this one process, each with
its own instance id, Postgres pool and webhook plugin process, sharing Postgres, Redis
and this machine's CPUs; --partitions K spreads the bench channel over K queues. With
redis.cluster_addrs in the config the Redis Cluster client is used; --redis-cluster
starts a throw-away 3-master cluster on loopback (redis-server and redis-cli on PATH)
for the run and removes it afterwards.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case output != "text" && output != "json":
				return fmt.Errorf("-o %q: want text or json", output)
			case o.N < 1:
				return fmt.Errorf("-n %d: want at least 1 notification", o.N)
			case o.Concurrency < 1:
				return fmt.Errorf("--concurrency %d: want at least 1", o.Concurrency)
			case o.Batch < 1:
				return fmt.Errorf("--batch %d: want at least 1", o.Batch)
			case o.Quiet < 0:
				return fmt.Errorf("--quiet %s: want 0 or more", o.Quiet)
			case o.Idle < 0:
				return fmt.Errorf("--idle %d: want 0 (skip the phase) or more", o.Idle)
			case o.Instances < 1 || o.Instances > bench.MaxInstances:
				return fmt.Errorf("--instances %d: want 1 to %d", o.Instances, bench.MaxInstances)
			case o.Partitions < 1 || o.Partitions > 256:
				return fmt.Errorf("--partitions %d: want 1 to 256", o.Partitions)
			case o.Idle == 0:
				o.Idle = -1 // Options: negative skips
			}
			cfg := bench.DefaultConfig()
			if path != "" {
				var err error
				if cfg, err = config.Load(path, nil); err != nil {
					return err
				}
			}
			if pluginsDir != "" {
				cfg.Plugins.Dir = pluginsDir
			}
			o.Config = cfg
			o.Logger = cfg.Log.NewLogger("notifyd", os.Stderr)
			o.Progress = cmd.ErrOrStderr()
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer f.Close()
				o.CPUProfile = f
			}
			if memProfile != "" {
				for _, w := range []struct {
					name string
					to   *io.Writer
				}{{memProfile + ".base", &o.MemProfileBase}, {memProfile, &o.MemProfile}} {
					f, err := os.Create(w.name)
					if err != nil {
						return fmt.Errorf("--memprofile: %w", err)
					}
					defer f.Close()
					*w.to = f
				}
			}
			rep, err := bench.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			if output == "json" {
				return rep.WriteJSON(cmd.OutOrStdout())
			}
			return rep.WriteText(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&path, "config", "c", os.Getenv("NOTIFYD_CONFIG"), "config file (YAML) for postgres, redis, plugins, delivery; env NOTIFYD_CONFIG; default: services on loopback")
	f.IntVarP(&o.N, "n", "n", bench.DefaultN, "notifications in the burst (and POSTs in the raw baseline)")
	f.IntVar(&o.Concurrency, "concurrency", bench.DefaultConcurrency, "the channel's concurrency, and the raw baseline's")
	f.IntVar(&o.Batch, "batch", bench.DefaultBatch, "the channel's batch_size (fetch, claim and gRPC batch)")
	f.IntVar(&o.Idle, "idle", bench.DefaultIdle, "single notifications for the idle pick-up phase (0 skips it)")
	f.DurationVar(&o.Quiet, "quiet", 0, "let the engine poll an empty outbox this long before the burst, as before a daily send")
	f.IntVar(&o.Instances, "instances", bench.DefaultInstances, "delivery engines (instances) sharing the work, each with its own plugin process, all in this process")
	f.IntVar(&o.Partitions, "partitions", bench.DefaultPartitions, "the bench channel's partitions (queues bench#0..K-1)")
	f.IntVar(&o.History, "history", 0, "after the burst, seed this many finished notifications (older than the retention windows), time the counts, run the burst again beside them, then time a retention pass that removes them (e.g. 10000000)")
	f.IntVar(&o.Steady, "steady", 0, "instead of the burst: this many notifications/s for --for, with every retention window --retain, table sizes sampled each minute")
	f.DurationVar(&o.SteadyFor, "for", 30*time.Minute, "with --steady: how long")
	f.DurationVar(&o.Retain, "retain", 5*time.Minute, "with --steady: retention.sent, cancelled and failed")
	f.BoolVar(&o.RedisCluster, "redis-cluster", false, "start a throw-away 3-master Redis Cluster on loopback for the run instead of the config's Redis")
	f.StringVar(&o.Provider, "provider", "webhook", "the bench channel's provider: webhook (the webhook plugin to the sink) or alimtalk (the Kakao plugin in AlimTalk mode, 100 notifications per request to a fake SENS partner; the burst only)")
	f.StringVar(&o.AlimtalkConfirm, "alimtalk-confirm", "delivered", "with --provider alimtalk: the channel's alimtalk.confirm, delivered (poll each request's results) or accepted")
	f.StringVar(&pluginsDir, "plugins-dir", "", "directory holding notifyd-plugin-webhook (overrides plugins.dir)")
	f.StringVarP(&output, "output", "o", "text", "report format: text or json")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of this process during the burst to this file")
	f.StringVar(&memProfile, "memprofile", "", "write this process's allocation profile to FILE.base at T and to FILE once the burst is delivered; the burst's allocations: go tool pprof -sample_index=alloc_space -diff_base FILE.base FILE")
	return cmd
}
