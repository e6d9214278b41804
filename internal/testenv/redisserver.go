package testenv

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a private redis-server a test may wipe, stop and restart.
type RedisServer struct {
	Addr string
	URL  string
	dir  string
	port int
	cmd  *exec.Cmd
	t    testing.TB
}

// StartRedis starts a redis-server of the test's own on a free loopback port
// (no persistence) and stops it when the test ends.
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("testenv: redis-server is not installed (%v); %s", err, howToStart)
	}
	s := &RedisServer{dir: t.TempDir(), port: freePort(t), t: t}
	s.Addr = "127.0.0.1:" + strconv.Itoa(s.port)
	s.URL = "redis://" + s.Addr + "/0"
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Start (re)starts the server on its port.
func (s *RedisServer) Start() {
	s.t.Helper()
	s.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(s.port),
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"))
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("testenv: start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("testenv: redis-server on %s did not answer: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (as a crash would: SIGKILL) and waits for it.
func (s *RedisServer) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Client returns a new client for the server, closed when the test ends.
func (s *RedisServer) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
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
