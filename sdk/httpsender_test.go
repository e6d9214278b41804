package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/sdktest"
)

// providerServer answers as the request's query says: code, retry_after,
// body, refusal (a JSON error), size (that many bytes of body), echo (the request's headers and URL
// in the body) and block (answer only once the request is gone, or after
// 30 s).
func providerServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		_, _ = io.Copy(io.Discard, r.Body) // read whole, so a client hanging up ends r.Context()
		if q.Has("block") {
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
		}
		if ra := q.Get("retry_after"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		code, _ := strconv.Atoi(q.Get("code"))
		w.WriteHeader(code)
		io.WriteString(w, q.Get("body"))
		if q.Has("refusal") { // not in the URL, whose query values are redacted as credentials
			io.WriteString(w, `{"error":"bad recipient"}`)
		}
		if q.Has("echo") {
			fmt.Fprintf(w, "you sent %s with %v", r.URL, r.Header)
		}
		size, _ := strconv.Atoi(q.Get("size"))
		chunk := []byte(strings.Repeat("x", 64<<10))
		for n := 0; n < size; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// countingClient counts the bytes the sender reads of answers.
func countingClient(read *atomic.Int64) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if resp != nil {
			resp.Body = countingBody{resp.Body, read}
		}
		return resp, err
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// postTo builds a POST of the message's payload to url.
func postTo(url string) func(context.Context, sdk.Message) (*http.Request, error) {
	return func(ctx context.Context, m sdk.Message) (*http.Request, error) {
		return sdk.PostJSON(ctx, url, m.Payload, nil)
	}
}

func messageIDResult(_ *http.Response, body []byte, _ sdk.Message) (sdk.Verdict, error) {
	var a struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return sdk.Verdict{}, err
	}
	return sdk.Success(json.RawMessage(strconv.Quote(a.ID))), nil
}

func TestHTTPSender_Send(t *testing.T) {
	t.Parallel()
	srv := providerServer(t)
	closed := httptest.NewServer(http.NotFoundHandler())
	refused := closed.URL
	closed.Close()

	tests := []struct {
		name       string
		url        string
		parse      bool
		timeout    time.Duration
		want       sdk.Outcome
		status     int
		retryAfter time.Duration
		detail     string
		result     string
	}{
		{name: "200", url: srv.URL + "?code=200", want: sdk.OutcomeSuccess, status: 200},
		{name: "200 parsed", url: srv.URL + "?code=200&body=" + url.QueryEscape(`{"id":"p-1"}`), parse: true, want: sdk.OutcomeSuccess, status: 200, result: `"p-1"`},
		{name: "204", url: srv.URL + "?code=204", want: sdk.OutcomeSuccess, status: 204},
		{name: "400", url: srv.URL + "?code=400&refusal", want: sdk.OutcomePermanent, status: 400, detail: `HTTP 400 Bad Request: {"error":"bad recipient"}`},
		{name: "404", url: srv.URL + "?code=404", want: sdk.OutcomePermanent, status: 404, detail: "HTTP 404"},
		{name: "410", url: srv.URL + "?code=410", want: sdk.OutcomePermanent, status: 410, detail: "HTTP 410 Gone"},
		{name: "429 with Retry-After", url: srv.URL + "?code=429&retry_after=7", want: sdk.OutcomeTransient, status: 429, retryAfter: 7 * time.Second, detail: "HTTP 429"},
		{name: "500", url: srv.URL + "?code=500", want: sdk.OutcomeTransient, status: 500, detail: "HTTP 500"},
		{name: "503", url: srv.URL + "?code=503&body=down", want: sdk.OutcomeTransient, status: 503, detail: "HTTP 503 Service Unavailable: down"},
		{name: "a redirect is not followed", url: srv.URL + "?code=302", want: sdk.OutcomePermanent, status: 302, detail: "HTTP 302"},
		{name: "timeout", url: srv.URL + "?block&code=200", timeout: 200 * time.Millisecond, want: sdk.OutcomeTransient, detail: "deadline exceeded"},
		{name: "connection refused", url: refused, want: sdk.OutcomeTransient, detail: "connection refused"},
		{name: "garbled 2xx answer", url: srv.URL + "?code=200&body=<html>", parse: true, want: sdk.OutcomeTransient, status: 200, detail: "read the answer: invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := &sdk.HTTPSender{Build: postTo(tt.url)}
			if tt.parse {
				s.Parse = messageIDResult
			}
			ctx := context.Background()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			v := s.Send(ctx, sdk.Message{ID: 1, Payload: json.RawMessage(`{}`)})
			if v.Outcome != tt.want || v.ProviderStatus != tt.status || v.RetryAfter != tt.retryAfter ||
				!strings.Contains(v.Detail, tt.detail) || string(v.Result) != tt.result {
				t.Errorf("got %v status %d retry %s detail %q result %s; want %v status %d retry %s detail containing %q result %s",
					v.Outcome, v.ProviderStatus, v.RetryAfter, v.Detail, v.Result, tt.want, tt.status, tt.retryAfter, tt.detail, tt.result)
			}
		})
	}
}

// TestHTTPSender_boundedRead: a 20 MB answer is never read whole — past
// MaxAnswer for Parse (TRANSIENT), past a drain when nobody parses it.
func TestHTTPSender_boundedRead(t *testing.T) {
	t.Parallel()
	srv := providerServer(t)
	const size = 20 << 20
	tests := []struct {
		name     string
		query    string
		parse    bool
		maxRead  int64
		want     sdk.Outcome
		detail   string
		parseRan bool
	}{
		{"2xx for Parse", "?code=200", true, sdk.DefaultMaxHTTPAnswer + 1, sdk.OutcomeTransient, "larger than 4194304 bytes", false},
		{"2xx nobody parses", "?code=200", false, 1 << 20, sdk.OutcomeSuccess, "", false},
		{"5xx", "?code=500", true, 1 << 20, sdk.OutcomeTransient, "HTTP 500", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var read atomic.Int64
			parsed := false
			s := &sdk.HTTPSender{
				Build:  postTo(srv.URL + tt.query + "&size=" + strconv.Itoa(size)),
				Client: countingClient(&read),
			}
			if tt.parse {
				s.Parse = func(*http.Response, []byte, sdk.Message) (sdk.Verdict, error) {
					parsed = true
					return sdk.Success(nil), nil
				}
			}
			v := s.Send(context.Background(), sdk.Message{ID: 1, Payload: json.RawMessage(`{}`)})
			if v.Outcome != tt.want || !strings.Contains(v.Detail, tt.detail) || parsed != tt.parseRan {
				t.Errorf("got %v %q (Parse ran: %v); want %v with %q (Parse ran: %v)", v.Outcome, v.Detail, parsed, tt.want, tt.detail, tt.parseRan)
			}
			// The transport reads ahead by a buffer at most.
			if n := read.Load(); n > tt.maxRead+64<<10 {
				t.Errorf("read %d bytes of a %d-byte answer; want at most %d", n, size, tt.maxRead)
			}
		})
	}
}

// TestHTTPSender_redacts: a provider echoing the request — its credential
// headers, its URL's token, a key in its body — leaves none of them in the
// verdict.
func TestHTTPSender_redacts(t *testing.T) {
	t.Parallel()
	srv := providerServer(t)
	secrets := sdk.Redactor{}
	secrets.Add("body-key-5678")
	s := &sdk.HTTPSender{
		Redactor: &secrets,
		Build: func(ctx context.Context, m sdk.Message) (*http.Request, error) {
			return sdk.PostJSON(ctx, srv.URL+"?code=401&echo&token=url-token-1234", map[string]string{"key": "body-key-5678"},
				http.Header{"Authorization": {"Bearer bearer-secret-42"}, "x-vendor-key": {"vendor-key-0099"}})
		},
	}
	v := s.Send(context.Background(), sdk.Message{ID: 1})
	if v.Outcome != sdk.OutcomePermanent || !strings.Contains(v.Detail, sdk.Redacted) {
		t.Fatalf("got %v %q, want PERMANENT with %s in its detail", v.Outcome, v.Detail, sdk.Redacted)
	}
	for _, leak := range []string{"bearer-secret-42", "url-token-1234", "vendor-key-0099"} {
		if strings.Contains(v.Detail, leak) {
			t.Errorf("detail %q quotes %q", v.Detail, leak)
		}
	}
	if !strings.Contains(v.Detail, "application/json") {
		t.Errorf("detail %q: a plain header (Content-Type) is no secret, want it kept", v.Detail)
	}

	// The body key echoed back, and a transport error quoting the URL.
	s.Build = func(ctx context.Context, m sdk.Message) (*http.Request, error) {
		return sdk.PostJSON(ctx, srv.URL+"?code=400&body=body-key-5678", nil, nil)
	}
	if v := s.Send(context.Background(), sdk.Message{ID: 1}); strings.Contains(v.Detail, "body-key-5678") {
		t.Errorf("detail %q quotes the Redactor's secret", v.Detail)
	}
	s.Build = postTo("http://127.0.0.1:1/?token=url-token-1234")
	if v := s.Send(context.Background(), sdk.Message{ID: 1}); v.Outcome != sdk.OutcomeTransient || strings.Contains(v.Detail, "url-token-1234") {
		t.Errorf("got %v %q; want TRANSIENT without the URL's token", v.Outcome, v.Detail)
	}
}

func TestHTTPSender_build(t *testing.T) {
	t.Parallel()
	srv := providerServer(t)
	tests := []struct {
		name   string
		build  func(context.Context, sdk.Message) (*http.Request, error)
		want   sdk.Outcome
		detail string
	}{
		{"an error is final", func(context.Context, sdk.Message) (*http.Request, error) {
			return nil, errors.New("recipient is empty")
		}, sdk.OutcomePermanent, "build the request: recipient is empty"},
		{"ErrRetry is retried", func(context.Context, sdk.Message) (*http.Request, error) {
			return nil, fmt.Errorf("refresh the token: %w", sdk.ErrRetry)
		}, sdk.OutcomeTransient, "refresh the token"},
		{"no request and no error", func(context.Context, sdk.Message) (*http.Request, error) {
			return nil, nil
		}, sdk.OutcomeTransient, "Build returned no request"},
		{"unencodable JSON", func(ctx context.Context, m sdk.Message) (*http.Request, error) {
			return sdk.PostJSON(ctx, srv.URL, func() {}, nil)
		}, sdk.OutcomePermanent, "encode the request as JSON"},
		{"a request built without a context keeps the deadline", func(_ context.Context, m sdk.Message) (*http.Request, error) {
			return http.NewRequest(http.MethodPost, srv.URL+"?block&code=200", nil)
		}, sdk.OutcomeTransient, "deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			v := (&sdk.HTTPSender{Build: tt.build}).Send(ctx, sdk.Message{ID: 1})
			if v.Outcome != tt.want || !strings.Contains(v.Detail, tt.detail) {
				t.Errorf("got %v %q, want %v with %q", v.Outcome, v.Detail, tt.want, tt.detail)
			}
		})
	}

	t.Run("a nil response or body never panics", func(t *testing.T) {
		t.Parallel()
		for _, resp := range []*http.Response{nil, {StatusCode: 200}, {StatusCode: 500}} {
			s := &sdk.HTTPSender{
				Build:  postTo(srv.URL),
				Parse:  messageIDResult,
				Client: &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil })},
			}
			if v := s.Send(context.Background(), sdk.Message{ID: 1}); v.Outcome != sdk.OutcomeTransient {
				t.Errorf("response %+v: got %v %q, want TRANSIENT", resp, v.Outcome, v.Detail)
			}
		}
	})
}

// fakeBatch is an HTTPBatchSender for sdktest.FakeBatchAPI's wire format.
func fakeBatch(url string) *sdk.HTTPBatchSender { return fakeBatchKeyed(url, sdk.Message.Key) }

// fakeBatchKeyed sends each message with key(m) as its key.
func fakeBatchKeyed(url string, key func(sdk.Message) string) *sdk.HTTPBatchSender {
	return &sdk.HTTPBatchSender{
		KeyOf: key,
		Build: func(ctx context.Context, ms []sdk.Message) (*http.Request, error) {
			items := make([]map[string]any, len(ms))
			for i, m := range ms {
				items[i] = map[string]any{"key": key(m), "recipient": m.Recipient, "payload": m.Payload}
			}
			return sdk.PostJSON(ctx, url, map[string]any{"messages": items}, nil)
		},
		Parse: func(_ *http.Response, body []byte, _ []sdk.Message) (map[string]sdk.Verdict, error) {
			var a struct {
				Results []struct {
					Key, Status, Error string
					MessageID          string `json:"message_id"`
				}
			}
			if err := json.Unmarshal(body, &a); err != nil {
				return nil, err
			}
			vs := map[string]sdk.Verdict{}
			for _, r := range a.Results {
				switch r.Status {
				case sdktest.FakeAccepted:
					vs[r.Key] = sdk.Success(json.RawMessage(strconv.Quote(r.MessageID)))
				case sdktest.FakeRejected:
					vs[r.Key] = sdk.Permanent(r.Error)
				default:
					vs[r.Key] = sdk.Transient(r.Status + ": " + r.Error)
				}
			}
			return vs, nil
		},
	}
}

// batchOf makes n messages with IDs from 101; recipient(i) names each.
func batchOf(n int, recipient func(i int) string) []sdk.Message {
	ms := make([]sdk.Message, n)
	for i := range ms {
		ms[i] = sdk.Message{ID: int64(101 + i), Recipient: recipient(i), Payload: json.RawMessage(`{"text":"hi"}`)}
	}
	return ms
}

func TestHTTPBatchSender_SendBatch(t *testing.T) {
	t.Parallel()

	t.Run("answers matched by key, shuffled and split", func(t *testing.T) {
		t.Parallel()
		fake := sdktest.NewFakeBatchAPI(t)
		s := fakeBatch(fake.URL)
		s.MaxPerRequest = 40
		prefixes := []string{"", sdktest.RejectPrefix, sdktest.ThrottlePrefix, sdktest.OmitPrefix}
		wants := []sdk.Outcome{sdk.OutcomeSuccess, sdk.OutcomePermanent, sdk.OutcomeTransient, sdk.OutcomeTransient}
		ms := batchOf(100, func(i int) string { return prefixes[i%4] + "user-" + strconv.Itoa(i) })
		vs := s.SendBatch(context.Background(), ms)
		if len(vs) != len(ms) {
			t.Fatalf("%d verdicts for %d messages", len(vs), len(ms))
		}
		wrong := 0
		for i, v := range vs {
			ok := v.Outcome == wants[i%4]
			switch i % 4 {
			case 0:
				ok = ok && strings.HasPrefix(string(v.Result), `"fake-`)
			case 3:
				ok = ok && strings.Contains(v.Detail, "no result for this message")
			}
			if !ok {
				if wrong++; wrong <= 5 {
					t.Errorf("message %d (%s): got %v %q %s, want %v", ms[i].ID, ms[i].Recipient, v.Outcome, v.Detail, v.Result, wants[i%4])
				}
			}
		}
		if n := fake.Requests(); n != 3 {
			t.Errorf("%d requests for 100 messages at 40 per request, want 3", n)
		}
		for key, n := range fake.Accepted() {
			if n != 1 {
				t.Errorf("key %s accepted %d times", key, n)
			}
		}
	})

	t.Run("a failed request is every message's verdict", func(t *testing.T) {
		t.Parallel()
		for status, want := range map[int]sdk.Outcome{503: sdk.OutcomeTransient, 401: sdk.OutcomePermanent} {
			fake := sdktest.NewFakeBatchAPI(t)
			fake.FailNext(1, status)
			for i, v := range fakeBatch(fake.URL).SendBatch(context.Background(), batchOf(5, func(int) string { return "user" })) {
				if v.Outcome != want || v.ProviderStatus != status {
					t.Errorf("HTTP %d, message %d: got %v status %d, want %v", status, i, v.Outcome, v.ProviderStatus, want)
				}
			}
		}
	})

	t.Run("an answer that cannot be parsed: all TRANSIENT", func(t *testing.T) {
		t.Parallel()
		srv := providerServer(t)
		for i, v := range fakeBatch(srv.URL+"?code=200&body=<html>oops").SendBatch(context.Background(), batchOf(5, func(int) string { return "user" })) {
			if v.Outcome != sdk.OutcomeTransient || !strings.Contains(v.Detail, "read the answer") {
				t.Errorf("message %d: got %v %q, want TRANSIENT reading the answer", i, v.Outcome, v.Detail)
			}
		}
	})

	t.Run("a message Build refuses fails alone", func(t *testing.T) {
		t.Parallel()
		fake := sdktest.NewFakeBatchAPI(t)
		s := fakeBatch(fake.URL)
		build := s.Build
		s.Build = func(ctx context.Context, ms []sdk.Message) (*http.Request, error) {
			for _, m := range ms {
				if m.Recipient == "" {
					return nil, fmt.Errorf("message %d has no recipient", m.ID)
				}
			}
			return build(ctx, ms)
		}
		ms := batchOf(6, func(i int) string { return map[bool]string{true: "", false: "user"}[i == 2] })
		for i, v := range s.SendBatch(context.Background(), ms) {
			want := map[bool]sdk.Outcome{true: sdk.OutcomePermanent, false: sdk.OutcomeSuccess}[i == 2]
			if v.Outcome != want {
				t.Errorf("message %d: got %v %q, want %v", i, v.Outcome, v.Detail, want)
			}
		}
	})

	t.Run("equal keys never share a request", func(t *testing.T) {
		t.Parallel()
		fake := sdktest.NewFakeBatchAPI(t) // refuses a request that repeats a key
		s := fakeBatchKeyed(fake.URL, func(m sdk.Message) string { return m.Recipient })
		ms := batchOf(6, func(i int) string { return "user-" + strconv.Itoa(i%3) })
		for i, v := range s.SendBatch(context.Background(), ms) {
			if v.Outcome != sdk.OutcomeSuccess {
				t.Errorf("message %d: got %v %q, want SUCCESS", i, v.Outcome, v.Detail)
			}
		}
		if n := fake.Requests(); n != 2 {
			t.Errorf("%d requests, want 2 (each key once per request)", n)
		}
	})

	t.Run("a panic in Parse is TRANSIENT, not a crash", func(t *testing.T) {
		t.Parallel()
		fake := sdktest.NewFakeBatchAPI(t)
		s := fakeBatch(fake.URL)
		s.Parse = func(*http.Response, []byte, []sdk.Message) (map[string]sdk.Verdict, error) { panic("boom") }
		for i, v := range s.SendBatch(context.Background(), batchOf(3, func(int) string { return "user" })) {
			if v.Outcome != sdk.OutcomeTransient || !strings.Contains(v.Detail, "boom") {
				t.Errorf("message %d: got %v %q, want TRANSIENT naming the panic", i, v.Outcome, v.Detail)
			}
		}
	})

	t.Run("Send is a batch of one", func(t *testing.T) {
		t.Parallel()
		fake := sdktest.NewFakeBatchAPI(t)
		v := fakeBatch(fake.URL).Send(context.Background(), sdk.Message{ID: 9, Recipient: sdktest.RejectPrefix + "x", Payload: json.RawMessage(`{}`)})
		if v.Outcome != sdk.OutcomePermanent || v.Detail != "unknown recipient" || v.ProviderStatus != 200 {
			t.Errorf("got %v %q status %d, want PERMANENT %q status 200", v.Outcome, v.Detail, v.ProviderStatus, "unknown recipient")
		}
	})
}

// TestHTTPBatchSender_timeout: a provider that does not answer by the
// batch's deadline leaves every message TRANSIENT.
func TestHTTPBatchSender_timeout(t *testing.T) {
	t.Parallel()
	srv := providerServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0") // keeps the port's number taken, answering nothing
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, url := range []string{srv.URL + "?block&code=200", "http://" + ln.Addr().String()} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		for i, v := range fakeBatch(url).SendBatch(ctx, batchOf(3, func(int) string { return "user" })) {
			if v.Outcome != sdk.OutcomeTransient {
				t.Errorf("%s, message %d: got %v %q, want TRANSIENT", url, i, v.Outcome, v.Detail)
			}
		}
	}
}

// A client of the plugin's own that would follow redirects follows none
// through the helpers: a 307 to another host would resend the message with
// its X-Api-Key there, and count that host's 200 as the provider's.
func TestHTTPSender_ownClientFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
	}))
	t.Cleanup(other.Close)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(provider.Close)
	own := &http.Client{Timeout: 5 * time.Second} // Go's default policy: follow up to 10
	build := func(ctx context.Context, m sdk.Message) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", provider.URL, strings.NewReader(`{}`))
		if err == nil {
			req.Header.Set("X-Api-Key", "SECRET")
		}
		return req, err
	}
	for name, send := range map[string]func() sdk.Verdict{
		"HTTPSender": func() sdk.Verdict {
			return (&sdk.HTTPSender{Build: build, Client: own}).Send(context.Background(), sdk.Message{ID: 1, Payload: json.RawMessage(`{}`)})
		},
		"HTTPBatchSender": func() sdk.Verdict {
			s := &sdk.HTTPBatchSender{Client: own,
				Build: func(ctx context.Context, ms []sdk.Message) (*http.Request, error) { return build(ctx, ms[0]) },
				Parse: func(*http.Response, []byte, []sdk.Message) (map[string]sdk.Verdict, error) {
					return map[string]sdk.Verdict{"1": sdk.Success(nil)}, nil
				}}
			return s.SendBatch(context.Background(), []sdk.Message{{ID: 1, Payload: json.RawMessage(`{}`)}})[0]
		},
	} {
		v := send()
		if v.Outcome != sdk.OutcomePermanent || v.ProviderStatus != http.StatusTemporaryRedirect {
			t.Errorf("%s: %v status %d (%s); want PERMANENT 307, the redirect not followed", name, v.Outcome, v.ProviderStatus, v.Detail)
		}
	}
	if n := elsewhere.Load(); n != 0 || own.CheckRedirect != nil {
		t.Errorf("the other host got %d requests, the plugin's client was changed (%v); want none and its client as it was", n, own.CheckRedirect != nil)
	}
}

// HTTPSender sends an Idempotency-Key the provider can drop a retry by: the
// message's idempotency key, the same on every attempt, or msg_<id> when it
// has none or it cannot go in a header; never over one Build set, and not
// at all with NoIdempotencyKey.
func TestHTTPSender_idempotencyKey(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- strings.Join(r.Header.Values("Idempotency-Key"), "|")
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name string
		m    sdk.Message
		own  string
		none bool
		want string
	}{
		{"the message's key", sdk.Message{ID: 7, IdempotencyKey: "daily-quiz:2026-11-26:u1"}, "", false, "daily-quiz:2026-11-26:u1"},
		{"no key: msg_<id>", sdk.Message{ID: 7}, "", false, "msg_7"},
		{"a key with a control character: msg_<id>", sdk.Message{ID: 8, IdempotencyKey: "a\nb"}, "", false, "msg_8"},
		{"Build's own", sdk.Message{ID: 9, IdempotencyKey: "k"}, "provider-key-9", false, "provider-key-9"},
		{"NoIdempotencyKey", sdk.Message{ID: 10, IdempotencyKey: "k"}, "", true, ""},
	} {
		s := &sdk.HTTPSender{NoIdempotencyKey: tc.none, Build: func(ctx context.Context, m sdk.Message) (*http.Request, error) {
			req, err := sdk.PostJSON(ctx, srv.URL, map[string]int64{"id": m.ID}, nil)
			if err == nil && tc.own != "" {
				req.Header.Set("Idempotency-Key", tc.own)
			}
			return req, err
		}}
		tc.m.Payload = json.RawMessage(`{}`)
		if v := s.Send(context.Background(), tc.m); v.Outcome != sdk.OutcomeSuccess {
			t.Fatalf("%s: %v (%s)", tc.name, v.Outcome, v.Detail)
		}
		if h := <-got; h != tc.want {
			t.Errorf("%s: Idempotency-Key %q, want %q", tc.name, h, tc.want)
		}
	}
}

// blockingBody is a body whose Read waits until Close: a connection handed
// over (a 101's), or what a custom RoundTripper returns.
type blockingBody struct{ closed chan struct{} }

func (b *blockingBody) Read([]byte) (int, error) { <-b.closed; return 0, io.ErrClosedPipe }
func (b *blockingBody) Close() error {
	select {
	case <-b.closed:
	default:
		close(b.closed)
	}
	return nil
}

type bodyTransport func() io.ReadCloser

func (f bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: f(), Request: r}, nil
}

// Every read of an answer ends at the message's deadline, whatever the body
// is: net/http stops a normal body's reads when the request's context ends,
// but not a 101's connection nor a body a custom RoundTripper returns, which
// were read until the peer closed — past any deadline.
func TestHTTPSender_bodyReadEndsAtDeadline(t *testing.T) {
	t.Parallel()
	s := &sdk.HTTPSender{
		Client: &http.Client{Transport: bodyTransport(func() io.ReadCloser { return &blockingBody{closed: make(chan struct{})} })},
		Build: func(ctx context.Context, m sdk.Message) (*http.Request, error) {
			return sdk.PostJSON(ctx, "http://127.0.0.1:1/send", map[string]int64{"id": m.ID}, nil)
		},
		Parse: func(*http.Response, []byte, sdk.Message) (sdk.Verdict, error) { return sdk.Success(nil), nil },
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	got := make(chan sdk.Verdict, 1)
	go func() { got <- s.Send(ctx, sdk.Message{ID: 1}) }()
	select {
	case v := <-got:
		if v.Outcome != sdk.OutcomeTransient || !strings.Contains(v.Detail, "read the answer") {
			t.Errorf("verdict = %v %q; want TRANSIENT, the answer's read cut at the deadline", v.Outcome, v.Detail)
		}
	case <-time.After(30 * time.Second): // uncut, it never returns
		t.Fatal("Send still running 30 s after its 300ms deadline: the answer's body is read without one")
	}

	// A real 101 to a request that asked for no upgrade: TRANSIENT at once.
	url := sdktest.RawServer(t, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n")
	s = &sdk.HTTPSender{Build: func(ctx context.Context, m sdk.Message) (*http.Request, error) {
		return sdk.PostJSON(ctx, url, map[string]int64{"id": m.ID}, nil)
	}}
	if v := s.Send(context.Background(), sdk.Message{ID: 1}); v.Outcome != sdk.OutcomeTransient || v.ProviderStatus != 101 {
		t.Errorf("101 = %v %d %q; want TRANSIENT, status 101", v.Outcome, v.ProviderStatus, v.Detail)
	}
}

// A receiver that honours Idempotency-Key answers 409 while an earlier
// request with the key is still in progress: that attempt may yet deliver
// the message, so the 409 is retried (it was final: a delivered message
// dead-lettered). Without the key a 409 stays final.
func TestHTTPSender_conflictWithIdempotencyKey(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, `{"error":"a request with this key is in progress"}`)
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		none bool
		want sdk.Outcome
	}{{false, sdk.OutcomeTransient}, {true, sdk.OutcomePermanent}} {
		s := &sdk.HTTPSender{NoIdempotencyKey: tc.none, Build: func(ctx context.Context, m sdk.Message) (*http.Request, error) {
			return sdk.PostJSON(ctx, srv.URL, map[string]int64{"id": m.ID}, nil)
		}}
		v := s.Send(context.Background(), sdk.Message{ID: 7, Payload: json.RawMessage(`{}`)})
		if v.Outcome != tc.want || v.ProviderStatus != http.StatusConflict {
			t.Errorf("NoIdempotencyKey %v: %v status %d (%s), want %v", tc.none, v.Outcome, v.ProviderStatus, v.Detail, tc.want)
		}
		if tc.want == sdk.OutcomeTransient && (v.RetryAfter != 2*time.Second || !strings.Contains(v.Detail, "in progress")) {
			t.Errorf("409 with a key: retry after %v, detail %q; want 2s and why it is retried", v.RetryAfter, v.Detail)
		}
	}
}
