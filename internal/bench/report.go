package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Targets from the issue, checked (not asserted) in the report.
const (
	TargetThroughput = 20_000.0 // notifications/s end to end
	TargetRatio      = 0.4      // of the raw baseline
	TargetIdleP50Ms  = 5.0      // idle pick-up p50
)

// Report is everything a Run measured.
type Report struct {
	Started time.Time `json:"started"`
	Machine Machine   `json:"machine"`
	Setup   Setup     `json:"setup"`
	Burst   Burst     `json:"burst"`
	Raw     Raw       `json:"raw"`
	// Ratio is the burst's throughput over the raw baseline's.
	Ratio float64 `json:"ratio"`
	// CPU is what each side cost in CPU time, which — unlike wall-clock
	// throughput — hardly depends on what else the machine runs.
	CPU  CPUCost `json:"cpu_cost"`
	Idle Idle    `json:"idle"`
	// History is the history phase's, when it ran.
	History *History `json:"history,omitempty"`
	// Steady is the steady-load phase's; with it no other phase runs.
	Steady *Steady `json:"steady,omitempty"`
}

// CPUCost is the CPU time per notification end to end (this process, the
// plugin, this run's Postgres backends and the Redis server) and per raw
// request (this process: client and sink), and the throughput each would
// reach if it had every CPU of the machine to itself.
type CPUCost struct {
	PerNotificationUs float64 `json:"per_notification_us"`
	PerRawRequestUs   float64 `json:"per_raw_request_us"`
	// Capacity = CPUs / cost: an upper bound, ignoring waits and the
	// processes' own limits on parallelism.
	NotificationCapacity float64 `json:"notification_capacity_per_s"`
	RawCapacity          float64 `json:"raw_capacity_per_s"`
	CapacityRatio        float64 `json:"capacity_ratio"`
}

func cpuCost(cpus int, b Burst, r Raw) CPUCost {
	var c CPUCost
	if b.N > 0 {
		u := b.CPU
		c.PerNotificationUs = 1e6 * (u.Bench + u.Plugin + u.Postgres + u.Redis) / float64(b.N)
	}
	if r.Requests > 0 {
		c.PerRawRequestUs = 1e6 * r.CPU.Bench / float64(r.Requests)
	}
	if c.PerNotificationUs > 0 {
		c.NotificationCapacity = float64(cpus) * 1e6 / c.PerNotificationUs
	}
	if c.PerRawRequestUs > 0 {
		c.RawCapacity = float64(cpus) * 1e6 / c.PerRawRequestUs
	}
	if c.RawCapacity > 0 {
		c.CapacityRatio = c.NotificationCapacity / c.RawCapacity
	}
	return c
}

// Machine describes where the run happened.
type Machine struct {
	CPUs       int        `json:"cpus"`
	GOMAXPROCS int        `json:"gomaxprocs"`
	Go         string     `json:"go"`
	LoadBefore [3]float64 `json:"load_before"`
	LoadAfter  [3]float64 `json:"load_after"`
}

// Setup is what was measured, and how.
type Setup struct {
	N                    int     `json:"n"`
	Concurrency          int     `json:"concurrency"`
	Batch                int     `json:"batch"`
	Idle                 int     `json:"idle"`
	QuietSeconds         float64 `json:"quiet_seconds"`
	RelayBatch           int     `json:"relay_batch"`
	SettleBatch          int     `json:"settle_batch"`
	PostgresMaxConns     int     `json:"postgres_max_conns"`
	PluginMaxConcurrency int     `json:"plugin_max_concurrency"`
	Provider             string  `json:"provider"`
	AlimtalkConfirm      string  `json:"alimtalk_confirm,omitempty"`
	EnvelopeBytes        int     `json:"envelope_bytes"`
	Schema               string  `json:"schema"`
	RedisPrefix          string  `json:"redis_prefix"`
	Sink                 string  `json:"sink"`
	// Instances is how many delivery engines ran (in this one process, each
	// with its own plugin process), Partitions the channel's partitions.
	Instances  int `json:"instances"`
	Partitions int `json:"partitions"`
	// Redis says which Redis: single (redis.url), the config's cluster, or
	// a cluster the bench started; RedisClusterAddrs its masters.
	Redis             string   `json:"redis"`
	RedisClusterAddrs []string `json:"redis_cluster_addrs,omitempty"`
}

// Dist summarises a set of durations, in milliseconds.
type Dist struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
	Mean  float64 `json:"mean_ms"`
}

// distOf summarises sorted durations (nearest-rank percentiles).
func distOf(sorted []time.Duration) Dist {
	d := Dist{Count: len(sorted)}
	if len(sorted) == 0 {
		return d
	}
	var sum time.Duration
	for _, v := range sorted {
		sum += v
	}
	d.P50, d.P90, d.P99 = ms(percentile(sorted, 50)), ms(percentile(sorted, 90)), ms(percentile(sorted, 99))
	d.Max, d.Mean = ms(sorted[len(sorted)-1]), ms(sum/time.Duration(len(sorted)))
	return d
}

// percentile is the nearest-rank p-th percentile of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted)) + 0.999999999)
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for a person.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	m, s := r.Machine, r.Setup
	fmt.Fprintf(&b, "notifyd-bench — %s\n", r.Started.Format(time.RFC3339))
	fmt.Fprintf(&b, "machine: %d CPUs, GOMAXPROCS %d, %s; load average %s before, %s after\n",
		m.CPUs, m.GOMAXPROCS, m.Go, loadString(m.LoadBefore), loadString(m.LoadAfter))
	if s.Provider == ProviderAlimtalk {
		fmt.Fprintf(&b, "setup:   channel %q → kakao plugin, mode alimtalk (confirm %s; gRPC batch, 100 per SENS request) → in-process fake SENS partner → sink\n", Channel, s.AlimtalkConfirm)
	} else {
		fmt.Fprintf(&b, "setup:   channel %q → webhook plugin (gRPC, fan-out %d) → in-process sink %s\n", Channel, s.PluginMaxConcurrency, s.Sink)
	}
	fmt.Fprintf(&b, "         concurrency %d, batch %d; delivery.relay_batch %d, settle_batch %d; postgres.max_conns %d; envelope ≈%d B\n",
		s.Concurrency, s.Batch, s.RelayBatch, s.SettleBatch, s.PostgresMaxConns, s.EnvelopeBytes)
	instances := "1 delivery engine"
	if s.Instances > 1 {
		instances = fmt.Sprintf("%d delivery engines in this one process (each its own instance id, Postgres pool and plugin process; concurrency and max_conns are per instance; all share the %d CPUs)",
			s.Instances, m.CPUs)
	}
	fmt.Fprintf(&b, "         %s; partitions %d; redis %s\n", instances, s.Partitions, s.Redis)

	if st := r.Steady; st != nil {
		fmt.Fprintf(&b, "\nsteady: %s notifications/s for %.0fs, retention %s, autovacuum %s; %s inserted, %s delivered\n",
			thousands(st.Rate), st.Seconds, st.Retain, st.Autovacuum, thousands(int(st.Inserted)), thousands(st.Delivered))
		fmt.Fprintf(&b, "  %8s %10s %9s %10s %12s %10s %11s\n", "at", "rows", "heap MB", "index MB", "attempts MB", "dead rows", "autovacuums")
		for _, sm := range st.Samples {
			fmt.Fprintf(&b, "  %7.0fs %10s %9.1f %10.1f %12.1f %10s %11d\n", sm.AtSeconds, thousands(int(sm.Rows)), sm.HeapMB, sm.IndexMB, sm.Attempts, thousands(int(sm.DeadRows)), sm.Vacuums)
		}
		_, err := io.WriteString(w, b.String())
		return err
	}

	bu := r.Burst
	quiet := ""
	if s.QuietSeconds > 0 {
		quiet = fmt.Sprintf(", after the engine polled an empty outbox for %gs", s.QuietSeconds)
	}
	fmt.Fprintf(&b, "\nburst:   %s notifications due at one instant T (inserted in %.2fs, one transaction%s)\n", thousands(bu.N), bu.InsertSeconds, quiet)
	fmt.Fprintf(&b, "  delivered      %s of %s, duplicates %d; SENT %s, FAILED %d\n",
		thousands(bu.Delivered), thousands(bu.N), bu.Duplicates, thousands(int(bu.Sent)), bu.Failed)
	fmt.Fprintf(&b, "  throughput     %s notifications/s  (first at T+%s, last at T+%s, all SENT committed at T+%s)\n",
		thousands(int(bu.Throughput+0.5)), msString(bu.FirstMs), msString(bu.LastMs), msString(bu.SettledMs))
	fmt.Fprintf(&b, "  due→delivered  p50 %s, p90 %s, p99 %s, max %s\n",
		msString(bu.Latency.P50), msString(bu.Latency.P90), msString(bu.Latency.P99), msString(bu.Latency.Max))
	if len(bu.ByInstance) > 1 {
		total := 0
		for _, n := range bu.ByInstance {
			total += n
		}
		var parts []string
		for i, n := range bu.ByInstance {
			parts = append(parts, fmt.Sprintf("#%d %s (%.0f%%)", i+1, thousands(n), 100*float64(n)/float64(max(total, 1))))
		}
		fmt.Fprintf(&b, "  by instance    %s sent\n", strings.Join(parts, ", "))
	}
	writeCPU(&b, bu.CPU, true)
	if st := bu.Stages; st.Batches > 0 {
		fmt.Fprintf(&b, "  stages         %d batches of %.0f on average, first fetched at T+%s; per batch: claim p50 %s p99 %s, send (gRPC + HTTP) p50 %s p99 %s\n",
			st.Batches, st.MeanBatch, msString(st.FirstFetchMs), msString(st.Claim.P50), msString(st.Claim.P99), msString(st.Send.P50), msString(st.Send.P99))
	}

	ra := r.Raw
	fmt.Fprintf(&b, "\nraw baseline: %s plain POSTs of ≈%d B to the same sink at concurrency %d (Go client, keep-alive), half before and half after the burst\n",
		thousands(ra.Requests), ra.Bytes, ra.Concurrency)
	var runs []string
	for _, run := range ra.Runs {
		runs = append(runs, fmt.Sprintf("%s the burst %s/s", run.When, thousands(int(run.Throughput+0.5))))
	}
	fmt.Fprintf(&b, "  throughput     %s requests/s  (%s); request latency p50 %s, p99 %s\n",
		thousands(int(ra.Throughput+0.5)), strings.Join(runs, ", "), msString(ra.Latency.P50), msString(ra.Latency.P99))
	writeCPU(&b, ra.CPU, false)
	fmt.Fprintf(&b, "\nratio end-to-end / raw: %.2f\n", r.Ratio)
	if c := r.CPU; c.PerNotificationUs > 0 && c.PerRawRequestUs > 0 {
		fmt.Fprintf(&b, "CPU cost: %.0f µs per notification end to end (notifyd, plugin, its Postgres backends, Redis), %.0f µs per raw request (client + sink);\n",
			c.PerNotificationUs, c.PerRawRequestUs)
		fmt.Fprintf(&b, "  with all %d CPUs to themselves that is at most %s notifications/s and %s raw requests/s (ratio %.2f)\n",
			m.CPUs, thousands(int(c.NotificationCapacity+0.5)), thousands(int(c.RawCapacity+0.5)), c.CapacityRatio)
	}

	if id := r.Idle; id.K > 0 {
		fmt.Fprintf(&b, "\nidle pick-up: %d single notifications, each inserted into an idle pipeline and waited for\n", id.K)
		fmt.Fprintf(&b, "  committed→received  p50 %s, p90 %s, p99 %s, max %s; duplicates %d\n",
			msString(id.Latency.P50), msString(id.Latency.P90), msString(id.Latency.P99), msString(id.Latency.Max), id.Duplicates)
		fmt.Fprintf(&b, "  insert→received     p50 %s, p99 %s  (the application's insert call included: p50 %s)\n",
			msString(id.FromInsert.P50), msString(id.FromInsert.P99), msString(id.Insert.P50))
		if bd := id.Breakdown; bd.ToFetch.Count > 0 {
			fmt.Fprintf(&b, "  p50 by stage        commit → NOTIFY, relay, push, fetch %s → claim %s → gRPC, plugin, HTTP to the sink %s\n",
				msString(bd.ToFetch.P50), msString(bd.Claim.P50), msString(bd.ToSink.P50))
			if bd.ToNotify.Count > 0 {
				fmt.Fprintf(&b, "                      (of the first: commit → NOTIFY received %s, then relay, push, fetch %s; %d of %d notified)\n",
					msString(bd.ToNotify.P50), msString(bd.NotifyToFetch.P50), bd.ToNotify.Count, id.K)
			}
		}
	}

	if h := r.History; h != nil {
		fmt.Fprintf(&b, "\nhistory: %s finished notifications (and their attempts) seeded in %.0fs; tables %.0f MB, indexes %.0f MB\n",
			thousands(h.Rows), h.SeedSeconds, h.TableMB, h.IndexMB)
		fmt.Fprintf(&b, "  counts         maintained p50 %s, max %s; the GROUP BY scan they replace p50 %s\n",
			msString(h.Counts.P50), msString(h.Counts.Max), msString(h.ScanCounts.P50))
		hb := h.Burst
		change := 0.0
		if bu.Throughput > 0 {
			change = 100 * (hb.Throughput - bu.Throughput) / bu.Throughput
		}
		fmt.Fprintf(&b, "  burst again    %s notifications/s beside the history (%+.1f%% against the empty-table burst above); due→delivered p50 %s, p99 %s; SENT %s, duplicates %d\n",
			thousands(int(hb.Throughput+0.5)), change, msString(hb.Latency.P50), msString(hb.Latency.P99), thousands(int(hb.Sent)), hb.Duplicates)
		// CPU time per notification hardly depends on what else the machine
		// runs, unlike wall-clock throughput on a shared machine.
		emptyUs, histUs := cpuCost(m.CPUs, bu, Raw{}).PerNotificationUs, cpuCost(m.CPUs, hb, Raw{}).PerNotificationUs
		if emptyUs > 0 && histUs > 0 {
			fmt.Fprintf(&b, "                 CPU per notification end to end %.0f µs beside the history, %.0f µs on empty tables (%+.1f%%)\n",
				histUs, emptyUs, 100*(histUs-emptyUs)/emptyUs)
		}
		fmt.Fprintf(&b, "  retention      one pass removed %s rows in %.1fs (%d batches), %s of the history left (its FAILED rows: dead letters are kept 30 days)\n",
			thousands(int(h.RetentionDeleted)), h.RetentionSeconds, h.RetentionBatches, thousands(int(h.LeftAfter)))
		fmt.Fprintf(&b, "                 %d single notifications delivered meanwhile: committed→received p50 %s, p99 %s, max %s\n",
			h.DuringRetention.Count, msString(h.DuringRetention.P50), msString(h.DuringRetention.P99), msString(h.DuringRetention.Max))
	}

	fmt.Fprintf(&b, "\ntargets: ≥ %s/s end to end: %s; ≥ %.1f of raw: %s", thousands(int(TargetThroughput)),
		verdict(bu.Throughput >= TargetThroughput), TargetRatio, verdict(r.Ratio >= TargetRatio))
	if r.Idle.K > 0 {
		fmt.Fprintf(&b, "; idle pick-up p50 ≤ %.0f ms: %s", TargetIdleP50Ms, verdict(r.Idle.Latency.P50 <= TargetIdleP50Ms))
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeCPU(b *strings.Builder, c CPUUsage, pipeline bool) {
	if c.MachineCapacity == 0 {
		return
	}
	fmt.Fprintf(b, "  CPU            machine %.0f%% busy over %.2fs; ", c.MachineBusyPct, c.WallSeconds)
	if pipeline {
		fmt.Fprintf(b, "bench process (engines + sink) %.2fs, plugin processes %.2fs, postgres backends %.2fs,\n"+
			"                 other postgres processes %.2fs (WAL writer, other users), redis %.2fs (shared)\n",
			c.Bench, c.Plugin, c.Postgres, c.PostgresOther, c.Redis)
		return
	}
	fmt.Fprintf(b, "bench process (client + sink) %.2fs\n", c.Bench)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func loadString(l [3]float64) string { return fmt.Sprintf("%.2f %.2f %.2f", l[0], l[1], l[2]) }

func msString(v float64) string {
	switch {
	case v >= 10_000:
		return fmt.Sprintf("%.1fs", v/1000)
	case v >= 1000:
		return fmt.Sprintf("%.2fs", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.0fms", v)
	default:
		return fmt.Sprintf("%.2fms", v)
	}
}

// thousands formats n with thin separators: 100000 → 100,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
