package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// rawServer is a loopback server that reads each request's head and body
// and writes answer's bytes as they are — what no http.Handler can say (a
// 1xx, a body cut before its Content-Length, nothing at all) — then closes
// the connection unless hold is set (then it keeps it open until the test
// ends). It returns the server's base URL and a count of requests.
func rawServer(t *testing.T, answer string, hold bool) (string, func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	done := make(chan struct{})
	var conns []net.Conn
	t.Cleanup(func() {
		close(done)
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					_ = c.Close()
					return
				}
				buf := make([]byte, 1<<16)
				for {
					if _, err := req.Body.Read(buf); err != nil {
						break
					}
				}
				mu.Lock()
				n++
				mu.Unlock()
				_, _ = c.Write([]byte(strings.ReplaceAll(answer, "\n", "\r\n")))
				if hold {
					<-done
				}
				_ = c.Close()
			}()
		}
	}()
	return "http://" + ln.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// switchProtocols is a 101 answer to a request that asked for no upgrade:
// net/http then hands the connection itself over as the body, which no
// request deadline reads past.
const switchProtocols = "HTTP/1.1 101 Switching Protocols\nConnection: Upgrade\nUpgrade: h2c\n\n"

// TestEdge_SwitchProtocolsNoStall: a 101 answer (a broken proxy) whose
// connection then stays open made every Kakao and partner send read the
// connection as its body for ever, past the message's deadline and the
// request timeout: the SDK gave the message TRANSIENT at its deadline, the
// goroutine and connection stayed, one more per retry, and the stuck call
// got the plugin process replaced with every send in flight on it.
func TestEdge_SwitchProtocolsNoStall(t *testing.T) {
	t.Parallel()
	within := func(t *testing.T, what string, limit time.Duration, send func(ctx context.Context) []sdk.Verdict) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		got := make(chan []sdk.Verdict, 1)
		go func() { got <- send(ctx) }()
		select {
		case vs := <-got:
			if took := time.Since(start); took > limit {
				t.Errorf("%s: answered after %v, want within %v (the request timeout)", what, took.Round(time.Millisecond), limit)
			}
			for i, v := range vs {
				if v.Outcome != sdk.OutcomeTransient {
					t.Errorf("%s: message %d %v %q, want TRANSIENT", what, i, v.Outcome, v.Detail)
				}
			}
		case <-time.After(limit + 5*time.Second):
			t.Fatalf("%s: no answer after %v: the send reads the switched connection for ever", what, limit+5*time.Second)
		}
	}
	t.Run("memo", func(t *testing.T) {
		t.Parallel()
		u, _ := rawServer(t, switchProtocols, true)
		b := setup(t, map[string]any{"api_url": u, "timeout": "1s"})
		within(t, "memo", 3*time.Second, func(ctx context.Context) []sdk.Verdict {
			return []sdk.Verdict{b.sender.Send(ctx, sdk.Message{ID: 1, Payload: json.RawMessage(textPayload), Attempt: 1})}
		})
	})
	t.Run("sens", func(t *testing.T) {
		t.Parallel()
		f := newFakeSENS(t)
		u, _ := rawServer(t, switchProtocols, true)
		s, _ := atSetup(t, f, map[string]any{"api_url": u}, quizTemplate)
		within(t, "sens", 5*time.Second, func(ctx context.Context) []sdk.Verdict { return s.SendBatch(ctx, quizMessages(2, phone)) })
	})
	t.Run("nhn", func(t *testing.T) {
		t.Parallel()
		f := newFakeNHN(t)
		u, _ := rawServer(t, switchProtocols, true)
		s, _ := nhnSetup(t, f, map[string]any{"api_url": u})
		within(t, "nhn", 5*time.Second, func(ctx context.Context) []sdk.Verdict { return s.SendBatch(ctx, quizMessages(2, phone)) })
	})
}

// TestSender_Send_RetryAfterWithCode: a 429 or 5xx whose body carries
// Kakao's error code was classified by the code alone and its Retry-After
// dropped: retried at notifyd's own backoff, sooner than Kakao asked. The
// header now raises the hint (capped as any, sdk.MaxRetryAfter).
func TestSender_Send_RetryAfterWithCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		header string
		body   string
		want   time.Duration
	}{
		{"429 seconds, unknown code", 429, "120", `{"msg":"slow down","code":-9999}`, 120 * time.Second},
		{"503 seconds, maintenance", 503, "600", `{"msg":"maintenance","code":-7}`, 600 * time.Second},
		{"429 absurd date", 429, "Wed, 21 Oct 2099 07:28:00 GMT", `{"msg":"x","code":-1}`, sdk.MaxRetryAfter},
		{"429 absurd seconds", 429, "99999999999999999999", `{"msg":"x","code":-1}`, sdk.MaxRetryAfter},
		{"400 quota: the reset is later than the header", 400, "5", `{"msg":"quota","code":-532}`, 30 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			b.fake.answerWith(cannedAnswer{status: tc.status, header: http.Header{"Retry-After": {tc.header}}, body: tc.body})
			v := b.send(b.sender, "", textPayload)
			if v.Outcome != sdk.OutcomeTransient || v.RetryAfter != tc.want {
				t.Errorf("%v retry after %v (%q), want TRANSIENT after %v", v.Outcome, v.RetryAfter, v.Detail, tc.want)
			}
		})
	}
}

// TestSENS_AnswerFieldTypes: SENS accepted a request (202, each message
// A000) but one field of its answer had another JSON type than documented
// (useSmsFailover "N", a requestTime number, a statusName object). The whole
// answer was thrown away as "not its send result" and reconciled; a list
// that did not show the request yet left every message retried — sent
// twice. Each field the plugin reads is now read whatever its type: a text
// as its JSON text, a flag true only as true or "true"/"Y".
func TestSENS_AnswerFieldTypes(t *testing.T) {
	t.Parallel()
	for _, edit := range []struct{ name, field, value string }{
		{"useSmsFailover string", "useSmsFailover", `"N"`},
		{"messageId number", "messageId", `12345`},
		{"countryCode number", "countryCode", `82`},
		{"requestStatusName object", "requestStatusName", `{"ko":"성공"}`},
		{"requestTime number", "requestTime", `1700000000`},
		{"statusName array", "statusName", `["success"]`},
	} {
		t.Run(edit.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeSENS(t)
			front := rewriting(t, f, func(r *http.Request, status int, body []byte) []byte {
				if r.Method != http.MethodPost {
					return []byte(`{"statusCode":"200","statusName":"success","messages":[]}`) // not listed yet
				}
				var a map[string]any
				if json.Unmarshal(body, &a) != nil {
					return body
				}
				if _, top := a[edit.field]; top {
					a[edit.field] = json.RawMessage(edit.value)
				}
				for _, m := range a["messages"].([]any) {
					m.(map[string]any)[edit.field] = json.RawMessage(edit.value)
				}
				out, _ := json.Marshal(a)
				return out
			})
			s, _ := atSetup(t, f, map[string]any{"confirm": "accepted", "api_url": front.URL}, quizTemplate)
			for i, v := range s.SendBatch(t.Context(), quizMessages(2, phone)) {
				if v.Outcome != sdk.OutcomeSuccess {
					t.Errorf("message %d: %v %q, want SENT: SENS accepted it (A000)", i, v.Outcome, v.Detail)
				}
			}
		})
	}
}
