package queue

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis contents are untrusted (another program sharing the Redis, a partial
// restore, an operator's mistake): these tests write such contents straight
// into a queue's keys and check that each is dealt with once, with a reason,
// and never strands the notifications beside it.

// badMembers are list members that are not a notification id as the queue
// writes one (strconv.FormatInt): each must leave the processing list the
// first time a Fetch or Pending meets it.
var badMembers = []string{
	"abc", "", "1000000000000000000000000000000", "007", "+7", " 7", "7 ", "\x00\xff", "1e3", "-0",
}

// fetchAll fetches until ready is empty, collecting ids and errors.
func (b *bundle) fetchAll(t *testing.T, channel, instance string) (ids []int64, errs []error) {
	t.Helper()
	for range 50 {
		got, err := b.q.Fetch(b.ctx, channel, instance, 3, 0)
		ids = append(ids, got...)
		if err != nil {
			errs = append(errs, err)
		}
		if n, _ := b.c.LLen(b.ctx, b.q.keys(channel).ready()).Result(); n == 0 {
			return ids, errs
		}
	}
	t.Fatal("ready never emptied")
	return
}

func TestQueue_FetchBadMember(t *testing.T) {
	t.Parallel()
	for _, bad := range badMembers {
		t.Run(strings.ToValidUTF8(bad, "?"), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			k := b.q.keys(ch)
			b.renew(t, ch, "a")
			b.push(t, ch, 1, 2)
			// The bad member sits in the middle of a fetch's batch.
			if err := b.c.LPush(b.ctx, k.ready(), bad).Err(); err != nil {
				t.Fatal(err)
			}
			b.c.SAdd(b.ctx, k.members(), bad)
			b.push(t, ch, 3, 4)

			ids, errs := b.fetchAll(t, ch, "a")
			// Whatever Fetch returned, the instance must be able to read
			// its backup list (the orphan check and a restart do), and
			// every valid id must be in hand or in that list.
			var pending []int64
			var err error
			for range 2 {
				if pending, err = b.q.Pending(b.ctx, ch, "a"); err == nil {
					break
				}
				errs = append(errs, err)
			}
			if err != nil {
				t.Fatalf("Pending keeps failing after a bad member %q was fetched: %v", bad, err)
			}
			all := sorted(append(slices.Clone(ids), pending...))
			all = slices.Compact(all)
			wantIDs(t, "fetched or pending", all, []int64{1, 2, 3, 4})
			if len(errs) == 0 {
				t.Errorf("bad member %q was never reported", bad)
			}
			if raw := b.c.LRange(b.ctx, k.processing("a"), 0, -1).Val(); slices.Contains(raw, bad) {
				t.Errorf("processing still holds %q after it was reported: %q", bad, raw)
			}
			if b.c.SIsMember(b.ctx, k.members(), bad).Val() {
				t.Errorf("members still holds %q", bad)
			}
			// Acking what the instance holds empties its list: nothing is
			// re-handled for ever by the orphan check.
			if err := b.q.Ack(b.ctx, ch, "a", all); err != nil {
				t.Fatal(err)
			}
			if n := b.c.LLen(b.ctx, k.processing("a")).Val(); n != 0 {
				t.Errorf("processing holds %d members after every id was acked: %q", n, b.c.LRange(b.ctx, k.processing("a"), 0, -1).Val())
			}
		})
	}
}

// A bad member BLMOVE moves (the fetch that waited for a push) is dealt
// with the same way.
func TestQueue_FetchBadMemberAfterWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k := b.q.keys(ch)
	b.renew(t, ch, "a")
	go func() {
		time.Sleep(200 * time.Millisecond)
		b.c.LPush(b.ctx, k.ready(), "garbage")
	}()
	_, err := b.q.Fetch(b.ctx, ch, "a", 5, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "garbage") {
		t.Errorf("Fetch error = %v, want one naming the bad member", err)
	}
	if pending, err := b.q.Pending(b.ctx, ch, "a"); err != nil || len(pending) != 0 {
		t.Errorf("Pending = %v, %v; want [], nil", pending, err)
	}
}

// A bad member written straight into a processing list (not through a
// fetch) is dropped by the first Pending that meets it, with the valid ids
// still returned.
func TestQueue_PendingBadMember(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k := b.q.keys(ch)
	b.c.LPush(b.ctx, k.processing("a"), "5", "x", "6")
	ids, err := b.q.Pending(b.ctx, ch, "a")
	if err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("Pending error = %v, want one naming the bad member", err)
	}
	wantIDs(t, "pending", ids, []int64{5, 6})
	ids, err = b.q.Pending(b.ctx, ch, "a")
	if err != nil {
		t.Errorf("second Pending: %v", err)
	}
	wantIDs(t, "pending", ids, []int64{5, 6})
}

// A queue key of the wrong type (another program's SET on it) fails the call
// that meets it once, naming it, and is moved aside, so the next call works;
// before, every call on the queue failed with WRONGTYPE for good, or a script
// failed half-way: the id in members (so no push could queue it again) and
// in no list.
func TestQueue_WrongTypeKey(t *testing.T) {
	t.Parallel()
	push := func(due time.Time) func(b *bundle) error {
		return func(b *bundle) error { _, err := b.q.Push(b.ctx, ch, items([]int64{1}, due)); return err }
	}
	fetch := func(b *bundle) error { _, err := b.q.Fetch(b.ctx, ch, "a", 5, 0); return err }
	for _, tc := range []struct {
		name   string
		key    func(keys) string
		queued bool // id 1 is queued before the key goes wrong
		call   func(b *bundle) error
		kept   bool // id 1 must be in ready, delayed or processing after
	}{
		{"push, members", keys.members, false, push(time.Time{}), true},
		{"push, ready", keys.ready, false, push(time.Time{}), true},
		{"push, delayed", keys.delayed, false, push(time.Now().Add(time.Hour)), true},
		{"fetch, ready", keys.ready, false, fetch, false},
		{"fetch, processing", func(k keys) string { return k.processing("a") }, true, fetch, true},
		{"promote, ready", keys.ready, false, func(b *bundle) error {
			b.c.ZAdd(b.ctx, b.q.keys(ch).delayed(), redis.Z{Score: 1, Member: "1"})
			b.c.SAdd(b.ctx, b.q.keys(ch).members(), "1")
			_, err := b.q.Promote(b.ctx, ch, time.Now(), 10)
			return err
		}, true},
		{"ack, processing", func(k keys) string { return k.processing("a") }, false, func(b *bundle) error { return b.q.Ack(b.ctx, ch, "a", []int64{1}) }, false},
		{"dead, dead", keys.dead, false, func(b *bundle) error { return b.q.Dead(b.ctx, ch, "a", []int64{1}) }, false},
	} {
		b := setup(t)
		b.renew(t, ch, "a")
		k := b.q.keys(ch)
		if tc.queued {
			b.push(t, ch, 1)
		}
		key := tc.key(k)
		if err := b.c.Set(b.ctx, key, "wrong", 0).Err(); err != nil {
			t.Fatal(err)
		}
		var errs []error
		for range 2 {
			err := tc.call(b)
			if err == nil {
				break
			}
			errs = append(errs, err)
		}
		if len(errs) == 2 {
			t.Errorf("%s: the second call still fails: %v", tc.name, errs[1])
		}
		if len(errs) == 1 && !strings.Contains(errs[0].Error(), key) {
			t.Errorf("%s: error %v does not name %s", tc.name, errs[0], key)
		}
		if !tc.kept {
			continue
		}
		_, zerr := b.c.ZScore(b.ctx, k.delayed(), "1").Result()
		inReady := slices.Contains(b.c.LRange(b.ctx, k.ready(), 0, -1).Val(), "1")
		inProc := slices.Contains(b.c.LRange(b.ctx, k.processing("a"), 0, -1).Val(), "1")
		if zerr != nil && !inReady && !inProc {
			t.Errorf("%s: id 1 is in no list (members: %v): no push can queue it again", tc.name, b.c.SIsMember(b.ctx, k.members(), "1").Val())
		}
	}
}

// An epoch key of the wrong type, or one grown huge, is replaced by a fresh
// epoch (a change: one resync) instead of failing every epoch check or being
// read whole on every one.
func TestQueue_EpochOddValues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.r.Prefix + ":epoch"
	if _, err := b.q.Epoch(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.c.Del(b.ctx, key)
	b.c.RPush(b.ctx, key, "x")
	changed, err := b.q.Epoch(b.ctx)
	if err != nil || !changed {
		t.Errorf("Epoch with a list for its key = %v, %v; want true, nil", changed, err)
	}
	b.c.Set(b.ctx, key, strings.Repeat("e", 1<<20), 0)
	changed, err = b.q.Epoch(b.ctx)
	if err != nil || !changed {
		t.Errorf("Epoch with a 1 MiB value = %v, %v; want true, nil", changed, err)
	}
	if n := b.c.StrLen(b.ctx, key).Val(); n > 64 {
		t.Errorf("epoch key is %d bytes after the check, want it replaced", n)
	}
}
