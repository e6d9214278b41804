package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// sender embeds one channel's notifications. Immutable after Configure.
type sender struct {
	client        *http.Client
	endpoint      string
	authorization string
	// secrets knows the channel's credentials (api_key, user info and query
	// values of base_url and callback_url, callback header values), to scrub
	// them from anything reported: an answer may echo them.
	secrets        *sdk.Redactor
	defaults       params
	timeout        time.Duration
	maxBatchTokens int
	maxResultBytes int64
	callback       *callback // nil when the channel has no callback_url
}

// callback is where results are POSTed after a successful embedding.
type callback struct {
	url     *url.URL
	headers http.Header
	timeout time.Duration
	secrets *sdk.Redactor // the sender's
}

// embedResponse is Voyage's answer to POST /v1/embeddings.
type embedResponse struct {
	Object string           `json:"object"`
	Data   []embeddingEntry `json:"data"`
	Model  string           `json:"model"`
	Usage  json.RawMessage  `json:"usage"`
}

type embeddingEntry struct {
	Object    string          `json:"object,omitempty"`
	Embedding json.RawMessage `json:"embedding"`
	Index     int             `json:"index"`
}

// errorResponse is Voyage's error body.
type errorResponse struct {
	Detail any `json:"detail"`
}

// Send embeds m's input and returns the embeddings as the result.
func (s *sender) Send(ctx context.Context, m sdk.Message) sdk.Verdict {
	body, inputs, err := buildRequest(m.Payload, s.defaults, s.maxBatchTokens)
	if err != nil {
		return sdk.Permanent(fmt.Sprintf("notification %d: %v", m.ID, err))
	}
	result, v := s.embed(ctx, body, inputs)
	if v.Outcome != sdk.OutcomeSuccess {
		return v
	}
	if s.callback != nil {
		if cv := s.callback.post(ctx, s.client, &m, result); cv.Outcome != sdk.OutcomeSuccess {
			return cv.WithResult(result)
		}
	}
	return v
}

// embed POSTs body to Voyage and turns the answer into a verdict carrying
// the result on success.
func (s *sender) embed(ctx context.Context, body []byte, inputs int) (json.RawMessage, sdk.Verdict) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, sdk.Permanent(fmt.Sprintf("voyage: build request: %v", err))
	}
	req.Header.Set("Authorization", s.authorization)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)

	resp, err := s.client.Do(req)
	if err != nil {
		v := sdk.ClassifyHTTP(nil, err)
		v.Detail = s.scrub("voyage: " + oneLine(v.Detail, 1024))
		return nil, v
	}
	defer resp.Body.Close()
	v := sdk.ClassifyHTTP(resp, nil)
	if v.Outcome != sdk.OutcomeSuccess {
		// Voyage says why in {"detail": …}; that is what the operator needs.
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		v.Detail = s.scrub(fmt.Sprintf("voyage: HTTP %d %s: %s", resp.StatusCode, http.StatusText(resp.StatusCode), errorDetail(raw)))
		return nil, v
	}
	raw, readErr := io.ReadAll(io.LimitReader(resp.Body, s.maxResultBytes+1))
	switch {
	case readErr != nil:
		// The answer was cut off: worth another try.
		return nil, sdk.Transient(s.scrub(fmt.Sprintf("voyage: read response: %v", readErr))).WithStatus(resp.StatusCode)
	case int64(len(raw)) > s.maxResultBytes:
		// The same request would bring the same size back.
		return nil, sdk.Permanent(fmt.Sprintf("voyage: response is over max_result_bytes (%d); raise it, lower output_dimension or send fewer inputs",
			s.maxResultBytes)).WithStatus(resp.StatusCode)
	}
	result, err := parseEmbeddings(raw, inputs)
	if err != nil {
		// A 2xx we cannot read is most likely a proxy or a glitch, not an
		// answer to this input: retrying is safe (embedding is idempotent).
		return nil, sdk.Transient(fmt.Sprintf("voyage: %s with an unusable body: %v", resp.Status, err)).WithStatus(resp.StatusCode)
	}
	return result, sdk.Success(result).WithStatus(resp.StatusCode)
}

// parseEmbeddings checks Voyage's 2xx body (one embedding per input, each
// index once) and returns it compacted, ordered by index, as the result.
func parseEmbeddings(raw []byte, inputs int) (json.RawMessage, error) {
	var r embedResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("not an embeddings response: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if len(r.Data) != inputs {
		return nil, fmt.Errorf("%d embeddings for %d inputs", len(r.Data), inputs)
	}
	ordered := make([]embeddingEntry, inputs)
	seen := make([]bool, inputs)
	for _, e := range r.Data {
		if e.Index < 0 || e.Index >= inputs || seen[e.Index] {
			return nil, fmt.Errorf("embedding index %d is out of range or repeated", e.Index)
		}
		if len(e.Embedding) == 0 || e.Embedding[0] != '[' && e.Embedding[0] != '"' {
			return nil, fmt.Errorf("embedding %d is not a vector", e.Index)
		}
		seen[e.Index] = true
		ordered[e.Index] = e
	}
	r.Data = ordered
	out, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return out, nil
}

// errorDetail is Voyage's `detail` from an error body, or the body's start
// when it is not Voyage's JSON.
func errorDetail(raw []byte) string {
	var e errorResponse
	if json.Unmarshal(raw, &e) == nil && e.Detail != nil {
		switch d := e.Detail.(type) {
		case string:
			return oneLine(d, 512)
		default:
			// FastAPI-style validation errors: a list of objects.
			b, _ := json.Marshal(d)
			return oneLine(string(b), 512)
		}
	}
	if s := oneLine(string(raw), 512); s != "" {
		return s
	}
	return "(no body)"
}

// post sends the result to the callback URL. Its failure is classified like
// any HTTP send (sdk.ClassifyHTTP): a transient one retries the whole
// notification, so the callback receives the embeddings at least once.
func (c *callback) post(ctx context.Context, client *http.Client, m *sdk.Message, result json.RawMessage) sdk.Verdict {
	var createdAt *time.Time
	if !m.CreatedAt.IsZero() {
		t := m.CreatedAt.UTC()
		createdAt = &t
	}
	body, err := json.Marshal(struct {
		ID             int64           `json:"id"`
		Channel        string          `json:"channel"`
		Recipient      string          `json:"recipient"`
		IdempotencyKey string          `json:"idempotency_key,omitempty"`
		Attempt        int             `json:"attempt"`
		CreatedAt      *time.Time      `json:"created_at"`
		Result         json.RawMessage `json:"result"`
	}{m.ID, m.Channel, m.Recipient, m.IdempotencyKey, m.Attempt, createdAt, result})
	if err != nil {
		return sdk.Permanent(fmt.Sprintf("callback: encode body: %v", err))
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url.String(), bytes.NewReader(body))
	if err != nil {
		return sdk.Permanent(fmt.Sprintf("callback: build request: %v", err))
	}
	for k, v := range c.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}
	key := m.IdempotencyKey
	if key == "" {
		key = strconv.FormatInt(m.ID, 10)
	}
	req.Header.Set("Idempotency-Key", key)

	resp, err := client.Do(req)
	if err != nil {
		v := sdk.ClassifyHTTP(nil, redactURLError(err))
		v.Detail = c.secrets.Redact("callback " + redactURL(c.url) + ": " + oneLine(v.Detail, 1024))
		return v
	}
	defer resp.Body.Close()
	v := sdk.ClassifyHTTP(resp, nil)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if v.Outcome != sdk.OutcomeSuccess {
		// The receiver's body may echo the callback headers back.
		v.Detail = c.secrets.Redact("callback " + redactURL(c.url) + ": " + oneLine(v.Detail, 1024))
	}
	return v
}

// redactURLError keeps the shape of a *url.Error (so timeouts still read as
// timeouts) but drops the URL's query and user info, which may hold a token.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			return &url.Error{Op: ue.Op, URL: redactURL(u), Err: ue.Err}
		}
		return &url.Error{Op: ue.Op, URL: "(callback URL)", Err: ue.Err}
	}
	return err
}

// redactURL prints u without user info or query.
func redactURL(u *url.URL) string {
	return u.Scheme + "://" + u.Host + u.EscapedPath()
}

// scrub removes the channel's credentials from text that will be logged or
// stored.
func (s *sender) scrub(text string) string { return s.secrets.Redact(text) }

// oneLine flattens s to one printable line of at most max bytes.
func oneLine(s string, max int) string {
	s = strings.ToValidUTF8(s, "")
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r < 0x20 || r == ' ' || r == 0x7f }), " ")
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
