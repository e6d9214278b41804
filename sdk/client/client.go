// Package client is the application side of notifyd: a typed client for its
// HTTP API, and EnqueueTx, which writes a notification inside the
// application's own Postgres transaction so that it exists if and only if
// the business change commits (the transactional outbox).
//
//	c, err := client.New("http://127.0.0.1:8080", os.Getenv("NOTIFYD_TOKEN"))
//	res, err := c.Enqueue(ctx, client.Notification{
//		Channel: "orders", Recipient: "user-7",
//		Payload: json.RawMessage(`{"text":"Your order shipped"}`),
//		IdempotencyKey: "order-42-shipped",
//	})
//
// Every error the API answers with is an *Error carrying the HTTP status,
// a code (CodeInvalid, CodeNotFound, …) and a message that names the field
// at fault.
//
// The bearer token goes to addr alone: a redirect is never followed (the
// API answers none, and net/http would carry Authorization to another port
// or scheme of the same host), whatever *http.Client WithHTTPClient gives.
// An answer is read within MaxAnswerBytes and must be the call's answer: a
// 2xx whose body is an error, not a JSON object, or followed by more data is
// an error, never an empty success.
package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/notifyd/notifyd/sdk/wire"
)

// DefaultTimeout bounds one API call when the caller's context has no
// deadline of its own.
const DefaultTimeout = 30 * time.Second

// maxErrorBody is how much of an error answer is read.
const maxErrorBody = 64 << 10

// MaxAnswerBytes bounds a 2xx answer's body: past it the answer is not read
// further and the call fails, so a hostile or broken server (or a proxy)
// cannot make the client hold any amount in memory. It bounds what
// decoding the answer would build for its structure, too, counted before
// anything is decoded (`{}` is 2 bytes and a NotificationInfo 328). The
// API's largest answer is a page of dead letters or jobs, which stops
// 16 MiB past its first row, a row reading back within 5 MiB (a 1 MiB
// payload, a 4 MiB result); 64 MiB leaves room for JSON's escapes of that
// text. A call that meets it pages with a smaller limit.
const MaxAnswerBytes = 64 << 20

// Client calls one notifyd API. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the *http.Client requests go through (transport, TLS,
// proxies). The default has DefaultTimeout; a client without a Timeout of
// its own still has DefaultTimeout bound a call whose context has no
// deadline.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.http = hc }
}

// New returns a client for the API at addr ("http://host:port", or
// "host:port" for plain HTTP) that authenticates with token.
func New(addr, token string, opts ...Option) (*Client, error) {
	if addr == "" {
		return nil, errors.New("notifyd client: address is empty")
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return nil, fmt.Errorf("notifyd client: address %q: %w", addr, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("notifyd client: address %q: scheme must be http or https", addr)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("notifyd client: address %q has no host", addr)
	}
	// Each call's path is appended to the address: after a query or a
	// fragment it would become part of them, and every call would go to
	// the address's own path.
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(addr, "?#") {
		return nil, fmt.Errorf("notifyd client: address %q has a query or fragment: want only scheme, host, port and an optional path prefix", addr)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	c := &Client{base: u, token: token, http: &http.Client{Timeout: DefaultTimeout}}
	for _, o := range opts {
		o(c)
	}
	// A copy, so the caller's client is left as it was: redirects are never
	// followed, since net/http keeps Authorization on a redirect to the same
	// host name whatever its port or scheme; do answers a 3xx as an error.
	hc := *c.http
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.http = &hc
	return c, nil
}

// Error is an error answer from the API.
type Error struct {
	StatusCode int    // HTTP status
	Code       string // CodeInvalid, CodeNotFound, …
	Message    string // names the field or parameter at fault
}

// Error is the API's answer in one line: its status, code and message, their
// control characters escaped (wire.EscapeControls): the text is the
// server's, or a proxy's, and ends up on terminals and in logs.
func (e *Error) Error() string {
	return fmt.Sprintf("notifyd API: %d %s: %s", e.StatusCode, wire.EscapeControls(e.Code), wire.EscapeControls(e.Message))
}

// StatusCode is the HTTP status of an *Error in err's chain, or 0.
func StatusCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

// Enqueue sends one notification. A repeated idempotency key answers with
// the original (Duplicate set).
func (c *Client) Enqueue(ctx context.Context, n Notification) (Enqueued, error) {
	var out Enqueued
	if err := c.do(ctx, http.MethodPost, "/v1/notifications", nil, n, &out); err != nil {
		return Enqueued{}, err
	}
	if out.ID <= 0 {
		return Enqueued{}, fmt.Errorf("notifyd client: POST /v1/notifications: the answer has no notification id (id %d)", out.ID)
	}
	return out, nil
}

// EnqueueBatch sends up to MaxBatch notifications in one call, all or none;
// the answers come in the same order.
func (c *Client) EnqueueBatch(ctx context.Context, ns []Notification) ([]Enqueued, error) {
	var out EnqueuedBatch
	if err := c.do(ctx, http.MethodPost, "/v1/notifications", nil, EnqueueBatchRequest{Notifications: ns}, &out); err != nil {
		return nil, err
	}
	if len(out.Notifications) != len(ns) {
		return nil, fmt.Errorf("notifyd client: POST /v1/notifications: the answer has %d notifications for the %d sent", len(out.Notifications), len(ns))
	}
	for i, e := range out.Notifications {
		if e.ID <= 0 {
			return nil, fmt.Errorf("notifyd client: POST /v1/notifications: the answer has no id for notification %d (id %d)", i, e.ID)
		}
	}
	return out.Notifications, nil
}

// Notification reads one notification with its attempt history.
func (c *Client) Notification(ctx context.Context, id int64) (*NotificationInfo, error) {
	var out NotificationInfo
	if err := c.do(ctx, http.MethodGet, "/v1/notifications/"+strconv.FormatInt(id, 10), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Cancel stops a PENDING or QUEUED notification. Cancelling one already
// cancelled succeeds; one being sent or finished answers 409.
func (c *Client) Cancel(ctx context.Context, id int64) (*Cancelled, error) {
	var out Cancelled
	if err := c.do(ctx, http.MethodPost, "/v1/notifications/"+strconv.FormatInt(id, 10)+"/cancel", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DLQ reads one page of dead-lettered (FAILED) notifications.
func (c *Client) DLQ(ctx context.Context, q DLQQuery) (*DLQPage, error) {
	v := url.Values{}
	setIf(v, "channel", q.Channel)
	setInt(v, "after", q.After)
	setInt(v, "limit", int64(q.Limit))
	var out DLQPage
	if err := c.do(ctx, http.MethodGet, "/v1/dlq", v, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReplayDLQ queues dead-lettered notifications again with a fresh retry
// budget: the given ids (all must be FAILED, or nothing changes) or every
// one of a channel.
func (c *Client) ReplayDLQ(ctx context.Context, sel DLQSelector) (*Replayed, error) {
	var out Replayed
	if err := c.do(ctx, http.MethodPost, "/v1/dlq/replay", nil, sel, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PurgeDLQ deletes dead-lettered notifications and their history.
func (c *Client) PurgeDLQ(ctx context.Context, sel DLQSelector) (*Purged, error) {
	var out Purged
	if err := c.do(ctx, http.MethodPost, "/v1/dlq/purge", nil, sel, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Channels reads every channel's queue sizes and outbox counts.
func (c *Client) Channels(ctx context.Context) (*Channels, error) {
	var out Channels
	if err := c.do(ctx, http.MethodGet, "/v1/channels", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PauseChannel stops every instance sending on channel until ResumeChannel;
// its notifications wait in the queue.
func (c *Client) PauseChannel(ctx context.Context, channel, reason string) error {
	var body any
	if reason != "" {
		body = PauseRequest{Reason: reason}
	}
	return c.do(ctx, http.MethodPost, "/v1/channels/"+url.PathEscape(channel)+"/pause", nil, body, &ChannelControl{})
}

// ResumeChannel lets a paused channel send again.
func (c *Client) ResumeChannel(ctx context.Context, channel string) error {
	return c.do(ctx, http.MethodPost, "/v1/channels/"+url.PathEscape(channel)+"/resume", nil, nil, &ChannelControl{})
}

// PutSubscriber creates or replaces s (addresses and attributes as given;
// topics added) and returns it as stored.
func (c *Client) PutSubscriber(ctx context.Context, s Subscriber) (*Subscriber, error) {
	if s.ExternalID == "" {
		return nil, errors.New("notifyd client: put subscriber: external id is empty")
	}
	body := s
	body.ExternalID, body.CreatedAt, body.UpdatedAt = "", time.Time{}, time.Time{}
	var out Subscriber
	if err := c.do(ctx, http.MethodPut, "/v1/subscribers/"+url.PathEscape(s.ExternalID), nil, putSubscriber(body), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// putSubscriber is the PUT body: the id is in the path.
type putSubscriber Subscriber

func (p putSubscriber) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Addresses  map[string]string `json:"addresses,omitempty"`
		Attributes map[string]any    `json:"attributes,omitempty"`
		Topics     []string          `json:"topics,omitempty"`
	}{p.Addresses, p.Attributes, p.Topics})
}

// Subscriber reads one subscriber with its topics.
func (c *Client) Subscriber(ctx context.Context, externalID string) (*Subscriber, error) {
	var out Subscriber
	if err := c.do(ctx, http.MethodGet, "/v1/subscribers/"+url.PathEscape(externalID), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSubscriber removes a subscriber and its subscriptions.
func (c *Client) DeleteSubscriber(ctx context.Context, externalID string) error {
	return c.do(ctx, http.MethodDelete, "/v1/subscribers/"+url.PathEscape(externalID), nil, nil, nil)
}

// Schedules lists the configured schedules.
func (c *Client) Schedules(ctx context.Context) ([]Schedule, error) {
	var out Schedules
	err := c.do(ctx, http.MethodGet, "/v1/schedules", nil, nil, &out)
	return out.Schedules, err
}

// RunSchedule runs the schedule for a fire time (req's zero value: a run
// firing now) and returns its job, whose Outcome says whether it was created,
// resumed or already pending or running. A fire time that already ran is an
// *Error with status 409 unless req.Force.
func (c *Client) RunSchedule(ctx context.Context, name string, req RunRequest) (*Job, error) {
	var out Job
	if err := c.do(ctx, http.MethodPost, "/v1/schedules/"+url.PathEscape(name)+"/run", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateCampaign starts an ad-hoc bulk send to a topic and returns its job.
func (c *Client) CreateCampaign(ctx context.Context, camp Campaign) (*Job, error) {
	var out Job
	if err := c.do(ctx, http.MethodPost, "/v1/campaigns", nil, camp, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Jobs lists bulk jobs, newest first.
func (c *Client) Jobs(ctx context.Context, q JobQuery) ([]Job, error) {
	v := url.Values{}
	setIf(v, "kind", q.Kind)
	setIf(v, "schedule", q.Schedule)
	setIf(v, "state", q.State)
	setInt(v, "before", q.Before)
	setInt(v, "limit", int64(q.Limit))
	var out Jobs
	err := c.do(ctx, http.MethodGet, "/v1/jobs", v, nil, &out)
	return out.Jobs, err
}

// Job reads one bulk job and its progress.
func (c *Client) Job(ctx context.Context, id int64) (*Job, error) {
	var out Job
	if err := c.do(ctx, http.MethodGet, "/v1/jobs/"+strconv.FormatInt(id, 10), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Ready asks /readyz. It returns the checks and, when the server is not
// ready (503), an *Error as well.
func (c *Client) Ready(ctx context.Context) (*Readiness, error) {
	var out Readiness
	err := c.do(ctx, http.MethodGet, "/readyz", nil, nil, &out)
	return &out, err
}

// Health asks /healthz: nil when the process answers.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil, nil)
}

func setIf(v url.Values, k, s string) {
	if s != "" {
		v.Set(k, s)
	}
}

func setInt(v url.Values, k string, n int64) {
	if n != 0 {
		v.Set(k, strconv.FormatInt(n, 10))
	}
}

// do makes one call: body (when not nil) as JSON, the answer decoded into
// out (when not nil; decodeAnswer). A 3xx is an error naming where it
// points, never followed; any other non-2xx answer becomes an *Error;
// /readyz's 503 also fills out, since its body is the checks.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	// path arrives escaped (url.PathEscape for ids), so it is appended as
	// text rather than set as url.URL.Path, which would escape it again.
	target := c.base.String() + path
	if q := query.Encode(); q != "" {
		target += "?" + q
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("notifyd client: %s %s: encode body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	// The call has a deadline: the caller's context's, else its
	// *http.Client's Timeout (WithHTTPClient, for TLS or a proxy), else
	// DefaultTimeout. A server trickling its answer must not hold the
	// caller for ever.
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmp.Or(c.http.Timeout, DefaultTimeout))
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return fmt.Errorf("notifyd client: %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("notifyd client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	// Every read of the answer ends at the call's deadline, whatever the
	// body is: net/http stops reading a normal one when the request's
	// context ends, but neither that nor the *http.Client's Timeout stops
	// a connection it handed over (a 101's), nor a body a RoundTripper of
	// the caller's returns.
	defer context.AfterFunc(ctx, func() { _ = resp.Body.Close() })()
	// The status line's text is the server's: only the code is quoted.
	status := fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	if resp.StatusCode < 200 {
		// An interim answer as the final one (101 Switching Protocols to a
		// request that asked for no upgrade): its body is the connection.
		return fmt.Errorf("notifyd client: %s %s: answered %s, which is not an answer of the API", method, path, status)
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		if loc := resp.Header.Get("Location"); loc != "" {
			return fmt.Errorf("notifyd client: %s %s: answered %s to %q: not followed (the API never redirects; the token goes to %s alone)",
				method, path, status, wire.Truncate(loc, 200), c.base.Host)
		}
		return fmt.Errorf("notifyd client: %s %s: answered %s, which is not an answer of the API", method, path, status)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if out == nil || resp.StatusCode == http.StatusNoContent {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
			return nil
		}
		if err := decodeAnswer(resp.Body, out); err != nil {
			return fmt.Errorf("notifyd client: %s %s: %s answer: %w", method, path, status, err)
		}
		return nil
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	apiErr := &Error{StatusCode: resp.StatusCode}
	var eb ErrorBody
	if json.Unmarshal(raw, &eb) == nil && eb.Error.Code != "" {
		apiErr.Code, apiErr.Message = eb.Error.Code, eb.Error.Message
	} else {
		// Only /readyz's 503 has a body that is not the error shape: its
		// checks, for out. Another status's JSON (a gateway's 404) is not
		// the API saying it is unavailable: a caller retrying on that code
		// would retry it for ever.
		if resp.StatusCode == http.StatusServiceUnavailable && out != nil && json.Unmarshal(raw, out) == nil {
			apiErr.Code = CodeUnavailable
		}
		apiErr.Message = strings.TrimSpace(string(raw))
		if apiErr.Message == "" {
			apiErr.Message = http.StatusText(resp.StatusCode)
		}
	}
	return apiErr
}

// decodeAnswer reads a 2xx body into out: one JSON object within
// MaxAnswerBytes and nothing after it, which is not the API's error shape
// (a proxy or a broken server answering 2xx with {"error": …}, null or {}
// followed by more must not read as a success with a zero answer).
func decodeAnswer(body io.Reader, out any) error {
	raw, err := io.ReadAll(io.LimitReader(body, MaxAnswerBytes+1))
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if len(raw) > MaxAnswerBytes {
		return fmt.Errorf("over %d bytes (client.MaxAnswerBytes), not read further", MaxAnswerBytes)
	}
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("not a JSON object: %q", wire.Truncate(string(t), 64))
	}
	if json.Valid(raw) { // else Unmarshal says where, building nothing
		if n := decodedSize(raw, reflect.TypeOf(out), MaxAnswerBytes); n > MaxAnswerBytes {
			return fmt.Errorf("would decode into more than %d bytes of values (client.MaxAnswerBytes), not decoded: ask for a smaller page", MaxAnswerBytes)
		}
	}
	var eb ErrorBody
	if json.Unmarshal(raw, &eb) == nil && eb.Error.Code != "" {
		return fmt.Errorf("an error, not an answer: %s: %s", wire.EscapeControls(eb.Error.Code), wire.EscapeControls(wire.Truncate(eb.Error.Message, 512)))
	}
	// json.Unmarshal refuses data after the value (a newline is not data).
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return nil
}
