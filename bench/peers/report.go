package peers

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// writeRound prints one round's table and ratios.
func writeRound(w io.Writer, o Options, r Round) {
	fmt.Fprintf(w, "\nround %d of %d: N=%d due at one instant, concurrency %d, notifyd batch_size %d; order %s\n",
		r.Index, o.Rounds, o.N, o.Concurrency, o.Batch, strings.Join(r.Order, ", "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tdeliveries/s\tlast ms\tp50 ms\tdups\t| CPU µs/notification: own\tpostgres\tredis\tsink\ttotal\t| machine busy %\t")
	for _, res := range r.Results {
		u := res.PerNotificationUs
		redis := "-"
		if res.System == Notifyd || res.System == Asynq {
			redis = fmt.Sprintf("%.1f", u["redis"])
		}
		pg := "-"
		if res.System == Notifyd || res.System == River {
			pg = fmt.Sprintf("%.1f", u["postgres"])
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%d\t%.1f\t%s\t%s\t%.1f\t%.1f\t%.0f\t\n",
			res.System, res.Throughput, res.LastMs, res.P50Ms, res.Duplicates,
			u["own"], pg, redis, u["sink"], u["total"], res.CPU.MachineBusyPct)
	}
	tw.Flush()
	for _, res := range r.Results {
		if len(res.CPU.Own) > 1 {
			var parts []string
			for _, name := range slices.Sorted(maps.Keys(res.CPU.Own)) {
				parts = append(parts, fmt.Sprintf("%s %.1f", name, res.PerNotificationUs["own:"+name]))
			}
			fmt.Fprintf(w, "  %s own = %s µs\n", res.System, strings.Join(parts, " + "))
		}
	}
	writeRatios(w, r.Ratios)
}

func writeRatios(w io.Writer, q Ratios) {
	if q.BestPeer != "" {
		fmt.Fprintf(w, "notifyd / best peer: throughput %.2f× (%s, the faster), CPU per notification %.2f× (%s, the cheaper)\n",
			q.ThroughputVsBestPeer, q.BestPeer, q.CPUVsCheapestPeer, q.CheapestPeer)
	}
	if q.ThroughputVsRaw > 0 {
		fmt.Fprintf(w, "notifyd / raw: throughput %.2f×, CPU per notification %.2f×\n", q.ThroughputVsRaw, q.CPUVsRaw)
	}
}

// writeSummary prints the medians over the rounds.
func writeSummary(w io.Writer, s *Summary) {
	fmt.Fprintln(w, "\nmedians over the rounds")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tdeliveries/s\tCPU µs/notification\t")
	for _, name := range Systems {
		if tp, ok := s.Throughput[name]; ok {
			fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t\n", name, tp, s.CPUUs[name])
		}
	}
	tw.Flush()
	writeRatios(w, s.Ratios)
}
