package delivery_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/notifyd/notifyd/core/config"
	"github.com/notifyd/notifyd/core/delivery"
	"github.com/notifyd/notifyd/core/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
)

// A statement that commits while its reply is lost (a connection reset at
// the wrong moment) must not strand its rows outside Redis until the sweeper
// (sweep_after, 2 minutes by default) finds them. Found by the chaos suite
// under toxiproxy reset_peer on Postgres. Each case loses the reply of the
// first statement containing marker, after Postgres has committed it.
func TestEngine_ReplyLost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, marker string
		// respond is the sink's answer to the n-th delivery of a recipient.
		respond func(n int) int
	}{
		// The relay moved the rows to QUEUED, but the engine saw an error
		// and never pushed them.
		{"relay", "WITH due AS", func(int) int { return http.StatusOK }},
		// A retry verdict committed QUEUED; the settler tried again, found
		// nothing to apply and took the id out of Redis.
		{"settle of a retry", "WITH settled AS", func(n int) int {
			if n == 1 {
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSink(t, func(_ string, n int, _ http.Header) (int, string) { return tt.respond(n), "" })
			b := setup(t, s, func(c *config.Config, _ *config.Channel) {
				c.Delivery.SweepAfter, c.Delivery.SweepInterval = time.Hour, time.Hour
			})
			px := startLossyProxy(t, b.dbURL)
			// The proxy must tell statements apart and let the one it drops
			// still run: the simple protocol here carries each statement's
			// text with it; outbox's hot path runs relay, claim and settle as
			// prepared statements on pools of its own, and the proxy knows
			// them by the name their Parse gave them.
			pool, err := pgxpool.New(context.Background(), px.url+"&default_query_exec_mode=simple_protocol")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			b.start(delivery.Options{Store: testenv.Store(t, pool)})
			time.Sleep(300 * time.Millisecond)

			px.arm(tt.marker)
			id := b.send("dana", "")
			select {
			case <-px.fired:
			case <-time.After(15 * time.Second):
				t.Fatalf("no statement with %q went through the proxy", tt.marker)
			}
			n := b.wait(id, 20*time.Second)
			if n.Status != outbox.StatusSent {
				t.Fatalf("status %s (%s), want SENT", n.Status, n.LastError)
			}
			b.queueEmpty()
		})
	}
}

// lossyProxy forwards TCP connections to Postgres. Once armed, the first
// client message containing the marker is forwarded, its reply read to the
// end (so Postgres commits) and thrown away, and the client's connection
// closed: to the client, the connection dropped mid-statement.
type lossyProxy struct {
	url   string // the database URL through the proxy
	fired chan struct{}

	mu     sync.Mutex
	marker []byte
	parsed map[string][]byte // prepared statement name → its text, from Parse messages
}

func startLossyProxy(t *testing.T, dbURL string) *lossyProxy {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	upstream := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	u.Host = ln.Addr().String()
	p := &lossyProxy{url: u.String(), fired: make(chan struct{}), parsed: map[string][]byte{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c, upstream)
		}
	}()
	return p
}

func (p *lossyProxy) arm(marker string) {
	p.mu.Lock()
	p.marker = []byte(marker)
	p.mu.Unlock()
}

// take reports whether chunk runs the armed statement, disarming the proxy:
// its text is in the chunk (a simple query, or a Parse sent with its
// execution), or the chunk binds a prepared statement whose Parse, seen
// earlier on any connection, had the text.
func (p *lossyProxy) take(chunk []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	hit := p.marker != nil && bytes.Contains(chunk, p.marker)
	// Frontend messages: a type byte, a length (itself included), a body.
	for b := chunk; len(b) >= 5; {
		n := int(binary.BigEndian.Uint32(b[1:5])) + 1
		if n < 5 || n > len(b) {
			break // split across reads; the statements of interest are small
		}
		fields := bytes.SplitN(b[5:n], []byte{0}, 3)
		switch {
		case b[0] == 'P' && len(fields) >= 2 && len(fields[0]) > 0: // Parse: name, text
			p.parsed[string(fields[0])] = append([]byte(nil), fields[1]...)
		case b[0] == 'B' && len(fields) >= 2 && p.marker != nil: // Bind: portal, statement
			hit = hit || bytes.Contains(p.parsed[string(fields[1])], p.marker)
		}
		b = b[n:]
	}
	if !hit {
		return false
	}
	p.marker = nil
	return true
}

func (p *lossyProxy) serve(client net.Conn, upstream string) {
	server, err := net.Dial("tcp", upstream)
	if err != nil {
		client.Close()
		return
	}
	var (
		mu   sync.Mutex
		drop bool // the server's replies go nowhere
	)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				mu.Lock()
				d := drop
				mu.Unlock()
				if !d {
					if _, werr := client.Write(buf[:n]); werr != nil {
						break
					}
				}
			}
			if err != nil {
				break
			}
		}
		client.Close()
		server.Close()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if p.take(buf[:n]) {
				mu.Lock()
				drop = true
				mu.Unlock()
				_, _ = server.Write(buf[:n])
				client.Close()
				// Let Postgres finish (and commit) the statement, then
				// hang up on it too.
				_ = server.SetReadDeadline(time.Now().Add(time.Second))
				close(p.fired)
				return
			}
			if _, werr := server.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	client.Close()
	server.Close()
}
