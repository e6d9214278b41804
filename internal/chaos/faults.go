package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Fault kinds, as the report names them.
const (
	KillNotifyd     = "kill -9 notifyd, restart"
	TermNotifyd     = "SIGTERM notifyd, restart"
	PauseNotifyd    = "SIGSTOP notifyd, SIGCONT"
	KillPlugin      = "kill -9 plugin"
	PausePlugin     = "SIGSTOP plugin, SIGCONT"
	RedisFlushAll   = "Redis FLUSHALL"
	RedisRestart    = "Redis kill -9, restart (empty)"
	PostgresRestart = "Postgres restart -m immediate"
	LatencyRedis    = "toxiproxy latency → Redis"
	LatencyPostgres = "toxiproxy latency → Postgres"
	TimeoutRedis    = "toxiproxy timeout → Redis"
	TimeoutPostgres = "toxiproxy timeout → Postgres"
	ResetRedis      = "toxiproxy reset_peer → Redis"
	ResetPostgres   = "toxiproxy reset_peer → Postgres"
)

// Kinds is every fault kind, the order the schedule cycles through (shuffled
// per cycle).
var Kinds = []string{
	KillNotifyd, TermNotifyd, PauseNotifyd, KillPlugin, PausePlugin, RedisFlushAll, RedisRestart, PostgresRestart,
	LatencyRedis, LatencyPostgres, TimeoutRedis, TimeoutPostgres, ResetRedis, ResetPostgres,
}

// BugError is a fault whose handling showed a bug in notifyd (e.g. a
// graceful stop that never finished), as opposed to a fault that could not
// be injected.
type BugError struct{ What string }

// Error is the injected bug's description.
func (e *BugError) Error() string { return e.What }

// Event is one injected fault.
type Event struct {
	Kind   string
	Target string
	Detail string

	At       time.Time // injected
	HealedAt time.Time // the fault ended: process back, toxic removed
	// InFlight is how many notifications were unfinished (not SENT or
	// FAILED) when the fault came; RecoveredAt is when the last of them
	// finished. -1: the snapshot failed (Postgres was down).
	InFlight    int
	RecoveredAt time.Time
	Stragglers  []int64 // the last of them to finish
	Err         error
	// Duplicates is how many duplicates went out after this fault and
	// before the next one (Report.attribute).
	Duplicates int

	ids []int64
}

// Recovery is how long after the fault ended the work it caught took to
// finish: zero when it finished before.
func (e *Event) Recovery() time.Duration {
	if e.RecoveredAt.IsZero() || e.HealedAt.IsZero() {
		return -1
	}
	return max(0, e.RecoveredAt.Sub(e.HealedAt))
}

// Schedule injects a fault every Every (±50%), cycling through Kinds in a
// random order per cycle.
type Schedule struct {
	C     *Cluster
	Every time.Duration
	Rand  *rand.Rand
	Logf  func(format string, args ...any)

	mu     sync.Mutex
	events []*Event
	busy   map[string]bool // targets with a fault in progress
	wg     sync.WaitGroup
}

// Run injects faults until ctx ends, then waits for the ones in progress to
// heal.
func (s *Schedule) Run(ctx context.Context) {
	s.busy = map[string]bool{}
	var cycle []string
	for {
		d := s.Every/2 + time.Duration(s.Rand.Int64N(int64(s.Every)))
		select {
		case <-ctx.Done():
			s.wg.Wait()
			return
		case <-time.After(d):
		}
		if len(cycle) == 0 {
			cycle = append(cycle, Kinds...)
			s.Rand.Shuffle(len(cycle), func(i, j int) { cycle[i], cycle[j] = cycle[j], cycle[i] })
		}
		// The first kind whose target is free; the rest wait for later.
		for i, kind := range cycle {
			target := s.target(kind)
			if target == "" {
				continue
			}
			cycle = append(cycle[:i], cycle[i+1:]...)
			s.start(ctx, kind, target)
			break
		}
	}
}

// target picks a free target for kind and marks it busy; "" when none.
func (s *Schedule) target(kind string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var candidates []string
	switch kind {
	case KillNotifyd, TermNotifyd, PauseNotifyd, KillPlugin, PausePlugin:
		for _, in := range s.C.Instances {
			candidates = append(candidates, in.Name)
		}
	case RedisFlushAll, RedisRestart:
		// The server, or in cluster mode one master ("redis-2").
		for _, rs := range s.C.Redis {
			candidates = append(candidates, rs.Name)
		}
	case PostgresRestart:
		candidates = []string{"postgres"}
	case LatencyRedis, TimeoutRedis, ResetRedis:
		// The proxy in front of the server, or of one master.
		for _, rs := range s.C.Redis {
			candidates = append(candidates, rs.Name+"-proxy")
		}
	default:
		candidates = []string{"postgres-proxy"}
	}
	var free []string
	for _, c := range candidates {
		if !s.busy[c] {
			free = append(free, c)
		}
	}
	if len(free) == 0 {
		return ""
	}
	t := free[s.Rand.IntN(len(free))]
	s.busy[t] = true
	return t
}

func (s *Schedule) start(ctx context.Context, kind, target string) {
	ids := s.C.unfinished(ctx)
	ev := &Event{Kind: kind, Target: target, InFlight: -1, At: time.Now(), ids: ids}
	if ids != nil {
		ev.InFlight = len(ids)
	}
	s.mu.Lock()
	s.events = append(s.events, ev)
	// Durations are drawn here, from the schedule's own generator, so a
	// seed replays the same schedule.
	down := 200*time.Millisecond + time.Duration(s.Rand.Int64N(int64(1800*time.Millisecond)))
	pick := s.Rand.Uint64()
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		detail, healed, err := s.inject(kind, target, down, pick)
		if healed.IsZero() {
			healed = time.Now()
		}
		s.mu.Lock()
		ev.Detail, ev.HealedAt, ev.Err = detail, healed, err
		s.busy[target] = false
		s.mu.Unlock()
		if err != nil {
			s.Logf("chaos: %s on %s failed: %v", kind, target, err)
		} else {
			s.Logf("chaos: %s on %s (%s), %d unfinished at the time", kind, target, detail, len(ids))
		}
	}()
}

// inject applies one fault and, for faults that last, ends it after down.
// It returns what it did and when the fault ended (zero: at return).
func (s *Schedule) inject(kind, target string, down time.Duration, pick uint64) (detail string, healed time.Time, err error) {
	c := s.C
	ctx := context.Background()
	switch kind {
	case KillNotifyd:
		in := c.instance(target)
		detail = fmt.Sprintf("down %v", down.Round(time.Millisecond))
		if !in.Kill9() {
			detail = "was not running"
		}
		time.Sleep(down)
		return detail, time.Now(), in.Start()
	case TermNotifyd:
		in := c.instance(target)
		status, took, ok := in.Terminate(30 * time.Second)
		detail = fmt.Sprintf("stopped in %v (%s), down %v", took.Round(time.Millisecond), status, down.Round(time.Millisecond))
		var bug error
		switch {
		case !ok:
			bug = &BugError{fmt.Sprintf("graceful stop of %s did not finish in 30s; killed", target)}
		case status != "exit 0" && status != "not running":
			bug = &BugError{fmt.Sprintf("graceful stop of %s ended with %s", target, status)}
		}
		time.Sleep(down)
		if err := in.Start(); err != nil {
			return detail, time.Now(), err
		}
		return detail, time.Now(), bug
	case PauseNotifyd:
		// Frozen (a long GC pause, a stalled VM) for up to well past the
		// lease: others reap its backup list while it lives.
		in := c.instance(target)
		pause := time.Second + time.Duration(pick%uint64(7*time.Second))
		if err := in.Signal(syscall.SIGSTOP); err != nil {
			return "was not running", healed, nil
		}
		time.Sleep(pause)
		return fmt.Sprintf("frozen %v", pause.Round(time.Millisecond)), time.Now(), in.Signal(syscall.SIGCONT)
	case KillPlugin, PausePlugin:
		kids := c.instance(target).Children()
		if len(kids) == 0 {
			return "no plugin running", healed, nil
		}
		pid := kids[pick%uint64(len(kids))]
		if kind == KillPlugin {
			return fmt.Sprintf("pid %d", pid), healed, syscall.Kill(pid, syscall.SIGKILL)
		}
		// A hung plugin: sends hit their deadline; the host may restart it.
		pause := time.Second + time.Duration(pick%uint64(5*time.Second))
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return "plugin gone", healed, nil
		}
		time.Sleep(pause)
		_ = syscall.Kill(pid, syscall.SIGCONT) // it may have been restarted (killed) meanwhile
		return fmt.Sprintf("pid %d frozen %v", pid, pause.Round(time.Millisecond)), time.Now(), nil
	case RedisFlushAll:
		rs := c.redisServer(target)
		if c.Setup.RedisCluster {
			detail = fmt.Sprintf("master %s only: its slots' keys gone", rs.Addr)
		}
		return detail, healed, rs.FlushAll(ctx)
	case RedisRestart:
		rs := c.redisServer(target)
		rs.Kill()
		time.Sleep(down)
		err := rs.Start()
		detail = fmt.Sprintf("down %v", down.Round(time.Millisecond))
		if c.Setup.RedisCluster {
			detail = fmt.Sprintf("master %s down %v, rejoined empty", rs.Addr, down.Round(time.Millisecond))
		}
		return detail, time.Now(), err
	case PostgresRestart:
		err := c.Postgres.RestartImmediate(ctx)
		return "", time.Now(), err
	}
	// Network faults, through the proxy in front of the service (in
	// cluster mode: of one master; the target names it).
	px := c.PGProxy
	if target != "postgres-proxy" {
		px = c.redisProxy(target)
	}
	var t Toxic
	last := 2*time.Second + time.Duration(pick%uint64(3*time.Second))
	switch kind {
	case LatencyRedis, LatencyPostgres:
		ms := 50 + int(pick%250)
		t = Toxic{Type: "latency", Attributes: map[string]any{"latency": ms, "jitter": ms / 2}}
		detail = fmt.Sprintf("%dms ±%dms for %v", ms, ms/2, last.Round(time.Millisecond))
	case TimeoutRedis, TimeoutPostgres:
		// Data stops flowing and the connection is closed after the
		// timeout, as a partition that ends in a reset.
		ms := 500 + int(pick%2000)
		t = Toxic{Type: "timeout", Attributes: map[string]any{"timeout": ms}}
		detail = fmt.Sprintf("stall %dms then close, for %v", ms, last.Round(time.Millisecond))
	case ResetRedis, ResetPostgres:
		last = 300*time.Millisecond + time.Duration(pick%uint64(1200*time.Millisecond))
		t = Toxic{Type: "reset_peer", Attributes: map[string]any{"timeout": 0}}
		detail = fmt.Sprintf("every connection reset for %v", last.Round(time.Millisecond))
	default:
		return "", healed, fmt.Errorf("unknown fault kind %q", kind)
	}
	if c.Setup.RedisCluster && target != "postgres-proxy" {
		detail += ", " + strings.TrimSuffix(target, "-proxy") + " only"
	}
	name, err := px.Add(t)
	if err != nil {
		return detail, healed, err
	}
	time.Sleep(last)
	healed = time.Now()
	return detail, healed, px.Remove(name)
}

// Events returns a copy of the faults injected so far.
func (s *Schedule) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Event, len(s.events))
	for i, ev := range s.events {
		out[i] = *ev
		out[i].ids = nil
	}
	return out
}

// Track polls until ctx ends, marking each event recovered once every
// notification it caught has finished. The last few to finish are kept as
// the event's stragglers, for the report to explain.
func (s *Schedule) Track(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		var open []*Event
		var sets [][]int64
		for _, ev := range s.events {
			if ev.ids != nil && ev.RecoveredAt.IsZero() {
				open = append(open, ev)
				sets = append(sets, ev.ids)
			}
		}
		s.mu.Unlock()
		for i, ev := range open {
			left, err := s.C.stillUnfinished(ctx, sets[i])
			if err != nil {
				break // Postgres is down; next tick
			}
			s.mu.Lock()
			if len(left) == 0 {
				ev.RecoveredAt = time.Now()
				ev.Stragglers = ev.ids[:min(len(ev.ids), 3)]
			} else {
				ev.ids = left
			}
			s.mu.Unlock()
		}
	}
}

// redisServer is the Redis server (cluster mode: master) a target names.
func (c *Cluster) redisServer(name string) *RedisServer {
	for _, rs := range c.Redis {
		if rs.Name == name {
			return rs
		}
	}
	panic("chaos: no Redis server " + name)
}

// redisProxy is the proxy in front of the server a target ("redis-2-proxy")
// names.
func (c *Cluster) redisProxy(target string) *Proxy {
	for i, rs := range c.Redis {
		if rs.Name+"-proxy" == target {
			return c.RedisPx[i]
		}
	}
	panic("chaos: no Redis proxy " + target)
}

func (c *Cluster) instance(name string) *Instance {
	for _, in := range c.Instances {
		if in.Name == name {
			return in
		}
	}
	panic("chaos: no instance " + name)
}

// unfinished lists the notifications not yet SENT or FAILED; nil when
// Postgres does not answer within a second.
func (c *Cluster) unfinished(ctx context.Context) []int64 {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	rows, err := c.DB.Query(ctx, `SELECT id FROM notifications WHERE status IN ('PENDING', 'QUEUED', 'PROCESSING')`)
	if err != nil {
		return nil
	}
	defer rows.Close()
	ids := []int64{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil
		}
		ids = append(ids, id)
	}
	if rows.Err() != nil {
		return nil
	}
	return ids
}

// stillUnfinished returns those of ids not yet SENT or FAILED.
func (c *Cluster) stillUnfinished(ctx context.Context, ids []int64) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var left []int64
	err := c.DB.QueryRow(ctx, `SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM notifications
 WHERE id = ANY($1) AND status IN ('PENDING', 'QUEUED', 'PROCESSING')`, ids).Scan(&left)
	return left, err
}
