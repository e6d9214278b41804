package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk/client"
)

func TestNew(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr, want string
	}{
		{"", "empty"},
		{"ftp://x:1", "scheme"},
		{"http://", "no host"},
		{"http://bad host/", "address"},
	} {
		if _, err := client.New(tc.addr, "t"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q) = %v, want an error mentioning %q", tc.addr, err, tc.want)
		}
	}
	for _, ok := range []string{"127.0.0.1:8080", "http://127.0.0.1:8080/", "https://notifyd.example/base"} {
		if _, err := client.New(ok, "t"); err != nil {
			t.Errorf("New(%q) = %v", ok, err)
		}
	}
}

// TestClient_Errors: the client turns every non-2xx answer into an *Error,
// from the API's JSON body when there is one, and sends the token.
func TestClient_Errors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret-token" {
			t.Errorf("Authorization %q", r.Header.Get("Authorization"))
		}
		switch r.URL.Path {
		case "/v1/notifications/1":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"notification 1 does not exist"}}`))
		case "/v1/subscribers/a b/c":
			if r.URL.RawPath != "/v1/subscribers/a%20b%2Fc" {
				t.Errorf("raw path %q, want the id escaped once", r.URL.RawPath)
			}
			w.WriteHeader(204)
		default:
			w.WriteHeader(502)
			_, _ = w.Write([]byte("bad gateway from a proxy"))
		}
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, "secret-token")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	_, err = c.Notification(ctx, 1)
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != 404 || e.Code != client.CodeNotFound || e.Message != "notification 1 does not exist" {
		t.Errorf("404 answer = %#v", err)
	}
	_, err = c.Channels(ctx)
	if !errors.As(err, &e) || e.StatusCode != 502 || !strings.Contains(e.Message, "bad gateway") || client.StatusCode(err) != 502 {
		t.Errorf("502 answer = %#v", err)
	}
	if err := c.DeleteSubscriber(ctx, "a b/c"); err != nil {
		t.Errorf("DeleteSubscriber with an id to escape: %v", err)
	}
	if client.StatusCode(errors.New("x")) != 0 {
		t.Error("StatusCode of a plain error is not 0")
	}
}

// A redirect was followed, and net/http keeps Authorization whenever the
// host name is the same, whatever the port or scheme: the bearer token went
// to another service (127.0.0.1 on another port, plain HTTP) and its answer
// was taken as the API's. No redirect is followed now, with the default
// client or the caller's (which is left as it was), and the error names
// where it pointed.
func TestClient_RedirectNotFollowed(t *testing.T) {
	t.Parallel()
	var leaked atomic.Value
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.Header.Get("Authorization"))
		_, _ = io.WriteString(w, `{"purged":1000}`)
	}))
	defer other.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer api.Close()

	own := &http.Client{Timeout: time.Minute}
	for name, opts := range map[string][]client.Option{"default client": nil, "the caller's client": {client.WithHTTPClient(own)}} {
		c, err := client.New(api.URL, "secret-token", opts...)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.PurgeDLQ(t.Context(), client.DLQSelector{Channel: "orders"})
		if got, _ := leaked.Load().(string); got != "" {
			t.Errorf("%s: the redirect target received Authorization %q", name, got)
		}
		if err == nil || !strings.Contains(err.Error(), "307") || !strings.Contains(err.Error(), other.URL+"/v1/dlq/purge") {
			t.Errorf("%s: PurgeDLQ = %+v, %v; want an error naming the 307 and where it pointed", name, res, err)
		}
	}
	if own.CheckRedirect != nil {
		t.Error("New changed the caller's *http.Client")
	}
}

// A 2xx answer was read whole, however large: a hostile or broken server
// (or a proxy) could make the client hold any amount in memory within the
// timeout. It is read within MaxAnswerBytes.
func TestClient_AnswerBound(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"channels":[],"x":"`)
		chunk := strings.Repeat("a", 1<<20)
		for range client.MaxAnswerBytes>>20 + 1 {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
		_, _ = io.WriteString(w, `"}`)
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Channels(t.Context()); err == nil || !strings.Contains(err.Error(), "MaxAnswerBytes") {
		t.Errorf("Channels of an answer past MaxAnswerBytes: %v, want an error naming the bound", err)
	}
}

// Error() carried the answer's text as it came, control characters and
// all, so the CLI printed an attacker's OSC 52 (a clipboard write) or a
// screen clear. They are escaped; Message keeps the text as answered.
func TestClient_ErrorTextEscaped(t *testing.T) {
	t.Parallel()
	const hostile = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07\x1b[2J\x1b[1Aok\r\u009b"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/notifications/1" {
			w.WriteHeader(404)
			_ = json.NewEncoder(w).Encode(client.ErrorBody{Error: client.ErrorDetail{Code: client.CodeNotFound, Message: "notification " + hostile}})
			return
		}
		w.WriteHeader(502)
		_, _ = io.WriteString(w, "bad gateway "+hostile+"\x9b")
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, "t")
	if err != nil {
		t.Fatal(err)
	}
	_, err1 := c.Channels(t.Context())
	_, err2 := c.Notification(t.Context(), 1)
	for _, err := range []error{err1, err2} {
		var e *client.Error
		if !errors.As(err, &e) || !strings.Contains(e.Message, hostile) {
			t.Fatalf("%#v: want an *Error keeping the message", err)
		}
		// "\x9b" alone: a byte of invalid UTF-8, CSI to an 8-bit terminal.
		if strings.ContainsAny(err.Error(), "\x1b\x07\r\u009b") || strings.Contains(err.Error(), "\x9b") || !strings.Contains(err.Error(), `\x1b]52;c;`) {
			t.Errorf("Error() = %q, want the control characters escaped", err.Error())
		}
	}
}

// A 2xx whose body was not the call's answer was a success: Enqueue
// returned id 0 and no error for an error body, {}, null, and kept id 5 of
// an answer followed by garbage; `notifyd send` printed 0.
func TestClient_TwoHundredWithoutAnAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, want string }{
		{`{"error":{"code":"internal","message":"database is down"}}`, "an error, not an answer: internal: database is down"},
		{`{}`, "no notification id"},
		{`null`, "not a JSON object"},
		{`{"id":5,"status":"PENDING"} trailing garbage`, "invalid character"},
		{`{"notifications":[{"id":5}]}`, "no notification id"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, tc.body)
		}))
		c, err := client.New(srv.URL, "t")
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Enqueue(t.Context(), client.Notification{Channel: "c", Recipient: "r", Payload: json.RawMessage(`{}`)})
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), tc.want) || res.ID != 0 {
			t.Errorf("202 %s: Enqueue = %+v, %v; want an error containing %q", tc.body, res, err, tc.want)
		}
	}
	// A batch answer must carry an id for each notification sent.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"notifications":[{"id":5,"status":"PENDING"}]}`+"\n")
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, "t")
	if err != nil {
		t.Fatal(err)
	}
	n := client.Notification{Channel: "c", Recipient: "r", Payload: json.RawMessage(`{}`)}
	if res, err := c.EnqueueBatch(t.Context(), []client.Notification{n}); err != nil || len(res) != 1 || res[0].ID != 5 {
		t.Errorf("EnqueueBatch of one answered with one: %+v, %v", res, err)
	}
	if res, err := c.EnqueueBatch(t.Context(), []client.Notification{n, n}); err == nil {
		t.Errorf("EnqueueBatch of two answered with one: %+v, nil error", res)
	}
}

// Any JSON object answered with any status got Code "unavailable": a
// gateway's 404 read as the API being unavailable, and a caller retrying on
// CodeUnavailable retried it for ever. Only a 503 is.
func TestClient_UnavailableOnlyFor503(t *testing.T) {
	t.Parallel()
	status := atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(status.Load()))
		_, _ = io.WriteString(w, `{"message":"no route on this gateway"}`)
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, "t")
	if err != nil {
		t.Fatal(err)
	}
	for code, want := range map[int]string{404: "", 401: "", 500: "", 503: client.CodeUnavailable} {
		status.Store(int64(code))
		_, err := c.Channels(t.Context())
		var e *client.Error
		if !errors.As(err, &e) || e.StatusCode != code || e.Code != want {
			t.Errorf("%d with a JSON body that is not an error: %#v, want Code %q", code, err, want)
		}
	}
}

func TestDuration_JSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(client.Duration(90 * time.Second))
	if err != nil || string(b) != `"1m30s"` {
		t.Errorf("Marshal = %s, %v", b, err)
	}
	var d client.Duration
	if err := json.Unmarshal([]byte(`"10m"`), &d); err != nil || time.Duration(d) != 10*time.Minute {
		t.Errorf("Unmarshal = %v, %v", time.Duration(d), err)
	}
	if err := json.Unmarshal([]byte(`600`), &d); err == nil {
		t.Error("a number was accepted as a duration")
	}
}

// A server (or a proxy) answering `101 Switching Protocols` to a request
// that asked for no upgrade, then saying nothing: net/http hands the
// connection itself back as the body, which neither the call's context nor
// the *http.Client's Timeout covers, so the client read it for ever (past a
// 1 s deadline, and past DefaultTimeout). The same for a silent body from a
// RoundTripper of the caller's that ignores the context. Every call ends
// at its deadline, and a 1xx answer is an error at once.
func TestClient_SwitchingProtocolsThenSilence(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = conn.Close() })
			go func() {
				br := bufio.NewReader(conn)
				for {
					line, err := br.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				_, _ = conn.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n"))
			}()
		}
	}()
	addr := "http://" + ln.Addr().String()
	// A body that says nothing until it is closed, blind to any context.
	silent := roundTripper(func(r *http.Request) (*http.Response, error) {
		body, _ := io.Pipe()
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: body, Request: r}, nil
	})
	for _, tc := range []struct {
		name, addr string
		opts       []client.Option
		deadline   bool
	}{
		{"101, default client", addr, nil, false},
		{"101, the caller's client and a deadline", addr, []client.Option{client.WithHTTPClient(&http.Client{Transport: &http.Transport{}})}, true},
		{"a silent body from the caller's RoundTripper", "http://127.0.0.1:9", []client.Option{client.WithHTTPClient(&http.Client{Transport: silent})}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := client.New(tc.addr, "t", tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if tc.deadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Second)
				defer cancel()
			}
			done := make(chan error, 1)
			go func() {
				_, err := c.Channels(ctx)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "/v1/channels") {
					t.Errorf("Channels = %v, want an error naming the call", err)
				}
			case <-time.After(client.DefaultTimeout + time.Minute):
				t.Fatalf("Channels still reading %v past DefaultTimeout", time.Minute)
			}
		})
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// An answer within MaxAnswerBytes still decodes into Go values many times
// its size: `{}` is 2 bytes and a NotificationInfo 328, so a server (or a
// proxy) answering a DLQ page of 1 MiB of `{},` made the client allocate
// 567 MiB, and one of 60 MiB took 23 GB before the kernel killed it. What
// decoding would build is counted first, and an answer past
// MaxAnswerBytes of it is an error, decoded not at all. Not parallel: it
// reads the process's allocation counter.
func TestClient_AnswerDecodeBounded(t *testing.T) {
	many := func(item string, n int) string { return strings.TrimSuffix(strings.Repeat(item+",", n), ",") }
	for _, tc := range []struct {
		name, answer string
		call         func(*client.Client) error
	}{
		{"a DLQ page of empty rows", `{"notifications":[` + many("{}", 350_000) + `],"next_after":0}`,
			func(c *client.Client) error { _, err := c.DLQ(t.Context(), client.DLQQuery{}); return err }},
		{"rows of empty attempts", `{"notifications":[` + many(`{"history":[`+many("{}", 1000)+`]}`, 700) + `],"next_after":0}`,
			func(c *client.Client) error { _, err := c.DLQ(t.Context(), client.DLQQuery{}); return err }},
		{"a job whose template is empty objects", `{"jobs":[{"id":1,"payload":{"a":[` + many("{}", 1_400_000) + `]}}]}`,
			func(c *client.Client) error { _, err := c.Jobs(t.Context(), client.JobQuery{}); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tc.answer)
			}))
			defer srv.Close()
			c, err := client.New(srv.URL, "t")
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			err = tc.call(c)
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), "client.MaxAnswerBytes") {
				t.Errorf("call = %v, want an error naming client.MaxAnswerBytes", err)
			}
			bound := uint64(3*len(tc.answer) + 16<<20)
			if got := after.TotalAlloc - before.TotalAlloc; got > bound {
				t.Errorf("a %d-byte answer allocated %d MiB, want at most %d MiB", len(tc.answer), got>>20, bound>>20)
			}
		})
	}
	t.Run("the API's largest pages are decoded", func(t *testing.T) {
		row := `{"id":7,"channel":"orders","recipient":"user-7","payload":{"text":"hi"},"status":"FAILED","attempts":5,` +
			`"due_at":"2026-01-02T08:00:00Z","last_error":"HTTP 400","created_at":"2026-01-02T08:00:00Z","updated_at":"2026-01-02T08:00:00Z"}`
		job := `{"id":7,"kind":"campaign","channel":"orders","audience":{"topic":"news"},"state":"DONE","total":5,` +
			`"payload":{"text":"hi {{.recipient}}","items":[` + many(`{"k":1,"v":"x"}`, 100) + `]},"created_at":"2026-01-02T08:00:00Z"}`
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch r.URL.Path {
			case "/v1/dlq":
				_, _ = io.WriteString(w, `{"notifications":[`+many(row, 1000)+`],"next_after":0}`)
			case "/v1/jobs":
				_, _ = io.WriteString(w, `{"jobs":[`+many(job, 1000)+`]}`)
			}
		}))
		defer srv.Close()
		c, err := client.New(srv.URL, "t")
		if err != nil {
			t.Fatal(err)
		}
		if page, err := c.DLQ(t.Context(), client.DLQQuery{Limit: 1000}); err != nil || len(page.Notifications) != 1000 {
			t.Errorf("DLQ: %v", err)
		}
		if jobs, err := c.Jobs(t.Context(), client.JobQuery{Limit: 1000}); err != nil || len(jobs) != 1000 {
			t.Errorf("Jobs: %v", err)
		}
	})
}
