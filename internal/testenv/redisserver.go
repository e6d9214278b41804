package testenv

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
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a private redis-server a test may wipe, stop and restart.
type RedisServer struct {
	Addr   string
	URL    string
	dir    string
	port   int
	extra  []string
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited (and been waited for)
	t      testing.TB
}

// StartRedis starts a redis-server of the test's own on a free loopback port
// (no persistence, plus any extra arguments) and stops it when the test ends.
func StartRedis(t testing.TB, extra ...string) *RedisServer {
	t.Helper()
	return startRedis(t, func() []string { return extra })
}

// startRedis starts a server with the arguments extra gives. A free port is
// free when freePort closes it, not necessarily when redis-server binds it:
// a test starting its servers in parallel with others (a cluster's three,
// each with a bus port) can be handed a port another server takes first.
// Such a server exits at once (the address in use), and is started again
// on other ports, extra called anew.
func startRedis(t testing.TB, extra func() []string) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("testenv: redis-server is not installed (%v); %s", err, howToStart)
	}
	for attempt := 1; ; attempt++ {
		s := &RedisServer{dir: t.TempDir(), port: freePort(t), extra: extra(), t: t}
		s.Addr = "127.0.0.1:" + strconv.Itoa(s.port)
		s.URL = "redis://" + s.Addr + "/0"
		err := s.start()
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		if !errors.Is(err, errExited) || attempt == 5 {
			t.Fatalf("testenv: redis-server on %s: %v", s.Addr, err)
		}
		t.Logf("testenv: redis-server on %s: %v; again on another port", s.Addr, err)
	}
}

// errExited is a server that exited before it answered.
var errExited = errors.New("exited before it answered")

// Start (re)starts the server on its port.
func (s *RedisServer) Start() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("testenv: redis-server on %s: %v", s.Addr, err)
	}
}

func (s *RedisServer) start() error {
	args := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(s.port),
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log")}, s.extra...)
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	exited := make(chan struct{})
	s.exited = exited
	go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(exited) }(s.cmd)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			s.cmd = nil
			return fmt.Errorf("%w: %s", errExited, logTail(filepath.Join(s.dir, "redis.log")))
		default:
		}
		// The server that answers must be this one: another that took the
		// port answers a PING too.
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		info, err := c.Info(ctx, "server").Result()
		cancel()
		if err == nil {
			if strings.Contains(info, "\nprocess_id:"+strconv.Itoa(s.cmd.Process.Pid)+"\r") {
				return nil
			}
			s.Stop()
			return fmt.Errorf("%w: another redis-server answers on its port", errExited)
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("did not answer: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logTail is the last lines of a redis-server log, to say why it exited.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-2):], " / ")
}

// Stop kills the server (as a crash would: SIGKILL) and waits for it.
func (s *RedisServer) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Client returns a new client for the server, closed when the test ends.
//
// Its reads wait up to 30 s, not go-redis' 3: the tests that start a server
// of their own fill lists of 100,000 ids and read them back whole, which on
// a machine busy with the whole suite once took past 3 s (an empty read,
// reported as the list's content).
func (s *RedisServer) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartRedisCluster creates a real 3-master Redis Cluster on loopback (three
// private redis-servers joined by redis-cli --cluster create) and returns the
// node addresses; the servers stop when the test ends.
func StartRedisCluster(t testing.TB) []string {
	t.Helper()
	var addrs []string
	for i := range 3 {
		// The bus port is set explicitly: the default, port+10000, does not
		// exist for ports above 55535, which the free-port search can return.
		s := startRedis(t, func() []string {
			return []string{"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(freePort(t)),
				"--cluster-config-file", fmt.Sprintf("nodes-%d.conf", i), "--cluster-node-timeout", "2000"}
		})
		addrs = append(addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("testenv: redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		for {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				_ = c.Close()
				t.Fatalf("testenv: cluster node %s not ready: %v %s", addr, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = c.Close()
	}
	return addrs
}
