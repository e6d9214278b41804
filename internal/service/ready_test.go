package service_test

import (
	"sync"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/service"
)

// /readyz is open to anyone and each check pings Postgres and Redis and
// asks every plugin for its health. Probes that arrive together share one
// check, and its answer serves the next service.ReadyReuse: a flood of
// probes costs one check, not one each (it cost one each: 64 probes, 64
// Postgres pings and 64 health calls to every plugin).
func TestReadiness_ProbesShareOneCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const probes = 64
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, probes)
	for range probes {
		wg.Go(func() {
			<-start
			out, err := b.ops.Readiness(b.ctx)
			if err != nil {
				errs <- err
				return
			}
			if out.Checks["postgres"] != "ok" {
				t.Errorf("checks %v, want postgres ok", out.Checks)
			}
			out.Checks["postgres"] = "changed by a caller" // each caller has its own map
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Readiness: %v", err)
	}
	// The probes may straddle the end of one check on a busy machine, and
	// the reuse window: at most a few checks, never one a probe.
	if got := service.ReadyChecks(b.ops); got < 1 || got > 3 {
		t.Errorf("%d probes ran %d checks, want 1 (a few at most)", probes, got)
	}
	out, err := b.ops.Readiness(b.ctx)
	if err != nil || out.Checks["postgres"] != "ok" {
		t.Errorf("after the probes: %v %v, want postgres ok (a caller's change is its own)", out.Checks, err)
	}

	// Past the reuse window a probe runs a fresh check.
	before := service.ReadyChecks(b.ops)
	deadline := time.Now().Add(30 * time.Second)
	for service.ReadyChecks(b.ops) == before {
		if time.Now().After(deadline) {
			t.Fatalf("no new check %v after the last one", 30*time.Second)
		}
		time.Sleep(service.ReadyReuse / 4)
		if _, err := b.ops.Readiness(b.ctx); err != nil {
			t.Fatal(err)
		}
	}

}
