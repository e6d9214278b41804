package delivery_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk"
)

// sendGate is a plain provider whose sends wait for the test: each Send blocks
// until open is closed (or its deadline passes, when hang is set), and the
// provider keeps how many were in flight at once and what each attempt of
// each message saw.
type sendGate struct {
	open chan struct{}
	hang bool // the first call waits for its deadline, whatever open does
	fast bool // the first call succeeds at once, whatever open does

	mu       sync.Mutex
	inFlight int
	maxIn    int
	calls    int
	seen     map[int64][]int // id → the attempts it was sent with
}

func newSendGate() *sendGate { return &sendGate{open: make(chan struct{}), seen: map[int64][]int{}} }

func (*sendGate) Describe() sdk.Info { return sdk.Info{Name: "gate", Version: "1"} }

func (g *sendGate) Configure(context.Context, sdk.ConfigureRequest) (sdk.Sender, error) {
	return sdk.SenderFunc(func(ctx context.Context, msg sdk.Message) sdk.Verdict {
		g.mu.Lock()
		g.inFlight++
		g.maxIn = max(g.maxIn, g.inFlight)
		g.calls++
		first := g.calls == 1
		g.seen[msg.ID] = append(g.seen[msg.ID], msg.Attempt)
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			g.inFlight--
			g.mu.Unlock()
		}()
		if g.hang && first {
			<-ctx.Done()
			return sdk.Transient(ctx.Err().Error())
		}
		if g.fast && first {
			return sdk.Success(nil)
		}
		select {
		case <-g.open:
			return sdk.Success(nil)
		case <-ctx.Done():
			return sdk.Transient(ctx.Err().Error())
		}
	}), nil
}

func (g *sendGate) state() (inFlight, maxIn int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight, g.maxIn
}

// holdsDepth waits until the shut gate holds concurrency sends in flight
// and the channel has depth rows PROCESSING (in flight and claimed ahead),
// checks for a quarter second that it claims no further, then opens the gate:
// every one of ids SENT, sent once, never more than concurrency in flight.
func (g *sendGate) holdsDepth(t *testing.T, b *bundle, ids []int64, concurrency, depth int) {
	t.Helper()
	g.holdsDepthIn(t, b, ids, concurrency, depth, depth)
}

// holdsDepthIn is holdsDepth for a depth from least to most.
func (g *sendGate) holdsDepthIn(t *testing.T, b *bundle, ids []int64, concurrency, least, most int) {
	t.Helper()
	depth := most
	var last string
	ok := func() bool {
		in, _ := g.state()
		counts := b.statusCounts()
		last = fmt.Sprintf("in flight %d, rows by status %v", in, counts)
		p := counts[outbox.StatusProcessing]
		return in == concurrency && p >= int64(least) && p <= int64(most)
	}
	deadline := time.Now().Add(15 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("never %d in flight and %d to %d claimed; last seen: %s", concurrency, least, most, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 5 {
		time.Sleep(50 * time.Millisecond)
		if got := b.statusCounts()[outbox.StatusProcessing]; got > int64(depth) {
			t.Fatalf("%d rows PROCESSING, want at most %d (in flight and claimed ahead)", got, depth)
		}
	}
	close(g.open)
	for _, id := range ids {
		if nt := b.wait(id, 30*time.Second); nt.Status != outbox.StatusSent {
			t.Fatalf("notification %d: %s (%s), want SENT", id, nt.Status, nt.LastError)
		}
	}
	if _, maxIn := g.state(); maxIn > concurrency {
		t.Errorf("the provider had %d sends in flight at once, over concurrency %d", maxIn, concurrency)
	}
	g.sentOnce(t, ids)
}

// sentOnce checks that the provider was sent each of ids exactly once.
func (g *sendGate) sentOnce(t *testing.T, ids []int64) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range ids {
		if got := g.seen[id]; len(got) != 1 {
			t.Errorf("notification %d was sent %d times (attempts %v), want once", id, len(got), got)
		}
	}
}

// startSendGate runs an engine whose test channel is the sendGate provider, in
// process, with ch's concurrency, batch size and timeout.
func startSendGate(t *testing.T, b *bundle, g *sendGate, concurrency, batch int, timeout time.Duration) {
	t.Helper()
	cfg := *b.cfg
	ch := b.cfg.Channels[testChannel]
	ch.Plugin, ch.Config = "gate", nil
	ch.Concurrency, ch.BatchSize, ch.Timeout = concurrency, batch, timeout
	cfg.Channels = map[string]config.Channel{testChannel: ch}
	b.startInProcess(&cfg, map[string]sdk.Provider{"gate": g})
}

// TestEngine_PrefetchWithinConcurrency: a plain plugin's channel claims
// messages ahead of the ones in flight — so the next claim overlaps the
// sends — while the provider never has more than concurrency in flight at
// once; before any call has returned it claims min(batch_size, concurrency)
// ahead, not Prefetch (batch_size).
func TestEngine_PrefetchWithinConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t, newSink(t, nil))
	const concurrency, batch, n = 2, 8, 12
	if got := delivery.Prefetch(config.Channel{Concurrency: concurrency, BatchSize: batch}); got != batch {
		t.Fatalf("Prefetch(concurrency %d, batch_size %d) = %d, want %d", concurrency, batch, got, batch)
	}
	ids := b.sendMany(n, func(int) string { return "someone" })
	g := newSendGate()
	startSendGate(t, b, g, concurrency, batch, 30*time.Second)

	// Two in flight, two more claimed and waiting for a send permit: four
	// PROCESSING, and no more while the sendGate stays shut.
	g.holdsDepth(t, b, ids, concurrency, 2*concurrency)
}

// TestEngine_PrefetchDeepensAfterFastCalls: once a call has returned well
// within half the timeout, a plain plugin's channel claims up to Prefetch
// (batch_size) ahead of what is in flight, and still never has more than
// concurrency in flight.
func TestEngine_PrefetchDeepensAfterFastCalls(t *testing.T) {
	t.Parallel()
	b := setup(t, newSink(t, nil))
	const concurrency, batch, n = 2, 8, 14
	g := newSendGate()
	g.fast = true
	// Full depth needs the last call under a quarter of timeout/2 (ahead:
	// concurrency for every half timeout it took): beside a test suite and
	// two CPU burners the first call, which returns at once, took 4–5 s, so
	// a 30 s timeout claimed 6 ahead, not 8 (rehearsal 45). Two minutes keep
	// "fast" anything under 15 s.
	startSendGate(t, b, g, concurrency, batch, 2*time.Minute)
	first := b.sendMany(1, func(int) string { return "someone" })
	if nt := b.wait(first[0], 30*time.Second); nt.Status != outbox.StatusSent {
		t.Fatalf("the first notification: %s (%s), want SENT", nt.Status, nt.LastError)
	}
	ids := b.sendMany(n, func(int) string { return "someone" })

	// Two in flight, batch_size more claimed and waiting for a permit — or
	// up to 2 × concurrency − 1 fewer: at full depth a fetcher holding a
	// whole part ahead waits to claim twice concurrency at once (gather),
	// so when the rows reached Redis in waves (a loaded machine's relay),
	// the last claim may wait for slots the shut gate never frees (seen:
	// 8 of 10 PROCESSING, 6 QUEUED, in a loaded run of the package). Not
	// deepened, it would hold 2 × concurrency (4).
	g.holdsDepthIn(t, b, ids, concurrency, concurrency+batch-(2*concurrency-1), concurrency+batch)
}

// TestEngine_PrefetchGathersAcrossPartitions: with batch_size four times
// concurrency and fast calls, a channel's fetchers claim at full depth and
// wait to claim twice concurrency at once (gather); over four partitions,
// each with its fetcher, and two instances, everything is still sent exactly
// once — no fetcher holding part of the slots it waits for stalls another.
func TestEngine_PrefetchGathersAcrossPartitions(t *testing.T) {
	t.Parallel()
	s := newSink(t, nil)
	b := setup(t, s, func(_ *config.Config, ch *config.Channel) {
		ch.Partitions, ch.Concurrency, ch.BatchSize = 4, 4, 16
		ch.Timeout = 30 * time.Second // no send reaches its deadline, even beside CPU burners
		ch.Config["timeout"] = "30s"
	})
	for i := range 2 {
		b.engine(fmt.Sprintf("inst%d", i), delivery.Hooks{})
	}
	const n = 2000
	b.sendMany(n, func(i int) string { return fmt.Sprintf("r%d", i) })
	counts := b.waitAll(90 * time.Second)
	if counts[outbox.StatusSent] != n {
		t.Fatalf("statuses %v, want %d SENT", counts, n)
	}
	if ids, dups := s.distinct(); ids != n || dups != 0 {
		t.Errorf("sink saw %d distinct with %d duplicates, want %d and 0", ids, dups, n)
	}
}

// TestEngine_PrefetchStartsWithinTimeout: a message claimed ahead waits for
// a send permit, but its send must start within the channel's timeout of its
// claim (the stale-claim takeover, after twice the timeout and a lease,
// counts on it). With concurrency 1 and the first send hanging until its
// deadline, the message claimed beside it gets its permit a whole timeout
// after the claim: it is not sent, its attempt says why, and it is retried
// and sent on the next one.
func TestEngine_PrefetchStartsWithinTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, newSink(t, nil))
	ids := b.sendMany(2, func(int) string { return "someone" }) // written first: one relay, one fetch, one claim
	g := newSendGate()
	g.hang = true
	close(g.open) // every send after the first succeeds at once
	// 2 s, not less: every later attempt must also be answered within the
	// timeout, and beside CPU burners a 500 ms one once ran out before the
	// open gate's answer came back (a third attempt, "deadline exceeded").
	startSendGate(t, b, g, 1, 2, 2*time.Second)

	var notSent int64
	for _, id := range ids {
		nt := b.wait(id, 30*time.Second)
		if nt.Status != outbox.StatusSent {
			t.Fatalf("notification %d: %s (%s), want SENT", id, nt.Status, nt.LastError)
		}
		if len(nt.Attempts) != 2 || nt.Attempts[0].Outcome != outbox.OutcomeTransient {
			t.Fatalf("notification %d: attempts %+v, want a transient first and a success", id, nt.Attempts)
		}
		if strings.Contains(nt.Attempts[0].Error, "timeout (2s) had passed since its claim before a send slot was free") {
			notSent = id
		}
	}
	if notSent == 0 {
		t.Fatalf("neither notification's first attempt says it waited past the timeout for a send slot")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if got := g.seen[notSent]; len(got) != 1 || got[0] != 2 {
		t.Errorf("the notification that waited was sent with attempts %v, want only attempt 2", got)
	}
	if g.maxIn > 1 {
		t.Errorf("%d sends in flight at once, over concurrency 1", g.maxIn)
	}
}

// stallSettles makes every settle of b's outbox (PROCESSING to anything
// else) wait in Postgres — as a Postgres waiting on its disk would hold
// them — until the returned func is called (also at the test's end); claims
// (QUEUED to PROCESSING) go on.
func stallSettles(t *testing.T, b *bundle) (release func()) {
	t.Helper()
	ctx := context.Background()
	if _, err := b.store.Pool().Exec(ctx, `
		CREATE FUNCTION stall_settles() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF OLD.status = 'PROCESSING' AND NEW.status <> 'PROCESSING' THEN
				PERFORM pg_advisory_xact_lock_shared(7201);
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER stall_settles BEFORE UPDATE ON notifications FOR EACH ROW EXECUTE FUNCTION stall_settles();`); err != nil {
		t.Fatal(err)
	}
	lock, err := b.store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `SELECT pg_advisory_xact_lock(7201)`); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if err := lock.Rollback(ctx); err != nil {
				t.Errorf("release the stalled settles: %v", err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// waitCapped waits until sent() reaches bound, then checks for half a second
// that it goes no further: what a channel sends while none of its verdicts
// can be committed.
func waitCapped(t *testing.T, sent func() int, bound int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a guard: the wait ends at the bound
	for sent() < bound {
		if time.Now().After(deadline) {
			t.Fatalf("%d sends, never the %d the slots allow", sent(), bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 10 {
		time.Sleep(50 * time.Millisecond)
		if got := sent(); got > bound {
			t.Fatalf("%d messages sent while no verdict could be committed, want at most the channel's slots' worth (%d)", got, bound)
		}
	}
}

// TestEngine_UncommittedBoundedBySlots: a message the provider took holds its
// send slot until its verdict is committed, so while the settles cannot
// commit the channel sends at most its slots — concurrency + Prefetch — and
// then waits: those are all a crash then could send twice. Before, the slot
// went back with the verdict to the settle queue, and a stalled commit let a
// channel send hundreds more, each one resent after a kill -9 (one run of
// `make chaos` counted 527 duplicates after a single kill).
func TestEngine_UncommittedBoundedBySlots(t *testing.T) {
	t.Parallel()
	b := setup(t, newSink(t, nil))
	const concurrency, batch, n = 2, 4, 60
	bound := concurrency + delivery.Prefetch(config.Channel{Concurrency: concurrency, BatchSize: batch})
	release := stallSettles(t, b)
	ids := b.sendMany(n, func(int) string { return "someone" })
	g := newSendGate()
	close(g.open) // every send succeeds at once
	startSendGate(t, b, g, concurrency, batch, 30*time.Second)

	waitCapped(t, func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.calls
	}, bound)
	release()
	for _, id := range ids {
		if nt := b.wait(id, 30*time.Second); nt.Status != outbox.StatusSent {
			t.Fatalf("notification %d: %s (%s), want SENT", id, nt.Status, nt.LastError)
		}
	}
	g.sentOnce(t, ids)
}

// TestEngine_UncommittedBoundedBySlots_batching: the same for a batching
// plugin, whose slots are its calls: while no verdict can be committed it
// sends at most its slots' calls of batch_size messages.
func TestEngine_UncommittedBoundedBySlots_batching(t *testing.T) {
	t.Parallel()
	s := newBatchSink(t, nil, nil)
	const concurrency, batch, n = 2, 4, 60
	b := setupBatching(t, s, func(_ *config.Config, ch *config.Channel) {
		ch.Concurrency, ch.BatchSize = concurrency, batch
	})
	bound := b.cfg.Channels[testChannel].Slots(true) * batch
	release := stallSettles(t, b)
	// Every row queued before the engine starts: rows enqueued while it
	// runs can reach a fetch one at a time on a loaded host, and two calls
	// of one message each held both slots for good, their verdicts
	// uncommitted (rehearsal 67: "2 sends, never the 8").
	ids := b.sendMany(n, func(i int) string { return fmt.Sprintf("r%d", i) })
	b.engine("a", delivery.Hooks{})

	waitCapped(t, func() int {
		sizes, _ := s.requests()
		total := 0
		for _, k := range sizes {
			total += k
		}
		return total
	}, bound)
	release()
	if counts := b.waitAll(60 * time.Second); counts[outbox.StatusSent] != int64(len(ids)) {
		t.Fatalf("statuses %v, want all %d SENT", counts, len(ids))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if got := s.accepted[id]; got != 1 {
			t.Errorf("notification %d accepted %d times, want once", id, got)
		}
	}
}
