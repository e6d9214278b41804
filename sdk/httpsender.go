package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
)

// Bounds of HTTPSender and HTTPBatchSender.
const (
	// DefaultMaxHTTPAnswer is how many bytes of a 2xx answer the helpers read
	// for Parse when MaxAnswer is 0. A longer answer is not read past it: its
	// messages are TRANSIENT.
	DefaultMaxHTTPAnswer = 4 << 20
	// MaxHTTPAnswerHeader bounds the bytes of an answer's status line and
	// headers the helpers' default client reads (Client nil; net/http's own
	// default is 10 MiB, held several times over while it is parsed). A
	// longer head is TRANSIENT.
	MaxHTTPAnswerHeader = 64 << 10
	// HTTPBatchRequestsAtOnce bounds the requests one SendBatch call of an
	// HTTPBatchSender has in flight.
	HTTPBatchRequestsAtOnce = 4
	// drainLimit is how much of an answer nobody parses is read (so the
	// connection can be reused) before it is closed.
	drainLimit = 64 << 10
)

// ErrRetry, wrapped in an error a Build function returns, makes the verdict
// TRANSIENT instead of PERMANENT: nothing is wrong with the message, the
// plugin is missing something for now (a token it could not refresh).
var ErrRetry = errors.New("retry later")

// HTTPSender is the Sender of a provider that takes one message per HTTP
// request: Build makes the request, HTTPSender sends it and gives the
// verdict. It is ClassifyHTTP's: 2xx SUCCESS; 429, 408, 425 and 5xx
// TRANSIENT with the Retry-After hint; other 4xx PERMANENT; a timeout or a
// refused connection TRANSIENT. ctx (the message's deadline) bounds the
// request and the read of its answer. A request with a body goes at most
// twice in one Send: net/http replays one carrying an Idempotency-Key after
// a reused connection is lost before the answer, once here (maxReplays).
//
// Every Detail is redacted: the request's header values (all but a few
// standard ones such as Content-Type) and URL credentials, and the
// Redactor's secrets, become Redacted wherever a provider echoes them. An
// answer is read for Parse up to MaxAnswer bytes, never more. Build and
// Parse run concurrently, as Send does. See the sdk README, "A plain HTTP
// provider", for a whole plugin.
type HTTPSender struct {
	// Build makes the request for m; PostJSON makes the usual one. Build it
	// with ctx (a request without a context is given ctx). An error is the
	// message's verdict, PERMANENT (the message cannot be sent as it is: no
	// recipient, a payload the provider does not take) or TRANSIENT when it
	// wraps ErrRetry or ctx has ended. Required.
	Build func(ctx context.Context, m Message) (*http.Request, error)
	// Parse, if set, reads a 2xx answer into the verdict: the provider's
	// message id as Result, a refusal answered with 200. body is the whole
	// answer (at most MaxAnswer bytes). An error is TRANSIENT: the request
	// reached the provider, so a retry may send twice but never loses the
	// message. Without Parse a 2xx is SUCCESS with no Result.
	Parse func(resp *http.Response, body []byte, m Message) (Verdict, error)
	// Client sends the requests (nil: http.DefaultTransport's settings, an
	// answer's head bounded by MaxHTTPAnswerHeader). Whatever
	// its CheckRedirect, no redirect is followed (a 3xx is PERMANENT):
	// following one would resend the message, with its credentials (an
	// X-Api-Key, a body key), to a host the channel was not configured for,
	// and count what that host answers as the provider's. ctx sets the
	// timeout.
	Client *http.Client
	// Redactor holds the channel's secrets the request does not show in its
	// headers or URL (a key inside the body); nil is none.
	Redactor *Redactor
	// MaxAnswer bounds the bytes of an answer read for Parse; 0 is
	// DefaultMaxHTTPAnswer. A longer answer is TRANSIENT.
	MaxAnswer int64
	// NoIdempotencyKey leaves out the Idempotency-Key header Send adds to a
	// request that has none (for a provider that refuses unknown headers).
	NoIdempotencyKey bool
}

// IdempotencyKey is the Idempotency-Key header HTTPSender sends with m
// unless Build set one: m's idempotency key, the same on every attempt, or
// "msg_<id>" when it has none or it cannot go in a header (a control
// character) — what the webhook plugin sends. A provider that honours the
// header (most payment and messaging APIs do) then ignores a retry of a
// message it already took: a timeout or a connection lost after the request
// was written is retried, and would otherwise send twice.
func IdempotencyKey(m Message) string {
	if m.IdempotencyKey != "" && headerSafe(m.IdempotencyKey) {
		return m.IdempotencyKey
	}
	return "msg_" + strconv.FormatInt(m.ID, 10)
}

// headerSafe reports whether s can be a header value as it is: no control
// character but tab.
func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// Send builds m's request, sends it and classifies the answer.
func (s *HTTPSender) Send(ctx context.Context, m Message) Verdict {
	if s.Build == nil {
		return Transient("sdk.HTTPSender has no Build function")
	}
	req, err := s.Build(ctx, m)
	if err == nil && req != nil && !s.NoIdempotencyKey && req.Header.Get("Idempotency-Key") == "" {
		if req.Header == nil {
			req.Header = http.Header{}
		}
		req.Header.Set("Idempotency-Key", IdempotencyKey(m))
	}
	x := newExchange(s.Client, s.Redactor, req, s.MaxAnswer)
	if v, failed := x.built(ctx, err); failed {
		return v
	}
	v, resp, body := x.do(ctx, s.Parse != nil)
	if v.Outcome != OutcomeSuccess || s.Parse == nil {
		return v
	}
	pv, err := s.Parse(resp, body, m)
	if err != nil {
		return x.redact(Transient("read the answer: " + err.Error()).WithStatus(resp.StatusCode))
	}
	if pv.ProviderStatus == 0 {
		pv.ProviderStatus = resp.StatusCode
	}
	return x.redact(pv)
}

// PostJSON builds a POST of v, encoded as JSON, to url under ctx, with
// header's fields (nil for none) replacing the defaults Content-Type and
// Accept: application/json. It is what most providers' Build returns.
func PostJSON(ctx context.Context, url string, v any, header http.Header) (*http.Request, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode the request as JSON: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, errors.New(RedactURLs(err.Error())) // the URL may carry a credential
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, vs := range header {
		req.Header[textproto.CanonicalMIMEHeaderKey(k)] = append([]string(nil), vs...)
	}
	return req, nil
}

// maxReplays bounds how often net/http's Transport sends a request again
// within one call. It replays a request carrying an Idempotency-Key (as
// HTTPSender's do) when a reused connection fails before the answer's first
// byte, on every idle connection in turn and then on a new one: a provider
// that reads the request and drops the connection got the message once per
// idle connection plus one. One replay is what a stale keep-alive
// connection needs; the rest is the engine's retry, later.
const maxReplays = 1

// errReplayed ends a request net/http would send a third time.
var errReplayed = errors.New("the connection was lost before an answer, also on the replay on another connection: not sent again")

// ReplayOnce is req (a copy when changed) that net/http's Transport sends
// at most twice within one call, as HTTPSender and HTTPBatchSender send
// theirs: a plugin sending a request with an Idempotency-Key on its own
// client passes it through ReplayOnce before Do. The Transport replays such
// a request — and any GET, HEAD, OPTIONS or TRACE — when a reused
// connection is lost before the answer's first byte, on every idle
// connection in turn and then on a new one. With a body it can do so only
// while GetBody gives the body again: after one replay GetBody fails, and
// Do with it, saying the request was not sent again. A request whose body
// GetBody cannot give again is never replayed and is left as it is. A
// request without a body (a GET, a DELETE, a POST with none) has no GetBody
// the Transport asks, so its context is replaced by one that ends, with
// that error as its cause, when the Transport asks for a connection a third
// time before any answer: the request cannot be written again, whatever
// the transport's pool holds. That context lives as long as req's does; give
// the request a context that ends (a deadline per call), as HTTPSender's
// message deadline does.
func ReplayOnce(req *http.Request) *http.Request {
	r, _ := replayOnce(req)
	return r
}

// replayOnce is ReplayOnce, and a function that releases what it made once
// the call is over (its answer read).
func replayOnce(req *http.Request) (*http.Request, func()) {
	if req.Body == nil || req.Body == http.NoBody {
		return bodylessReplayOnce(req)
	}
	get := req.GetBody
	if get == nil {
		return req, func() {}
	}
	var replays atomic.Int32
	r := req.WithContext(req.Context())
	r.GetBody = func() (io.ReadCloser, error) {
		if replays.Add(1) > maxReplays {
			return nil, errReplayed
		}
		return get()
	}
	return r, func() {}
}

// bodylessReplayOnce bounds the sends of a request without a body by its
// context: the Transport asks for a connection (httptrace GetConn) once per
// send, so a third ask before an answer's first byte (which a redirect's
// next request follows) ends the context, before any connection is handed
// to the request.
func bodylessReplayOnce(req *http.Request) (*http.Request, func()) {
	ctx, cancel := context.WithCancelCause(req.Context())
	var sends atomic.Int32
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn: func(string) {
			if sends.Add(1) > 1+maxReplays {
				cancel(errReplayed)
			}
		},
		GotFirstResponseByte: func() { sends.Store(0) },
	})
	return req.WithContext(ctx), func() { cancel(nil) }
}

// noRedirects is the helpers' default client. Following a redirect would
// resend a POST as a GET, or to a host the channel was not configured for.
var noRedirects = &http.Client{
	Transport:     boundedTransport(),
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// boundedTransport is http.DefaultTransport's settings with an answer's head
// bounded by MaxHTTPAnswerHeader (http.DefaultTransport itself when a
// program replaced it by another RoundTripper before this package's init).
func boundedTransport() http.RoundTripper {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultTransport
	}
	t = t.Clone()
	t.MaxResponseHeaderBytes = MaxHTTPAnswerHeader
	return t
}

// noFollow is client with CheckRedirect replaced by one that follows no
// redirect (noRedirects for nil): a copy, so the caller's client is left as
// it is, made per request (one small allocation beside the request's own).
func noFollow(client *http.Client) *http.Client {
	if client == nil || client == noRedirects {
		return noRedirects
	}
	c := *client
	c.CheckRedirect = noRedirects.CheckRedirect
	return &c
}

// plainHeaders are the request headers whose values are no credential, so
// a provider quoting them is left alone. Every other header's value is
// redacted: a list of the secret ones would miss a provider's own.
var plainHeaders = map[string]bool{
	"Accept": true, "Accept-Encoding": true, "Accept-Language": true, "Cache-Control": true,
	"Connection": true, "Content-Encoding": true, "Content-Language": true, "Content-Length": true,
	"Content-Type": true, "User-Agent": true, "Traceparent": true, "Tracestate": true, "Idempotency-Key": true,
}

// exchange is one request and what redacting its answer needs.
type exchange struct {
	client  *http.Client
	req     *http.Request
	secrets *Redactor
	extra   []string // the request's own: header values, URL credentials
	limit   int64
}

func newExchange(client *http.Client, r *Redactor, req *http.Request, limit int64) *exchange {
	x := &exchange{client: noFollow(client), req: req, secrets: r, limit: limit}
	if x.limit <= 0 {
		x.limit = DefaultMaxHTTPAnswer
	}
	if req != nil {
		for name, vals := range req.Header {
			if plainHeaders[textproto.CanonicalMIMEHeaderKey(name)] {
				continue
			}
			for _, v := range vals {
				x.extra = append(x.extra, HeaderSecrets(v)...)
			}
		}
		x.extra = append(x.extra, URLSecrets(req.URL)...)
	}
	return x
}

func (x *exchange) redact(v Verdict) Verdict {
	v.Detail = x.secrets.Redact(v.Detail, x.extra...)
	return v
}

// built is the verdict of a Build that failed (failed set), or of one that
// returned no request.
func (x *exchange) built(ctx context.Context, err error) (v Verdict, failed bool) {
	switch {
	case err != nil && (errors.Is(err, ErrRetry) || ctx.Err() != nil):
		return x.redact(Transient("build the request: " + err.Error())), true
	case err != nil:
		return x.redact(Permanent("build the request: " + err.Error())), true
	case x.req == nil:
		return Transient("build the request: Build returned no request and no error"), true
	}
	return Verdict{}, false
}

// do sends the request and classifies the answer (ClassifyHTTP). With read
// set, a 2xx answer's body is read, up to the limit: past it, or when the
// read fails, the verdict is TRANSIENT. The body is always closed; the
// verdict's Detail is redacted.
func (x *exchange) do(ctx context.Context, read bool) (Verdict, *http.Response, []byte) {
	req := x.req
	if req.Context().Done() == nil { // built without a context: the message's deadline
		req = req.WithContext(ctx)
	}
	req, release := replayOnce(req)
	defer release()
	resp, err := x.client.Do(req)
	if err != nil && context.Cause(req.Context()) == errReplayed {
		err = &url.Error{Op: urlErrorOp(req.Method), URL: req.URL.String(), Err: errReplayed}
	}
	if resp != nil && resp.Body != nil {
		// Every read of the body ends at the message's deadline, whatever
		// the body is: net/http stops reading a normal one when the
		// request's context ends, but not a connection it handed over
		// (a 101's), nor anything a custom RoundTripper returns.
		body := resp.Body // ClassifyHTTP may replace resp.Body
		defer context.AfterFunc(req.Context(), func() { _ = body.Close() })()
	}
	v := ClassifyHTTP(resp, err)
	if resp == nil || resp.Body == nil {
		return x.redact(v), resp, nil
	}
	defer resp.Body.Close()
	if v.Outcome != OutcomeSuccess || !read {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
		return x.redact(v), resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, x.limit+1))
	switch {
	case err != nil:
		v = Transient("read the answer: " + err.Error()).WithStatus(resp.StatusCode)
	case int64(len(body)) > x.limit:
		v = Transient(fmt.Sprintf("the answer is larger than %d bytes (MaxAnswer); not read further", x.limit)).WithStatus(resp.StatusCode)
	}
	return x.redact(v), resp, body
}

// urlErrorOp is the Op net/http's Client gives a *url.Error for method:
// "Get", "Post", "Delete".
func urlErrorOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}
