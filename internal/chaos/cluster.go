package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
)

// Channel is the one channel every instance delivers on.
const Channel = "chaos"

// Token is the instances' API bearer token.
const Token = "chaos-suite-api-token"

// Prefix is the instances' Redis key prefix.
const Prefix = "chaos"

// ClusterPartitions is the channel's partitions in cluster mode: queues
// chaos#0..#3, each its own hash slot, spread over the masters.
const ClusterPartitions = 4

// Setup says what to build.
type Setup struct {
	Bin       string // the notifyd binary
	PluginDir string // holds notifyd-plugin-webhook
	Instances int    // notifyd processes; the last has no instance.id (notifyd derives its own, the same across restarts)
	// Sink behaviour: share of 503 answers, and the longest answer delay.
	SinkTransient float64
	SinkMaxDelay  time.Duration
	LeaseTTL      time.Duration
	// SweepAfter is the instances' delivery.sweep_after; 0 = the production
	// default (2m). The sweeper is the last resort for rows in no Redis
	// queue: a short one would hide every path that strands rows, since
	// the sweeper would quietly deliver them a few seconds late.
	SweepAfter time.Duration
	Logf       func(format string, args ...any)
	// RedisCluster runs a real 3-master Redis Cluster (three redis-servers
	// of the suite's own, each behind its own proxy) instead of one
	// server, and spreads the channel over ClusterPartitions queues so the
	// work lands on every shard. Redis faults then hit one master at a
	// time.
	RedisCluster bool
	// KeepLogs leaves the directory with the instances' configs and logs
	// (and the Postgres log) in place at Close, and names it.
	KeepLogs bool
	// Daily, when positive, adds the daily path (daily.go): a topic of this
	// many subscribers and a schedule over it firing every DailyEvery
	// (default 20s; one minute is the cron "* * * * *").
	Daily      int
	DailyEvery time.Duration
	// DailyUntitledEvery: every n-th subscriber lacks the attribute the
	// payload template needs, so its notification must be FAILED with the
	// reason while the run goes on (0: none).
	DailyUntitledEvery int
}

// Cluster is everything the suite runs: Postgres and Redis of its own,
// toxiproxy in front of both, the sink, and the notifyd instances.
type Cluster struct {
	Setup    Setup
	Dir      string // configs and logs
	Postgres *Postgres
	// Redis is the one server, or the cluster's masters; RedisPx the proxy
	// in front of each, in the same order.
	Redis     []*RedisServer
	PGProxy   *Proxy
	RedisPx   []*Proxy
	Sink      *Sink
	Instances []*Instance

	// DB and RC talk to Postgres and Redis directly (not through the
	// proxies): the suite's own view, for snapshots and checks. In cluster
	// mode RC is a ClusterClient whose dialer maps each announced (proxy)
	// address to its node's own.
	DB    *pgxpool.Pool
	RC    redis.UniversalClient
	DBURL string // direct URL of the notifyd database

	toxi *toxiproxy.ApiServer
}

// Start builds the cluster. On error everything started so far is stopped.
func Start(ctx context.Context, s Setup) (c *Cluster, err error) {
	if s.Instances < 1 {
		return nil, errors.New("chaos: need at least one instance")
	}
	if s.Logf == nil {
		s.Logf = func(string, ...any) {}
	}
	c = &Cluster{Setup: s}
	built := c // `return nil, err` clears c before this runs
	defer func() {
		if err != nil {
			built.Close()
			c = nil
		}
	}()
	if c.Dir, err = os.MkdirTemp("", "notifyd-chaos-"); err != nil {
		return nil, err
	}
	// Postgres, the instances' HTTP listeners, then per Redis server its
	// port (and in cluster mode its bus port and its proxy's port).
	nRedis, perRedis := 1, 1
	if s.RedisCluster {
		nRedis, perRedis = redisClusterMasters, 3
	}
	ports, err := freePorts(1 + s.Instances + nRedis*perRedis)
	if err != nil {
		return nil, err
	}
	redisPorts := ports[1+s.Instances:]
	start := time.Now()
	if c.Postgres, err = StartPostgres(ctx, ports[0]); err != nil {
		return nil, err
	}
	if err := c.Postgres.CreateDatabase(ctx, "notifyd"); err != nil {
		return nil, err
	}
	s.Logf("chaos: Postgres cluster on 127.0.0.1:%d up in %v", ports[0], time.Since(start).Round(time.Millisecond))
	c.DBURL = c.Postgres.DatabaseURL(fmt.Sprintf("127.0.0.1:%d", ports[0]), "notifyd")
	if c.DB, err = pgxpool.New(ctx, c.DBURL); err != nil {
		return nil, fmt.Errorf("chaos: connect to Postgres: %w", err)
	}
	if _, err := outbox.Migrate(ctx, c.DB); err != nil {
		return nil, fmt.Errorf("chaos: migrate: %w", err)
	}
	if s.Daily > 0 {
		if c.Setup.DailyEvery == 0 {
			c.Setup.DailyEvery = 20 * time.Second
		}
		if err := c.seedDaily(ctx); err != nil {
			return nil, err
		}
	}
	c.toxi = NewProxyServer()
	if c.PGProxy, err = StartProxy(c.toxi, "postgres", "", fmt.Sprintf("127.0.0.1:%d", ports[0])); err != nil {
		return nil, err
	}
	if s.RedisCluster {
		if err := c.startRedisCluster(ctx, redisPorts); err != nil {
			return nil, err
		}
	} else {
		rs, err := StartRedis("redis", redisPorts[0])
		if err != nil {
			return nil, err
		}
		c.Redis = []*RedisServer{rs}
		c.RC = redis.NewClient(&redis.Options{Addr: rs.Addr})
		px, err := StartProxy(c.toxi, "redis", "", rs.Addr)
		if err != nil {
			return nil, err
		}
		c.RedisPx = []*Proxy{px}
	}
	if c.Sink, err = StartSink(s.SinkTransient, s.SinkMaxDelay); err != nil {
		return nil, err
	}
	// The instances' TMPDIR, inside the suite's directory so what kill -9
	// leaves there goes with it. Plugins put Unix sockets in it (at most
	// 108 bytes a path), so a long path falls back to the test's TMPDIR.
	tmpDir := filepath.Join(c.Dir, "tmp")
	if len(tmpDir) > 48 {
		tmpDir = ""
	} else if err := os.Mkdir(tmpDir, 0o700); err != nil {
		return nil, err
	}
	for i := range s.Instances {
		name := fmt.Sprintf("n%d", i+1)
		id := name
		if i == s.Instances-1 && s.Instances > 1 {
			id = "" // notifyd derives one, held while it lives and the same after a restart
		}
		httpAddr := fmt.Sprintf("127.0.0.1:%d", ports[1+i])
		cfg := filepath.Join(c.Dir, name+".yaml")
		if err := os.WriteFile(cfg, []byte(c.config(id, httpAddr)), 0o600); err != nil {
			return nil, err
		}
		in, err := StartInstance(name, id, s.Bin, cfg, filepath.Join(c.Dir, name+".log"), httpAddr, tmpDir)
		if err != nil {
			return nil, err
		}
		c.Instances = append(c.Instances, in)
	}
	return c, nil
}

// startRedisCluster starts the cluster's masters, a proxy in front of each
// on the port the node announces, creates the cluster and connects RC
// straight to the nodes. ports holds three per node: its own, its bus
// port, its proxy's.
func (c *Cluster) startRedisCluster(ctx context.Context, ports []int) error {
	start := time.Now()
	var triples [][3]int
	for i := range redisClusterMasters {
		triples = append(triples, [3]int{ports[3*i], ports[3*i+1], ports[3*i+2]})
	}
	nodes, err := startRedisCluster(triples)
	c.Redis = nodes // stopped at Close, also on error
	if err != nil {
		return err
	}
	direct := map[string]string{}
	var addrs []string
	for i, n := range nodes {
		px, err := StartProxy(c.toxi, n.Name, fmt.Sprintf("127.0.0.1:%d", triples[i][2]), n.Addr)
		if err != nil {
			return err
		}
		c.RedisPx = append(c.RedisPx, px)
		direct[px.Addr] = n.Addr
		addrs = append(addrs, n.Addr)
	}
	if err := createRedisCluster(ctx, nodes); err != nil {
		return err
	}
	c.RC = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Dialer: directDialer(direct)})
	// The suite's client must see the announced topology it will route by.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	slots, err := c.RC.ClusterSlots(sctx).Result()
	if err != nil {
		return fmt.Errorf("chaos: CLUSTER SLOTS: %w", err)
	}
	for _, sl := range slots {
		for _, n := range sl.Nodes {
			if _, ok := direct[n.Addr]; !ok {
				return fmt.Errorf("chaos: CLUSTER SLOTS names %s for slots %d-%d, not a proxy: clients would bypass toxiproxy", n.Addr, sl.Start, sl.End)
			}
		}
	}
	var desc []string
	for i, n := range nodes {
		desc = append(desc, fmt.Sprintf("%s %s (proxy %s)", n.Name, n.Addr, c.RedisPx[i].Addr))
	}
	c.Setup.Logf("chaos: Redis Cluster of %d masters up in %v: %s", len(nodes), time.Since(start).Round(time.Millisecond), strings.Join(desc, ", "))
	return nil
}

// Partitions is how many queues the channel is spread over.
func (c *Cluster) Partitions() int {
	if c.Setup.RedisCluster {
		return ClusterPartitions
	}
	return 1
}

// Queues are the channel's Redis queues.
func (c *Cluster) Queues() []string { return delivery.QueueNames(Channel, c.Partitions()) }

// queueKey is a key of queue name, e.g. queueKey("chaos#2", "ready").
func queueKey(name, suffix string) string { return Prefix + ":{ch:" + name + "}:" + suffix }

// config is one instance's YAML: everything through the proxies, short
// leases and sweeps and fast retries, so recovery is quick.
func (c *Cluster) config(id, httpAddr string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "postgres: {url: %q, max_conns: 8}\n", c.Postgres.DatabaseURL(c.PGProxy.Addr, "notifyd"))
	if c.Setup.RedisCluster {
		var addrs []string
		for _, px := range c.RedisPx {
			addrs = append(addrs, strconv.Quote(px.Addr))
		}
		fmt.Fprintf(&b, "redis: {cluster_addrs: [%s], prefix: %s}\n", strings.Join(addrs, ", "), Prefix)
	} else {
		fmt.Fprintf(&b, "redis: {url: %q, prefix: %s}\n", "redis://"+c.RedisPx[0].Addr+"/0", Prefix)
	}
	fmt.Fprintf(&b, "plugins: {dir: %q, health_interval: 1s}\n", c.Setup.PluginDir)
	fmt.Fprintf(&b, "http: {listen: %q, tokens: [%s]}\n", httpAddr, Token)
	b.WriteString("log: {level: info, format: text}\n")
	if id != "" {
		fmt.Fprintf(&b, "instance: {id: %s}\n", id)
	}
	lease, sweepAfter := c.Setup.LeaseTTL, c.Setup.SweepAfter
	if sweepAfter == 0 {
		sweepAfter = config.DefaultSweepAfter
	}
	fmt.Fprintf(&b, `shutdown: {soft_timeout: 2s, hard_timeout: 5s}
delivery:
  lease_ttl: %s
  sweep_interval: 1s
  sweep_after: %s
  promote_interval: 50ms
  epoch_interval: 200ms
  relay_interval: 500ms
channels:
  %s:
    plugin: webhook
    config: {url: %q, timeout: 2s}
    concurrency: 32
    batch_size: 16
    timeout: 3s
    retry: {max_attempts: 25, base: 100ms, max: 1s, jitter: full}
    partitions: %d
`, lease, sweepAfter, Channel, c.Sink.URL, c.Partitions())
	b.WriteString(c.dailyConfig())
	return b.String()
}

// Running returns the HTTP addresses of the instances running now.
func (c *Cluster) Running() []string {
	var out []string
	for _, in := range c.Instances {
		if in.PID() != 0 {
			out = append(out, in.HTTPAddr)
		}
	}
	return out
}

// Heal ends every fault: toxics removed, Redis (every node, the cluster
// back to cluster_state:ok) and every instance running.
func (c *Cluster) Heal() error {
	c.PGProxy.Clear()
	for _, px := range c.RedisPx {
		px.Clear()
	}
	for _, rs := range c.Redis {
		if err := rs.Start(); err != nil {
			return err
		}
	}
	if c.Setup.RedisCluster {
		if err := waitClusterOK(context.Background(), c.Redis, 60*time.Second); err != nil {
			return err
		}
	}
	for _, in := range c.Instances {
		if err := in.Start(); err != nil {
			return err
		}
	}
	return nil
}

// Close stops and removes everything, in an order that lets each part go
// quietly: instances first, then the services.
func (c *Cluster) Close() {
	for _, in := range c.Instances {
		in.Stop()
	}
	if c.Sink != nil {
		c.Sink.Close()
	}
	if c.PGProxy != nil {
		c.PGProxy.Stop()
	}
	for _, px := range c.RedisPx {
		px.Stop()
	}
	if c.RC != nil {
		_ = c.RC.Close()
	}
	if c.DB != nil {
		c.DB.Close()
	}
	for _, rs := range c.Redis {
		rs.Remove()
	}
	if c.Setup.KeepLogs && c.Dir != "" && c.Postgres != nil {
		if b, err := os.ReadFile(c.Postgres.Log()); err == nil {
			_ = os.WriteFile(filepath.Join(c.Dir, "postgres.log"), b, 0o644)
		}
	}
	if c.Postgres != nil {
		c.Postgres.Remove()
	}
	if c.Dir != "" {
		if c.Setup.KeepLogs {
			c.Setup.Logf("chaos: configs and logs kept in %s", c.Dir)
		} else {
			os.RemoveAll(c.Dir)
		}
	}
}

// freePorts reserves n distinct free loopback ports (all listeners are held
// until every port is chosen, so none repeats).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("chaos: find a free port: %w", err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}
