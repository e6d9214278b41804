package queue

import (
	"slices"
	"strings"
	"testing"
	"time"
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

func TestProbeAuditD_FetchBadMember(t *testing.T) {
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
func TestProbeAuditD_FetchBadMemberAfterWait(t *testing.T) {
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
func TestProbeAuditD_PendingBadMember(t *testing.T) {
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
