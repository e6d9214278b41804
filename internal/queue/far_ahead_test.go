package queue

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/notifyd/notifyd/internal/testenv"
)

// Scores that no caller of this package writes (+inf, a year ahead: a
// clock-skewed instance, a restore, an operator's ZADD) must not strand an
// id: as a member, no push could queue it again.
var farScores = map[string]float64{"+inf": math.Inf(1), "a year ahead": float64(time.Now().AddDate(1, 0, 0).UnixMilli())}

func TestQueue_DelayedScoreFarAhead(t *testing.T) {
	t.Parallel()
	for name, score := range farScores {
		t.Run(name+", pushed again", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			k := b.q.keys(ch)
			b.c.SAdd(b.ctx, k.members(), "1")
			b.c.ZAdd(b.ctx, k.delayed(), redis.Z{Score: score, Member: "1"})
			b.push(t, ch, 1) // the sweeper's or the resync's push
			wantIDs(t, "ready", b.list(t, k.ready()), []int64{1})
			if got := b.zset(t, k.delayed()); len(got) != 0 {
				t.Errorf("delayed = %v, want the far score gone", got)
			}
		})
		t.Run(name+", promoted", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			k := b.q.keys(ch)
			b.c.SAdd(b.ctx, k.members(), "1", "2")
			b.c.ZAdd(b.ctx, k.delayed(), redis.Z{Score: score, Member: "1"}, redis.Z{Score: 1, Member: "2"})
			n, err := b.q.Promote(b.ctx, ch, time.Now(), 10)
			if err != nil || n != 2 {
				t.Errorf("Promote = %d, %v; want 2, nil", n, err)
			}
			wantIDs(t, "ready", b.list(t, k.ready()), []int64{1, 2})
		})
	}
	// A legitimate backoff, as long as retry.max_retry_after allows (168h),
	// is kept by a push and not promoted early.
	t.Run("a week's backoff kept", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.q.keys(ch)
		b.push(t, ch, 1)
		b.renew(t, ch, "a")
		b.fetch(t, ch, "a", 1)
		due := time.Now().Add(7 * 24 * time.Hour)
		if err := b.q.Retry(b.ctx, ch, "a", []Item{{ID: 1, Due: due}}); err != nil {
			t.Fatal(err)
		}
		b.push(t, ch, 1)
		if n, err := b.q.Promote(b.ctx, ch, time.Now(), 10); err != nil || n != 0 {
			t.Errorf("Promote = %d, %v; want 0, nil", n, err)
		}
		if got := b.zset(t, k.delayed()); got[1] != due.UnixMilli() {
			t.Errorf("delayed = %v, want {1: %d}", got, due.UnixMilli())
		}
	})
	// A due further ahead than MaxDelay is parked no further than that: it
	// is neither stranded nor taken for corrupt and promoted at once (a
	// loop: claim, defer, retry, promote).
	t.Run("a due of a year is parked for MaxDelay", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.q.keys(ch)
		b.push(t, ch, 1)
		b.renew(t, ch, "a")
		b.fetch(t, ch, "a", 1)
		if err := b.q.Retry(b.ctx, ch, "a", []Item{{ID: 1, Due: time.Now().AddDate(1, 0, 0)}}); err != nil {
			t.Fatal(err)
		}
		limit := time.Now().Add(8 * 24 * time.Hour).UnixMilli()
		if got := b.zset(t, k.delayed()); len(got) != 1 || got[1] > limit {
			t.Errorf("delayed = %v, want id 1 due by %d", got, limit)
		}
		if n, err := b.q.Promote(b.ctx, ch, time.Now(), 10); err != nil || n != 0 {
			t.Errorf("Promote = %d, %v; want 0, nil", n, err)
		}
	})
}

// A dead instance's lease of +inf or a year ahead must not keep its backup
// list from Reap for good; a live lease is still left alone, and Renew
// refuses to write a lease that long.
func TestQueue_LeaseFarAhead(t *testing.T) {
	t.Parallel()
	for name, score := range farScores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			k := b.q.keys(ch)
			b.c.ZAdd(b.ctx, k.instances(), redis.Z{Score: score, Member: "dead"})
			b.c.SAdd(b.ctx, k.members(), "1", "2")
			b.c.LPush(b.ctx, k.processing("dead"), "1", "2")
			b.renew(t, ch, "live")
			b.push(t, ch, 3)
			b.fetch(t, ch, "live", 1)
			n, err := b.q.Reap(b.ctx, ch, time.Now())
			if err != nil || n != 2 {
				t.Errorf("Reap = %d, %v; want 2, nil", n, err)
			}
			wantIDs(t, "ready", b.list(t, k.ready()), []int64{2, 1})
			wantIDs(t, "live's processing", b.list(t, k.processing("live")), []int64{3})
			if _, err := b.c.ZScore(b.ctx, k.instances(), "dead").Result(); err != redis.Nil {
				t.Errorf("the dead instance's lease is still there (%v)", err)
			}
		})
	}
	t.Run("renew refuses a lease of a day", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if err := b.q.Renew(b.ctx, ch, "a", 24*time.Hour); err == nil {
			t.Error("Renew(24h) = nil, want an error")
		}
	})
}

// monitor records the commands a private redis-server runs, scripts' own
// included, until stop: what a call touches, read from its arguments.
type monitor struct {
	conn  net.Conn
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

func startMonitor(t *testing.T, s *testenv.RedisServer) *monitor {
	t.Helper()
	conn, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	m := &monitor{conn: conn, done: make(chan struct{})}
	r := bufio.NewReaderSize(conn, 1<<20)
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
		t.Fatalf("MONITOR: %q, %v", line, err)
	}
	go func() {
		defer close(m.done)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			m.mu.Lock()
			m.lines = append(m.lines, line)
			m.mu.Unlock()
		}
	}()
	return m
}

// until returns the commands seen up to marker, which c echoes.
func (m *monitor) until(t *testing.T, ctx context.Context, c *redis.Client, marker string) [][]string {
	t.Helper()
	if err := c.Echo(ctx, marker).Err(); err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		m.mu.Lock()
		var out [][]string
		for _, l := range m.lines {
			args := monitorArgs(l)
			if len(args) == 2 && strings.EqualFold(args[0], "echo") && args[1] == marker {
				m.lines = nil
				m.mu.Unlock()
				return out
			}
			out = append(out, args)
		}
		m.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("MONITOR never showed the marker")
	return nil
}

var quoted = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)

func monitorArgs(line string) []string {
	var args []string
	for _, m := range quoted.FindAllStringSubmatch(line, -1) {
		args = append(args, m[1])
	}
	return args
}

// checkBounded works out, for each command on key, the elements it may read:
// an LRANGE its range (0 -1: the whole list), an LREM with count 0 or an
// LPOS without MAXLEN the whole list. It fails the test on one over limit.
func checkBounded(t *testing.T, cmds [][]string, key string, length, limit int) {
	t.Helper()
	seen := 0
	for _, c := range cmds {
		if len(c) < 2 || c[1] != key {
			continue
		}
		seen++
		n := 0
		switch strings.ToUpper(c[0]) {
		case "LRANGE":
			start, _ := strconv.Atoi(c[2])
			stop, _ := strconv.Atoi(c[3])
			if start < 0 {
				start += length
			}
			if stop < 0 {
				stop += length
			}
			n = max(0, min(stop, length-1)-max(start, 0)+1)
		case "LREM":
			if c[2] == "0" {
				n = length
			}
		case "LPOS":
			n = length
			for i := 3; i+1 < len(c); i++ {
				if strings.EqualFold(c[i], "MAXLEN") {
					n, _ = strconv.Atoi(c[i+1])
				}
			}
		}
		if n > limit {
			t.Errorf("%s may read %d elements of a %d-long list, over %d", strings.Join(c[:min(len(c), 5)], " "), n, length, limit)
		}
	}
	if seen == 0 {
		t.Errorf("MONITOR showed no command on %s", key)
	}
}

// privateQueue is a Queue on a redis-server of the test's own, watched.
func privateQueue(t *testing.T) (*bundle, *monitor) {
	s := testenv.StartRedis(t)
	c := s.Client()
	b := &bundle{q: New(c, "e"), c: c, ctx: testenv.Context(t)}
	return b, startMonitor(t, s)
}

func fill(t *testing.T, b *bundle, key string, from, n int64) {
	t.Helper()
	for start := from; start < from+n; start += 1000 {
		vals := make([]any, 0, 1000)
		for id := start; id < min(start+1000, from+n); id++ {
			vals = append(vals, strconv.FormatInt(id, 10))
		}
		if err := b.c.RPush(b.ctx, key, vals...).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// A dead instance's backup list of many ids goes back in bounded steps, each
// one short script, keeping its order; and Pending, DeadOnce and an ack
// against a long list read bounded parts of it, not the whole.
func TestQueue_LongListsBounded(t *testing.T) {
	t.Parallel()
	const long, limit = 12000, 5000
	t.Run("reap", func(t *testing.T) {
		t.Parallel()
		b, m := privateQueue(t)
		k := b.q.keys(ch)
		fill(t, b, k.processing("dead"), 1, long) // 1 newest … 12000 oldest
		b.c.ZAdd(b.ctx, k.instances(), redis.Z{Score: 1, Member: "dead"})
		m.until(t, b.ctx, b.c, "start")
		n, err := b.q.Reap(b.ctx, ch, time.Now())
		if err != nil || n != long {
			t.Fatalf("Reap = %d, %v; want %d", n, err, long)
		}
		checkBounded(t, m.until(t, b.ctx, b.c, "reaped"), k.processing("dead"), long, limit)
		// Fetched from the right: oldest first, as one move gave them.
		got := b.list(t, k.ready())
		want := seq(1, long)
		wantIDs(t, "ready", got, want)
		if b.c.Exists(b.ctx, k.processing("dead")).Val() != 0 || b.c.ZCard(b.ctx, k.instances()).Val() != 0 {
			t.Error("the list or the lease is left after the reap")
		}
	})
	t.Run("pending", func(t *testing.T) {
		t.Parallel()
		b, m := privateQueue(t)
		k := b.q.keys(ch)
		fill(t, b, k.processing("a"), 1, long)
		m.until(t, b.ctx, b.c, "start")
		ids, err := b.q.Pending(b.ctx, ch, "a")
		if err != nil {
			t.Fatal(err)
		}
		checkBounded(t, m.until(t, b.ctx, b.c, "read"), k.processing("a"), long, limit)
		want := seq(1, long)
		slices.Reverse(want)
		wantIDs(t, "pending", ids, want)
	})
	t.Run("dead once", func(t *testing.T) {
		t.Parallel()
		b, m := privateQueue(t)
		k := b.q.keys(ch)
		const deadLen = 30000
		fill(t, b, k.dead(), 1_000_000, deadLen)
		b.c.LPush(b.ctx, k.dead(), "7") // 7 failed again, its dead-letter step done
		b.c.SAdd(b.ctx, k.members(), "7", "8")
		b.c.LPush(b.ctx, k.processing("a"), "7", "8")
		m.until(t, b.ctx, b.c, "start")
		if err := b.q.DeadOnce(b.ctx, ch, "a", []int64{7, 8}); err != nil {
			t.Fatal(err)
		}
		checkBounded(t, m.until(t, b.ctx, b.c, "dead"), k.dead(), deadLen+1, 2*limit)
		head := b.c.LRange(b.ctx, k.dead(), 0, 2).Val()
		if fmt.Sprint(head) != "[8 7 1000000]" {
			t.Errorf("dead list starts %v, want [8 7 1000000]: 7 once, 8 added", head)
		}
	})
	// Ids acked against a long backup list: a resumed instance works it off
	// oldest first. Each LREM stops at the id (an id is in a processing list
	// once) instead of scanning the whole list for more.
	t.Run("ack", func(t *testing.T) {
		t.Parallel()
		b, m := privateQueue(t)
		k := b.q.keys(ch)
		fill(t, b, k.processing("a"), 1, long)
		m.until(t, b.ctx, b.c, "start")
		if err := b.q.Ack(b.ctx, ch, "a", []int64{long, long - 1}); err != nil {
			t.Fatal(err)
		}
		checkBounded(t, m.until(t, b.ctx, b.c, "acked"), k.processing("a"), long, 0)
		if n := b.c.LLen(b.ctx, k.processing("a")).Val(); n != long-2 {
			t.Errorf("processing holds %d, want %d", n, long-2)
		}
	})
}
