package main

// An answer's status line and headers, on both paths: their bound, their
// line ends.

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/wire"
)

// TestSender_Send_hugeAnswerHeaders: the direct path reads at most
// readBufferSize (16 KB) of an answer's head; behind a proxy net/http read
// up to its default 10 MiB, allocating about 67 MB for a 9 MiB header — per
// send in flight, 256 at once on a channel. Both now refuse a head past
// 16 KB (TRANSIENT, as any answer that cannot be read) and take one within
// it.
func TestSender_Send_hugeAnswerHeaders(t *testing.T) {
	t.Parallel()
	for name, size := range map[string]int{"12 KB, within the bound": 12 << 10, "1 MiB": 1 << 20} {
		answer := "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("h", size) + "\r\nContent-Length: 0\r\n\r\n"
		u, _ := rawReceiver(t, func(c net.Conn) bool {
			_, _ = io.WriteString(c, answer)
			return true
		})
		proxyURL, _ := url.Parse(u)
		proxyURL.Path = ""
		for path, p := range map[string]*provider{
			"direct":         {},
			"behind a proxy": {proxy: func(*url.URL) (*url.URL, error) { return proxyURL, nil }},
		} {
			t.Run(name+", "+path, func(t *testing.T) {
				t.Parallel()
				target := u
				if p.proxy != nil {
					target = "http://hooks.example.com/in"
				}
				s := configure(t, p, map[string]any{"url": target})
				v := s.Send(context.Background(), testMessage())
				want := sdk.OutcomeSuccess
				if size > readBufferSize {
					want = sdk.OutcomeTransient
				}
				if v.Outcome != want {
					t.Errorf("a 200 with a %d-byte header: %v %d (%.200s); want %v", size, v.Outcome, v.ProviderStatus, v.Detail, want)

				}
			})
		}
	}
}

// TestSender_Send_bareLF: a receiver whose answer's head ends its lines
// with a bare LF ("HTTP/1.1 200 OK\n\n", as a hand-written or embedded
// server may; RFC 9112 §2.2 lets a recipient read it as a line end, and
// net/http, curl and Python do). fasthttp waits for a CRLF CRLF that never
// comes: the send held its connection to the channel timeout and was
// TRANSIENT, so a delivered message was sent again on every attempt and
// then dead-lettered; a 400 was retried. The head's bare LFs are now read as
// line ends; the body is left as it is (the next answer on the connection
// still parses).
func TestSender_Send_bareLF(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, answer string
		want         sdk.Outcome
		status       int
		retryAfter   time.Duration
		inDetail     string
	}{
		{"200", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", sdk.OutcomeSuccess, 200, 0, ""},
		{"204, no reason phrase", "HTTP/1.1 204\n\n", sdk.OutcomeSuccess, 204, 0, ""},
		{"a body of bare LFs, twice on one connection", "HTTP/1.1 200 OK\nContent-Length: 4\n\na\nb\n", sdk.OutcomeSuccess, 200, 0, ""},
		{"LF then CRLF", "HTTP/1.1 202 Accepted\r\nContent-Length: 0\n\r\n", sdk.OutcomeSuccess, 202, 0, ""},
		{"after a 103", "HTTP/1.1 103 Early Hints\nLink: </a.css>\n\nHTTP/1.1 200 OK\nContent-Length: 0\n\n", sdk.OutcomeSuccess, 200, 0, ""},
		{"400 quotes its body", "HTTP/1.1 400 Bad Request\nContent-Length: 13\n\nunknown order", sdk.OutcomePermanent, 400, 0, "unknown order"},
		{"503 with Retry-After", "HTTP/1.1 503 Busy\nRetry-After: 7\nContent-Length: 0\n\n", sdk.OutcomeTransient, 503, 7 * time.Second, "503"},
		{"000 is still garbled", "HTTP/1.1 000 x\nContent-Length: 0\n\n", sdk.OutcomeTransient, 0, 0, "000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u, requests := rawReceiver(t, func(c net.Conn) bool {
				_, _ = io.WriteString(c, tc.answer)
				return true // kept open: only the head's own end can end it
			})
			s := configure(t, &provider{}, map[string]any{"url": u, "timeout": "2s"})
			for n := range 2 {
				v := s.Send(context.Background(), testMessage())
				if v.Outcome != tc.want || v.ProviderStatus != tc.status || v.RetryAfter != tc.retryAfter || !strings.Contains(v.Detail, tc.inDetail) {
					t.Fatalf("send %d: %v %d, retry after %v (%.200s); want %v %d, retry after %v, the detail holding %q",
						n, v.Outcome, v.ProviderStatus, v.RetryAfter, v.Detail, tc.want, tc.status, tc.retryAfter, tc.inDetail)
				}
			}
			if got := requests.Load(); got != 2 {
				t.Errorf("the receiver got %d requests for 2 sends; want 2", got)
			}
		})
	}
}

// chunkConn is a connection whose Reads return the answer step bytes at a
// time.
type chunkConn struct {
	net.Conn
	answer []byte
	step   int
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.answer) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.step)], c.answer)
	c.answer = c.answer[n:]
	return n, nil
}

// replayConn makes the head's bare LFs CRLF, and nothing else, however the
// answer is split between the receiver's writes and fasthttp's reads.
func TestReplayConn_bareLF(t *testing.T) {
	t.Parallel()
	for answer, want := range map[string]string{
		"HTTP/1.1 200 OK\nA: b\n\nbody\nwith\nLF":                  "HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody\nwith\nLF",
		"HTTP/1.1 200 OK\r\nA: b\n\r\nx\n":                         "HTTP/1.1 200 OK\r\nA: b\r\n\r\nx\n",
		"HTTP/1.1 200 OK\r\nA: b\r\n\r\nx\n\n":                     "HTTP/1.1 200 OK\r\nA: b\r\n\r\nx\n\n",
		"\nHTTP/1.1 103 Early\nLink: </a>\n\nHTTP/1.1 204\n\n\n\r": "\r\nHTTP/1.1 103 Early\r\nLink: </a>\r\n\r\nHTTP/1.1 204\r\n\r\n\n\r",
		"HTTP/1.1 101 Switching\n\n\n":                             "HTTP/1.1 101 Switching\r\n\r\n\n",
		"HTTP/1.1 20 OK\nA: b\n\n":                                 "HTTP/1.1 20 OK\nA: b\n\n", // refused by fasthttp at its first line
	} {
		for _, step := range []int{1, 2, 3, 5, len(answer)} {
			for _, size := range []int{2, 3, 7, 4096} {
				c := &replayConn{Conn: &chunkConn{answer: []byte(answer), step: step}}
				var got []byte
				buf := make([]byte, size)
				for {
					n, err := c.Read(buf)
					got = append(got, buf[:n]...)
					if err != nil {
						break
					}
				}
				if string(got) != want {
					t.Errorf("%q, %d bytes a write, %d a read: got %q, want %q", answer, step, size, got, want)
				}
			}
		}
	}
}

// TestSender_Send_garbledHeadDetail: fasthttp's error for a status line it
// cannot parse quotes the answer's head whole, twice: a 16 KB head of
// control bytes and backslashes made a 49 KB detail, made printable and
// then searched for every secret in its raw and decoded forms (1.4 MB
// allocated a send). It is cut to wire.MaxErrorLen (what last_error holds)
// first; a secret the cut splits is still redacted.
func TestSender_Send_garbledHeadDetail(t *testing.T) {
	t.Parallel()
	const apiKey = "api-key-0987654321"
	answer := "HTTP/1.1 2x0 " + strings.Repeat("\x01\\", 100) + apiKey + strings.Repeat("\x01\\", 8000) + "\r\n\r\n"
	u, _ := rawReceiver(t, func(c net.Conn) bool {
		_, _ = io.WriteString(c, answer)
		return true
	})
	s := configure(t, &provider{}, map[string]any{"url": u, "headers": map[string]string{"X-Api-Key": apiKey}})
	v := s.Send(context.Background(), testMessage())
	if v.Outcome != sdk.OutcomeTransient || len(v.Detail) > wire.MaxErrorLen {
		t.Errorf("verdict %v, detail of %d bytes; want TRANSIENT, at most %d", v.Outcome, len(v.Detail), wire.MaxErrorLen)
	}
	if strings.Contains(v.Detail, "api-key-09") || !strings.Contains(v.Detail, "invalid response status code") {
		t.Errorf("detail %.300q…; want the parse error, the key redacted", v.Detail)
	}
}
