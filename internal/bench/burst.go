package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime/pprof"
	"slices"
	"strconv"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
)

// insertChunk is how many notifications one outbox.Insert writes.
const insertChunk = outbox.MaxInsertBatch

// dueMargin is how long after the inserts commit the burst falls due, so
// the inserts' own load has passed when the pipeline starts.
const dueMargin = 2 * time.Second

// burstStall fails the burst when the sink sees nothing new for this long.
const burstStall = 60 * time.Second

// payload is every bench notification's payload: a daily quiz, the size of
// a typical templated message.
var payload = json.RawMessage(`{"title":"Daily quiz #1042","text":"Which planet has the most moons?","choices":["Jupiter","Saturn","Uranus","Neptune"],"link":"https://quiz.example/1042"}`)

// Burst is the result of the burst phase.
type Burst struct {
	N          int       `json:"n"`
	Delivered  int       `json:"delivered"`  // distinct notifications the sink saw
	Duplicates int       `json:"duplicates"` // deliveries beyond the first per notification
	DueAt      time.Time `json:"due_at"`     // T: when all N fell due
	// InsertSeconds is how long writing the N rows took (one transaction).
	InsertSeconds float64 `json:"insert_seconds"`
	// FirstMs and LastMs: the first and the last delivery, after T.
	FirstMs float64 `json:"first_ms"`
	LastMs  float64 `json:"last_ms"`
	// SettledMs: every row SENT in Postgres, after T.
	SettledMs  float64 `json:"settled_ms"`
	Throughput float64 `json:"throughput_per_s"` // N / (last - T)
	Latency    Dist    `json:"due_to_delivered"`
	Stages     Stages  `json:"stages"`
	// ByInstance is how many notifications each instance handed to its
	// plugin (a retried one counts again).
	ByInstance []int `json:"by_instance"`
	Sent       int64 `json:"sent"`   // rows SENT at the end
	Failed     int64 `json:"failed"` // rows FAILED at the end (should be 0)
	// CPU is the CPU time each process group used from T until the last
	// delivery, and how busy the whole machine was meanwhile.
	CPU  CPUUsage   `json:"cpu"`
	Load [3]float64 `json:"load_at_end"`
}

// burst inserts N notifications due at one instant T, waits until the sink
// has seen them all, and measures.
func (e *env) burst(ctx context.Context) (Burst, error) {
	n := e.o.N
	b := Burst{N: n}
	e.sink.Reset()
	// Rows already settled (an earlier burst, the history phase's).
	sent0, failed0, err := e.statusCounts(ctx)
	if err != nil {
		return b, err
	}

	due, took, err := e.insertBurst(ctx, n)
	if err != nil {
		return b, err
	}
	b.DueAt, b.InsertSeconds = due, took.Seconds()
	e.progress("burst: %d notifications inserted in %s, due at %s", n, took.Round(time.Millisecond), due.Format("15:04:05.000"))

	// Wait for T, then measure from it.
	if d := time.Until(due); d > 0 {
		sleepCtx(ctx, d)
	}
	e.tracer.reset(false)
	cpu0 := e.sampleCPU(ctx)
	if err := writeAllocs(e.o.MemProfileBase); err != nil {
		return b, err
	}
	if e.o.CPUProfile != nil {
		if err := pprof.StartCPUProfile(e.o.CPUProfile); err != nil {
			return b, fmt.Errorf("bench: start CPU profile: %w", err)
		}
	}
	err = e.waitSink(ctx, n)
	cpu1 := e.sampleCPU(ctx)
	if e.o.CPUProfile != nil {
		pprof.StopCPUProfile()
	}
	if werr := writeAllocs(e.o.MemProfile); werr != nil && err == nil {
		err = werr
	}
	b.CPU = cpu1.since(cpu0)
	b.Load = loadAvg()
	counts := e.sink.Counts()
	b.Delivered, b.Duplicates = counts.Distinct, counts.Duplicates
	if err != nil {
		return b, fmt.Errorf("bench: burst: the sink saw %d of %d notifications: %w", counts.Distinct, n, err)
	}

	arrivals := e.sink.Arrivals()
	lat := make([]time.Duration, 0, len(arrivals))
	for _, at := range arrivals {
		lat = append(lat, at.Sub(due))
	}
	slices.Sort(lat)
	b.Latency = distOf(lat)
	b.Stages = e.tracer.stages(due)
	b.FirstMs, b.LastMs = ms(lat[0]), ms(lat[len(lat)-1])
	if last := lat[len(lat)-1]; last > 0 {
		b.Throughput = float64(n) / last.Seconds()
	}
	e.progress("burst: all %d delivered %s after T; waiting for every row to be SENT", n, lat[len(lat)-1].Round(time.Millisecond))

	settled, err := e.waitSettled(ctx, sent0+failed0+int64(n))
	b.SettledMs = ms(settled.Sub(due))
	if err != nil {
		return b, err
	}
	b.Sent, b.Failed, err = e.statusCounts(ctx)
	if err != nil {
		return b, err
	}
	b.Sent, b.Failed = b.Sent-sent0, b.Failed-failed0
	// Settling can only add deliveries if something was retried. An
	// instance counts a batch when its plugin answers, after the sink saw it,
	// so its counts are read now that every row settled.
	b.ByInstance = e.tracer.sent()
	counts = e.sink.Counts()
	b.Delivered, b.Duplicates = counts.Distinct, counts.Duplicates
	return b, nil
}

// writeAllocs writes the process's allocation profile to w (none when w is
// nil).
func writeAllocs(w io.Writer) error {
	if w == nil {
		return nil
	}
	if err := pprof.Lookup("allocs").WriteTo(w, 0); err != nil {
		return fmt.Errorf("bench: write allocation profile: %w", err)
	}
	return nil
}

// insertBurst writes n notifications due at one instant, in one
// transaction, so they become visible together and — if writing them took
// longer than planned and T came too close — can be rolled back and written
// again with a later T.
func (e *env) insertBurst(ctx context.Context, n int) (due time.Time, took time.Duration, err error) {
	perRow := 100 * time.Microsecond // a first guess: 10k rows/s on a busy 2-core machine
	for attempt := 1; ; attempt++ {
		start := time.Now()
		due = start.Add(time.Duration(n)*perRow + dueMargin).Truncate(time.Millisecond)
		tx, err := e.app.Begin(ctx)
		if err != nil {
			return due, 0, fmt.Errorf("bench: begin the burst's insert: %w", err)
		}
		fire := strconv.FormatInt(due.Unix(), 10)
		batch := make([]outbox.NewNotification, 0, insertChunk)
		for i := 0; i < n; {
			batch = batch[:0]
			for ; i < n && len(batch) < insertChunk; i++ {
				r := e.recipient(i)
				batch = append(batch, outbox.NewNotification{
					Channel: Channel, Recipient: r, Payload: payload, DueAt: due,
					// As a schedule run keys them: schedule:fire-time:recipient.
					IdempotencyKey: "daily-quiz:" + fire + ":" + r, TraceParent: e.traceParent(),
				})
			}
			if _, err := outbox.Insert(ctx, tx, batch); err != nil {
				_ = tx.Rollback(context.WithoutCancel(ctx))
				return due, 0, fmt.Errorf("bench: insert the burst: %w", err)
			}
		}
		took = time.Since(start)
		if time.Until(due) < dueMargin/2 && attempt < 3 {
			// Too slow for the planned T: try again with room to spare.
			_ = tx.Rollback(ctx)
			perRow = 2 * took / time.Duration(n)
			e.progress("burst: inserting took %s, too close to the planned T; again with a later T", took.Round(time.Millisecond))
			continue
		}
		if err := tx.Commit(ctx); err != nil {
			return due, 0, fmt.Errorf("bench: commit the burst's insert: %w", err)
		}
		return due, time.Since(start), nil
	}
}

// waitSink waits until the sink has seen n distinct notifications, failing
// when it sees nothing new for burstStall.
func (e *env) waitSink(ctx context.Context, n int) error {
	done := make(chan error, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { done <- e.sink.WaitDistinct(wctx, n) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, lastChange := 0, time.Now()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			c := e.sink.Counts().Distinct
			if c != last {
				last, lastChange = c, time.Now()
				continue
			}
			if time.Since(lastChange) > burstStall {
				return fmt.Errorf("no new delivery for %s", burstStall)
			}
		}
	}
}

// waitSettled polls until want rows are terminal and returns when it saw
// that.
func (e *env) waitSettled(ctx context.Context, want int64) (time.Time, error) {
	deadline := time.Now().Add(burstStall)
	for {
		sent, failed, err := e.statusCounts(ctx)
		if err != nil {
			return time.Now(), err
		}
		if sent+failed >= want {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Now(), fmt.Errorf("bench: only %d of %d rows settled (SENT %d, FAILED %d) %s after the sink saw them all", sent+failed, want, sent, failed, burstStall)
		}
		sleepCtx(ctx, 20*time.Millisecond)
		if ctx.Err() != nil {
			return time.Now(), ctx.Err()
		}
	}
}

// statusCounts counts the bench channel's SENT and FAILED rows, from the
// maintained counts (outbox.CountByStatus): a scan would cost seconds per
// poll beside a large history.
func (e *env) statusCounts(ctx context.Context) (sent, failed int64, err error) {
	c, err := e.store.CountByStatus(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("bench: count settled rows: %w", err)
	}
	return c[Channel][outbox.StatusSent], c[Channel][outbox.StatusFailed], nil
}

func recipient(i int) string { return fmt.Sprintf("user-%07d", i) }

// recipient is the burst's i-th recipient: a phone number on the AlimTalk
// path (the fake partner counts deliveries by number).
func (e *env) recipient(i int) string {
	if e.o.Provider == ProviderAlimtalk {
		return fmt.Sprintf("010%08d", i)
	}
	return recipient(i)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
