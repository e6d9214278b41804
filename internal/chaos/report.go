package chaos

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Report is the outcome of one run.
type Report struct {
	N          int
	Seed       uint64
	Instances  int
	Rate       float64
	FaultEvery time.Duration
	Enqueuer   string
	// RedisCluster: a 3-master Redis Cluster; the channel over Partitions
	// queues.
	RedisCluster bool
	Partitions   int

	Accepted         int
	EnqueueRetries   int64
	LastEnqueueError error
	LoadTime         time.Duration // enqueueing, with the faults running
	Quiesce          time.Duration // from healing until everything finished

	Statuses      map[string]int
	Sent, Failed  int
	Refused       int // notifications to refused recipients
	WronglyFailed int // FAILED though the sink never refused them
	Lost          int
	LostSamples   []string
	Duplicates    int // deliveries the sink accepted beyond the first of each notification
	MaxAttempts   int
	TotalAttempts int

	Delays      Percentiles // due → first accepted delivery, SENT notifications
	MaxDelay    time.Duration
	MaxDelayKey string

	Redis  queueState
	Events []Event
	Kinds  []KindStats
	Starts int      // notifyd process starts, all instances
	Exits  []string // exits the suite did not cause (e.g. a start while Postgres was down)

	Problems   []string
	LogTails   []string
	Stragglers []string // the slowest recovery of each kind, explained
	// DeadRepeats is how many dead-list entries repeat an id already
	// there (each one is also a problem).
	DeadRepeats int
	// Daily is the daily path's figures, when it ran (Setup.Daily).
	Daily *DailyReport
	// DupsBeforeFaults is how many duplicates (load and daily path) went
	// out before the first fault; each later one is counted to the fault
	// injected last before it (Event.Duplicates, KindStats.Duplicates).
	DupsBeforeFaults int

	dupAt []time.Time // when each duplicate went out, load and daily path
}

// duplicates counts a SENT load notification's deliveries beyond the first.
func (r *Report) duplicates(d Deliveries) {
	r.Duplicates += d.Accepted - 1
	r.duplicated(d)
}

// duplicated records when d's duplicates went out, for attribution.
func (r *Report) duplicated(d Deliveries) {
	for i := range d.Accepted - 1 {
		r.dupAt = append(r.dupAt, d.AgainAt(i))
	}
}

// attribute counts each duplicate to the fault injected last before it
// went out (the one whose recovery it most likely belongs to), or to
// DupsBeforeFaults.
func (r *Report) attribute() {
	order := make([]int, len(r.Events))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return r.Events[order[a]].At.Before(r.Events[order[b]].At) })
	for _, t := range r.dupAt {
		// The last event (in time) with At <= t.
		k := sort.Search(len(order), func(j int) bool { return r.Events[order[j]].At.After(t) }) - 1
		if k < 0 {
			r.DupsBeforeFaults++
			continue
		}
		r.Events[order[k]].Duplicates++
	}
}

// KindStats summarizes the faults of one kind.
type KindStats struct {
	Kind       string
	Count      int
	Failed     int // the injection itself failed (e.g. FLUSHALL while Redis was down)
	Unmeasured int // no snapshot of unfinished work (Postgres was down)
	InFlight   int // most unfinished notifications caught by one fault
	Duration   time.Duration
	Median     time.Duration // recovery after the fault ended
	Max        time.Duration
	Duplicates int // duplicates that went out after a fault of this kind, before the next fault
}

// Percentiles of a set of durations.
type Percentiles struct {
	N                   int
	P50, P99, P999, Max time.Duration
}

func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return Percentiles{N: len(ds), P50: at(0.5), P99: at(0.99), P999: at(0.999), Max: ds[len(ds)-1]}
}

func (r *Report) problem(format string, args ...any) {
	if len(r.Problems) < 50 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

func (r *Report) lost(what string) {
	r.Lost++
	if len(r.LostSamples) < 20 {
		r.LostSamples = append(r.LostSamples, what)
	}
}

// redisWiped says whether any fault lost Redis' data.
func (r *Report) redisWiped() bool {
	for _, ev := range r.Events {
		if ev.Err == nil && (ev.Kind == RedisFlushAll || ev.Kind == RedisRestart) {
			return true
		}
	}
	return false
}

// OK says whether the run passed every check.
func (r *Report) OK() bool { return r.Lost == 0 && len(r.Problems) == 0 }

// DuplicatePct is duplicates per notification, in percent.
func (r *Report) DuplicatePct() float64 {
	if r.N == 0 {
		return 0
	}
	return 100 * float64(r.Duplicates) / float64(r.N)
}

func (r *Report) summarize() {
	if r.Lost > 0 {
		r.Problems = append([]string{fmt.Sprintf("%d notifications lost", r.Lost)}, r.Problems...)
	}
	if r.Accepted != r.N {
		r.problem("only %d of %d notifications were accepted", r.Accepted, r.N)
	}
	for _, ev := range r.Events {
		var bug *BugError
		if errors.As(ev.Err, &bug) {
			r.problem("%s: %s", ev.Kind, bug.What)
		}
	}
	r.attribute()
	by := map[string]*KindStats{}
	recov := map[string][]time.Duration{}
	for _, ev := range r.Events {
		k := by[ev.Kind]
		if k == nil {
			k = &KindStats{Kind: ev.Kind}
			by[ev.Kind] = k
		}
		k.Count++
		k.Duplicates += ev.Duplicates
		k.Duration += ev.HealedAt.Sub(ev.At)
		switch {
		case ev.Err != nil:
			k.Failed++
		case ev.InFlight < 0 || ev.Recovery() < 0:
			k.Unmeasured++
		default:
			k.InFlight = max(k.InFlight, ev.InFlight)
			recov[ev.Kind] = append(recov[ev.Kind], ev.Recovery())
		}
	}
	for _, kind := range Kinds {
		k := by[kind]
		if k == nil {
			continue
		}
		if k.Count > 0 {
			k.Duration /= time.Duration(k.Count)
		}
		p := percentiles(recov[kind])
		k.Median, k.Max = p.P50, p.Max
		r.Kinds = append(r.Kinds, *k)
	}
}

// String is the report as the test log and docs/reliability.md show it.
func (r *Report) String() string {
	var b strings.Builder
	verdict := "PASS"
	if !r.OK() {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "chaos run: %s\n", verdict)
	fmt.Fprintf(&b, "  notifications  N=%d (accepted %d) via %s at %.0f/s over %v; %d notifyd instances; seed %d\n",
		r.N, r.Accepted, r.Enqueuer, r.Rate, r.LoadTime.Round(time.Second), r.Instances, r.Seed)
	if r.RedisCluster {
		fmt.Fprintf(&b, "  Redis          a %d-master Redis Cluster, each master behind its own proxy; the channel over %d partitions\n",
			redisClusterMasters, r.Partitions)
	} else {
		fmt.Fprintf(&b, "  Redis          one server; the channel in one queue\n")
	}
	fmt.Fprintf(&b, "  outcome        SENT %d, FAILED %d (refused by the sink: %d), wrongly FAILED %d, lost %d\n",
		r.Sent, r.Failed, r.Refused, r.WronglyFailed, r.Lost)
	fmt.Fprintf(&b, "  statuses       %v\n", sortedMap(r.Statuses))
	fmt.Fprintf(&b, "  duplicates     %d (%.3f%% of N): deliveries the sink accepted beyond the first\n", r.Duplicates, r.DuplicatePct())
	fmt.Fprintf(&b, "  attempts       %d in all, at most %d for one notification\n", r.TotalAttempts, r.MaxAttempts)
	fmt.Fprintf(&b, "  due→delivered  p50 %v, p99 %v, p99.9 %v, max %v (%s)\n",
		r.Delays.P50.Round(time.Millisecond), r.Delays.P99.Round(time.Millisecond),
		r.Delays.P999.Round(time.Millisecond), r.MaxDelay.Round(time.Millisecond), r.MaxDelayKey)
	fmt.Fprintf(&b, "  quiescence     %v after healing\n", r.Quiesce.Round(time.Millisecond))
	if r.Daily != nil {
		b.WriteString(r.Daily.String())
	}
	fmt.Fprintf(&b, "  Redis at end   ready %d, delayed %d, members %d, processing %d (%d lists), dead %d (%d of them repeats)\n",
		r.Redis.Ready, r.Redis.Delayed, r.Redis.Members, r.Redis.Processing, r.Redis.ProcessingLists, len(r.Redis.Dead), r.DeadRepeats)
	fmt.Fprintf(&b, "  enqueue        %d batch retries", r.EnqueueRetries)
	if r.LastEnqueueError != nil {
		fmt.Fprintf(&b, " (last: %v)", r.LastEnqueueError)
	}
	fmt.Fprintf(&b, "\n  processes      %d notifyd starts; %d exits not caused by the suite\n", r.Starts, len(r.Exits))
	fmt.Fprintf(&b, "  faults         %d injected; recovery = from the fault's end until every notification unfinished at its start had finished;\n", len(r.Events))
	fmt.Fprintf(&b, "                 dups = duplicates (load and daily path) that went out after a fault of the kind and before the next fault (%d before the first)\n", r.DupsBeforeFaults)
	fmt.Fprintf(&b, "    %-34s %5s %6s %9s %9s %10s %10s %6s\n", "kind", "count", "failed", "in flight", "lasted", "recovery", "worst", "dups")
	for _, k := range r.Kinds {
		fmt.Fprintf(&b, "    %-34s %5d %6d %9d %9v %10v %10v %6d\n", k.Kind, k.Count, k.Failed, k.InFlight,
			k.Duration.Round(10*time.Millisecond), k.Median.Round(10*time.Millisecond), k.Max.Round(10*time.Millisecond), k.Duplicates)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "  PROBLEM: %s\n", p)
	}
	for _, l := range r.LostSamples {
		fmt.Fprintf(&b, "  LOST: %s\n", l)
	}
	return b.String()
}

// Timeline lists every fault, for a failing run's log.
func (r *Report) Timeline() string {
	var b strings.Builder
	var t0 time.Time
	if len(r.Events) > 0 {
		t0 = r.Events[0].At
	}
	for _, ev := range r.Events {
		rec := "unmeasured"
		if d := ev.Recovery(); d >= 0 {
			rec = d.Round(time.Millisecond).String()
		}
		fmt.Fprintf(&b, "  +%8v %-34s %-15s %-45s in flight %4d, recovered %s, %d duplicates after it", ev.At.Sub(t0).Round(time.Millisecond),
			ev.Kind, ev.Target, ev.Detail, ev.InFlight, rec, ev.Duplicates)
		if ev.Err != nil {
			fmt.Fprintf(&b, " (error: %v)", ev.Err)
		}
		b.WriteByte('\n')
	}
	for _, e := range r.Exits {
		fmt.Fprintf(&b, "  exit: %s\n", e)
	}
	for _, s := range r.Stragglers {
		fmt.Fprintf(&b, "  slowest %s\n", s)
	}
	return b.String()
}

func sortedMap(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}
