// Package httpguard holds what the API and the dashboard share to stay up
// under hostile clients: the client's address behind trusted proxies, a
// throttle on failed authentication per client, a bound on request bytes in
// flight, the bounds on connections (Conns), and which errors are an outage
// of Postgres or Redis (Outage).
package httpguard

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// Proxies are the peers whose X-Forwarded-For and X-Forwarded-Proto are
// believed (http.trusted_proxies). From anyone else those headers are
// ignored: a client could otherwise pick its own throttle key, or claim
// HTTPS.
type Proxies []netip.Prefix

// ParseProxies reads CIDRs (or single addresses), naming the bad one.
func ParseProxies(cidrs []string) (Proxies, error) {
	var out Proxies
	for i, c := range cidrs {
		if !strings.Contains(c, "/") {
			a, err := netip.ParseAddr(c)
			if err != nil {
				return nil, fmt.Errorf("http.trusted_proxies[%d]: %q is not an address or CIDR", i, c)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("http.trusted_proxies[%d]: %q is not an address or CIDR", i, c)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func (p Proxies) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, pr := range p {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}

func peer(r *http.Request) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	return a.Unmap(), err == nil
}

// ClientIP is the request's client: the peer, or, when the peer is a
// trusted proxy, the right-most address of X-Forwarded-For that is not
// itself a trusted proxy.
func (p Proxies) ClientIP(r *http.Request) string {
	a, ok := peer(r)
	if !ok {
		return r.RemoteAddr
	}
	if !p.trusted(a) {
		return a.String()
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		h, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		if !p.trusted(h) {
			return h.Unmap().String()
		}
	}
	return a.String()
}

// HTTPS reports whether the client reached notifyd over TLS: directly, or
// through a trusted proxy that says so (X-Forwarded-Proto: https).
func (p Proxies) HTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	a, ok := peer(r)
	return ok && p.trusted(a) && strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https")
}

// Throttle counts authentication failures per client in fixed windows:
// past Max failures in one Window, the client is refused until the window
// ends. It remembers at most MaxClients clients (a flood of addresses
// resets the oldest windows, never grows memory).
type Throttle struct {
	Max        int
	Window     time.Duration
	MaxClients int
	now        func() time.Time

	mu      sync.Mutex
	clients map[string]*window
}

type window struct {
	start    time.Time
	failures int
}

// Throttle defaults: 10 failed logins or bad tokens a minute per client.
const (
	ThrottleMaxDefault     = 10
	ThrottleWindowDefault  = time.Minute
	ThrottleClientsDefault = 10_000
)

// NewThrottle allows max failures a minute per client (0: the default).
func NewThrottle(max int) *Throttle {
	if max <= 0 {
		max = ThrottleMaxDefault
	}
	return &Throttle{Max: max, Window: ThrottleWindowDefault, MaxClients: ThrottleClientsDefault}
}

func (t *Throttle) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}

// Blocked says how long client must wait before it may try again (0: it may).
func (t *Throttle) Blocked(client string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.clients[client]
	if w == nil {
		return 0
	}
	now := t.clock()
	if now.Sub(w.start) >= t.Window {
		delete(t.clients, client)
		return 0
	}
	if w.failures < t.Max {
		return 0
	}
	return w.start.Add(t.Window).Sub(now)
}

// Fail records a failed attempt of client.
func (t *Throttle) Fail(client string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock()
	if t.clients == nil {
		t.clients = map[string]*window{}
	}
	w := t.clients[client]
	if w == nil || now.Sub(w.start) >= t.Window {
		if len(t.clients) >= t.MaxClients {
			for k, old := range t.clients {
				if now.Sub(old.start) >= t.Window || len(t.clients) >= t.MaxClients {
					delete(t.clients, k)
				}
				if len(t.clients) < t.MaxClients/2 {
					break
				}
			}
		}
		w = &window{start: now}
		t.clients[client] = w
	}
	w.failures++
}

// Inflight bounds the request body bytes being read at once across every
// request: a request declaring more than is free waits at most Wait, then is
// refused (503, Retry-After) rather than letting concurrent large bodies
// take memory without bound. A body without a declared length counts as
// the largest allowed.
//
// One client (Proxies.ClientIP) may hold at most its share of the bound:
// the share of the server's connections it may hold (PerClient of Max
// connections, docs/config.md), and never less than one body. Without it,
// one client's 64 connections declaring 1 MiB each and sending nothing held
// the whole 64 MiB for the read timeout, and every other client's request
// with a body got 503.
//
// A request holds its whole body's share only once it has shown a
// credential (Serving); until then it holds, and may read, at most
// PreCredentialBody. Reserving the declared length before anyone was known
// let four addresses' slow dashboard logins declaring 1 MiB each hold the
// whole bound. A request reads no more of its body than it holds: past it,
// a read fails with *http.MaxBytesError.
type Inflight struct {
	sem     *semaphore.Weighted
	max     int64
	maxBody int64
	wait    time.Duration
	client  func(*http.Request) string
	shares
}

// PreCredentialBody is the most of its body a request holds, and may read,
// before it has shown a credential (Serving): the dashboard's login form,
// whose token is in its body, is the one route that reads one, within
// 64 KiB.
const PreCredentialBody = 64 << 10

// NewInflight allows total bytes in flight, at most perClient of them to one
// client (at least maxBody, at most max); maxBody is a body's own limit;
// client names a request's client.
func NewInflight(total, maxBody, perClient int64, wait time.Duration, client func(*http.Request) string) *Inflight {
	return &Inflight{sem: semaphore.NewWeighted(total), max: total, maxBody: maxBody,
		shares: newShares(min(max(perClient, maxBody), total)), wait: wait, client: client}
}

// ClientShare is the bytes of an in-flight bound of total that a client
// holding perClient of maxConns connections may hold.
func ClientShare(total int64, perClient, maxConns int) int64 {
	if perClient <= 0 || maxConns <= 0 || perClient >= maxConns {
		return total
	}
	return total / int64(maxConns) * int64(perClient)
}

// inflightBusy is the 503's message when a request's bytes cannot be had.
const inflightBusy = "too many request bytes in flight (http.max_inflight_body_bytes, or this client's share of it); retry"

// Wrap applies the bound to h.
func (f *Inflight) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := r.ContentLength
		if r.Body == nil || r.Body == http.NoBody || n == 0 {
			h.ServeHTTP(w, r)
			return
		}
		if n < 0 || n > f.maxBody {
			n = f.maxBody // a larger body is refused by its own limit after maxBody bytes
		}
		res := &reservation{f: f, ctx: r.Context(), who: f.client(r), full: min(n, f.max)}
		defer res.release()
		if err := res.grow(min(res.full, PreCredentialBody)); err != nil {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, `{"error":{"code":"unavailable","message":%q}}`+"\n", inflightBusy)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), reservationKey{}, res))
		r.Body = &reservedBody{ReadCloser: r.Body, res: res}
		h.ServeHTTP(w, r)
	})
}

// reservation is what one request holds of the bound.
type reservation struct {
	f    *Inflight
	ctx  context.Context
	who  string
	full int64 // what its body may take: its declared length within the bounds

	mu   sync.Mutex
	held int64
}

type reservationKey struct{}

// grow holds to bytes in all, waiting for them at most the bound's wait.
func (v *reservation) grow(to int64) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := to - v.held
	if n <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(v.ctx, v.f.wait)
	defer cancel()
	if err := v.f.hold(ctx, v.who, n); err != nil {
		return err
	}
	if err := v.f.sem.Acquire(ctx, n); err != nil {
		v.f.unhold(v.who, n)
		return err
	}
	v.held = to
	return nil
}

func (v *reservation) limit() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.held
}

func (v *reservation) release() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.held > 0 {
		v.f.sem.Release(v.held)
		v.f.unhold(v.who, v.held)
		v.held = 0
	}
}

// reservedBody reads a body no further than its reservation holds, as
// http.MaxBytesReader does its limit.
type reservedBody struct {
	io.ReadCloser
	res  *reservation
	read int64
}

func (b *reservedBody) Read(p []byte) (int, error) {
	limit := b.res.limit()
	if b.read > limit {
		return 0, &http.MaxBytesError{Limit: limit}
	}
	if room := limit - b.read; int64(len(p)) > room+1 {
		p = p[:room+1] // one byte past it tells a longer body from one that ends there
	}
	n, err := b.ReadCloser.Read(p)
	if b.read+int64(n) > limit {
		n = int(limit - b.read)
		b.read = limit + 1
		return n, &http.MaxBytesError{Limit: limit}
	}
	b.read += int64(n)
	return n, err
}
