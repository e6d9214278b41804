package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a redis-server of the suite's own, without persistence, so
// a kill -9 and restart comes back empty, as a Redis that lost its data. In
// cluster mode it is one master: its directory keeps nodes.conf, so a
// restart rejoins the cluster with its node id and slots, but no keys.
type RedisServer struct {
	Name string // "redis", or "redis-1".. in cluster mode: the fault schedule's target
	Addr string // its own address (the suite's direct view)
	dir  string
	port int
	args []string // extra arguments (cluster mode)

	mu  sync.Mutex
	cmd *exec.Cmd
}

// StartRedis starts a redis-server on port, with any extra arguments.
func StartRedis(name string, port int, extra ...string) (*RedisServer, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis: redis-server is not installed (apt-get install redis-server): %w", err)
	}
	dir, err := os.MkdirTemp("", "notifyd-chaos-redis-")
	if err != nil {
		return nil, err
	}
	s := &RedisServer{Name: name, Addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, port: port, args: extra}
	if err := s.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// Start starts the server (if it is not running) and waits for PONG.
func (s *RedisServer) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	args := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(s.port),
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log")}, s.args...)
	cmd := exec.Command("redis-server", args...)
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redis: start: %w", err)
	}
	s.cmd = cmd
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis: server on %s did not answer: %w", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill kills the server with SIGKILL and waits for it.
func (s *RedisServer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// FlushAll wipes the server's keys, through a connection of its own.
func (s *RedisServer) FlushAll(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	return c.FlushAll(ctx).Err()
}

// ClusterState is the node's cluster_state from CLUSTER INFO ("ok", "fail").
func (s *RedisServer) ClusterState(ctx context.Context) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cluster_state:"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("redis: no cluster_state in CLUSTER INFO of %s", s.Addr)
}

// Log is the tail of the server's log, for error messages.
func (s *RedisServer) Log(n int) string { return tail(filepath.Join(s.dir, "redis.log"), n) }

// Remove kills the server and deletes its directory.
func (s *RedisServer) Remove() {
	s.Kill()
	os.RemoveAll(s.dir)
}

// redisClusterMasters is how many masters the cluster mode runs: the fewest
// redis-cli --cluster create accepts.
const redisClusterMasters = 3

// startRedisCluster starts the masters of a Redis Cluster, each announcing
// its proxy's address (so CLUSTER SLOTS and MOVED send every client through
// toxiproxy) and its real bus port (the cluster bus stays direct), and
// joins them with redis-cli --cluster create. ports holds, per node, its
// client port, bus port and proxy port; the proxies must be listening
// before the cluster is created (redis-cli checks it through the announced
// addresses). On error the servers started so far are returned, for the
// caller to stop.
func startRedisCluster(ports [][3]int) ([]*RedisServer, error) {
	var nodes []*RedisServer
	for i, p := range ports {
		n, err := StartRedis(fmt.Sprintf("redis-%d", i+1), p[0],
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000", "--cluster-port", strconv.Itoa(p[1]),
			"--cluster-announce-ip", "127.0.0.1", "--cluster-announce-port", strconv.Itoa(p[2]),
			"--cluster-announce-bus-port", strconv.Itoa(p[1]))
		if err != nil {
			return nodes, err
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// createRedisCluster runs redis-cli --cluster create on the nodes' direct
// addresses and waits until every node reports cluster_state:ok.
func createRedisCluster(ctx context.Context, nodes []*RedisServer) error {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return fmt.Errorf("redis: redis-cli is not installed (apt-get install redis-tools): %w", err)
	}
	args := []string{"--cluster", "create"}
	for _, n := range nodes {
		args = append(args, n.Addr)
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, "redis-cli", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("redis: redis-cli --cluster create: %w\n%s", err, out)
	}
	if strings.Contains(string(out), "[ERR]") {
		return fmt.Errorf("redis: redis-cli --cluster create reported an error:\n%s", out)
	}
	return waitClusterOK(ctx, nodes, 30*time.Second)
}

// waitClusterOK waits until every node reports cluster_state:ok.
func waitClusterOK(ctx context.Context, nodes []*RedisServer, d time.Duration) error {
	deadline := time.Now().Add(d)
	for _, n := range nodes {
		for {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			state, err := n.ClusterState(cctx)
			cancel()
			if err == nil && state == "ok" {
				break
			}
			if err == nil {
				err = errors.New("cluster_state:" + state)
			}
			if ctx.Err() != nil || time.Now().After(deadline) {
				return fmt.Errorf("redis: cluster node %s (%s) not ok within %v: %v\n%s", n.Name, n.Addr, d, err, n.Log(10))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// directDialer dials a node's own address where a client was told (by
// CLUSTER SLOTS or MOVED) the address of its proxy: the suite's own view
// must work while a proxy carries a toxic.
func directDialer(direct map[string]string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if d, ok := direct[addr]; ok {
			addr = d
		}
		var dl net.Dialer
		return dl.DialContext(ctx, network, addr)
	}
}
