package queue

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// scripts returns the commands seen up to marker grouped by the client
// command that ran them: a script's own commands (MONITOR's "lua" source)
// go with the EVAL or EVALSHA before them.
func (m *monitor) scripts(t *testing.T, ctx context.Context, c *redis.Client, marker string) [][][]string {
	t.Helper()
	if err := c.Echo(ctx, marker).Err(); err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		m.mu.Lock()
		var out [][][]string
		for _, l := range m.lines {
			args := monitorArgs(l)
			if len(args) == 2 && strings.EqualFold(args[0], "echo") && args[1] == marker {
				m.lines = nil
				m.mu.Unlock()
				return out
			}
			if strings.Contains(l, " lua]") && len(out) > 0 {
				out[len(out)-1] = append(out[len(out)-1], args)
			} else {
				out = append(out, [][]string{args})
			}
		}
		m.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("MONITOR never showed the marker")
	return nil
}

// reads is how many elements of the list at key (about length long) the
// commands may read: an LRANGE its range, an LREM with count 0 or an LPOS
// without MAXLEN the whole list, an RPOP its count.
func reads(cmds [][]string, key string, length int) int {
	n := 0
	for _, c := range cmds {
		if len(c) < 2 || c[1] != key {
			continue
		}
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
			n += max(0, min(stop, length-1)-max(start, 0)+1)
		case "LREM", "LPOS":
			if c[0] == "LPOS" || c[2] == "0" {
				n += length
			}
		case "RPOP", "LPOP":
			k := 1
			if len(c) > 2 {
				k, _ = strconv.Atoi(c[2])
			}
			n += k
		}
	}
	return n
}

// Ids dropped from a long dead list (a replay or purge of 1,000 dead
// letters of a channel whose dead list holds 100,000; the list is never
// trimmed otherwise) were one LREM each over the whole list, all in one
// script: 10^8 elements read while Redis served nobody else. Against 10^6
// that script ran past the client's 10 s timeout, and a purge of a
// channel's million dead letters is a thousand of them. Now no script
// reads more than a bounded part of the list: it is filtered in bounded
// steps from its old end, each step's survivors put back in order.
func TestQueue_DeadRemoveLongListBounded(t *testing.T) {
	t.Parallel()
	b, m := privateQueue(t)
	k := b.q.keys(ch)
	const long = 100_000
	fill(t, b, k.dead(), 1, long) // 1 newest … 100,000 oldest
	// Markers of two other filters: one that died a day ago (dropped), one
	// running now (left where it is).
	live := deadSentinel + strconv.FormatInt(unixMs(time.Now()), 10) + ":running"
	b.c.RPush(b.ctx, k.dead(), deadSentinel+strconv.FormatInt(unixMs(time.Now().Add(-24*time.Hour)), 10)+":died", live)
	var drop []int64
	for id := int64(7); id <= long; id += long / 1000 {
		drop = append(drop, id)
	}
	m.until(t, b.ctx, b.c, "start")
	n, err := b.q.DeadRemove(b.ctx, ch, append(drop, drop[0], long+1))
	if err != nil || n != len(drop) {
		t.Fatalf("DeadRemove = %d, %v; want %d", n, err, len(drop))
	}
	for i, cmds := range m.scripts(t, b.ctx, b.c, "removed") {
		if r := reads(cmds, k.dead(), long); r > 2*maxPerCall {
			t.Errorf("command %d (%.40s) read %d elements of the %d-long dead list, over %d", i, strings.Join(cmds[0], " "), r, long, 2*maxPerCall)
		}
	}
	raw, err := b.c.LRange(b.ctx, k.dead(), 0, -1).Result()
	if err != nil {
		t.Fatalf("read the dead list back: %v", err)
	}
	if len(raw) == 0 || raw[len(raw)-1] != live {
		t.Fatalf("the dead list ends %q; want the running filter's marker kept, the dead one's dropped", raw[max(0, len(raw)-2):])
	}
	b.c.RPop(b.ctx, k.dead())
	got := b.list(t, k.dead())
	want := make([]int64, 0, long-len(drop))
	gone := map[int64]bool{}
	for _, id := range drop {
		gone[id] = true
	}
	for id := int64(1); id <= long; id++ {
		if !gone[id] {
			want = append(want, id)
		}
	}
	wantIDs(t, "dead, newest first, without the removed", got, want)
}
