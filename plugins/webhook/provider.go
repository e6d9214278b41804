package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/notifyd/notifyd/sdk"
)

// Version is the plugin's version, reported by Describe.
const Version = "1.0.0"

// Defaults for keys the channel leaves out.
const (
	// DefaultTimeout follows the Standard Webhooks advice to give a receiver
	// 15 to 30 seconds: the short end, so a stuck receiver holds a send slot
	// no longer than needed.
	DefaultTimeout   = 15 * time.Second
	DefaultUserAgent = "notifyd-webhook/" + Version
	secretPrefix     = "whsec_"
	minSecretBytes   = 24
	maxSecretBytes   = 64
	maxSecrets       = 5
)

// Connection pool. maxConnsPerHost keeps a warm connection for every
// concurrent send to one receiver: it must be at least the channel's
// concurrency (and the SDK's fan-out), or sends queue for a connection. A
// send past it waits for one, within its own timeout.
const (
	maxConnsPerHost = 1024
	// maxIdleConn closes a keep-alive connection unused this long. fasthttp
	// has no goroutine watching idle connections, so one the receiver has
	// closed is only found out when it is used (and the send replayed, see
	// retryStale): staying under the 5 s keep-alive of Node, Apache, uvicorn
	// and the like means that rarely happens.
	maxIdleConn = 4 * time.Second
	// maxAttempts bounds the sends of one message within one call over
	// connections found dead (retryStale): one replay. A failure before the
	// answer's first byte reaches retryStale as io.EOF whatever its cause
	// (fasthttp's tryRead), so a receiver that took the request and dropped
	// the connection unanswered is replayed too; this keeps that to one copy
	// more (it was four), which the same webhook-id lets it ignore.
	maxAttempts = 2
	// readBufferSize bounds a response's status line and headers (16 KB, as
	// Node's default) on both paths (net/http's own default is 10 MiB); a
	// bigger header block fails the send (TRANSIENT).
	readBufferSize = 16 << 10
	dialTimeout    = 5 * time.Second // TCP connect and TLS handshake, each
)

// provider builds a sender per channel. All channels of the process share
// one client, so channels pointed at the same receiver share its pool.
type provider struct {
	once    sync.Once
	clients *clients

	// Set only by tests, before the first Configure.
	tlsConfig *tls.Config                      // nil: the system's roots
	proxy     func(*url.URL) (*url.URL, error) // nil: from the environment
}

// config is a channel's `config:` block.
type config struct {
	URL               string            `json:"url"`
	AllowRecipientURL bool              `json:"allow_recipient_url"`
	Secret            string            `json:"secret"`
	Timeout           string            `json:"timeout"`
	RetryAllNon2xx    bool              `json:"retry_all_non_2xx"`
	Headers           map[string]string `json:"headers"`
	UserAgent         string            `json:"user_agent"`
}

// reservedHeaders are set by the plugin on every request; a static header
// may not replace them (User-Agent has its own key).
var reservedHeaders = []string{
	hdrWebhookID, hdrWebhookTimestamp, hdrWebhookSignature, hdrIdempotencyKey,
	hdrContentType, hdrUserAgent, "Content-Length", "Host", "Transfer-Encoding", "Connection",
}

func (p *provider) Describe() sdk.Info {
	return sdk.Info{
		Name:           "webhook",
		Version:        Version,
		Capabilities:   []string{"standard-webhooks", "idempotency-key", "receipts"},
		ConfigSchema:   configSchema,
		MaxConcurrency: 256,
	}
}

func (p *provider) Configure(ctx context.Context, req sdk.ConfigureRequest) (sdk.Sender, error) {
	var c config
	if err := req.Decode(&c); err != nil {
		return nil, err
	}
	s, err := p.newSender(c)
	if err != nil {
		return nil, err
	}
	s.log = req.Log()
	if req.Logger != nil {
		// Never the secret or header values: only whether they are set.
		req.Logger.Info("webhook channel configured", "channel", req.Channel,
			"url", redactString(c.URL), "signed", len(s.macs) > 0, "secrets", len(s.macs),
			"allow_recipient_url", c.AllowRecipientURL, "retry_all_non_2xx", c.RetryAllNon2xx,
			"timeout", s.timeout.String(), "extra_headers", len(s.headers))
	}
	return s, nil
}

// newSender validates c and builds its sender.
func (p *provider) newSender(c config) (*sender, error) {
	s := &sender{
		clients:           p.client(),
		allowRecipientURL: c.AllowRecipientURL,
		retryAllNon2xx:    c.RetryAllNon2xx,
		userAgent:         []string{DefaultUserAgent},
		redactor:          &sdk.Redactor{},
	}
	switch {
	case c.URL != "":
		u, err := sdk.ParseHTTPURL(c.URL)
		if err != nil {
			return nil, configError("url", err.Error())
		}
		s.url = u
		s.rawURL = u.String()
		s.redactor.Add(sdk.URLSecrets(u)...)
		s.urlProxied = s.clients.proxied != nil && s.clients.proxied(u)
	case !c.AllowRecipientURL:
		return nil, configError("url", "is required (or set allow_recipient_url: true and send to URL recipients)")
	}
	timeout, err := sdk.ParseDuration(c.Timeout, DefaultTimeout)
	if err != nil {
		return nil, configError("timeout", err.Error())
	}
	s.timeout = timeout
	if c.UserAgent != "" {
		if err := sdk.CheckHeaderValue(c.UserAgent); err != nil {
			return nil, configError("user_agent", err.Error())
		}
		s.userAgent = []string{c.UserAgent}
	}
	if c.Secret != "" {
		// Several secrets, space-separated, while one is rotated: every
		// request is signed with each.
		for i, one := range strings.Fields(c.Secret) {
			key, err := decodeSecret(one)
			if err != nil {
				return nil, configError("secret", fmt.Sprintf("(secret %d): %v", i+1, err))
			}
			s.macs = append(s.macs, newMACPool(key))
			s.redactor.Add(one, strings.TrimPrefix(one, secretPrefix))
		}
		if len(s.macs) > maxSecrets {
			return nil, configError("secret", fmt.Sprintf("holds %d secrets, at most %d", len(s.macs), maxSecrets))
		}
	}
	if len(c.Headers) > 0 {
		s.headers = make(http.Header, len(c.Headers))
		for name, value := range c.Headers {
			canon, err := sdk.ParseHeader(name, value, reservedHeaders...)
			if err != nil {
				return nil, configError("headers."+name, err.Error())
			}
			s.headers[canon] = []string{value}
			s.redactor.Add(sdk.HeaderSecrets(value)...)
		}
	}
	return s, nil
}

// clients are the process-wide HTTP clients.
type clients struct {
	// fast sends to every receiver reached directly: fasthttp's client
	// costs about half the CPU per request of net/http's on this path (see
	// README.md, Performance).
	fast *fasthttp.Client
	// std sends to receivers behind a proxy (HTTP_PROXY, HTTPS_PROXY,
	// NO_PROXY), exactly as net/http always did: absolute-form requests to
	// an http proxy, CONNECT for https. Nil when no proxy is configured.
	std *http.Client
	// proxied reports whether a target goes through std. Nil when no proxy
	// is configured.
	proxied func(*url.URL) bool
}

// client returns the process-wide clients, built on first use.
func (p *provider) client() *clients {
	p.once.Do(func() {
		c := &clients{fast: &fasthttp.Client{
			NoDefaultUserAgentHeader:  true, // Send sets one
			DisablePathNormalizing:    true, // the path goes as the URL has it
			MaxConnsPerHost:           maxConnsPerHost,
			MaxConnWaitTimeout:        24 * time.Hour, // i.e. the send's own deadline
			MaxIdleConnDuration:       maxIdleConn,
			MaxIdemponentCallAttempts: maxAttempts,
			RetryIfErr:                retryStale,
			ReadBufferSize:            readBufferSize,
			// The body is streamed, never read whole: Send reads at most
			// maxDrainBytes of it.
			StreamResponseBody: true,
			ConfigureClient: func(hc *fasthttp.HostClient) error {
				hc.DialTimeout = dialer(hc.IsTLS, p.tlsConfig)
				hc.Transport = alertTransport{}
				return nil
			},
		}}
		proxy := p.proxy
		if proxy == nil && proxyConfigured() {
			proxy = func(u *url.URL) (*url.URL, error) { return http.ProxyFromEnvironment(&http.Request{URL: u}) }
		}
		if proxy != nil {
			c.proxied = func(u *url.URL) bool {
				pu, err := proxy(u)
				return pu != nil || err != nil // std reports a bad proxy setting as before
			}
			c.std = &http.Client{
				Transport: &http.Transport{
					Proxy: func(r *http.Request) (*url.URL, error) { return proxy(r.URL) },
					DialContext: (&net.Dialer{
						Timeout:   dialTimeout,
						KeepAlive: 30 * time.Second,
					}).DialContext,
					TLSClientConfig:        p.tlsConfig,
					ForceAttemptHTTP2:      true,
					MaxIdleConns:           4 * maxConnsPerHost,
					MaxIdleConnsPerHost:    maxConnsPerHost,
					IdleConnTimeout:        90 * time.Second,
					TLSHandshakeTimeout:    dialTimeout,
					ExpectContinueTimeout:  time.Second,
					MaxResponseHeaderBytes: readBufferSize,
				},
				// A redirected POST would silently become a GET: the 3xx
				// itself is the answer, classified like any other non-2xx.
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			}
		}
		p.clients = c
	})
	return p.clients
}

// proxyConfigured reports whether the environment names a proxy at all, as
// net/http reads it (http.ProxyFromEnvironment): without one, every target
// is reached directly and the per-target check is skipped.
func proxyConfigured() bool {
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		if os.Getenv(k) != "" {
			return true
		}
	}
	return false
}

// dialer connects to a receiver for fasthttp: TCP (IPv4 or IPv6, like
// net/http; fasthttp's own dialer is IPv4-only), then for https the TLS
// handshake, each bounded by dialTimeout and together by what is left of the
// send's deadline (timeout; 0 when fasthttp dials for a queued send).
func dialer(isTLS bool, cfg *tls.Config) fasthttp.DialFuncWithTimeout {
	if cfg == nil {
		cfg = &tls.Config{}
	} else {
		cfg = cfg.Clone()
	}
	cfg.NextProtos = []string{"http/1.1"} // fasthttp speaks HTTP/1.1 only
	return func(addr string, timeout time.Duration) (net.Conn, error) {
		if timeout <= 0 || timeout > 2*dialTimeout {
			timeout = 2 * dialTimeout
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		nd := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
		if !isTLS {
			conn, err := nd.DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			return &replayConn{Conn: conn}, nil
		}
		conn, err := nd.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		hctx, hcancel := context.WithTimeout(ctx, dialTimeout)
		defer hcancel()
		c := cfg
		if c.ServerName == "" {
			c = cfg.Clone()
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				host = addr
			}
			c.ServerName = host
		}
		tc := tls.Client(conn, c)
		if err := tc.HandshakeContext(hctx); err != nil {
			conn.Close()
			return nil, err
		}
		return &replayConn{Conn: tc}, nil
	}
}

// retryStale tells fasthttp to send a message again on another connection
// when the one it used turns out dead: a keep-alive connection that had
// answered an earlier request, closed or reset before any byte of this
// request's answer (fasthttp then reports io.EOF), or failing the write. A
// receiver closes an idle keep-alive connection whenever it likes, and
// nothing watches idle connections between sends. This is net/http's rule
// (a reused connection, nothing of the answer read; the request carries an
// Idempotency-Key): replayConn marks every other failure noReplay — one
// that had begun to answer, or a write failing on a fresh connection — so
// it is never sent again within the call; the verdict is TRANSIENT once.
// (A fresh connection dropped before the answer's first byte cannot be told
// from a stale one here: fasthttp reports both as a bare io.EOF; maxAttempts
// bounds it.) Timeouts are never replayed.
func retryStale(_ *fasthttp.Request, _ int, err error) (resetTimeout, retry bool) {
	if errors.As(err, new(noReplay)) {
		return false, false
	}
	return false, errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// replayConn is a connection that knows whether a failure of its current
// exchange may be replayed (retryStale): only when it had read an earlier
// answer (a reused keep-alive connection) and has read nothing since this
// request began. Any other error of a Read or Write is wrapped in
// noReplay. fasthttp uses a connection from one goroutine at a time.
//
// It also hands fasthttp an answer's head with every bare LF line end made
// CRLF (RFC 9112 §2.2 lets a recipient read a bare LF as a line end; net/http
// does): fasthttp waits for a CRLF CRLF to end the head, and a head ended by
// "\n\n" held the send to its deadline, TRANSIENT, however the receiver
// answered. The body is left as it is.
type replayConn struct {
	net.Conn
	read    int64 // bytes of answers read over the connection's life
	atWrite int64 // read when the current request began (its first Write)
	reading bool  // the last call was a Read: the next Write begins a request
	// status reads the current answer's head as fasthttp does; failed, an
	// error every later Read returns (the status code is 000).
	status statusScan
	failed error
	last   byte // the head's last byte read: what a Read's first LF follows
}

// crlf makes each bare LF of the head among p's first n bytes (read raw
// into at most half of p) a CRLF, in place, and returns the new count.
// Only the head's bytes are changed: a copy of the status scanner finds
// where the head ends.
func (c *replayConn) crlf(p []byte, n int) int {
	before := c.last
	c.last = p[n-1]
	if !bareLF(p[:n], before) { // most answers: CRLF throughout
		return n
	}
	s, prev := c.status, before
	end, bare := n, 0
	for i, b := range p[:n] {
		if !s.inHead() {
			end = i
			break
		}
		if b == '\n' && prev != '\r' {
			bare++
		}
		prev = b
		s.scan(p[i : i+1])
	}
	if bare == 0 || n+bare > len(p) { // no room only in a 1-byte Read
		return n
	}
	// Right to left, so every byte is moved before it is overwritten.
	for i, j := n-1, n+bare-1; i >= 0; i, j = i-1, j-1 {
		p[j] = p[i]
		if i < end && p[i] == '\n' && (i > 0 && p[i-1] != '\r' || i == 0 && before != '\r') {
			j--
			p[j] = '\r'
		}
	}
	return n + bare
}

// bareLF reports whether p holds an LF that follows no CR (before is the
// byte before p).
func bareLF(p []byte, before byte) bool {
	for i := 0; ; i++ {
		j := bytes.IndexByte(p[i:], '\n')
		if j < 0 {
			return false
		}
		if i += j; i == 0 && before != '\r' || i > 0 && p[i-1] != '\r' {
			return true
		}
	}
}

// errStatus000 is an answer whose status code is 000: fasthttp parses it as
// 0 and reports 0 as 200, which would make a garbled answer a delivery.
var errStatus000 = errors.New(`the answer's status code is "000", not a status: a garbled status line`)

// noReplay wraps an error after which the request must not be sent again
// within the call.
type noReplay struct{ error }

func (e noReplay) Unwrap() error { return e.error }

// Handshake is the TLS connection's, done already (dialer): fasthttp takes
// a connection with one for TLS and does not wrap it again.
func (c *replayConn) Handshake() error {
	if h, ok := c.Conn.(interface{ Handshake() error }); ok {
		return h.Handshake()
	}
	return nil
}

func (c *replayConn) stale() bool { return c.atWrite > 0 && c.read == c.atWrite }

func (c *replayConn) Write(p []byte) (int, error) {
	if c.reading || c.read == 0 {
		c.reading, c.atWrite, c.status, c.last = false, c.read, statusScan{}, 0
	}
	n, err := c.Conn.Write(p)
	if err != nil && !c.stale() {
		return n, noReplay{err}
	}
	return n, err
}

func (c *replayConn) Read(p []byte) (int, error) {
	c.reading = true
	if c.failed != nil {
		return 0, c.failed
	}
	head := c.status.inHead()
	q := p
	if head && len(p) >= 2 {
		q = p[:len(p)/2] // room for a CR before each LF
	}
	n, err := c.Conn.Read(q)
	c.read += int64(n)
	if err != nil && n == 0 && sdk.RefusedTLS(err) != "" {
		// fasthttp reports an error before the answer's first byte as
		// io.EOF: the alert reaches the request another way.
		alerts.put(alertKey(c.LocalAddr(), c.RemoteAddr()), err)
	}
	if err != nil && n == 0 && !c.stale() {
		return n, noReplay{err}
	}
	if head && n > 0 {
		n = c.crlf(p, n)
	}
	// The answer's status code, read as fasthttp reads it, past any 1xx
	// interim answers: only the head's bytes are looked at.
	if i := c.status.scan(p[:n]); i >= 0 {
		// Hand fasthttp the bytes before the code's end, then the error: it
		// reports an error after an answer's first byte as it is (noReplay
		// kept); the status line's start came in this or an earlier Read.
		c.failed = noReplay{errStatus000}
		if i == 0 {
			return 0, c.failed
		}
		return i, nil
	}
	return n, err
}

// statusScan finds a status code of 000 in an answer's head the way
// fasthttp's parser reads a status line (ResponseHeader.parseFirstLine):
// empty lines before it skipped, the protocol up to a space, any run of
// spaces, then the code (exactly three bytes, up to a space or the line's
// end), and after an interim 1xx answer's header block the next status line
// the same way. It keeps a few bytes of state, whatever the head's length,
// and follows the final answer's header block to its end (inHead), or
// stops at a status line fasthttp refuses.
type statusScan struct {
	state   uint8
	code    [3]byte
	n       int  // bytes of code so far
	interim bool // the status line read is a 1xx (not 101): headers, then another
	blank   bool // the header line so far is empty (or only "\r")
}

const (
	scanLineStart = iota // before a status line: empty lines skipped
	scanProto            // the protocol, up to a space
	scanSpaces           // spaces before the code
	scanCode             // the code's bytes
	scanLineRest         // the reason phrase, to the line's end
	scanHeaders          // an answer's header lines, to the empty one
	scanDone             // the final head read: nothing more to look at
)

// inHead reports whether the bytes scanned so far end inside an answer's
// head (its status lines and headers, interim answers' included).
func (s *statusScan) inHead() bool { return s.state != scanDone }

// scan reads the next bytes of the answer and returns the index of the byte
// ending a code of 000 (the code's last byte's follower), or -1.
func (s *statusScan) scan(p []byte) int {
	for i := 0; i < len(p) && s.state != scanDone; i++ {
		b := p[i]
		switch s.state {
		case scanLineStart:
			if b != '\r' && b != '\n' {
				s.state = scanProto
			}
		case scanProto:
			switch b {
			case ' ':
				s.state = scanSpaces
			case '\n':
				s.state = scanDone // no status line fasthttp takes
			}
		case scanSpaces:
			if b != ' ' {
				s.state, s.n = scanCode, 0
				i-- // the code's first byte
			}
		case scanCode:
			if b != ' ' && b != '\r' && b != '\n' {
				if s.n == len(s.code) {
					s.state = scanDone // not three bytes: fasthttp refuses it
				} else {
					s.code[s.n] = b
					s.n++
				}
				continue
			}
			if s.n == 3 && s.code == [3]byte{'0', '0', '0'} {
				return i
			}
			// 101 is final to fasthttp; the other 1xx are followed by the
			// answer's real status line.
			s.interim = s.n == 3 && s.code[0] == '1' && s.code != [3]byte{'1', '0', '1'}
			switch {
			case s.n != len(s.code):
				s.state = scanDone // not three bytes: fasthttp refuses it
			case b == '\n':
				s.state, s.blank = scanHeaders, true
			default:
				s.state = scanLineRest
			}
		case scanLineRest:
			j := bytes.IndexByte(p[i:], '\n')
			if j < 0 {
				return -1
			}
			i += j
			s.state, s.blank = scanHeaders, true
		case scanHeaders:
			// A line at a time: blank when it holds nothing but CRs.
			j := bytes.IndexByte(p[i:], '\n')
			if j < 0 {
				j = len(p) - i
			}
			if len(bytes.TrimLeft(p[i:i+j], "\r")) > 0 {
				s.blank = false
			}
			if i += j; i == len(p) {
				return -1
			}
			switch {
			case s.blank && s.interim:
				s.state = scanLineStart
			case s.blank:
				s.state = scanDone
			}
			s.blank = true
		}
	}
	return -1
}

// decodeSecret returns the HMAC key of a Standard Webhooks secret:
// "whsec_" followed by the base64 of the key bytes.
func decodeSecret(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok {
		return nil, errors.New(`must start with "whsec_" followed by the base64 of the key`)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		// Never echo the secret, not even the part that failed to decode.
		return nil, errors.New(`the part after "whsec_" is not valid base64`)
	}
	if len(key) < minSecretBytes || len(key) > maxSecretBytes {
		return nil, fmt.Errorf(`the key after "whsec_" is %d bytes; Standard Webhooks secrets are %d to %d (e.g. whsec_ + base64 of 32 random bytes)`, len(key), minSecretBytes, maxSecretBytes)
	}
	return key, nil
}

func configError(key, reason string) error {
	return fmt.Errorf("webhook config: %s %s", key, reason)
}

// configSchema documents the channel config (JSON Schema).
var configSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "url": {"type": "string", "format": "uri", "description": "Where envelopes are POSTed (http or https)."},
    "allow_recipient_url": {"type": "boolean", "default": false, "description": "A recipient that is an http(s) URL is POSTed to instead of url: signed with secret, but without headers and without url's user info or query values, unless it names url's own endpoint (same scheme, host, port and path), which gets headers too."},
    "secret": {"type": "string", "pattern": "^whsec_", "description": "Standard Webhooks signing secret: whsec_<base64 key>."},
    "timeout": {"type": "string", "default": "10s", "description": "Per-request timeout (Go duration)."},
    "retry_all_non_2xx": {"type": "boolean", "default": false, "description": "Treat every non-2xx answer as transient (Standard Webhooks' rule)."},
    "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Extra static headers, sent only to url's endpoint, never to another recipient URL."},
    "user_agent": {"type": "string", "default": "notifyd-webhook/` + Version + `"}
  }
}`)
