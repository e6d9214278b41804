package peers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/notifyd/notifyd/internal/bench"
	"github.com/notifyd/notifyd/internal/outbox"
)

// notifydSys is the real daemon, bin/notifyd serve, with its webhook plugin
// (a child of the daemon), on its own database and Redis DB. The burst is
// written into its outbox the way notifyd-bench's burst writes it: outbox.Insert
// in one transaction, every row due at T, keyed as a schedule run keys them.
type notifydSys struct {
	daemon *proc
	pool   *pgxpool.Pool
	store  *outbox.Store
}

func (s *notifydSys) lead() time.Duration { return time.Second }
func (s *notifydSys) usesRedis() bool     { return true }

func (s *notifydSys) groups() []group {
	return []group{{name: "notifyd", pids: []int{s.daemon.pid()}}, {name: "plugin", pids: children(s.daemon.pid())}}
}

func (s *notifydSys) start(ctx context.Context, r *run) error {
	o := r.c.o
	if err := r.createDB(ctx); err != nil {
		return err
	}
	if _, err := r.redisDB(ctx, o.RedisDB); err != nil {
		return err
	}
	listen, err := freeAddr()
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(`postgres: {url: %q}
redis: {url: %q, prefix: notifyd}
plugins: {dir: %q}
http: {listen: %q}
log: {level: warn}
channels:
  %s:
    plugin: webhook
    config: {url: %q, timeout: 10s}
    concurrency: %d
    batch_size: %d
`, r.appURL("peers-notifyd"), fmt.Sprintf("redis://%s/%d", o.RedisAddr, o.RedisDB), o.PluginsDir, listen,
		bench.Channel, r.sinkURL+HookPath, o.Concurrency, o.Batch)
	path := filepath.Join(o.WorkDir, fmt.Sprintf("notifyd-%s.yaml", randHex(3)))
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return err
	}
	// Only the generated config: no NOTIFYD_ variable of the caller's may
	// override a key.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NOTIFYD_") {
			env = append(env, kv)
		}
	}
	if s.daemon, err = startDaemon(o.WorkDir, o.NotifydBin, env, "serve", "--config", path); err != nil {
		return err
	}
	r.procs = append(r.procs, s.daemon)
	r.onClose(func(context.Context) error { return s.daemon.stop(45 * time.Second) })
	if err := waitReady(ctx, s.daemon, "http://"+listen+"/readyz"); err != nil {
		return err
	}
	if s.pool, err = openPool(ctx, r.dbURL, "peers-coordinator", 4); err != nil {
		return err
	}
	r.onClose(func(context.Context) error { s.pool.Close(); return nil })
	s.store = outbox.New(s.pool)
	return nil
}

// waitReady polls the daemon's /readyz until it answers 200: migrated,
// Redis up, the channel's plugin started.
func waitReady(ctx context.Context, p *proc, url string) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if err := p.exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("notifyd not ready within a minute (%v): %s", err, p.tail())
		}
		sleepCtx(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func (s *notifydSys) prepare(ctx context.Context, r *run, due time.Time) (commit, abort func(context.Context) error, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	payload := bench.Payload()
	batch := make([]outbox.NewNotification, 0, outbox.MaxInsertBatch)
	for i := 0; i < r.c.o.N; {
		batch = batch[:0]
		for ; i < r.c.o.N && len(batch) < outbox.MaxInsertBatch; i++ {
			j := jobAt(i, due)
			batch = append(batch, outbox.NewNotification{
				Channel: bench.Channel, Recipient: j.Recipient, Payload: payload, DueAt: due, IdempotencyKey: j.Key,
			})
		}
		if _, err := outbox.Insert(ctx, tx, batch); err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			return nil, nil, fmt.Errorf("insert the burst: %w", err)
		}
	}
	return tx.Commit, tx.Rollback, nil
}

func (s *notifydSys) settle(ctx context.Context, r *run) error {
	return poll(ctx, func() (bool, error) {
		c, err := s.store.CountByStatus(ctx)
		if err != nil {
			return false, err
		}
		sent, failed := c[bench.Channel][outbox.StatusSent], c[bench.Channel][outbox.StatusFailed]
		if failed > 0 {
			return false, fmt.Errorf("%d notifications FAILED", failed)
		}
		return sent >= int64(r.c.o.N), nil
	})
}

// riverSys is a River client in a process of its own, working the default
// queue with Concurrency workers on its own database.
type riverSys struct {
	pool   *pgxpool.Pool
	worker *proc
	client *river.Client[pgx.Tx] // insert-only: no queues
}

// lead: River's scheduler makes a scheduled job available up to 5 s before
// its time, every 5 s; 6 s ahead, it has done so by T.
func (s *riverSys) lead() time.Duration { return 6 * time.Second }
func (s *riverSys) usesRedis() bool     { return false }

func (s *riverSys) groups() []group {
	return []group{{name: "river", pids: []int{s.worker.pid()}}}
}

func (s *riverSys) start(ctx context.Context, r *run) error {
	o := r.c.o
	if err := r.createDB(ctx); err != nil {
		return err
	}
	var err error
	if s.pool, err = openPool(ctx, r.dbURL, "peers-coordinator", 4); err != nil {
		return err
	}
	r.onClose(func(context.Context) error { s.pool.Close(); return nil })
	migrator, err := rivermigrate.New(riverpgxv5.New(s.pool), nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate River's schema: %w", err)
	}
	if s.client, err = river.NewClient(riverpgxv5.New(s.pool), &river.Config{Workers: riverWorkers(nil), Logger: warnLogger()}); err != nil {
		return err
	}
	if s.worker, _, err = startRole(ctx, o.WorkDir, roleRiver,
		"-postgres", r.appURL("peers-river"), "-sink", r.sinkURL, "-concurrency", strconv.Itoa(o.Concurrency),
		"-fetch-cooldown", o.RiverFetchCooldown.String(), "-fetch-poll", o.RiverFetchPoll.String()); err != nil {
		return err
	}
	r.procs = append(r.procs, s.worker)
	r.onClose(func(context.Context) error { return s.worker.stop(20 * time.Second) })
	// The scheduler runs on the leader only.
	return poll(ctx, func() (bool, error) {
		if err := s.worker.exited(); err != nil {
			return false, err
		}
		var n int
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM river_leader WHERE expires_at > now()`).Scan(&n)
		return n > 0, err
	})
}

func (s *riverSys) prepare(ctx context.Context, r *run, due time.Time) (commit, abort func(context.Context) error, err error) {
	params := make([]river.InsertManyParams, r.c.o.N)
	opts := &river.InsertOpts{ScheduledAt: due}
	for i := range params {
		params[i] = river.InsertManyParams{Args: riverArgs{jobAt(i, due)}, InsertOpts: opts}
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	if _, err := s.client.InsertManyFastTx(ctx, tx, params); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, nil, fmt.Errorf("insert the burst: %w", err)
	}
	return tx.Commit, tx.Rollback, nil
}

func (s *riverSys) settle(ctx context.Context, r *run) error {
	return poll(ctx, func() (bool, error) {
		var done, bad int
		err := s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'completed'),
			count(*) FILTER (WHERE state IN ('discarded', 'cancelled')) FROM river_job`).Scan(&done, &bad)
		if err == nil && bad > 0 {
			err = fmt.Errorf("%d River jobs discarded or cancelled", bad)
		}
		return done >= r.c.o.N, err
	})
}

// asynqSys is an asynq server in a process of its own, on its own Redis DB
// (RedisDB+1), with Concurrency workers.
type asynqSys struct {
	worker    *proc
	client    *asynq.Client
	inspector *asynq.Inspector
}

func (s *asynqSys) lead() time.Duration { return time.Second }
func (s *asynqSys) usesRedis() bool     { return true }

func (s *asynqSys) groups() []group {
	return []group{{name: "asynq", pids: []int{s.worker.pid()}}}
}

func (s *asynqSys) start(ctx context.Context, r *run) error {
	o := r.c.o
	db := o.RedisDB + 1
	if _, err := r.redisDB(ctx, db); err != nil {
		return err
	}
	opt := asynq.RedisClientOpt{Addr: o.RedisAddr, DB: db, PoolSize: 16}
	s.client, s.inspector = asynq.NewClient(opt), asynq.NewInspector(opt)
	r.onClose(func(context.Context) error { s.inspector.Close(); return s.client.Close() })
	var err error
	if s.worker, _, err = startRole(ctx, o.WorkDir, roleAsynq,
		"-redis", o.RedisAddr, "-db", strconv.Itoa(db), "-pool-size", strconv.Itoa(o.AsynqPoolSize),
		"-sink", r.sinkURL, "-concurrency", strconv.Itoa(o.Concurrency),
		"-task-check", o.AsynqTaskCheck.String(), "-delayed-check", o.AsynqDelayedCheck.String()); err != nil {
		return err
	}
	r.procs = append(r.procs, s.worker)
	r.onClose(func(context.Context) error { return s.worker.stop(20 * time.Second) })
	return nil
}

func (s *asynqSys) prepare(ctx context.Context, r *run, due time.Time) (commit, abort func(context.Context) error, err error) {
	created := time.Now().UnixNano()
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	// asynq enqueues one task per call: 16 at a time.
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= r.c.o.N {
					return
				}
				body, _ := json.Marshal(asynqJob{job: jobAt(i, due), CreatedNs: created})
				if _, err := s.client.EnqueueContext(ctx, asynq.NewTask(asynqTask, body), asynq.ProcessAt(due)); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	abort = func(context.Context) error {
		_, err := s.inspector.DeleteAllScheduledTasks("default")
		return err
	}
	if first != nil {
		_ = abort(ctx)
		return nil, nil, fmt.Errorf("enqueue the burst: %w", first)
	}
	return func(context.Context) error { return nil }, abort, nil
}

func (s *asynqSys) settle(ctx context.Context, r *run) error {
	return poll(ctx, func() (bool, error) {
		q, err := s.inspector.GetQueueInfo("default")
		if err != nil {
			return false, err
		}
		if q.Archived > 0 {
			return false, fmt.Errorf("%d asynq tasks archived (failed)", q.Archived)
		}
		return q.Pending+q.Active+q.Scheduled+q.Retry == 0, nil
	})
}

// rawSys is the baseline: a process POSTing the N envelopes from T, no
// queue at all.
type rawSys struct {
	client *proc
}

func (s *rawSys) lead() time.Duration { return time.Second }
func (s *rawSys) usesRedis() bool     { return false }

func (s *rawSys) groups() []group { return []group{{name: "raw", pids: []int{s.client.pid()}}} }

func (s *rawSys) start(context.Context, *run) error { return nil }

func (s *rawSys) prepare(ctx context.Context, r *run, due time.Time) (commit, abort func(context.Context) error, err error) {
	o := r.c.o
	if s.client, _, err = startRole(ctx, o.WorkDir, roleRaw, "-sink", r.sinkURL, "-n", strconv.Itoa(o.N),
		"-concurrency", strconv.Itoa(o.Concurrency), "-at", strconv.FormatInt(due.UnixNano(), 10)); err != nil {
		return nil, nil, err
	}
	p := s.client
	r.procs = append(r.procs, p)
	r.onClose(func(context.Context) error { return p.stop(20 * time.Second) })
	abort = func(context.Context) error {
		r.procs = r.procs[:len(r.procs)-1]
		return p.stop(20 * time.Second)
	}
	return func(context.Context) error { return nil }, abort, nil
}

func (s *rawSys) settle(ctx context.Context, r *run) error {
	line, err := s.client.waitLine(ctx, "done", stall)
	if err != nil {
		return err
	}
	if line != "done failed=0" {
		return fmt.Errorf("raw client: %s", line)
	}
	return nil
}

// poll calls f every 20 ms until it says done or fails, for at most the
// stall time.
func poll(ctx context.Context, f func() (bool, error)) error {
	deadline := time.Now().Add(stall)
	for {
		done, err := f()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %s", stall)
		}
		sleepCtx(ctx, 20*time.Millisecond)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// freeAddr is a loopback address with a port nobody listens on (yet).
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
