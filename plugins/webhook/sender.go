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
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// sender delivers one channel's notifications. It is immutable after
// Configure, so Send is safe for any number of goroutines.
type sender struct {
	client            *http.Client
	url               *url.URL // nil when only recipient URLs are used
	allowRecipientURL bool
	retryAllNon2xx    bool
	timeout           time.Duration
	userAgent         []string
	headers           http.Header // extra static headers, canonical keys, shared read-only
	// macs pools HMAC-SHA256 states keyed with the secret; nil when unsigned.
	macs *sync.Pool
}

// Header keys, in canonical form so they can be stored without re-canonicalising.
const (
	hdrWebhookID        = "Webhook-Id"
	hdrWebhookTimestamp = "Webhook-Timestamp"
	hdrWebhookSignature = "Webhook-Signature"
	hdrIdempotencyKey   = "Idempotency-Key"
	hdrContentType      = "Content-Type"
	hdrUserAgent        = "User-Agent"
)

// maxDrainBytes bounds how much of a response is read (and dropped) so its
// connection can be reused; past that, closing it is cheaper.
const maxDrainBytes = 64 << 10

var contentTypeJSON = []string{"application/json"}

// Send POSTs m's envelope and classifies the answer.
func (s *sender) Send(ctx context.Context, m sdk.Message) sdk.Verdict {
	target, err := s.target(m.Recipient)
	if err != nil {
		return sdk.Permanent(err.Error())
	}
	body, err := appendEnvelope(make([]byte, 0, envelopeSize(&m)), &m)
	if err != nil {
		return sdk.Permanent(fmt.Sprintf("notification %d: %v", m.ID, err))
	}

	msgID := m.IdempotencyKey
	if msgID == "" {
		msgID = strconv.FormatInt(m.ID, 10)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)

	// One backing array for every per-request header value: one allocation
	// instead of one per header.
	vals := make([]string, 4)
	vals[0], vals[1], vals[2] = msgID, ts, msgID
	h := make(http.Header, 6+len(s.headers))
	for k, v := range s.headers {
		h[k] = v
	}
	h[hdrContentType] = contentTypeJSON
	h[hdrUserAgent] = s.userAgent
	h[hdrWebhookID] = vals[0:1:1]
	h[hdrWebhookTimestamp] = vals[1:2:2]
	h[hdrIdempotencyKey] = vals[2:3:3]
	if s.macs != nil {
		vals[3] = s.sign(msgID, ts, body)
		h[hdrWebhookSignature] = vals[3:4:4]
	}

	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req := (&http.Request{
		Method:        http.MethodPost,
		URL:           target,
		Host:          target.Host,
		Header:        h,
		Body:          bodyReader(body),
		GetBody:       func() (io.ReadCloser, error) { return bodyReader(body), nil },
		ContentLength: int64(len(body)),
	}).WithContext(ctx)

	resp, err := s.client.Do(req)
	if err != nil {
		v := sdk.ClassifyHTTP(nil, redactURLError(err))
		v.Detail = printable(v.Detail)
		return v
	}
	defer resp.Body.Close()
	v := sdk.ClassifyHTTP(resp, nil)
	// Drain (a bounded amount) so the keep-alive connection is reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrainBytes))
	if v.Outcome == sdk.OutcomeSuccess {
		return v
	}
	// The detail quotes the receiver's body; make sure it is one clean line
	// (a NUL byte, say, cannot be stored in a Postgres text column).
	v.Detail = "webhook " + redactURL(target) + ": " + printable(v.Detail)
	if s.retryAllNon2xx && v.Outcome == sdk.OutcomePermanent {
		v.Outcome = sdk.OutcomeTransient
	}
	return v
}

// target is where m goes: the recipient when it is an http(s) URL and the
// channel allows that, the channel's url otherwise.
func (s *sender) target(recipient string) (*url.URL, error) {
	if s.allowRecipientURL && isHTTPURL(recipient) {
		u, err := url.Parse(recipient)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("recipient is not a usable URL: %s", redactString(recipient))
		}
		return u, nil
	}
	if s.url == nil {
		return nil, errors.New("recipient is not an http(s) URL and the channel has no url")
	}
	return s.url, nil
}

func isHTTPURL(s string) bool {
	return strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://")
}

// sign returns the Standard Webhooks signature "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>".
func (s *sender) sign(msgID, ts string, body []byte) string {
	mac := s.macs.Get().(hash.Hash)
	defer s.macs.Put(mac)
	mac.Reset()
	var scratch [64]byte
	_, _ = mac.Write(append(append(append(append(scratch[:0], msgID...), '.'), ts...), '.'))
	_, _ = mac.Write(body)
	sum := mac.Sum(scratch[:0])
	out := make([]byte, 3+base64.StdEncoding.EncodedLen(len(sum)))
	copy(out, "v1,")
	base64.StdEncoding.Encode(out[3:], sum)
	return string(out)
}

// newMACPool pools HMAC states for key: hmac.New allocates several hundred
// bytes, which adds up at 20k sends/s.
func newMACPool(key []byte) *sync.Pool {
	return &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}
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

// redactURLError keeps the shape of a *url.Error (so timeouts still read as
// timeouts) but drops the URL's query and user info: webhook URLs often carry
// a token there, and details end up in logs and the outbox.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &url.Error{Op: ue.Op, URL: redactString(ue.URL), Err: ue.Err}
	}
	return err
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
