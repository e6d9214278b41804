package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/wire"
)

// sender delivers one channel's notifications. It is immutable after
// Configure, so Send is safe for any number of goroutines.
type sender struct {
	clients           *clients
	url               *url.URL // nil when only recipient URLs are used
	rawURL            string   // url, as sent
	urlProxied        bool     // url goes through a proxy (clients.std)
	allowRecipientURL bool
	retryAllNon2xx    bool
	timeout           time.Duration
	userAgent         []string
	headers           http.Header // extra static headers, canonical keys, shared read-only
	// macs pools HMAC-SHA256 states, one pool per secret (several while a
	// secret is rotated); nil when unsigned.
	macs []*sync.Pool
	// gone remembers the endpoints that answered 410, to warn once each.
	gone goneSet
	log  interface{ Warn(string, ...any) }
	// redactor knows the channel's credentials (url's user info and query
	// values, header values, the secret): a receiver's answer quoted in a
	// detail may echo them.
	redactor *sdk.Redactor
}

// Header keys, in canonical form so they can be stored without re-canonicalising.
const (
	hdrWebhookID        = "Webhook-Id"
	hdrWebhookTimestamp = "Webhook-Timestamp"
	hdrWebhookSignature = "Webhook-Signature"
	hdrIdempotencyKey   = "Idempotency-Key"
	hdrContentType      = "Content-Type"
	hdrUserAgent        = "User-Agent"
	hdrRetryAfter       = "Retry-After"
)

// maxDrainBytes bounds how much of a response is read (and dropped) so its
// connection can be reused; past that, closing it is cheaper.
const maxDrainBytes = 64 << 10

var contentTypeJSON = []string{"application/json"}

// post is one request: where it goes and what it carries.
type post struct {
	target *url.URL
	rawURL string // target, as sent
	// hostHeader is the Host header when it is not target's host as
	// written: an IPv6 literal's zone ([fe80::1%eth0]) names an interface
	// of this host, dialed through but never sent (RFC 6874 §4; RFC 9110
	// §7.2's uri-host has no zone). "" otherwise.
	hostHeader string
	// headers are the channel's static headers, or nil when target is a
	// recipient's URL other than the channel's own endpoint (sameEndpoint):
	// a caller who picks the URL never gets the channel's credentials.
	headers    http.Header
	body       []byte
	msgID, ts  string // webhook-id ("msg_<notification id>") and webhook-timestamp
	idemKey    string // Idempotency-Key: the client's idempotency key, else msgID
	signature  string // "" when unsigned
	deadline   time.Time
	ctxBounded bool // deadline is the message's, not the channel timeout's
	// traced is Send's ctx when the message is traced: the request carries
	// its traceparent (and tracestate), so the receiver joins the trace.
	traced context.Context
}

// Send POSTs m's envelope and classifies the answer.
func (s *sender) Send(ctx context.Context, m sdk.Message) sdk.Verdict {
	target, configured, err := s.target(m.Recipient)
	if err != nil {
		return sdk.Permanent(err.Error())
	}
	buf := getBody(envelopeSize(&m))
	body, err := appendEnvelope(*buf, &m)
	if err != nil {
		return sdk.Permanent(fmt.Sprintf("notification %d: %v", m.ID, err))
	}
	// webhook-id is notifyd's, stable across retries (Standard Webhooks):
	// never the client's idempotency key, which may contain the "." that
	// separates the signed content's parts. The key travels in its own
	// Idempotency-Key header.
	var id [24]byte
	p := post{target: target, body: body, msgID: string(strconv.AppendInt(append(id[:0], "msg_"...), m.ID, 10)), idemKey: m.IdempotencyKey}
	if configured {
		p.headers = s.headers
	}
	if p.idemKey == "" {
		p.idemKey = p.msgID
	} else if sdk.CheckHeaderValue(p.idemKey) != nil {
		// No retry can make it fit in a header.
		return sdk.Permanent(fmt.Sprintf("notification %d: the idempotency key holds a control character, which an HTTP header cannot", m.ID))
	}
	now := time.Now()
	p.ts = unixString(now.Unix())
	if s.macs != nil {
		p.signature = s.sign(p.msgID, p.ts, body)
	}
	if m.TraceParent != "" {
		p.traced = ctx
	}
	p.deadline = now.Add(s.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(p.deadline) {
		p.deadline, p.ctxBounded = d, true
	}
	if err := ctx.Err(); err != nil {
		// Never send once the host has given up on the message.
		return s.failed(&p, err)
	}

	p.hostHeader = hostWithoutZone(target.Host)
	if target == s.url {
		p.rawURL = s.rawURL
		if s.urlProxied {
			return s.sendStd(ctx, &p)
		}
	} else {
		p.rawURL = target.String()
		if s.clients.proxied != nil && s.clients.proxied(target) {
			return s.sendStd(ctx, &p)
		}
	}
	v := s.sendFast(&p)
	// fasthttp is done with the body once DoDeadline returns (it sends on
	// the caller's goroutine, retries included), so its buffer serves the
	// next envelope. net/http may still be writing a body after Do returns:
	// sendStd's is left to the garbage collector.
	*buf = body
	putBody(buf)
	return v
}

// bodies pools envelope buffers for the fasthttp path: one allocation of a
// few hundred bytes a notification otherwise.
var bodies sync.Pool

// maxPooledBody: a buffer grown past this (a large payload) is dropped rather
// than kept for envelopes that rarely need it.
const maxPooledBody = 64 << 10

// getBody returns an empty buffer with room for n bytes.
func getBody(n int) *[]byte {
	if b, ok := bodies.Get().(*[]byte); ok && cap(*b) >= n {
		*b = (*b)[:0]
		return b
	}
	b := make([]byte, 0, max(n, 512))
	return &b
}

func putBody(b *[]byte) {
	if cap(*b) <= maxPooledBody {
		bodies.Put(b)
	}
}

// unixNow caches the decimal Unix time of webhook-timestamp: it changes
// once a second, and formatting it for every message allocated each time.
var unixNow atomic.Pointer[unixSecond]

type unixSecond struct {
	sec int64
	s   string
}

// unixString is strconv.FormatInt(sec, 10), from the cache when sec is the
// second it holds.
func unixString(sec int64) string {
	if c := unixNow.Load(); c != nil && c.sec == sec {
		return c.s
	}
	c := &unixSecond{sec: sec, s: strconv.FormatInt(sec, 10)}
	unixNow.Store(c)
	return c.s
}

// sendFast sends p with fasthttp's client, directly to the receiver.
//
// The deadline bounds the whole send (waiting for a connection, dialing,
// writing, reading the answer); a host's cancellation that is not a
// deadline does not interrupt a request already under way — the SDK has
// answered for the message by then, and the request ends by its deadline.
func (s *sender) sendFast(p *post) sdk.Verdict {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)

	req.SetRequestURI(p.rawURL)
	if p.hostHeader != "" {
		// fasthttp sends the URL's host as written, zone and all.
		req.UseHostHeader = true
		req.Header.SetHost(p.hostHeader)
	}
	req.Header.SetMethod(fasthttp.MethodPost)
	for k, v := range p.headers {
		req.Header.Set(k, v[0])
	}
	req.Header.SetContentType(contentTypeJSON[0])
	req.Header.SetUserAgent(s.userAgent[0])
	req.Header.Set(hdrWebhookID, p.msgID)
	req.Header.Set(hdrWebhookTimestamp, p.ts)
	req.Header.Set(hdrIdempotencyKey, p.idemKey)
	if p.signature != "" {
		req.Header.Set(hdrWebhookSignature, p.signature)
	}
	if p.traced != nil {
		propagation.TraceContext{}.Inject(p.traced, fastHeaders{&req.Header})
	}
	req.SetBodyRaw(p.body) // not copied: p.body outlives the request

	if err := s.clients.fast.DoDeadline(req, resp, p.deadline); err != nil {
		return s.failed(p, err)
	}
	// A nil stream is an answer without a body (204, 304, Content-Length: 0).
	// CloseBodyStream pools the connection when the body was read to its
	// end, and closes it otherwise.
	defer resp.CloseBodyStream() //nolint:errcheck // nothing to do about it
	var retryAfter string
	if ra := resp.Header.Peek(hdrRetryAfter); len(ra) > 0 {
		retryAfter = string(ra)
	}
	return s.answered(p, resp.StatusCode(), retryAfter, resp.BodyStream())
}

// sendStd sends p with net/http's client, for a target behind a proxy.
func (s *sender) sendStd(ctx context.Context, p *post) sdk.Verdict {
	// One backing array for every per-request header value: one allocation
	// instead of one per header.
	vals := []string{p.msgID, p.ts, p.signature, p.idemKey}
	h := make(http.Header, 6+len(p.headers))
	for k, v := range p.headers {
		h[k] = v
	}
	h[hdrContentType] = contentTypeJSON
	h[hdrUserAgent] = s.userAgent
	h[hdrWebhookID] = vals[0:1:1]
	h[hdrWebhookTimestamp] = vals[1:2:2]
	h[hdrIdempotencyKey] = vals[3:4:4]
	if p.signature != "" {
		h[hdrWebhookSignature] = vals[2:3:3]
	}
	if p.traced != nil {
		propagation.TraceContext{}.Inject(p.traced, propagation.HeaderCarrier(h))
	}

	ctx, cancel := context.WithDeadline(ctx, p.deadline)
	defer cancel()
	body := p.body
	// net/http replays a request with an Idempotency-Key after a reused
	// connection is lost before the answer, on every idle connection in
	// turn: sdk.ReplayOnce lets it do so once, as fasthttp's
	// MaxIdemponentCallAttempts (maxAttempts) on the direct path.
	req := sdk.ReplayOnce((&http.Request{
		Method:        http.MethodPost,
		URL:           p.target,
		Host:          p.target.Host,
		Header:        h,
		Body:          bodyReader(body),
		GetBody:       func() (io.ReadCloser, error) { return bodyReader(body), nil },
		ContentLength: int64(len(body)),
	}).WithContext(ctx))

	resp, err := s.clients.std.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // failed wraps it again, with the URL redacted
		}
		return s.failed(p, err)
	}
	defer resp.Body.Close()
	// Every read of the body ends at the deadline, whatever the body is (a
	// 101's is the connection itself, which the context does not cover).
	defer context.AfterFunc(ctx, func() { _ = resp.Body.Close() })()
	return s.answered(p, resp.StatusCode, resp.Header.Get(hdrRetryAfter), resp.Body)
}

// answered classifies an answer (sdk.ClassifyKeyedStatus, ClassifyHTTP's rules)
// and drains a bounded part of its body so the connection can be reused.
// body may be nil.
func (s *sender) answered(p *post, code int, retryAfter string, body io.Reader) sdk.Verdict {
	v := sdk.ClassifyStatus(code, "", nil)
	if v.Outcome == sdk.OutcomeSuccess {
		drain(body, maxDrainBytes)
		return v
	}
	if code >= 100 && code < 200 {
		body = nil // a 1xx has no body; a 101's stream is the connection
	}
	// The detail quotes the start of the receiver's body.
	var start []byte
	if body != nil {
		start = make([]byte, sdk.ClassifyBodyPrefix)
		n, _ := io.ReadFull(body, start)
		start = start[:n]
	}
	// Every request carries an Idempotency-Key: a 409 is the receiver still
	// working on an earlier attempt with it, which may yet deliver the
	// message (sdk.ClassifyHTTP), so it is retried.
	v = sdk.ClassifyKeyedStatus(code, retryAfter, start)
	drain(body, maxDrainBytes-len(start))
	if code == http.StatusSeeOther {
		// 303 See Other is "an indirect response to the original request"
		// (RFC 9110 §15.4.4): the receiver may have processed the POST
		// (§9.3.3: a result it has already) — or it sends every request it
		// will not take to a sign-in page, as web frameworks redirect after
		// a POST. Nothing here tells which. Taken as a delivery, a URL that
		// points at such a page would lose every message without a sound;
		// retried, a processed POST would be delivered twice. So it is
		// final, also with retry_all_non_2xx, and dead-lettered saying so:
		// an operator checks the receiver before replaying it. The Location
		// is not followed.
		v.Outcome = sdk.OutcomePermanent
		v.RetryAfter = 0
		v.Detail = "the receiver answered 303 See Other: it may have processed the POST (RFC 9110 §15.4.4), or it redirects to a sign-in page; not followed and not sent again: check the receiver before replaying; " + v.Detail
		return v
	}
	if code == http.StatusGone {
		// Standard Webhooks: 410 means the receiver wants no more; retrying
		// never helps. Final, and said once per endpoint in the log.
		v.Outcome = sdk.OutcomePermanent
		v.Detail = "endpoint gone (410): disable this endpoint; " + v.Detail
		if s.gone.add(p.rawURL) && s.log != nil {
			s.log.Warn("webhook endpoint answered 410 Gone: it asks to be disabled; fix the channel's url (or the recipients) and replay the dead letters",
				"url", redactURL(p.target))
		}
	}
	// Make sure the detail is one clean line (a NUL byte, say, cannot be
	// stored in a Postgres text column) without a credential echoed back.
	v.Detail = "webhook " + redactURL(p.target) + ": " + s.redact(p, printable(v.Detail))
	if s.retryAllNon2xx && v.Outcome == sdk.OutcomePermanent && code != http.StatusGone {
		v.Outcome = sdk.OutcomeTransient
	}
	return v
}

// maxGoneRemembered bounds the endpoints a channel remembers having
// answered 410: with allow_recipient_url the API's callers name them, and
// every distinct URL stayed for the life of the process. Past the bound the
// set starts again, so an endpoint may be warned about once more.
const maxGoneRemembered = 1024

// goneSet is the endpoints that answered 410, at most maxGoneRemembered.
type goneSet struct {
	mu   sync.Mutex
	urls map[string]struct{}
}

// add remembers url and reports whether it was new.
func (g *goneSet) add(url string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, seen := g.urls[url]; seen {
		return false
	}
	if g.urls == nil || len(g.urls) >= maxGoneRemembered {
		g.urls = make(map[string]struct{})
	}
	g.urls[url] = struct{}{}
	return true
}

func (g *goneSet) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.urls)
}

// drain reads and drops at most n bytes of body (nil is an empty body).
func drain(body io.Reader, n int) {
	if body != nil && n > 0 {
		_, _ = io.Copy(io.Discard, io.LimitReader(body, int64(n)))
	}
}

// failed is the verdict of a send that got no answer: TRANSIENT, with a
// detail shaped as net/http's (Post "<url>": <error>), the URL without its
// query or user info.
func (s *sender) failed(p *post, err error) sdk.Verdict {
	if errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		err = &timeoutError{timeout: s.timeout, message: p.ctxBounded}
	}
	ue := &url.Error{Op: "Post", URL: redactURL(p.target), Err: err}
	var v sdk.Verdict
	if why := sdk.RefusedTLS(err); why != "" {
		// sdk.ClassifyHTTP does not know these alerts (it reads a remote
		// alert's text, for TLS versions only): found by type here.
		v = sdk.Permanent("request failed: " + ue.Error() + " (final: " + why + ")")
	} else {
		v = sdk.ClassifyHTTP(nil, ue)
	}
	// fasthttp's parse errors quote the answer's head whole, twice (49 KB
	// for a garbled 16 KB head): cut to what last_error holds before it is
	// made printable and redacted (Redact drops a secret's start at the
	// cut), so the cost of a detail does not grow with the answer.
	v.Detail = s.redact(p, printable(sdk.CutText(v.Detail, wire.MaxErrorLen)))
	return v
}

// redact removes the channel's credentials from text, and those of p's
// target when it is a recipient's URL.
func (s *sender) redact(p *post, text string) string {
	if p.target == s.url {
		return s.redactor.Redact(text)
	}
	return s.redactor.Redact(text, sdk.URLSecrets(p.target)...)
}

// timeoutError is a send cut by its deadline. It reads as a timeout (a
// net.Error whose Timeout is true, and context.DeadlineExceeded to errors.Is)
// and says which deadline it was.
type timeoutError struct {
	timeout time.Duration
	message bool // the message's deadline, before the channel timeout
}

func (e *timeoutError) Error() string {
	if e.message {
		return "no answer by the message's deadline (context deadline exceeded)"
	}
	return "no answer within the channel timeout of " + e.timeout.String() + " (context deadline exceeded)"
}

func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }
func (e *timeoutError) Unwrap() error   { return context.DeadlineExceeded }

// target is where m goes: the recipient when it is an http(s) URL and the
// channel allows that, the channel's url otherwise. configured says the
// target is the channel's own endpoint, so the channel's static headers may
// go with it: its url, or a recipient URL naming the same endpoint
// (sameEndpoint). A recipient URL is requested as written: the user info and
// query values of the channel's url are never copied onto it.
func (s *sender) target(recipient string) (u *url.URL, configured bool, err error) {
	if s.allowRecipientURL && isHTTPURL(recipient) {
		u, err := sdk.ParseHTTPURL(recipient)
		if err != nil {
			return nil, false, fmt.Errorf("recipient URL %s %v", redactString(recipient), err)
		}
		return u, s.url != nil && sameEndpoint(u, s.url), nil
	}
	if s.url == nil {
		return nil, false, errors.New("recipient is not an http(s) URL and the channel has no url")
	}
	return s.url, true, nil
}

// hostWithoutZone is host (a URL's host and port) with its IPv6 zone
// removed, or "" when it has none: "[fe80::1%eth0]:8080" is
// "[fe80::1]:8080".
func hostWithoutZone(host string) string {
	i := strings.IndexByte(host, '%')
	if i < 0 || !strings.HasPrefix(host, "[") {
		return ""
	}
	j := strings.IndexByte(host[i:], ']')
	if j < 0 {
		return ""
	}
	return host[:i] + host[i+j:]
}

// sameEndpoint reports whether a and b name one endpoint: the same scheme,
// host (case aside), port (a default one spelled out or not) and path (""
// and "/" alike). User info and query are not part of it.
func sameEndpoint(a, b *url.URL) bool {
	path := func(u *url.URL) string {
		if p := u.EscapedPath(); p != "" {
			return p
		}
		return "/"
	}
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if u.Scheme == "https" {
			return "443"
		}
		return "80"
	}
	return a.Scheme == b.Scheme && strings.EqualFold(a.Hostname(), b.Hostname()) &&
		port(a) == port(b) && path(a) == path(b)
}

func isHTTPURL(s string) bool {
	return strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://")
}

// sign returns the Standard Webhooks signature "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>".
func (s *sender) sign(msgID, ts string, body []byte) string {
	// One "v1,<base64>" per secret, space-separated: a receiver that knows
	// any of them (the old one while a rotation is under way) verifies it.
	// Written into a builder of the exact size: the string is the one
	// allocation.
	const sigLen = len("v1,") + 44 // base64 of a SHA-256 sum: 44 characters
	var sb strings.Builder
	sb.Grow(len(s.macs)*(sigLen+1) - 1)
	var enc [44]byte
	for i, pool := range s.macs {
		st := pool.Get().(*macState)
		st.mac.Reset()
		_, _ = st.mac.Write(append(append(append(append(st.scratch[:0], msgID...), '.'), ts...), '.'))
		_, _ = st.mac.Write(body)
		base64.StdEncoding.Encode(enc[:], st.mac.Sum(st.scratch[:0]))
		pool.Put(st)
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString("v1,")
		sb.Write(enc[:])
	}
	return sb.String()
}

// macState is a pooled HMAC-SHA256 state with room for what it hashes
// first and for its sum: as a local array that room escaped (the hash is an
// interface) and was allocated on every signature.
type macState struct {
	mac     hash.Hash
	scratch [64]byte
}

// newMACPool pools HMAC states for key: hmac.New allocates several hundred
// bytes, which adds up at 20k sends/s.
func newMACPool(key []byte) *sync.Pool {
	return &sync.Pool{New: func() any { return &macState{mac: hmac.New(sha256.New, key)} }}
}

// bodyReader is the request body; a fresh reader per (re)send so the
// Transport can replay an idempotent request on a dead keep-alive connection.
func bodyReader(b []byte) io.ReadCloser {
	return io.NopCloser(bytes.NewReader(b))
}

// printable turns s into one line of valid UTF-8 text: control characters
// become spaces, invalid bytes are dropped, runs of space collapse.
func printable(s string) string {
	var sb strings.Builder
	sb.Grow(len(s))
	space := false
	for _, r := range strings.ToValidUTF8(s, "") {
		if r < 0x20 || r == 0x7f || r == ' ' {
			if !space && sb.Len() > 0 {
				sb.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		sb.WriteRune(r)
	}
	return strings.TrimSpace(sb.String())
}

// redactURL prints u without user info or query.
func redactURL(u *url.URL) string {
	return u.Scheme + "://" + u.Host + u.EscapedPath()
}

// redactString redacts a URL given as a string; something unparsable is not
// echoed at all.
func redactString(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparsable URL)"
	}
	return redactURL(u)
}

// fastHeaders lets a propagator write a fasthttp request's headers.
type fastHeaders struct{ h *fasthttp.RequestHeader }

func (c fastHeaders) Get(key string) string { return string(c.h.Peek(key)) }
func (c fastHeaders) Set(key, value string) { c.h.Set(key, value) }
func (c fastHeaders) Keys() []string        { return nil }
