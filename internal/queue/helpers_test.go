package queue

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/notifyd/notifyd/internal/testenv"
)

// bundle is what most tests need: a Queue on its own prefix of the shared
// Redis, the raw client to look at keys, and a context bounded by the test.
type bundle struct {
	q   *Queue
	c   *redis.Client
	r   *testenv.Redis
	ctx context.Context
}

func setup(t testing.TB) *bundle {
	t.Helper()
	r := testenv.NewRedis(t)
	return &bundle{q: New(r.Client, r.Prefix), c: r.Client, r: r, ctx: testenv.Context(t)}
}

func seq(from, n int64) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = from + int64(i)
	}
	return ids
}

func items(ids []int64, due time.Time) []Item {
	its := make([]Item, len(ids))
	for i, id := range ids {
		its[i] = Item{ID: id, Due: due}
	}
	return its
}

func (b *bundle) push(t testing.TB, channel string, ids ...int64) int {
	t.Helper()
	n, err := b.q.Push(b.ctx, channel, items(ids, time.Time{}))
	if err != nil {
		t.Fatalf("Push(%v): %v", ids, err)
	}
	return n
}

func (b *bundle) renew(t testing.TB, channel, instance string) {
	t.Helper()
	if err := b.q.Renew(b.ctx, channel, instance, time.Minute); err != nil {
		t.Fatalf("Renew(%s): %v", instance, err)
	}
}

func (b *bundle) fetch(t testing.TB, channel, instance string, max int) []int64 {
	t.Helper()
	ids, err := b.q.Fetch(b.ctx, channel, instance, max, 0)
	if err != nil {
		t.Fatalf("Fetch(%s, %d): %v", instance, max, err)
	}
	return ids
}

// list reads a list key as ids, left to right.
func (b *bundle) list(t testing.TB, key string) []int64 {
	t.Helper()
	vals, err := b.c.LRange(b.ctx, key, 0, -1).Result()
	if err != nil {
		t.Fatalf("LRANGE %s: %v", key, err)
	}
	return mustParse(t, vals)
}

func (b *bundle) set(t testing.TB, key string) []int64 {
	t.Helper()
	vals, err := b.c.SMembers(b.ctx, key).Result()
	if err != nil {
		t.Fatalf("SMEMBERS %s: %v", key, err)
	}
	ids := mustParse(t, vals)
	slices.Sort(ids)
	return ids
}

func (b *bundle) zset(t testing.TB, key string) map[int64]int64 {
	t.Helper()
	zs, err := b.c.ZRangeWithScores(b.ctx, key, 0, -1).Result()
	if err != nil {
		t.Fatalf("ZRANGE %s: %v", key, err)
	}
	out := make(map[int64]int64, len(zs))
	for _, z := range zs {
		id, err := strconv.ParseInt(z.Member.(string), 10, 64)
		if err != nil {
			t.Fatalf("ZSET %s holds %q", key, z.Member)
		}
		out[id] = int64(z.Score)
	}
	return out
}

func mustParse(t testing.TB, vals []string) []int64 {
	t.Helper()
	ids, err := parseStrings(vals)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func sorted(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

func wantIDs(t testing.TB, what string, got, want []int64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %v, want %v", what, short(got), short(want))
	}
}

// short keeps failure messages about 10k-id lists readable.
func short(ids []int64) string {
	if len(ids) <= 20 {
		return fmt.Sprint(ids)
	}
	return fmt.Sprintf("%v … %v (%d ids)", ids[:10], ids[len(ids)-5:], len(ids))
}
