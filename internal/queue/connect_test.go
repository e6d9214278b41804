package queue

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/notifyd/notifyd/internal/testenv"
)

func TestConnect(t *testing.T) {
	t.Parallel()

	t.Run("bad config", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			url     string
			cluster []string
			pool    int
			want    string
		}{
			{"", nil, 0, "give redis.url or redis.cluster_addrs"},
			{"redis://127.0.0.1:6379", []string{"127.0.0.1:7000"}, 0, "not both"},
			{"http://127.0.0.1:6379", nil, 0, "redis.url: must start with redis:// or rediss://"},
			{"redis://127.0.0.1:6379/notadb", nil, 0, "redis.url: invalid Redis URL"},
			{"redis://127.0.0.1:6379", nil, -1, "pool size must not be negative"},
			{"", []string{"localhost"}, 0, "redis.cluster_addrs[0] = \"localhost\" is not host:port"},
			{"", []string{"127.0.0.1:7000", "ftp://x:1"}, 0, "redis.cluster_addrs[1]: must start with redis://"},
		} {
			_, err := Connect(tc.url, tc.cluster, tc.pool)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Connect(%q, %q, %d) error = %v, want %q", tc.url, tc.cluster, tc.pool, err, tc.want)
			}
		}
	})

	t.Run("password never in errors", func(t *testing.T) {
		t.Parallel()
		for _, url := range []string{
			"redis://user:s3cret@127.0.0.1:6379/x",
			"redis://:s3cret@127.0.0.1:abc/0",
			"redis://user:s3cret@127.0.0.1:6379/%zz?client_name=qval-hidden",
		} {
			_, err := Connect(url, nil, 0)
			if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "qval-hidden") {
				t.Errorf("Connect error = %v; want an error without the password or query values", err)
			}
		}
	})

	t.Run("redis url", func(t *testing.T) {
		t.Parallel()
		c, err := Connect(testenv.RedisURL(), nil, 3)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Ping(testenv.Context(t)).Err(); err != nil {
			t.Fatalf("ping: %v", err)
		}
		if got := c.(*redis.Client).Options().PoolSize; got != 3 {
			t.Errorf("pool size = %d, want 3", got)
		}
	})

	t.Run("rediss url uses TLS", func(t *testing.T) {
		t.Parallel()
		c, err := Connect("rediss://:pw@127.0.0.1:6390/1", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		opts := c.(*redis.Client).Options()
		if opts.TLSConfig == nil || opts.DB != 1 || opts.Password != "pw" {
			t.Errorf("options = TLS %v, db %d, password set %v; want TLS, db 1, password", opts.TLSConfig != nil, opts.DB, opts.Password != "")
		}
	})

	t.Run("cluster urls carry credentials and TLS", func(t *testing.T) {
		t.Parallel()
		c, err := Connect("", []string{"rediss://u:pw@127.0.0.1:7001", "127.0.0.1:7002"}, 4)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		opts := c.(*redis.ClusterClient).Options()
		if len(opts.Addrs) != 2 || opts.Addrs[0] != "127.0.0.1:7001" || opts.Username != "u" || opts.Password != "pw" || opts.TLSConfig == nil || opts.PoolSize != 4 {
			t.Errorf("cluster options = addrs %v, user %q, TLS %v, pool %d", opts.Addrs, opts.Username, opts.TLSConfig != nil, opts.PoolSize)
		}
	})
}

// TestQueue_Cluster runs every operation through a real three-node Redis
// Cluster: a script touching a key outside its declared slot fails there.
func TestQueue_Cluster(t *testing.T) {
	t.Parallel()
	addrs := testenv.StartRedisCluster(t)
	c, err := Connect("", addrs, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testenv.Context(t)
	q := New(c, "nd")
	now := time.Now()

	for _, channel := range []string{"email", "sms", "push#1", "push#2"} {
		t.Run(channel, func(t *testing.T) {
			must := func(what string, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s on %s: %v", what, channel, err)
				}
			}
			_, err := q.Push(ctx, channel, append(items(seq(1, 3000), time.Time{}), Item{ID: 9000, Due: now.Add(time.Hour)}))
			must("Push", err)
			must("Renew", q.Renew(ctx, channel, "a", time.Minute))
			must("Renew", q.Renew(ctx, channel, "b", time.Millisecond))
			got, err := q.Fetch(ctx, channel, "a", 1000, 0)
			must("Fetch", err)
			if len(got) != 1000 {
				t.Fatalf("Fetch = %d ids, want 1000", len(got))
			}
			_, err = q.Pending(ctx, channel, "a")
			must("Pending", err)
			must("Ack", q.Ack(ctx, channel, "a", got[:500]))
			must("Retry", q.Retry(ctx, channel, "a", items(got[500:600], now.Add(time.Hour))))
			must("Dead", q.Dead(ctx, channel, "a", got[600:700]))
			must("DeadOnce", q.DeadOnce(ctx, channel, "a", got[700:710]))
			_, err = q.Promote(ctx, channel, now.Add(2*time.Hour), 1000)
			must("Promote", err)
			_, err = q.Reap(ctx, channel, now.Add(time.Second))
			must("Reap", err)
			must("Release", q.Release(ctx, channel, "a"))
			_, err = q.DeadList(ctx, channel, 0, 10)
			must("DeadList", err)
			_, err = q.DeadReplay(ctx, channel, got[600:610])
			must("DeadReplay", err)
			_, err = q.DeadReplay(ctx, channel, nil)
			must("DeadReplay(all)", err)
			_, err = q.DeadRemove(ctx, channel, got[600:610])
			must("DeadRemove", err)
			_, err = q.DeadRemove(ctx, channel, nil)
			must("DeadRemove(all)", err)
			st, err := q.Stats(ctx, channel)
			must("Stats", err)
			// 500 acked; everything else is back in ready.
			if want := (Stats{Ready: 2501}); st != want {
				t.Errorf("Stats = %+v, want %+v", st, want)
			}
		})
	}

	t.Run("blocked fetch wakes", func(t *testing.T) {
		if err := q.Renew(ctx, "idle", "c", time.Minute); err != nil {
			t.Fatal(err)
		}
		done := make(chan []int64, 1)
		go func() {
			ids, err := q.Fetch(ctx, "idle", "c", 5, 10*time.Second)
			if err != nil {
				t.Error(err)
			}
			done <- ids
		}()
		time.Sleep(100 * time.Millisecond)
		if _, err := q.Push(ctx, "idle", items([]int64{1, 2}, time.Time{})); err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "woken fetch", <-done, []int64{1, 2})
	})

	_, err = q.Epoch(ctx)
	if err != nil {
		t.Fatalf("Epoch: %v", err)
	}

	// Each node's policy is read by the connections to it: one shard that
	// evicts is refused, naming it, while the others are used.
	node := redis.NewClient(&redis.Options{Addr: addrs[1]})
	defer node.Close()
	if err := node.ConfigSet(ctx, "maxmemory-policy", "allkeys-lfu").Err(); err != nil {
		t.Fatal(err)
	}
	ev, err := Connect("", addrs, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	err = ev.(*redis.ClusterClient).ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
		return c.Ping(ctx).Err()
	})
	if !errors.Is(err, ErrEvicting) || !strings.Contains(err.Error(), addrs[1]) || !strings.Contains(err.Error(), "allkeys-lfu") {
		t.Errorf("a shard evicting: %v; want ErrEvicting naming %s and its policy", err, addrs[1])
	}
}

// TestConnect_EvictionPolicy: a Redis whose maxmemory-policy evicts keys
// can drop a queue's list while its ids stay members: no push queues them
// again and their rows stay QUEUED for good. Under volatile-* only keys with
// a TTL go, and notifyd has those too (rate limit buckets, daily caps, the
// breaker's probe, a dead-list filter's drop hash). So a connection to a
// Redis with any policy but noeviction fails, naming the policy and what
// to set; one whose policy cannot be read (INFO and CONFIG refused) is used
// and said once.
func TestConnect_EvictionPolicy(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	s := testenv.StartRedis(t)
	admin := s.Client()
	for _, policy := range []string{"allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"} {
		if err := admin.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		c, err := Connect(s.URL, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		err = c.Ping(ctx).Err()
		c.Close()
		if !errors.Is(err, ErrEvicting) {
			t.Errorf("%s: Ping = %v, want ErrEvicting", policy, err)
			continue
		}
		for _, want := range []string{s.Addr, "maxmemory-policy " + policy, "set maxmemory-policy noeviction"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not say %q", policy, err, want)
			}
		}
	}

	// noeviction: used. A policy changed later is seen by the next
	// connection.
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	c, err := Connect(s.URL, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("noeviction: Ping = %v", err)
	}

	// A user that may run neither INFO nor CONFIG (a managed Redis's ACL):
	// used, and the unchecked policy said once per server, however many
	// connections.
	if err := admin.Do(ctx, "ACL", "SETUSER", "app", "on", ">app-pw", "~*", "&*", "+@all", "-info", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		told []string
	)
	u, err := Connect("redis://app:app-pw@"+s.Addr+"/0", nil, 8, OnPolicyUnchecked(func(addr string, err error) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, addr+": "+err.Error())
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			// Held at once, so that each opens a connection of its own.
			if err := u.Do(ctx, "BLPOP", "nd-eviction-test-none", "0.2").Err(); err != nil && !errors.Is(err, redis.Nil) {
				t.Errorf("a connection whose policy cannot be read: %v", err)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 1 || !strings.Contains(told[0], s.Addr) || !strings.Contains(told[0], "NOPERM") {
		t.Errorf("told of the unchecked policy %d times: %q; want once, naming the server and why", len(told), told)
	}
	if n := u.PoolStats().TotalConns; n < 2 {
		t.Errorf("%d connections opened, want several", n)
	}
}
