package api_test

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/api"
	"github.com/notifyd/notifyd/internal/httpguard"
	"github.com/notifyd/notifyd/internal/schedule"
	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/internal/ui"
)

// One client without any credentials cannot keep every other client's
// request bodies out. With the defaults (64 connections per client, 1 MiB
// bodies, 64 MiB in flight) a client that opened its 64 connections as slow
// dashboard logins (Content-Length 1 MiB, a few bytes sent) reserved the
// whole http.max_inflight_body_bytes for up to the read timeout (60 s), and
// an authorised enqueue from another address got 503 (found in stop 42).
// A client now holds at most its share (httpguard.ClientShare: 16 MiB).
// dashboardServer starts the API with its dashboard over a service of its
// own on cfg (the defaults of http.*), on port 0, as notifyd serves them.
func dashboardServer(t *testing.T, b *bundle, cfg *config.Config) string {
	t.Helper()
	cfg.HTTP.Listen = "127.0.0.1:0"
	log := hclog.NewNullLogger()
	sched, err := schedule.New(b.store.Pool(), cfg, schedule.Options{Logger: log})
	must(t, err)
	ops, err := service.New(service.Options{Config: cfg, Store: b.store, Engine: b.engine, Schedules: sched, Redis: b.rds.Client, Logger: log})
	must(t, err)
	dash, err := ui.New(ui.Deps{Config: cfg, Ops: ops, Logger: log})
	must(t, err)
	srv, err := api.New(api.Options{Config: cfg, Ops: ops, UI: dash, Logger: log})
	must(t, err)
	must(t, srv.Start(context.Background()))
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	return srv.Addr().String()
}

// holdBody opens a connection from 127.0.0.ip that sends head, a request
// declaring a body with Expect: 100-continue, and none of the body: the
// server answers 100 once the handler reads the body, that is once the
// in-flight bound has admitted it, or 503 when the bound refuses it.
// admitted says which.
func holdBody(t *testing.T, addr string, ip byte, head string) (admitted bool) {
	t.Helper()
	c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, ip)}}).Dial("tcp", addr)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = io.WriteString(c, head)
	must(t, err)
	must(t, c.SetReadDeadline(time.Now().Add(time.Minute)))
	line, err := bufio.NewReader(c).ReadString('\n')
	must(t, err)
	return strings.Contains(line, " 100 ")
}

// enqueueFrom sends an authorised enqueue from 127.0.0.ip and fails the
// test unless it is accepted.
func enqueueFrom(t *testing.T, addr string, ip byte, while string) {
	t.Helper()
	other := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, ip)}}).DialContext,
	}}
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/notifications",
		strings.NewReader(`{"channel":"orders","recipient":"victim","payload":{}}`))
	req.Header.Set("Authorization", "Bearer "+tokenA)
	res, err := other.Do(req)
	if err != nil {
		t.Fatalf("enqueue from 127.0.0.%d: %v", ip, err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 202 {
		t.Errorf("authorised enqueue from 127.0.0.%d while %s: %d %s; want 202", ip, while, res.StatusCode, body)
	}
}

// One client cannot keep every other client's request bodies out. With
// the defaults (64 connections per client, 1 MiB bodies, 64 MiB in flight)
// a client that opened its 64 connections as slow requests declaring 1 MiB
// and sending none of it reserved the whole http.max_inflight_body_bytes
// for up to the read timeout (60 s), and an authorised enqueue from another
// address got 503 (found in stop 42). A client now holds at most its share
// (httpguard.ClientShare: 16 MiB), a token holder's requests included.
func TestServer_InflightShare(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	cfg := *b.cfg
	addr := dashboardServer(t, b, &cfg)
	perClient := cmp.Or(cfg.HTTP.MaxConnectionsPerClient, config.DefaultMaxConnectionsPerClient)
	held := 0
	for range perClient {
		if !holdBody(t, addr, 1, fmt.Sprintf("POST /v1/notifications HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", addr, tokenA, 1<<20)) {
			break // refused: the client's share is held
		}
		held++
	}
	if share := int(httpguard.ClientShare(config.DefaultMaxInflight, perClient, config.DefaultMaxConnections) >> 20); held > share {
		t.Errorf("one client holds %d 1 MiB bodies in flight; want at most its share, %d", held, share)
	}
	enqueueFrom(t, addr, 2, fmt.Sprintf("127.0.0.1 holds %d slow 1 MiB bodies", held))
}

// A request holds its whole body's share of http.max_inflight_body_bytes
// only once it has shown a credential: before, it holds what a request may
// read before one, 64 KiB (the dashboard's login form, whose token is in
// its body). Four addresses' slow dashboard logins, each declaring 1 MiB
// and sending none of it, reserved their 1 MiB before anyone was known:
// 16 each held the whole 64 MiB for the read timeout, and every other
// request with a body got 503.
func TestServer_InflightBeforeCredential(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	cfg := *b.cfg
	addr := dashboardServer(t, b, &cfg)
	for ip := byte(2); ip <= 5; ip++ {
		for i := range 16 {
			if !holdBody(t, addr, ip, fmt.Sprintf("POST /ui/login HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\n"+
				"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n", addr, 1<<20)) {
				t.Fatalf("login %d from 127.0.0.%d refused", i, ip)
			}
		}
	}
	enqueueFrom(t, addr, 6, "4 addresses hold 16 slow unauthenticated logins each")

	// A login reads no more than that before it has shown a credential.
	form := "token=" + strings.Repeat("x", 64<<10)
	res, err := http.Post("http://"+addr+"/ui/login", "application/x-www-form-urlencoded", strings.NewReader(form))
	must(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.Contains(string(body), "too large") {
		t.Errorf("a login form of %d bytes: %d, want 400 saying it is too large; body:\n%.1000s", len(form), res.StatusCode, body)
	}
}
