package bench

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
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterMasters is how many masters a throw-away cluster has: the fewest
// redis-cli --cluster create accepts.
const clusterMasters = 3

// clusterReady bounds the wait for a new cluster to agree on its slots.
const clusterReady = 20 * time.Second

// Cluster is a throw-away Redis Cluster of three masters on loopback, for
// `notifyd-bench --redis-cluster`: redis-server processes of its own in a
// temporary directory, no persistence, joined by redis-cli --cluster create.
// It does what internal/testenv.StartRedisCluster does for tests, without a
// testing.TB.
type Cluster struct {
	// Addrs are the masters' host:port, for redis.cluster_addrs.
	Addrs []string
	dir   string
	cmds  []*exec.Cmd
}

// StartCluster starts the servers, creates the cluster and waits until
// every node reports cluster_state:ok. On error nothing is left running.
func StartCluster(ctx context.Context) (c *Cluster, err error) {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("bench: --redis-cluster needs %s on PATH: %w", bin, err)
		}
	}
	dir, err := os.MkdirTemp("", "notifyd-bench-cluster-")
	if err != nil {
		return nil, fmt.Errorf("bench: redis cluster: %w", err)
	}
	c = &Cluster{dir: dir}
	defer func() {
		if err != nil {
			_ = c.Close()
			c = nil
		}
	}()
	for i := range clusterMasters {
		// Two free ports each: the client port and, set explicitly, the
		// cluster bus port, which otherwise is port+10000 and does not
		// exist for ports above 55535.
		ports, err := freePorts(2)
		if err != nil {
			return c, err
		}
		node := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(node, 0o700); err != nil {
			return c, fmt.Errorf("bench: redis cluster: %w", err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(ports[0])
		cmd := exec.Command("redis-server",
			"--bind", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--cluster-port", strconv.Itoa(ports[1]),
			"--save", "", "--appendonly", "no", "--dir", node, "--logfile", filepath.Join(node, "redis.log"),
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		if err := cmd.Start(); err != nil {
			return c, fmt.Errorf("bench: redis cluster: start redis-server on %s: %w", addr, err)
		}
		c.cmds = append(c.cmds, cmd)
		c.Addrs = append(c.Addrs, addr)
	}
	for _, addr := range c.Addrs {
		if err := waitNode(ctx, addr, func(context.Context, *redis.Client) error { return nil }); err != nil {
			return c, err
		}
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		return c, fmt.Errorf("bench: redis-cli --cluster create: %w\n%s", err, out)
	}
	for _, addr := range c.Addrs {
		err := waitNode(ctx, addr, func(ctx context.Context, rc *redis.Client) error {
			info, err := rc.ClusterInfo(ctx).Result()
			if err == nil && !strings.Contains(info, "cluster_state:ok") {
				err = errors.New("cluster_state is not ok yet")
			}
			return err
		})
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

// waitNode polls the node at addr until it answers PING and ready accepts
// it, for at most clusterReady.
func waitNode(ctx context.Context, addr string, ready func(context.Context, *redis.Client) error) error {
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	deadline := time.Now().Add(clusterReady)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := rc.Ping(pctx).Err()
		if err == nil {
			err = ready(pctx, rc)
		}
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("bench: redis cluster node %s not ready: %w", addr, err)
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
}

// Close kills the servers, waits for them and removes their directory.
func (c *Cluster) Close() error {
	for _, cmd := range c.cmds {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	c.cmds = nil
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("bench: remove the redis cluster's directory: %w", err)
	}
	return nil
}

// freePorts finds n distinct free loopback ports, holding each until all
// are found so none is handed out twice.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("bench: find a free loopback port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
