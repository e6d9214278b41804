package httpguard

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Conns bounds a server's connections so that no client can starve the
// listener (docs/design.md §10): at most Max open, at most PerClient from
// one peer address (a trusted proxy is not capped: it carries many
// clients). A connection that is not serving a request — idle between
// keep-alive requests, new with no request read yet, or reading a request
// that has not shown a credential — holds nothing anyone needs, so a new
// connection past either bound closes one of those (the oldest of the peer
// with the most connections) instead of waiting for it to time out. Only
// when every connection is busy serving a request does a new one wait, at
// most AdmitWait, and is then answered 503 with Retry-After. A request takes
// at most the server's read and write timeouts, so busy connections free
// up; the others free up at once.
//
// The server must report its connections' states: set
// http.Server.ConnState to Conns.ConnState and serve on Conns.Listener.
// With http.Server.ConnContext set to Conns.ConnContext too, a request
// serves someone only once its handler says so (Serving): until then its
// connection may be closed like an idle one. Without it, every request
// does from its first byte. Conns.Server builds such a server. A request refused before its body is read (no
// token) waits for that body for the read timeout, net/http reading it
// before it answers, and a dashboard login may trickle its form as long: a
// few addresses doing that held every connection without a credential.
type Conns struct {
	max, perClient int
	exempt         Proxies
	wait           time.Duration

	mu      sync.Mutex
	open    map[*conn]struct{}
	byPeer  map[string]int
	changed chan struct{} // closed, and replaced, when a connection closes or goes idle

	refusing chan struct{} // a token per connection being answered 503 (refuse)
}

// The timeouts and header bound of every server notifyd runs on its HTTP
// address (Conns.Server): generous for a 1 MiB body on a slow link, short
// enough that idle or stalled clients do not pile up. ReadTimeout bounds
// how long net/http waits for a body a handler did not read.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 60 * time.Second
	WriteTimeout      = 60 * time.Second
	IdleTimeout       = 2 * time.Minute
	MaxHeaderBytes    = 64 << 10
)

// Server is an http.Server for h under g's bounds, the one way notifyd
// serves its HTTP address (the API, and the stand-in that answers while
// notifyd waits for Postgres and Redis): its ConnState and ConnContext are
// g's, so a request serves someone only once its handler says so (Serving,
// Open), with the timeouts above. Serve it on g.Listener(ln). errorLog may
// be nil.
func (g *Conns) Server(h http.Handler, errorLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ConnState:         g.ConnState,
		ConnContext:       g.ConnContext,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          errorLog,
	}
}

// AdmitWait is how long a new connection waits for a busy one to finish
// when every connection is serving a request.
const AdmitWait = 2 * time.Second

// NewConns allows max connections, perClient of them from one peer address
// (perClient ≥ max: no cap of its own). Peers in exempt have no per-client
// cap.
func NewConns(max, perClient int, exempt Proxies) *Conns {
	return &Conns{max: max, perClient: min(perClient, max), exempt: exempt, wait: AdmitWait,
		open: map[*conn]struct{}{}, byPeer: map[string]int{}, changed: make(chan struct{}),
		refusing: make(chan struct{}, maxRefusing)}
}

// conn is an admitted connection.
type conn struct {
	net.Conn
	g     *Conns
	peer  string
	state http.ConnState // under g.mu
	since time.Time      // when it entered state
	gone  bool           // released (closed, hijacked or evicted); under g.mu
	// tracked: its server says which requests serve someone (ConnContext);
	// serving: its request does (Serving). Under g.mu.
	tracked, serving bool
}

// connKey is the request context's key for its *conn (ConnContext).
type connKey struct{}

// ConnContext is the http.Server's ConnContext hook: a request's context
// carries its connection, for Serving.
func (g *Conns) ConnContext(ctx context.Context, nc net.Conn) context.Context {
	c, ok := nc.(*conn)
	if !ok {
		return ctx
	}
	g.mu.Lock()
	c.tracked = true
	g.mu.Unlock()
	return context.WithValue(ctx, connKey{}, c)
}

// Serving says that the request of ctx serves someone: it showed a
// credential, or its route needs none. Its connection is not closed to
// admit another until the request is over (without Conns.ConnContext on the
// server, it has none to keep), and it takes its whole body's share of the
// in-flight bound (Inflight), of which it held only PreCredentialBody
// until now. When that share cannot be had, the error is a *Busy: answer
// 503 with Retry-After.
func Serving(ctx context.Context) error {
	if c, ok := ctx.Value(connKey{}).(*conn); ok {
		c.g.mu.Lock()
		c.serving = true
		c.g.mu.Unlock()
	}
	if v, ok := ctx.Value(reservationKey{}).(*reservation); ok {
		if err := v.grow(v.full); err != nil {
			return &Busy{RetryAfter: 1, Message: inflightBusy}
		}
	}
	return nil
}

// Open says that r, for a route that needs no credential, serves someone
// (Serving), unless it declares a body: such a route reads none, and
// net/http waits for that body, up to the read timeout, before it sends the
// answer. A connection doing that serves no one, and may be closed to admit
// another: two addresses' /healthz requests declaring 100 bytes that never
// came held every connection for the read timeout.
func Open(r *http.Request) {
	if r.ContentLength == 0 {
		_ = Serving(r.Context()) // no body: nothing to reserve, nothing to refuse
	}
}

func (c *conn) Close() error {
	c.g.release(c)
	return c.Conn.Close()
}

// Listener admits ln's connections under the bounds.
func (g *Conns) Listener(ln net.Listener) net.Listener {
	return &listener{Listener: ln, g: g, done: make(chan struct{})}
}

type listener struct {
	net.Listener
	g        *Conns
	done     chan struct{}
	doneOnce sync.Once
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if gc := l.g.admit(c, l.done); gc != nil {
			return gc, nil
		}
	}
}

func (l *listener) Close() error {
	l.doneOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// ConnState is the http.Server's ConnState hook.
func (g *Conns) ConnState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	switch st {
	case http.StateClosed, http.StateHijacked:
		g.release(c)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if c.gone || c.state == st {
		return
	}
	c.state, c.since, c.serving = st, time.Now(), false
	if st == http.StateIdle {
		g.signalLocked()
	}
}

// Open is the number of connections admitted and not closed.
func (g *Conns) Open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.open)
}

func peerOf(c net.Conn) string {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return ap.Addr().Unmap().String()
}

// admit admits c, closing an idle connection to make room when a bound is
// reached; nil when c was refused (and answered).
func (g *Conns) admit(c net.Conn, done <-chan struct{}) *conn {
	peer := peerOf(c)
	capped := true
	if a, err := netip.ParseAddr(peer); err == nil && g.exempt.trusted(a) {
		capped = false
	}
	var deadline <-chan time.Time
	for {
		g.mu.Lock()
		var victims []*conn
		if capped && g.byPeer[peer] >= g.perClient {
			v := g.victimLocked(peer)
			if v == nil {
				g.mu.Unlock()
				g.refuse(c, fmt.Sprintf("too many connections from %s, each serving a request (http.max_connections_per_client: %d); retry", peer, g.perClient))
				return nil
			}
			g.removeLocked(v)
			victims = append(victims, v)
		}
		if len(g.open) >= g.max {
			v := g.victimLocked("")
			if v == nil {
				wait := g.changed
				g.mu.Unlock()
				closeAll(victims)
				if deadline == nil {
					deadline = time.After(g.wait)
				}
				select {
				case <-wait:
					continue
				case <-deadline:
					g.refuse(c, fmt.Sprintf("all %d connections are serving requests (http.max_connections); retry", g.max))
					return nil
				case <-done:
					_ = c.Close()
					return nil
				}
			}
			g.removeLocked(v)
			victims = append(victims, v)
		}
		gc := &conn{Conn: c, g: g, peer: peer, state: http.StateNew, since: time.Now()}
		g.open[gc] = struct{}{}
		g.byPeer[peer]++
		g.mu.Unlock()
		closeAll(victims)
		return gc
	}
}

// victimLocked is the connection to close for a new one: one not serving a
// request, of peer (any peer when ""), from the peer with the most
// connections, idle before new before a request without a credential, the
// longest in that state first.
func (g *Conns) victimLocked(peer string) *conn {
	var best *conn
	for c := range g.open {
		if (peer != "" && c.peer != peer) || idleness(c) < 0 {
			continue
		}
		if best == nil || g.before(c, best) {
			best = c
		}
	}
	return best
}

// idleness ranks what c is doing for someone: 0 nothing (idle), 1 nothing
// yet (new), 2 reading a request that has shown no credential; -1 serving.
func idleness(c *conn) int {
	switch {
	case c.state == http.StateIdle:
		return 0
	case c.state == http.StateNew:
		return 1
	case c.state == http.StateActive && c.tracked && !c.serving:
		return 2
	}
	return -1
}

func (g *Conns) before(a, b *conn) bool {
	if na, nb := g.byPeer[a.peer], g.byPeer[b.peer]; na != nb {
		return na > nb
	}
	if ia, ib := idleness(a), idleness(b); ia != ib {
		return ia < ib
	}
	return a.since.Before(b.since)
}

func (g *Conns) removeLocked(c *conn) {
	if c.gone {
		return
	}
	c.gone = true
	delete(g.open, c)
	if g.byPeer[c.peer]--; g.byPeer[c.peer] <= 0 {
		delete(g.byPeer, c.peer)
	}
	g.signalLocked()
}

func (g *Conns) signalLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

func (g *Conns) release(c *conn) {
	g.mu.Lock()
	g.removeLocked(c)
	g.mu.Unlock()
}

// closeAll closes evicted connections; their servers see the close and
// report StateClosed, which finds them released already.
func closeAll(cs []*conn) {
	for _, c := range cs {
		_ = c.Conn.Close()
	}
}

// refuse answers a connection that cannot be admitted with 503 and closes
// it, on a goroutine of its own so the accept loop goes on. It reads the
// request's head first (at most 16 KiB, for at most a second): answering
// before the client has written makes Go's client report an unsolicited
// response instead of the 503, and closing on unread bytes can reset the
// connection before the answer is read (both seen under load). At most
// maxRefusing connections are answered at once; past that, closed.
func (g *Conns) refuse(c net.Conn, msg string) {
	select {
	case g.refusing <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-g.refusing }()
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 4096)
		var head []byte
		for len(head) < 16<<10 && !bytes.Contains(head, []byte("\r\n\r\n")) {
			n, err := c.Read(buf)
			head = append(head, buf[:n]...)
			if err != nil {
				break
			}
		}
		body := fmt.Sprintf(`{"error":{"code":"unavailable","message":%q}}`+"\n", msg)
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_ = c.Close()
	}()
}

// maxRefusing bounds the connections refuse answers at once.
const maxRefusing = 64
