package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// fate is what the model (standing in for Postgres) decided for an id.
type fate uint8

const (
	open fate = iota
	acked
	deadLettered
)

// model is the test's stand-in for Postgres: which ids were ever pushed and
// which reached a terminal state. Finality is recorded before the Redis ack
// or dead (as the pipeline commits SENT/FAILED first), and pushes skip final
// ids under the same lock (as the sweeper only pushes unfinished rows), so a
// push never resurrects an id after its fate is decided.
type model struct {
	mu     sync.Mutex
	pushed map[int64]bool
	fate   map[int64]fate
}

// decide makes f the fate of id if it has none yet, and reports whether it
// did: one check-and-set, as the pipeline's claim is one statement.
func (m *model) decide(id int64, f fate) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fate[id] != open {
		return false
	}
	m.fate[id] = f
	return true
}

func (m *model) fateOf(id int64) fate {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fate[id]
}

func (m *model) pushedSnapshot() map[int64]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[int64]bool, len(m.pushed))
	for id := range m.pushed {
		out[id] = true
	}
	return out
}

func (m *model) fateSnapshot() map[int64]fate {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[int64]fate, len(m.fate))
	for id, f := range m.fate {
		out[id] = f
	}
	return out
}

// snapshotScript reads every list and set of one channel in one atomic step.
// Test only: it finds the processing lists with KEYS, which a Cluster would
// refuse.
var snapshotScript = redis.NewScript(`
local base = ARGV[1]
local procs = redis.call('KEYS', base .. 'processing:*')
local out = {
  redis.call('LRANGE', base .. 'ready', 0, -1),
  redis.call('ZRANGE', base .. 'delayed', 0, -1),
  redis.call('LRANGE', base .. 'dead', 0, -1),
  redis.call('SMEMBERS', base .. 'members'),
}
for _, k in ipairs(procs) do
  out[#out + 1] = redis.call('LRANGE', k, 0, -1)
end
return out
`)

type snapshot struct {
	ready, delayed, dead, members []int64
	processing                    [][]int64
}

func takeSnapshot(ctx context.Context, q *Queue, channel string) (snapshot, error) {
	res, err := snapshotScript.Run(ctx, q.c, nil, q.keys(channel).base).Slice()
	if err != nil {
		return snapshot{}, err
	}
	lists := make([][]int64, len(res))
	for i, r := range res {
		if lists[i], err = parseIDs(r); err != nil {
			return snapshot{}, err
		}
	}
	return snapshot{ready: lists[0], delayed: lists[1], dead: lists[2], members: lists[3], processing: lists[4:]}, nil
}

// check verifies the queue's invariants against the model: pushed is read
// before the snapshot was taken, fates after.
func (s snapshot) check(pushed map[int64]bool, fates map[int64]fate) []string {
	var errs []string
	where := map[int64][]string{}
	note := func(name string, ids []int64) {
		for _, id := range ids {
			where[id] = append(where[id], name)
		}
	}
	note("ready", s.ready)
	note("delayed", s.delayed)
	for i, p := range s.processing {
		note(fmt.Sprintf("processing#%d", i), p)
	}
	queued := map[int64]bool{}
	for id := range where {
		queued[id] = true
	}
	note("dead", s.dead)

	for id, places := range where {
		if len(places) > 1 {
			errs = append(errs, fmt.Sprintf("id %d is in %v at once", id, places))
		}
	}
	members := map[int64]bool{}
	for _, id := range s.members {
		members[id] = true
		if !queued[id] {
			errs = append(errs, fmt.Sprintf("id %d is a member but in no ready, delayed or processing list", id))
		}
	}
	for id := range queued {
		if !members[id] {
			errs = append(errs, fmt.Sprintf("id %d is queued (%v) but not a member", id, where[id]))
		}
	}
	for _, id := range s.dead {
		if fates[id] != deadLettered {
			errs = append(errs, fmt.Sprintf("id %d is dead-lettered but its fate is %d", id, fates[id]))
		}
	}
	for id := range pushed {
		if fates[id] == open && !queued[id] {
			errs = append(errs, fmt.Sprintf("id %d is unfinished but lost: in %v", id, where[id]))
		}
	}
	if len(errs) > 20 {
		errs = append(errs[:20], fmt.Sprintf("… and %d more", len(errs)-20))
	}
	return errs
}

// TestQueue_Model runs instances that push, fetch, ack, retry, dead-letter,
// promote and reap at once while some crash (forgetting what they held and
// no longer renewing) or stall past their lease and act late, and checks
// after every step of a snapshotter and at the end that no id is ever in two
// places, members is exactly what is queued, and no unfinished id is lost.
func TestQueue_Model(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const (
		channel = "model"
		ids     = 20000
		slots   = 4
		ttl     = 80 * time.Millisecond
		// The run lasts duration, and longer until it has exercised every
		// kind of event (exercised, below) — a busy machine does fewer in
		// the same time —, at most longest.
		duration = 3 * time.Second
		longest  = time.Minute
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	m := &model{pushed: map[int64]bool{}, fate: map[int64]fate{}}
	ctx, stop := context.WithTimeout(b.ctx, longest)
	defer stop()

	var (
		wg       sync.WaitGroup
		statsMu  sync.Mutex
		stats    = map[string]int{}
		failOnce sync.Once
	)
	count := func(what string, n int) {
		statsMu.Lock()
		stats[what] += n
		statsMu.Unlock()
	}
	fail := func(format string, args ...any) {
		failOnce.Do(stop)
		t.Errorf(format, args...)
	}
	// ok reports whether err is nothing or the run ending.
	ok := func(what string, err error) bool {
		if err == nil {
			return true
		}
		if ctx.Err() == nil {
			fail("%s: %v", what, err)
		}
		return false
	}
	exercised := []string{"fetched", "acked", "retried", "dead", "reaped", "promoted", "crashes", "stalls", "late", "resumed", "snapshots"}
	go func() {
		start := time.Now()
		for ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			if time.Since(start) < duration {
				continue
			}
			statsMu.Lock()
			all := true
			for _, what := range exercised {
				all = all && stats[what] > 0
			}
			statsMu.Unlock()
			if all {
				stop()
			}
		}
	}()
	stream := uint64(0)
	loop := func(every time.Duration, fn func(r *rand.Rand) bool) {
		stream++
		r := rand.New(rand.NewPCG(seed, stream))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && fn(r) {
				time.Sleep(every)
			}
		}()
	}

	for range 2 {
		loop(2*time.Millisecond, func(r *rand.Rand) bool {
			batch := make([]Item, 0, 64)
			for range 1 + r.IntN(64) {
				it := Item{ID: 1 + r.Int64N(ids)}
				if r.IntN(5) == 0 {
					it.Due = time.Now().Add(time.Duration(r.IntN(30)) * time.Millisecond)
				}
				batch = append(batch, it)
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			batch = dropFinal(batch, m.fate)
			_, err := b.q.Push(ctx, channel, batch)
			if err == nil {
				for _, it := range batch {
					m.pushed[it.ID] = true
				}
				count("pushed", len(batch))
			}
			return ok("push", err)
		})
	}
	for range 2 {
		loop(7*time.Millisecond, func(*rand.Rand) bool {
			n, err := b.q.Reap(ctx, channel, time.Now())
			count("reaped", n)
			return ok("reap", err)
		})
	}
	loop(3*time.Millisecond, func(r *rand.Rand) bool {
		n, err := b.q.Promote(ctx, channel, time.Now(), 1+r.IntN(200))
		count("promoted", n)
		return ok("promote", err)
	})
	loop(40*time.Millisecond, func(*rand.Rand) bool {
		pushed := m.pushedSnapshot()
		s, err := takeSnapshot(ctx, b.q, channel)
		if !ok("snapshot", err) {
			return false
		}
		if errs := s.check(pushed, m.fateSnapshot()); len(errs) > 0 {
			fail("invariants broken mid-run:\n%s", strings.Join(errs, "\n"))
			return false
		}
		count("snapshots", 1)
		return true
	})
	for slot := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 1000+uint64(slot)))
			// The first time an incarnation crashes holding ids, the next
			// comes back at once under the same instance id, well inside the
			// lease: every run exercises resuming its own list, however the
			// random down times fall on a busy machine.
			resumeAs, resumedOnce := "", false
			for incarnation := 0; ctx.Err() == nil; incarnation++ {
				instance := fmt.Sprintf("slot%d", slot)
				if r.IntN(4) == 0 { // no configured instance.id: a fresh one
					instance = fmt.Sprintf("slot%d-%d", slot, incarnation)
				}
				if resumeAs != "" {
					instance, resumeAs = resumeAs, ""
				}
				w := &modelWorker{q: b.q, m: m, r: r, channel: channel, instance: instance, ttl: ttl, count: count, fail: ok}
				w.run(ctx, time.Duration(100+r.IntN(600))*time.Millisecond)
				count("crashes", 1)
				if !resumedOnce && len(w.held) > 0 {
					resumeAs, resumedOnce = instance, true
					continue
				}
				// Down for a while: mostly back before the lease runs out,
				// to resume its own list; sometimes after the reaper took it.
				time.Sleep(time.Duration(r.IntN(int(2*ttl/time.Millisecond))) * time.Millisecond / 2)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// The end state, then a drain: every lease expires, every delay is due,
	// and one last instance finishes everything.
	pushed := m.pushedSnapshot()
	s, err := takeSnapshot(b.ctx, b.q, channel)
	if err != nil {
		t.Fatal(err)
	}
	if errs := s.check(pushed, m.fateSnapshot()); len(errs) > 0 {
		t.Fatalf("invariants broken at the end:\n%s", strings.Join(errs, "\n"))
	}
	far := time.Now().Add(time.Hour)
	if _, err := b.q.Reap(b.ctx, channel, far); err != nil {
		t.Fatal(err)
	}
	if _, err := b.q.Promote(b.ctx, channel, far, ids*2); err != nil {
		t.Fatal(err)
	}
	b.renew(t, channel, "drain")
	for {
		got := b.fetch(t, channel, "drain", 500)
		if len(got) == 0 {
			break
		}
		for _, id := range got {
			m.decide(id, acked)
		}
		if err := b.q.Ack(b.ctx, channel, "drain", got); err != nil {
			t.Fatal(err)
		}
	}
	s, err = takeSnapshot(b.ctx, b.q, channel)
	if err != nil {
		t.Fatal(err)
	}
	fates := m.fateSnapshot()
	if errs := s.check(pushed, fates); len(errs) > 0 {
		t.Fatalf("invariants broken after the drain:\n%s", strings.Join(errs, "\n"))
	}
	if len(s.ready)+len(s.delayed)+len(s.members) > 0 {
		t.Errorf("after the drain: ready %d, delayed %d, members %d; want all 0", len(s.ready), len(s.delayed), len(s.members))
	}
	for i, p := range s.processing {
		if len(p) > 0 {
			t.Errorf("after the drain processing#%d holds %s", i, short(p))
		}
	}
	for id := range pushed {
		if fates[id] == open {
			t.Errorf("id %d was pushed but never finished", id)
		}
	}
	t.Logf("%d ids pushed (%d distinct), %d dead-lettered, stats %v", stats["pushed"], len(pushed), len(s.dead), stats)
	for _, what := range exercised {
		if stats[what] == 0 {
			t.Errorf("the run never exercised %q; stats %v", what, stats)
		}
	}
}

// dropFinal keeps the items whose id has no fate yet.
func dropFinal(batch []Item, fates map[int64]fate) []Item {
	out := batch[:0]
	for _, it := range batch {
		if fates[it.ID] == open {
			out = append(out, it)
		}
	}
	return out
}

// modelWorker is one incarnation of an instance: it renews its lease on its
// own timer, resumes its processing list (read, not deleted), fetches and
// settles, sometimes holds ids for a while, sometimes stalls past its lease
// and then settles late, and at the end "crashes": stops renewing and
// forgets everything it held.
type modelWorker struct {
	q        *Queue
	m        *model
	r        *rand.Rand
	channel  string
	instance string
	ttl      time.Duration
	count    func(string, int)
	fail     func(string, error) bool // reports a real error
	ctx      context.Context          // this incarnation's life
	held     []int64
	stalled  bool // has stalled once: its first chance to stall holding ids is taken
}

// ok reports whether err is nothing; an error after the incarnation's end
// is its crash, anything else fails the test.
func (w *modelWorker) ok(what string, err error) bool {
	if err == nil {
		return true
	}
	if w.ctx.Err() != nil {
		return false
	}
	return w.fail(w.instance+": "+what, err)
}

func (w *modelWorker) run(parent context.Context, life time.Duration) {
	ctx, cancel := context.WithTimeout(parent, life)
	defer cancel()
	w.ctx = ctx
	var stalled sync.Mutex // held while the lease is not renewed
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		for ctx.Err() == nil {
			stalled.Lock()
			err := w.q.Renew(ctx, w.channel, w.instance, w.ttl)
			stalled.Unlock()
			if !w.ok("renew", err) {
				return
			}
			time.Sleep(w.ttl / 4)
		}
	}()
	defer func() { <-renewed }()

	pending, err := w.q.Pending(ctx, w.channel, w.instance)
	if !w.ok("pending", err) {
		return
	}
	w.count("resumed", len(pending))
	w.settle(ctx, pending)

	for ctx.Err() == nil {
		// Stall past the lease, then act late: at random, and the first
		// time it holds ids, so every run exercises acting late however
		// few rounds a busy machine lets it play.
		if len(w.held) > 0 && (w.r.IntN(40) == 0 || !w.stalled) {
			w.stalled = true
			stalled.Lock()
			time.Sleep(w.ttl + time.Duration(w.r.IntN(100))*time.Millisecond)
			w.count("stalls", 1)
			w.count("late", len(w.held))
			late := w.held
			w.held = nil
			w.settle(ctx, late)
			stalled.Unlock()
			continue
		}
		got, err := w.q.Fetch(ctx, w.channel, w.instance, 1+w.r.IntN(50), 20*time.Millisecond)
		if errors.Is(err, ErrNoLease) {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if !w.ok("fetch", err) {
			return
		}
		w.count("fetched", len(got))
		if len(got) > 0 && w.r.IntN(30) == 0 {
			return // crash between fetch and settle, the worst moment
		}
		w.settle(ctx, got)
	}
}

// settle decides each id like the delivery pipeline would: one already
// finished is only acked (the claim finds it terminal); others are sent and
// acked, dead-lettered, retried, or held for later.
func (w *modelWorker) settle(ctx context.Context, ids []int64) {
	var ack, dead []int64
	var retry []Item
	for _, id := range ids {
		if w.m.fateOf(id) != open {
			ack = append(ack, id)
			continue
		}
		switch n := w.r.IntN(20); {
		case n < 10:
			w.m.decide(id, acked)
			ack = append(ack, id)
		case n < 12:
			// Another worker holding the id too (this one stalled past its
			// lease) may have finished it since fateOf: then it is only
			// acked, as the claim would find it terminal.
			if w.m.decide(id, deadLettered) {
				dead = append(dead, id)
			} else {
				ack = append(ack, id)
			}
		case n < 17:
			retry = append(retry, Item{ID: id, Due: time.Now().Add(time.Duration(w.r.IntN(25)) * time.Millisecond)})
		default:
			w.held = append(w.held, id)
		}
	}
	if len(w.held) > 0 && w.r.IntN(4) == 0 { // finish what was held
		for _, id := range w.held {
			w.m.decide(id, acked)
		}
		ack = append(ack, w.held...)
		w.held = nil
	}
	if w.ok("ack", w.q.Ack(ctx, w.channel, w.instance, ack)) {
		w.count("acked", len(ack))
	}
	if w.ok("retry", w.q.Retry(ctx, w.channel, w.instance, retry)) {
		w.count("retried", len(retry))
	}
	if w.ok("dead", w.q.Dead(ctx, w.channel, w.instance, dead)) {
		w.count("dead", len(dead))
	}
}
