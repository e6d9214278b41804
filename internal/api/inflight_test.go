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
func TestServer_InflightShare(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	cfg := *b.cfg
	cfg.HTTP.Listen = "127.0.0.1:0"
	log := hclog.NewNullLogger()
	sched, err := schedule.New(b.store.Pool(), &cfg, schedule.Options{Logger: log})
	must(t, err)
	ops, err := service.New(service.Options{Config: &cfg, Store: b.store, Engine: b.engine, Schedules: sched, Redis: b.rds.Client, Logger: log})
	must(t, err)
	dash, err := ui.New(ui.Deps{Config: &cfg, Ops: ops, Logger: log})
	must(t, err)
	srv, err := api.New(api.Options{Config: &cfg, Ops: ops, UI: dash, Logger: log})
	must(t, err)
	must(t, srv.Start(context.Background()))
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	addr := srv.Addr().String()

	// The greedy client's logins, one connection each, declare 1 MiB and
	// send none of it, with Expect: 100-continue: the server answers 100
	// when the handler starts reading the body, that is once the in-flight
	// bound has admitted it, or 503 when the bound refuses it. Opened until
	// one is refused or every connection it may have is holding bytes.
	perClient := cmp.Or(cfg.HTTP.MaxConnectionsPerClient, config.DefaultMaxConnectionsPerClient)
	held := 0
	for range perClient {
		c, err := net.Dial("tcp", addr)
		must(t, err)
		t.Cleanup(func() { c.Close() })
		_, err = fmt.Fprintf(c, "POST /ui/login HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", addr, 1<<20)
		must(t, err)
		must(t, c.SetReadDeadline(time.Now().Add(time.Minute)))
		line, err := bufio.NewReader(c).ReadString('\n')
		must(t, err)
		if !strings.Contains(line, " 100 ") {
			break // refused: the client's share is held
		}
		held++
	}
	if share := int(httpguard.ClientShare(config.DefaultMaxInflight, perClient, config.DefaultMaxConnections) >> 20); held > share {
		t.Errorf("one client holds %d 1 MiB bodies in flight; want at most its share, %d", held, share)
	}

	other := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext,
	}}
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/notifications",
		strings.NewReader(`{"channel":"orders","recipient":"victim","payload":{}}`))
	req.Header.Set("Authorization", "Bearer "+tokenA)
	res, err := other.Do(req)
	if err != nil {
		t.Fatalf("enqueue from another client: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 202 {
		t.Errorf("authorised enqueue from 127.0.0.2 while 127.0.0.1 holds %d slow unauthenticated logins: %d %s; want 202",
			held, res.StatusCode, body)
	}
}
