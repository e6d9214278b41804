package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/notifyd/notifyd/sdk"
)

// testSecret is a Standard Webhooks secret: whsec_ + base64 of 32 bytes.
const testSecret = "whsec_" + "c2VjcmV0LWtleS1mb3Itbm90aWZ5ZC13ZWJob29rLXRlc3Q="

// received is one request the fake receiver saw.
type received struct {
	method, path, query string
	requestURI          string // the request target as sent
	header              http.Header
	body                []byte
}

// receiver is an httptest webhook endpoint that records each request and
// answers with respond (204 when nil).
type receiver struct {
	*httptest.Server
	got chan received
}

func newReceiver(t *testing.T, respond http.HandlerFunc) *receiver {
	t.Helper()
	r := &receiver{got: make(chan received, 64)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.got <- received{req.Method, req.URL.Path, req.URL.RawQuery, req.RequestURI, req.Header.Clone(), body}
		if respond == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		respond(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

// hangingReceiver records each request, runs before (if not nil), and then
// answers nothing more until the client gives up or the test ends.
func hangingReceiver(t *testing.T, before func(http.ResponseWriter)) *receiver {
	t.Helper()
	release := make(chan struct{})
	r := newReceiver(t, func(w http.ResponseWriter, req *http.Request) {
		if before != nil {
			before(w)
		}
		select {
		case <-release:
		case <-req.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) }) // before the server's Close, which waits for handlers
	return r
}

// next returns the next recorded request or fails.
func (r *receiver) next(t *testing.T) received {
	t.Helper()
	select {
	case got := <-r.got:
		return got
	case <-time.After(5 * time.Second):
		t.Fatal("receiver got no request")
		return received{}
	}
}

// none fails if the receiver saw any request.
func (r *receiver) none(t *testing.T) {
	t.Helper()
	select {
	case got := <-r.got:
		t.Fatalf("receiver got %s %s; want no request", got.method, got.path)
	default:
	}
}

// configure builds a sender from a config given as a Go map.
func configure(t testing.TB, p *provider, cfg map[string]any) sdk.Sender {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Configure(context.Background(), sdk.ConfigureRequest{Channel: "orders", Config: raw, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatalf("Configure(%s): %v", raw, err)
	}
	return s
}

func testMessage() sdk.Message {
	return sdk.Message{
		ID:             42,
		Channel:        "orders",
		Recipient:      "user-7",
		Payload:        json.RawMessage(`{"text":"hello","n":1}`),
		Attempt:        1,
		IdempotencyKey: "order-42-shipped",
		CreatedAt:      time.Date(2025, 3, 1, 8, 0, 0, 123456789, time.UTC),
	}
}

// verifySignature checks a request the way a Standard Webhooks receiver does
// (written from the spec, independently of sender.sign): HMAC-SHA256 keyed
// with the base64 part of the secret over "id.timestamp.body", compared with
// every space-separated "v1,<base64>" signature.
func verifySignature(secret string, h http.Header, body []byte) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("missing header: id=%q timestamp=%q signature=%q", id, ts, sigs)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(sigs) {
		version, b64, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("no signature in %q matches", sigs)
}

func TestSender_Send(t *testing.T) {
	t.Parallel()

	t.Run("posts the signed envelope with every header", func(t *testing.T) {
		t.Parallel()
		r := newReceiver(t, nil)
		s := configure(t, &provider{}, map[string]any{
			"url": r.URL + "/hooks/notifyd?tenant=a", "secret": testSecret,
			"headers": map[string]any{"X-Tenant": "acme", "authorization": "Bearer receiver-token"},
		})
		m := testMessage()
		before := time.Now().Unix()
		v := s.Send(context.Background(), m)
		if v.Outcome != sdk.OutcomeSuccess {
			t.Fatalf("outcome = %v (%s); want SUCCESS", v.Outcome, v.Detail)
		}
		if v.ProviderStatus != http.StatusNoContent {
			t.Errorf("provider status = %d; want 204", v.ProviderStatus)
		}
		got := r.next(t)
		if got.method != http.MethodPost || got.path != "/hooks/notifyd" || got.query != "tenant=a" {
			t.Errorf("request = %s %s?%s; want POST /hooks/notifyd?tenant=a", got.method, got.path, got.query)
		}
		for k, want := range map[string]string{
			"Content-Type":    "application/json",
			"User-Agent":      DefaultUserAgent,
			"webhook-id":      "msg_42", // notifyd's, never the client's key (which may hold a '.')
			"Idempotency-Key": "order-42-shipped",
			"X-Tenant":        "acme",
			"Authorization":   "Bearer receiver-token",
		} {
			if g := got.header.Get(k); g != want {
				t.Errorf("header %s = %q; want %q", k, g, want)
			}
		}
		ts, err := strconv.ParseInt(got.header.Get("webhook-timestamp"), 10, 64)
		if err != nil || ts < before || ts > time.Now().Unix() {
			t.Errorf("webhook-timestamp = %q; want unix seconds of the send", got.header.Get("webhook-timestamp"))
		}
		if err := verifySignature(testSecret, got.header, got.body); err != nil {
			t.Errorf("signature does not verify: %v", err)
		}

		var env struct {
			ID        int64           `json:"id"`
			Channel   string          `json:"channel"`
			Recipient string          `json:"recipient"`
			Payload   json.RawMessage `json:"payload"`
			Attempt   int             `json:"attempt"`
			CreatedAt time.Time       `json:"created_at"`
		}
		dec := json.NewDecoder(bytes.NewReader(got.body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&env); err != nil {
			t.Fatalf("envelope %s: %v", got.body, err)
		}
		if env.ID != 42 || env.Channel != "orders" || env.Recipient != "user-7" || env.Attempt != 1 ||
			!env.CreatedAt.Equal(m.CreatedAt) || string(env.Payload) != string(m.Payload) {
			t.Errorf("envelope = %s; want id 42, channel orders, recipient user-7, attempt 1, created_at %s, payload %s",
				got.body, m.CreatedAt.Format(time.RFC3339Nano), m.Payload)
		}
	})

	t.Run("webhook-id is the notification id without a key, the same on every attempt", func(t *testing.T) {
		t.Parallel()
		r := newReceiver(t, nil)
		s := configure(t, &provider{}, map[string]any{"url": r.URL, "secret": testSecret})
		m := testMessage()
		m.IdempotencyKey = ""
		for attempt := 1; attempt <= 2; attempt++ {
			m.Attempt = attempt
			if v := s.Send(context.Background(), m); v.Outcome != sdk.OutcomeSuccess {
				t.Fatalf("attempt %d: outcome = %v (%s)", attempt, v.Outcome, v.Detail)
			}
			got := r.next(t)
			if id, key := got.header.Get("webhook-id"), got.header.Get("Idempotency-Key"); id != "msg_42" || key != "msg_42" {
				t.Errorf("attempt %d: webhook-id = %q, Idempotency-Key = %q; want msg_42 and msg_42", attempt, id, key)
			}
			if !bytes.Contains(got.body, []byte(`"attempt":`+strconv.Itoa(attempt))) {
				t.Errorf("attempt %d: body %s lacks the attempt number", attempt, got.body)
			}
			if err := verifySignature(testSecret, got.header, got.body); err != nil {
				t.Errorf("attempt %d: %v", attempt, err)
			}
		}
	})

	t.Run("no signature without a secret", func(t *testing.T) {
		t.Parallel()
		r := newReceiver(t, nil)
		s := configure(t, &provider{}, map[string]any{"url": r.URL, "user_agent": "acme-relay/2"})
		s.Send(context.Background(), testMessage())
		got := r.next(t)
		if sig, ok := got.header["Webhook-Signature"]; ok {
			t.Errorf("webhook-signature = %q; want none", sig)
		}
		if ua := got.header.Get("User-Agent"); ua != "acme-relay/2" {
			t.Errorf("User-Agent = %q; want acme-relay/2", ua)
		}
	})

	t.Run("an empty payload is sent as null", func(t *testing.T) {
		t.Parallel()
		r := newReceiver(t, nil)
		s := configure(t, &provider{}, map[string]any{"url": r.URL})
		m := testMessage()
		m.Payload = nil
		s.Send(context.Background(), m)
		if got := r.next(t); !bytes.Contains(got.body, []byte(`"payload":null`)) {
			t.Errorf("body = %s; want payload null", got.body)
		}
	})

	t.Run("an idempotency key that cannot be a header value is permanent and never sent", func(t *testing.T) {
		t.Parallel()
		r := newReceiver(t, nil)
		s := configure(t, &provider{}, map[string]any{"url": r.URL})
		m := testMessage()
		m.IdempotencyKey = "order-42\r\nX-Injected: 1"
		v := s.Send(context.Background(), m)
		if v.Outcome != sdk.OutcomePermanent || !strings.Contains(v.Detail, "idempotency key") {
			t.Errorf("verdict = %v %q; want PERMANENT naming the idempotency key", v.Outcome, v.Detail)
		}
		r.none(t)
	})

	t.Run("a payload that is not JSON is permanent and never sent", func(t *testing.T) {
		t.Parallel()
		r := newReceiver(t, nil)
		s := configure(t, &provider{}, map[string]any{"url": r.URL})
		m := testMessage()
		m.Payload = json.RawMessage(`{"text":`)
		v := s.Send(context.Background(), m)
		if v.Outcome != sdk.OutcomePermanent || !strings.Contains(v.Detail, "not valid JSON") {
			t.Errorf("verdict = %v %q; want PERMANENT naming the payload", v.Outcome, v.Detail)
		}
		r.none(t)
	})
}

func TestSender_Send_recipientURL(t *testing.T) {
	t.Parallel()
	channel := newReceiver(t, nil)
	own := newReceiver(t, nil)
	ownURL := own.URL + "/mine?sig=abc"

	t.Run("allowed: an http recipient is the target", func(t *testing.T) {
		s := configure(t, &provider{}, map[string]any{"url": channel.URL, "allow_recipient_url": true})
		m := testMessage()
		m.Recipient = ownURL
		if v := s.Send(context.Background(), m); v.Outcome != sdk.OutcomeSuccess {
			t.Fatalf("outcome = %v (%s)", v.Outcome, v.Detail)
		}
		if got := own.next(t); got.path != "/mine" || got.query != "sig=abc" {
			t.Errorf("recipient got %s?%s; want /mine?sig=abc", got.path, got.query)
		}
		channel.none(t)
	})

	t.Run("allowed: a plain recipient goes to url", func(t *testing.T) {
		s := configure(t, &provider{}, map[string]any{"url": channel.URL, "allow_recipient_url": true})
		s.Send(context.Background(), testMessage())
		channel.next(t)
		own.none(t)
	})

	t.Run("not allowed: a URL recipient is only data", func(t *testing.T) {
		s := configure(t, &provider{}, map[string]any{"url": channel.URL})
		m := testMessage()
		m.Recipient = ownURL
		s.Send(context.Background(), m)
		got := channel.next(t)
		if !bytes.Contains(got.body, []byte(`"recipient":"`+ownURL+`"`)) {
			t.Errorf("body = %s; want the recipient URL as data", got.body)
		}
		own.none(t)
	})

	t.Run("no url: a plain recipient is permanent", func(t *testing.T) {
		s := configure(t, &provider{}, map[string]any{"allow_recipient_url": true})
		v := s.Send(context.Background(), testMessage())
		if v.Outcome != sdk.OutcomePermanent || !strings.Contains(v.Detail, "no url") {
			t.Errorf("verdict = %v %q; want PERMANENT saying there is no url", v.Outcome, v.Detail)
		}
	})
}

func TestSender_Send_classification(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		status       int
		header       map[string]string
		body         string
		retryAll     bool
		want         sdk.Outcome
		retryAfter   time.Duration
		wantInDetail string
	}{
		{name: "200", status: 200, want: sdk.OutcomeSuccess},
		{name: "202", status: 202, want: sdk.OutcomeSuccess},
		{name: "503", status: 503, body: "maintenance", want: sdk.OutcomeTransient, wantInDetail: "503"},
		{name: "500", status: 500, want: sdk.OutcomeTransient},
		{name: "408", status: 408, want: sdk.OutcomeTransient},
		{name: "429 with Retry-After", status: 429, header: map[string]string{"Retry-After": "7"},
			want: sdk.OutcomeTransient, retryAfter: 7 * time.Second},
		{name: "503 with Retry-After", status: 503, header: map[string]string{"Retry-After": "2"},
			want: sdk.OutcomeTransient, retryAfter: 2 * time.Second},
		{name: "400 quotes the body", status: 400, body: `{"error":"unknown order"}`,
			want: sdk.OutcomePermanent, wantInDetail: `400 Bad Request: {"error":"unknown order"}`},
		{name: "404", status: 404, want: sdk.OutcomePermanent, wantInDetail: "404"},
		{name: "410", status: 410, want: sdk.OutcomePermanent},
		{name: "redirect is not followed", status: 302, header: map[string]string{"Location": "/elsewhere"},
			want: sdk.OutcomePermanent, wantInDetail: "302"},
		{name: "retry_all_non_2xx: 400", status: 400, retryAll: true, want: sdk.OutcomeTransient},
		{name: "retry_all_non_2xx: 410 stays final (the receiver asks to be left alone)", status: 410, retryAll: true, want: sdk.OutcomePermanent},
		{name: "retry_all_non_2xx: 429 keeps Retry-After", status: 429, retryAll: true,
			header: map[string]string{"Retry-After": "3"}, want: sdk.OutcomeTransient, retryAfter: 3 * time.Second},
		{name: "retry_all_non_2xx: 200", status: 200, retryAll: true, want: sdk.OutcomeSuccess},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			})
			s := configure(t, &provider{}, map[string]any{"url": r.URL, "retry_all_non_2xx": tt.retryAll})
			v := s.Send(context.Background(), testMessage())
			if v.Outcome != tt.want {
				t.Errorf("outcome = %v (%s); want %v", v.Outcome, v.Detail, tt.want)
			}
			if v.RetryAfter != tt.retryAfter {
				t.Errorf("retry after = %v; want %v", v.RetryAfter, tt.retryAfter)
			}
			if v.ProviderStatus != tt.status {
				t.Errorf("provider status = %d; want %d", v.ProviderStatus, tt.status)
			}
			if !strings.Contains(v.Detail, tt.wantInDetail) {
				t.Errorf("detail = %q; want it to contain %q", v.Detail, tt.wantInDetail)
			}
			if r.next(t).path == "/elsewhere" {
				t.Error("the redirect was followed")
			}
		})
	}
}

func TestSender_Send_badReceivers(t *testing.T) {
	t.Parallel()

	t.Run("a hanging receiver times out as transient", func(t *testing.T) {
		t.Parallel()
		r := hangingReceiver(t, nil)
		s := configure(t, &provider{}, map[string]any{"url": r.URL, "timeout": "150ms"})
		start := time.Now()
		v := s.Send(context.Background(), testMessage())
		if v.Outcome != sdk.OutcomeTransient {
			t.Errorf("outcome = %v (%s); want TRANSIENT", v.Outcome, v.Detail)
		}
		if took := time.Since(start); took > 10*time.Second { // uncut, it would hang
			t.Errorf("send took %v; want it cut at the 150ms timeout", took)
		}
		if !strings.Contains(v.Detail, "timeout of 150ms") || !strings.Contains(v.Detail, "deadline exceeded") {
			t.Errorf("detail = %q; want it to name the 150ms timeout", v.Detail)
		}
	})

	t.Run("the message deadline also bounds the send", func(t *testing.T) {
		t.Parallel()
		r := hangingReceiver(t, nil)
		s := configure(t, &provider{}, map[string]any{"url": r.URL, "timeout": "1m"})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		v := s.Send(ctx, testMessage())
		if v.Outcome != sdk.OutcomeTransient || !strings.Contains(v.Detail, "message's deadline") {
			t.Errorf("verdict = %v %q; want TRANSIENT naming the message's deadline", v.Outcome, v.Detail)
		}
		if took := time.Since(start); took > 10*time.Second { // uncut, it would hang
			t.Errorf("send took %v; want it cut at the 100ms deadline", took)
		}
	})

	t.Run("connection refused is transient and the URL's query is not echoed", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		s := configure(t, &provider{}, map[string]any{"url": "http://" + addr + "/hook?token=s3cr3t-query"})
		v := s.Send(context.Background(), testMessage())
		if v.Outcome != sdk.OutcomeTransient {
			t.Errorf("outcome = %v (%s); want TRANSIENT", v.Outcome, v.Detail)
		}
		if strings.Contains(v.Detail, "s3cr3t-query") {
			t.Errorf("detail %q echoes the URL's query", v.Detail)
		}
		if want := `Post "http://` + addr + `/hook": dial tcp`; !strings.Contains(v.Detail, want) || !strings.Contains(v.Detail, "refused") {
			t.Errorf("detail = %q; want it to contain %q and say the connection was refused", v.Detail, want)
		}
	})

	t.Run("an oversized 200 is still a success", func(t *testing.T) {
		t.Parallel()
		r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			for range 160 { // 10 MB
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		})
		s := configure(t, &provider{}, map[string]any{"url": r.URL})
		if v := s.Send(context.Background(), testMessage()); v.Outcome != sdk.OutcomeSuccess {
			t.Errorf("outcome = %v (%s); want SUCCESS", v.Outcome, v.Detail)
		}
	})

	t.Run("a garbage error body is quoted short and printable", func(t *testing.T) {
		t.Parallel()
		garbage := append(bytes.Repeat([]byte{0xff, 0x00, '\n', 'A'}, 4096), "tail"...)
		r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			w.Write(garbage)
		})
		s := configure(t, &provider{}, map[string]any{"url": r.URL})
		v := s.Send(context.Background(), testMessage())
		if v.Outcome != sdk.OutcomeTransient {
			t.Errorf("outcome = %v; want TRANSIENT", v.Outcome)
		}
		if len(v.Detail) > 700 || strings.ContainsAny(v.Detail, "\x00\n\xff") {
			t.Errorf("detail (%d bytes) = %q; want one short printable line", len(v.Detail), v.Detail)
		}
	})
}

func TestProvider_Configure_secretNeverLeaks(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Trace})
	r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
	raw, _ := json.Marshal(map[string]any{"url": r.URL, "secret": testSecret})
	s, err := (&provider{}).Configure(context.Background(), sdk.ConfigureRequest{Channel: "c", Config: raw, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	v := s.Send(context.Background(), testMessage())
	key := strings.TrimPrefix(testSecret, "whsec_")
	for what, text := range map[string]string{"logs": logs.String(), "detail": v.Detail} {
		if strings.Contains(text, key) {
			t.Errorf("%s contain the secret: %q", what, text)
		}
	}

	// A malformed secret is not echoed in the Configure error either.
	for _, bad := range []string{"whsec_not*base64*" + key, "sk_" + key} {
		raw, _ := json.Marshal(map[string]any{"url": r.URL, "secret": bad})
		_, err := (&provider{}).Configure(context.Background(), sdk.ConfigureRequest{Channel: "c", Config: raw})
		if err == nil || strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "secret") {
			t.Errorf("Configure(secret %.10s…) error = %v; want one naming secret without its value", bad, err)
		}
	}
}

func TestProvider_Configure_errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		config  string
		wantKey string
	}{
		{"no url", `{}`, "url"},
		{"url not http", `{"url":"ftp://example.com/x"}`, "url"},
		{"url without host", `{"url":"http:///path"}`, "url"},
		{"url wrong type", `{"url":5}`, "url"},
		{"url port past 65535", `{"url":"http://127.0.0.1:99999/in"}`, "url"},
		{"url port 0", `{"url":"http://127.0.0.1:0/in"}`, "url"},
		{"url port empty", `{"url":"http://127.0.0.1:/in"}`, "url"},
		{"url query with a space", `{"url":"http://127.0.0.1/in?name=my hook"}`, "url"},
		{"url port without a host", `{"url":"http://:8080/in"}`, "url"},
		{"unknown key", `{"url":"http://127.0.0.1/","retries":3}`, "retries"},
		{"secret without prefix", `{"url":"http://127.0.0.1/","secret":"c2VjcmV0"}`, "secret"},
		{"secret not base64", `{"url":"http://127.0.0.1/","secret":"whsec_%%%"}`, "secret"},
		{"secret empty key", `{"url":"http://127.0.0.1/","secret":"whsec_"}`, "secret"},
		{"timeout not a duration", `{"url":"http://127.0.0.1/","timeout":"soon"}`, "timeout"},
		{"timeout negative", `{"url":"http://127.0.0.1/","timeout":"-1s"}`, "timeout"},
		{"reserved header", `{"url":"http://127.0.0.1/","headers":{"webhook-id":"x"}}`, "headers.webhook-id"},
		{"bad header name", `{"url":"http://127.0.0.1/","headers":{"X Bad":"x"}}`, "headers.X Bad"},
		{"header value with newline", `{"url":"http://127.0.0.1/","headers":{"X-A":"a\r\nX-B: b"}}`, "headers.X-A"},
		{"bool as number", `{"url":"http://127.0.0.1/","retry_all_non_2xx":1}`, "retry_all_non_2xx"},
		{"not an object", `["http://127.0.0.1/"]`, "config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := (&provider{}).Configure(context.Background(), sdk.ConfigureRequest{Channel: "c", Config: json.RawMessage(tt.config)})
			if err == nil {
				t.Fatalf("Configure(%s) = nil error; want one naming %s", tt.config, tt.wantKey)
			}
			if !strings.Contains(err.Error(), tt.wantKey) {
				t.Errorf("Configure(%s) error = %q; want it to name %q", tt.config, err, tt.wantKey)
			}
		})
	}
}

func TestSender_sign(t *testing.T) {
	t.Parallel()
	// The test vector published with the Standard Webhooks reference
	// libraries (and Svix's docs).
	key, err := decodeSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	s := &sender{macs: []*sync.Pool{newMACPool(key)}}
	got := s.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("sign = %q; want %q", got, want)
	}
	// The pooled MAC is reset between uses.
	if again := s.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", []byte(`{"test": 2432232314}`)); again != got {
		t.Errorf("second sign = %q; want %q", again, got)
	}
}

func TestAppendEnvelope(t *testing.T) {
	t.Parallel()
	m := testMessage()
	m.Channel = "ch\"an\\nel"
	m.Recipient = "line\nbreak\ttab \x01 \u2028 \xff é 😀 </script>"
	got, err := appendEnvelope(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal(got, &env); err != nil {
		t.Fatalf("envelope %q is not JSON: %v", got, err)
	}
	if env["channel"] != m.Channel {
		t.Errorf("channel = %q; want %q", env["channel"], m.Channel)
	}
	if want := strings.ToValidUTF8(m.Recipient, "\ufffd"); env["recipient"] != want {
		t.Errorf("recipient = %q; want %q", env["recipient"], want)
	}
	if n := envelopeSize(&m); len(got) > n {
		t.Errorf("envelope is %d bytes, over its size estimate %d: building it reallocates", len(got), n)
	}
}
