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

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
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
		// delay holds the statement back from Postgres after the engine
		// has seen its connection drop.
		delay time.Duration
	}{
		// The relay moved the rows to QUEUED, but the engine saw an error
		// and never pushed them. The statement reaches Postgres only after
		// several epoch ticks (100 ms here), as one still running on the
		// server when its reply is lost: the resync passes right after the
		// error read the outbox before it commits, and found nothing (a CI
		// run caught that race), so a later pass must come.
		{"relay", "WITH due AS", func(int) int { return http.StatusOK }, 500 * time.Millisecond},
		// A retry verdict committed QUEUED; the settler tried again, found
		// nothing to apply and took the id out of Redis.
		{"settle of a retry", "WITH settled AS", func(n int) int {
			if n == 1 {
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		}, 0},
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

			px.arm(tt.marker, tt.delay)
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
	delay  time.Duration
	parsed map[string][]byte // prepared statement name → its text, from Parse messages

	held      []byte    // the marker of a statement held back, after it fired
	heldUntil time.Time // until when statements like it wait
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

// arm makes the proxy lose the reply of the next statement containing
// marker; with a delay, the client's connection is closed first and the
// statement sent on to Postgres that much later.
func (p *lossyProxy) arm(marker string, delay time.Duration) {
	p.mu.Lock()
	p.marker, p.delay = []byte(marker), delay
	p.mu.Unlock()
}

// take reports whether chunk runs the armed statement (see runs), disarming
// the proxy, and the delay it was armed with.
func (p *lossyProxy) take(chunk []byte) (delay time.Duration, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runs(chunk, p.marker) { // nil marker: only records the chunk's Parses
		return 0, false
	}
	if p.delay > 0 {
		// Statements like it wait until the held one has reached Postgres.
		p.held, p.heldUntil = p.marker, time.Now().Add(p.delay+100*time.Millisecond)
	}
	p.marker = nil
	return p.delay, true
}

// hold is how long chunk must wait before going on: while a statement is
// held back, so are others of its kind (a retried relay would otherwise
// queue the rows itself and hide what the test looks for).
func (p *lossyProxy) hold(chunk []byte) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	wait := time.Until(p.heldUntil)
	if p.held == nil || wait <= 0 || !p.runs(chunk, p.held) {
		return 0
	}
	return wait
}

// runs reports whether chunk runs a statement containing text: the text is
// in the chunk (a simple query, or a Parse sent with its execution), or the
// chunk binds a prepared statement whose Parse, seen earlier on any
// connection, had it (never, for a nil text). Called with p.mu held; it
// records the Parses it sees.
func (p *lossyProxy) runs(chunk, text []byte) bool {
	hit := text != nil && bytes.Contains(chunk, text)
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
		case b[0] == 'B' && len(fields) >= 2: // Bind: portal, statement
			hit = hit || text != nil && bytes.Contains(p.parsed[string(fields[1])], text)
		}
		b = b[n:]
	}
	return hit
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
			if delay, ok := p.take(buf[:n]); ok {
				mu.Lock()
				drop = true
				mu.Unlock()
				if delay > 0 {
					client.Close()
					time.Sleep(delay)
				}
				_, _ = server.Write(buf[:n])
				client.Close()
				// Let Postgres finish (and commit) the statement, then
				// hang up on it too.
				_ = server.SetReadDeadline(time.Now().Add(time.Second))
				close(p.fired)
				return
			}
			if wait := p.hold(buf[:n]); wait > 0 {
				time.Sleep(wait)
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
