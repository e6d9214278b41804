package lifecycle_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/notifyd/notifyd/internal/lifecycle"
	"github.com/notifyd/notifyd/internal/testenv"
)

// part records its start and stop in a shared log; stop blocks until its
// context ends when slow is set. stopping, when set, is closed as Stop
// begins.
type part struct {
	name     string
	log      *[]string
	mu       *sync.Mutex
	startErr error
	slow     bool
	killed   bool
	stopCtx  context.Context
	stopping chan struct{}
}

func (p *part) Start(context.Context) error {
	p.record("start " + p.name)
	return p.startErr
}

func (p *part) Stop(ctx context.Context) error {
	p.stopCtx = ctx
	if p.stopping != nil {
		close(p.stopping)
	}
	if p.slow {
		<-ctx.Done()
		p.record("stop " + p.name + " (late)")
		return ctx.Err()
	}
	p.record("stop " + p.name)
	return nil
}

func (p *part) record(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	*p.log = append(*p.log, s)
}

type killable struct{ *part }

func (k killable) Kill() { k.killed = true; k.record("kill " + k.name) }

func TestGroup(t *testing.T) {
	var (
		log []string
		mu  sync.Mutex
	)
	mk := func(name string) *part { return &part{name: name, log: &log, mu: &mu} }
	ctx := context.Background()

	t.Run("starts in order, stops in reverse, releases resources last-acquired-first", func(t *testing.T) {
		log = nil
		g := lifecycle.NewGroup(nil)
		g.Defer("pool", func(context.Context) error { mu.Lock(); log = append(log, "release pool"); mu.Unlock(); return nil })
		for _, n := range []string{"engine", "schedules", "api"} {
			if err := g.Start(ctx, n, mk(n)); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		want := []string{"start engine", "start schedules", "start api", "stop api", "stop schedules", "stop engine", "release pool"}
		if !slices.Equal(log, want) {
			t.Errorf("got %q, want %q", log, want)
		}
		log = nil
		if err := g.Stop(ctx); err != nil || len(log) != 0 {
			t.Errorf("a second Stop: %v, ran %q; want nothing", err, log)
		}
	})

	t.Run("a part that fails to start is not stopped; what started before is", func(t *testing.T) {
		log = nil
		g := lifecycle.NewGroup(nil)
		if err := g.Start(ctx, "engine", mk("engine")); err != nil {
			t.Fatal(err)
		}
		bad := mk("api")
		bad.startErr = errors.New("listen: address in use")
		if err := g.Start(ctx, "api", bad); err == nil || err.Error() != "listen: address in use" {
			t.Fatalf("Start = %v, want the part's error", err)
		}
		if err := g.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		want := []string{"start engine", "start api", "stop engine"}
		if !slices.Equal(log, want) {
			t.Errorf("got %q, want %q", log, want)
		}
	})

	t.Run("a bound shortens one part's stop; a killer out of time is killed; later steps still run", func(t *testing.T) {
		log = nil
		g := lifecycle.NewGroup(nil)
		released := false
		g.Defer("pool", func(ctx context.Context) error {
			if ctx.Err() != nil {
				t.Error("the pool's release got a context that had already ended")
			}
			released = true
			return nil
		})
		engine := killable{mk("engine")}
		engine.slow = true
		engine.stopping = make(chan struct{})
		if err := g.Start(ctx, "engine", engine); err != nil {
			t.Fatal(err)
		}
		api := mk("api")
		api.slow = true
		if err := g.Start(ctx, "api", api, lifecycle.Bound(time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		stopCtx, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		// The engine's own stop context is the group's: end it once the
		// engine is waiting on it (the API's bound ended long before). Not
		// sooner: a group whose context has already ended gives the next
		// step a fresh Grace instead (a rehearsal under CPU burners once
		// cancelled between the API's stop and the engine's, when the
		// test waited for the API's "stop api (late)" instead).
		go func() {
			select {
			case <-engine.stopping:
				cancel()
			case <-stopCtx.Done():
			}
		}()
		err := g.Stop(stopCtx)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, context.Canceled) {
			t.Errorf("Stop = %v, want the API's deadline and the engine's cancellation, joined", err)
		}
		if d, ok := api.stopCtx.Deadline(); !ok || time.Until(d) > time.Minute {
			t.Errorf("the API's stop context has deadline %v (set %v), want its 1 ms bound", d, ok)
		}
		if !engine.killed {
			t.Error("the engine's stop ran out of time and it was not killed")
		}
		if !released {
			t.Error("the pool was not released after the engine ran out of time")
		}
		want := []string{"start engine", "start api", "stop api (late)", "stop engine (late)", "kill engine"}
		if !slices.Equal(log, want) {
			t.Errorf("got %q, want %q", log, want)
		}
	})
}

// TestGroup_StopThatIgnoresItsContext: a release that does not take a
// context — pgxpool's Close, which waits for every connection it lent to
// come back — held Stop for as long as one connection stayed out (a part
// stopped out of time, a goroutine stuck on a query): Stop never returned,
// so neither did serve after SIGTERM and shutdown.hard_timeout, and the
// steps after it (the instance lock, the span exporter) were never run. A
// step that has not returned a second after its context ended is left
// behind, named in the error, and the next step runs.
func TestGroup_StopThatIgnoresItsContext(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := testenv.Context(t)
	pool, err := pgxpool.New(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	held, err := pool.Acquire(ctx) // lent and never given back
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release() // after the test: the Close left behind then returns
	g := lifecycle.NewGroup(nil)
	released := make(chan struct{})
	g.Defer("lock", func(context.Context) error { close(released); return nil })
	g.Defer("postgres", func(context.Context) error { pool.Close(); return nil })
	stopCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.Stop(stopCtx) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "stop postgres") {
			t.Errorf("Stop = %v; want an error naming the step left behind", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Stop has not returned a minute after its 100 ms context ended")
	}
	select {
	case <-released:
	default:
		t.Error("the step after the one left behind was not run")
	}
}
