package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Options configure one run of the suite.
type Options struct {
	Setup
	N          int           // notifications to enqueue
	Rate       float64       // enqueued per second
	FaultEvery time.Duration // mean time between faults
	Seed       uint64        // the fault schedule's seed
	RefuseEach int           // every RefuseEach-th notification goes to a refused recipient
	Quiesce    time.Duration // how long the pipeline may take to finish after healing
	// Enqueue is "api" (POST /v1/notifications on a random running
	// instance) or "db" (outbox.Insert straight into Postgres).
	Enqueue string
}

// Run builds the cluster, enqueues N notifications while the fault schedule
// runs, heals everything, waits for the pipeline to finish and checks the
// outcome. Every process it started is stopped before it returns, also on
// error; the report's Problems say what failed.
func Run(ctx context.Context, o Options) (*Report, error) {
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
		o.Logf = logf
	}
	c, err := Start(ctx, o.Setup)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.waitLeases(ctx, 90*time.Second); err != nil {
		return nil, err
	}
	r := &Report{N: o.N, Seed: o.Seed, Instances: o.Instances, Rate: o.Rate, FaultEvery: o.FaultEvery,
		RedisCluster: o.RedisCluster, Partitions: c.Partitions()}

	var enq Enqueuer
	switch o.Enqueue {
	case "api":
		enq = &APIEnqueuer{Channel: Channel, Token: Token, Instances: c.Running,
			Client: &http.Client{Timeout: 10 * time.Second}}
	case "db":
		pool, err := pgxpool.New(ctx, c.DBURL)
		if err != nil {
			return nil, err
		}
		defer pool.Close()
		enq = &DBEnqueuer{Channel: Channel, Pool: pool}
	default:
		return nil, fmt.Errorf("chaos: Enqueue %q, want api or db", o.Enqueue)
	}
	r.Enqueuer = enq.Name()
	runID := fmt.Sprintf("%x", rand.Uint32())
	load := &Load{Enqueuer: enq, N: o.N, Rate: o.Rate, Make: func(i int) Notification {
		rcpt := fmt.Sprintf("user-%d", i)
		if o.RefuseEach > 0 && i%o.RefuseEach == o.RefuseEach-1 {
			rcpt = fmt.Sprintf("%s%d", RefusedPrefix, i)
		}
		return Notification{Key: fmt.Sprintf("chaos-%s-%d", runID, i), Recipient: rcpt,
			Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
	}}

	sched := &Schedule{C: c, Every: o.FaultEvery, Rand: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)), Logf: logf}
	trackCtx, stopTrack := context.WithCancel(ctx)
	defer stopTrack()
	go sched.Track(trackCtx)
	faultCtx, stopFaults := context.WithCancel(ctx)
	faultsDone := make(chan struct{})
	go func() {
		defer close(faultsDone)
		sched.Run(faultCtx)
	}()
	progressCtx, stopProgress := context.WithCancel(ctx)
	go c.progress(progressCtx, load, logf)

	start := time.Now()
	logf("chaos: enqueueing %d notifications at %.0f/s through %s, a fault every ~%v (seed %d)",
		o.N, o.Rate, r.Enqueuer, o.FaultEvery, o.Seed)
	var (
		campaign    int64
		campaignErr error
		campaignOK  = make(chan struct{})
	)
	if c.Setup.Daily > 0 {
		logf("chaos: daily path: a schedule every %v over %d subscribers, and a campaign to them", c.Setup.DailyEvery, c.Setup.Daily)
		go func() {
			defer close(campaignOK)
			sleepCtx(ctx, 5*time.Second) // into the faults
			campaign, campaignErr = c.sendCampaign(ctx)
		}()
	} else {
		close(campaignOK)
	}
	loadErr := load.Run(ctx)
	r.LoadTime = time.Since(start)
	stopFaults()
	<-faultsDone
	if err := c.Heal(); err != nil {
		stopProgress()
		return nil, fmt.Errorf("chaos: heal: %w", err)
	}
	healed := time.Now()
	logf("chaos: load done in %v; faults stopped, everything healed; waiting for the pipeline to finish",
		r.LoadTime.Round(time.Millisecond))
	<-campaignOK
	if c.Setup.Daily > 0 {
		if campaignErr == nil {
			campaignErr = c.settleDaily(ctx, healed, campaign, o.Quiesce)
		}
		if campaignErr != nil {
			stopProgress()
			return nil, campaignErr
		}
	}
	if loadErr != nil {
		stopProgress()
		return nil, fmt.Errorf("chaos: load: %w", loadErr)
	}
	r.Accepted = int(load.Accepted())
	r.EnqueueRetries, r.LastEnqueueError = load.Retries()

	quiet, err := c.waitQuiet(ctx, o.Quiesce)
	r.Quiesce = time.Since(healed)
	stopProgress()
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
	}
	if quiet {
		// Late duplicates (a send still in flight somewhere) show up now.
		time.Sleep(2 * o.LeaseTTL)
	}
	stopTrack()
	r.Events = sched.Events()
	if err := c.check(ctx, r, fmt.Sprintf("chaos-%s-", runID), o.N); err != nil {
		return r, err
	}
	if c.Setup.Daily > 0 {
		if err := c.checkDaily(ctx, r, healed, campaign); err != nil {
			return r, err
		}
	}
	r.summarize()
	r.Stragglers = c.explainWorst(ctx, r.Events)
	if len(r.Problems) > 0 {
		for _, in := range c.Instances {
			r.LogTails = append(r.LogTails, fmt.Sprintf("--- %s (last 40 lines) ---\n%s", in.Name, in.Tail(40)))
		}
	}
	return r, nil
}

// waitLeases waits until every instance holds a lease on each of the
// channel's queues: all are up and delivering.
func (c *Cluster) waitLeases(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		// The fewest leases any queue has.
		least, err := int64(-1), error(nil)
		for _, name := range c.Queues() {
			var k int64
			k, err = c.RC.ZCard(ctx, queueKey(name, "instances")).Result()
			if err != nil {
				break
			}
			if least < 0 || k < least {
				least = k
			}
		}
		if err == nil && int(least) >= len(c.Instances) {
			return nil
		}
		failing := false
		for _, in := range c.Instances {
			if exits, _ := in.Exits(); len(exits) >= 5 {
				failing = true // e.g. a config error: no use waiting
			}
		}
		if failing || time.Now().After(deadline) {
			msg := fmt.Sprintf("chaos: only %d of %d instances took a lease on every queue within %v (%v)", max(least, 0), len(c.Instances), d, err)
			for _, in := range c.Instances {
				msg += fmt.Sprintf("\n--- %s ---\n%s", in.Name, in.Tail(30))
			}
			return fmt.Errorf("%s", msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitQuiet waits until no notification is unfinished and the channel's
// queue is empty in Redis. It reports whether that happened in time.
func (c *Cluster) waitQuiet(ctx context.Context, d time.Duration) (bool, error) {
	deadline := time.Now().Add(d)
	for {
		ids := c.unfinished(ctx)
		q, qerr := c.queueState(ctx)
		if ids != nil && len(ids) == 0 && qerr == nil && q.empty() {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("not quiet %v after healing: %d notifications unfinished, Redis %+v (%v)", d, len(ids), q, qerr)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// progress logs a line every 10 seconds while the load runs.
func (c *Cluster) progress(ctx context.Context, l *Load, logf func(string, ...any)) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, refused, unavail := c.Sink.Counts()
		retries, lastErr := l.Retries()
		logf("chaos: accepted %d, sink 2xx %d / 400 %d / 503 %d, unfinished %d, enqueue retries %d (last: %v)",
			l.Accepted(), ok, refused, unavail, len(c.unfinished(ctx)), retries, lastErr)
	}
}

// explainWorst explains the stragglers of the slowest recovery of each
// fault kind.
func (c *Cluster) explainWorst(ctx context.Context, events []Event) []string {
	if len(events) == 0 {
		return nil
	}
	t0 := events[0].At
	worst := map[string]Event{}
	for _, ev := range events {
		if w, ok := worst[ev.Kind]; ev.Recovery() >= 0 && (!ok || ev.Recovery() > w.Recovery()) {
			worst[ev.Kind] = ev
		}
	}
	var out []string
	for _, kind := range Kinds {
		ev, ok := worst[kind]
		if !ok || len(ev.Stragglers) == 0 {
			continue
		}
		s := fmt.Sprintf("%s at +%v (%s), recovered %v after its end; last to finish:", kind,
			ev.At.Sub(t0).Round(time.Millisecond), ev.Detail, ev.Recovery().Round(time.Millisecond))
		for _, id := range ev.Stragglers[:min(2, len(ev.Stragglers))] {
			s += "\n      " + c.explain(ctx, id, t0)
		}
		out = append(out, s)
	}
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
