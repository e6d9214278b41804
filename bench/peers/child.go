package peers

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// EnvChild names the role a re-executed copy of this program plays: the
// coordinator starts the sink and the peers' workers as processes of their
// own (the same executable: a binary, or a test binary), so that /proc
// counts each one's CPU time apart.
const EnvChild = "NOTIFYD_PEERS_CHILD"

// Child roles.
const (
	roleSink  = "sink"
	roleRiver = "river"
	roleAsynq = "asynq"
	roleRaw   = "raw"
)

// MaybeChild runs this process as the child the environment names, and exits;
// without EnvChild it returns at once. A main (or a TestMain) calls it first.
func MaybeChild() {
	role := os.Getenv(EnvChild)
	if role == "" {
		return
	}
	var err error
	switch role {
	case roleSink:
		err = runSink(os.Args[1:])
	case roleRiver:
		err = runRiver(os.Args[1:])
	case roleAsynq:
		err = runAsynq(os.Args[1:])
	case roleRaw:
		err = runRaw(os.Args[1:])
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "peers %s: %v\n", role, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// workerFlags are what every worker child takes.
type workerFlags struct {
	fs          *flag.FlagSet
	sink        string
	concurrency int
}

func newWorkerFlags(role string) *workerFlags {
	w := &workerFlags{fs: flag.NewFlagSet(role, flag.ContinueOnError)}
	w.fs.StringVar(&w.sink, "sink", "", "the sink's base URL")
	w.fs.IntVar(&w.concurrency, "concurrency", 64, "workers")
	return w
}

func (w *workerFlags) parse(args []string) error {
	if err := w.fs.Parse(args); err != nil {
		return err
	}
	if w.sink == "" {
		return errors.New("-sink is required")
	}
	return nil
}

func warnLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// riverArgs is the River job: one notification.
type riverArgs struct{ job }

func (riverArgs) Kind() string { return "deliver" }

type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	p *poster
}

func (w *riverWorker) Work(ctx context.Context, j *river.Job[riverArgs]) error {
	return w.p.post(ctx, j.Args.job, j.Attempt, j.CreatedAt)
}

// riverWorkers registers the one job kind (the coordinator's insert-only
// client registers it too).
func riverWorkers(p *poster) *river.Workers {
	ws := river.NewWorkers()
	river.AddWorker(ws, &riverWorker{p: p})
	return ws
}

// runRiver is River's worker process: a River client working the default
// queue with -concurrency workers, each POSTing its job to the sink.
func runRiver(args []string) error {
	w := newWorkerFlags(roleRiver)
	pg := w.fs.String("postgres", "", "the River database's URL")
	maxConns := w.fs.Int("max-conns", 16, "Postgres pool size")
	cooldown := w.fs.Duration("fetch-cooldown", river.FetchCooldownDefault, "River's FetchCooldown")
	poll := w.fs.Duration("fetch-poll", river.FetchPollIntervalDefault, "River's FetchPollInterval")
	if err := w.parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	pc, err := pgxpool.ParseConfig(*pg)
	if err != nil {
		return err
	}
	pc.MaxConns = int32(*maxConns)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return err
	}
	defer pool.Close()
	p := newPoster(w.sink, w.concurrency)
	defer p.close()
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: w.concurrency}},
		Workers:           riverWorkers(p),
		FetchCooldown:     *cooldown,
		FetchPollInterval: *poll,
		Logger:            warnLogger(),
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	fmt.Println("ready")
	waitStdinClosed()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return client.Stop(sctx)
}

// asynqTask is the asynq task type.
const asynqTask = "deliver"

// asynqJob is the asynq payload: the job and when it was enqueued (River
// keeps that in the row; asynq's handler does not see it).
type asynqJob struct {
	job
	CreatedNs int64 `json:"created_ns"`
}

// runAsynq is asynq's worker process: a server on the default queue with
// -concurrency workers, each POSTing its task to the sink.
func runAsynq(args []string) error {
	w := newWorkerFlags(roleAsynq)
	addr := w.fs.String("redis", "127.0.0.1:6379", "Redis address")
	db := w.fs.Int("db", 0, "Redis DB number")
	poolSize := w.fs.Int("pool-size", 0, "Redis connections (0: asynq's default)")
	taskCheck := w.fs.Duration("task-check", time.Second, "asynq's TaskCheckInterval")
	delayedCheck := w.fs.Duration("delayed-check", 5*time.Second, "asynq's DelayedTaskCheckInterval")
	if err := w.parse(args); err != nil {
		return err
	}
	p := newPoster(w.sink, w.concurrency)
	defer p.close()
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: *addr, DB: *db, PoolSize: *poolSize}, asynq.Config{
		Concurrency:              w.concurrency,
		Queues:                   map[string]int{"default": 1},
		TaskCheckInterval:        *taskCheck,
		DelayedTaskCheckInterval: *delayedCheck,
		LogLevel:                 asynq.WarnLevel,
		ShutdownTimeout:          10 * time.Second,
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc(asynqTask, func(ctx context.Context, t *asynq.Task) error {
		var j asynqJob
		if err := json.Unmarshal(t.Payload(), &j); err != nil {
			return fmt.Errorf("%w: %v", asynq.SkipRetry, err)
		}
		retried, _ := asynq.GetRetryCount(ctx)
		return p.post(ctx, j.job, retried+1, time.Unix(0, j.CreatedNs))
	})
	if err := srv.Start(mux); err != nil {
		return err
	}
	fmt.Println("ready")
	waitStdinClosed()
	srv.Shutdown()
	return nil
}

// runRaw is the raw baseline's process: at -at it POSTs -n envelopes from
// -concurrency goroutines, no queue at all (a failed POST is tried again,
// up to 3 times), prints "done", and waits to be told to exit, so its CPU
// time can still be read.
func runRaw(args []string) error {
	w := newWorkerFlags(roleRaw)
	n := w.fs.Int("n", 50_000, "POSTs")
	at := w.fs.Int64("at", 0, "when to start, unix ns (the burst's T)")
	if err := w.parse(args); err != nil {
		return err
	}
	due := time.Unix(0, *at)
	p := newPoster(w.sink, w.concurrency)
	defer p.close()
	fmt.Println("ready")
	time.Sleep(time.Until(due))
	created := due.Add(-time.Second)
	var (
		next   atomic.Int64
		failed atomic.Int64
		wg     sync.WaitGroup
	)
	ctx := context.Background()
	for range w.concurrency {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(*n) {
					return
				}
				j := jobAt(int(i), due)
				var err error
				for attempt := 1; attempt <= 3; attempt++ {
					if err = p.post(ctx, j, attempt, created); err == nil {
						break
					}
				}
				if err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("done failed=%d\n", failed.Load())
	waitStdinClosed()
	return nil
}
