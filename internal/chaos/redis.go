package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a redis-server of the suite's own, without persistence, so
// a kill -9 and restart comes back empty, as a Redis that lost its data.
type RedisServer struct {
	Addr string
	dir  string
	port int

	mu  sync.Mutex
	cmd *exec.Cmd
}

// StartRedis starts a redis-server on port.
func StartRedis(port int) (*RedisServer, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis: redis-server is not installed (apt-get install redis-server): %w", err)
	}
	dir, err := os.MkdirTemp("", "notifyd-chaos-redis-")
	if err != nil {
		return nil, err
	}
	s := &RedisServer{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, port: port}
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
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(s.port),
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"))
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

// Remove kills the server and deletes its directory.
func (s *RedisServer) Remove() {
	s.Kill()
	os.RemoveAll(s.dir)
}
