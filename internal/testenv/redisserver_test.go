package testenv

import (
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A redis-server whose port another process took between freePort and its
// bind exits at once: start says so (errExited, the log's reason) instead of
// pinging a dead port for 10 s, and startRedis tries another port. A cluster
// test failed that way under make test (its three servers' ports and bus
// ports chosen while other tests' servers started).
func TestRedisServer_portTaken(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	s := &RedisServer{dir: dir, port: port, t: t, Addr: "127.0.0.1:" + strconv.Itoa(port)}
	err = s.start()
	if !errors.Is(err, errExited) || !strings.Contains(err.Error(), "in use") && !strings.Contains(err.Error(), "Failed listening") {
		t.Errorf("start on a taken port = %v; want errExited saying the address is in use (log: %s)", err, logTail(filepath.Join(dir, "redis.log")))
	}
	s.Stop() // nothing to stop: it exited

	// A port another redis-server holds: that one answers, ours exits.
	other := StartRedis(t)
	s = &RedisServer{dir: t.TempDir(), port: other.port, t: t, Addr: other.Addr}
	if err := s.start(); !errors.Is(err, errExited) {
		t.Errorf("start on another redis-server's port = %v; want errExited", err)
	}
	if err := other.Client().Ping(t.Context()).Err(); err != nil {
		t.Errorf("the other server after the attempt: %v", err)
	}
}
