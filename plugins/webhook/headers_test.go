package main

// The bound on an answer's status line and headers, on both paths.

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/sdk"
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
