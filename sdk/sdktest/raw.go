package sdktest

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// RawReceiver is a receiver on 127.0.0.1 speaking raw TCP, for answers and
// connection behaviour no well-behaved server has: for each request it reads
// whole (counted in requests before answer runs) it calls answer, which
// writes to c what it likes; the connection closes when answer returns
// false. It returns the URL to send to (ending in path) and stops with the
// test.
func RawReceiver(t testing.TB, path string, answer func(c net.Conn) (keep bool)) (url string, requests *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	requests = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					requests.Add(1)
					if !answer(c) {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + path, requests
}

// RawServer is a provider on 127.0.0.1 that answers every request with
// answer written as it is — a status line, headers and body of the test's
// choosing, garbled if it likes — and then holds the connection open,
// saying nothing more, until the test ends. It returns the URL to send to.
// For the answers no well-behaved server writes, which a plugin must still
// survive: a 101 Switching Protocols nobody asked for (its body is the
// connection itself), a status code of 000, headers that never end.
func RawServer(t testing.TB, answer string) string {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	url, _ := RawReceiver(t, "/send", func(c net.Conn) bool {
		_, _ = io.WriteString(c, answer)
		<-done
		return false
	})
	return url
}

// HugeHeaderServer is a server on 127.0.0.1 that answers as h does, each
// answer carrying an X-Big header of size bytes: for checking that a
// plugin's client reads an answer's head within a bound
// (sdk.MaxHTTPAnswerHeader, as the SDK's own client), where net/http's
// default of 10 MiB is allocated several times over while parsed.
func HugeHeaderServer(t testing.TB, h http.Handler, size int) *httptest.Server {
	t.Helper()
	big := strings.Repeat("h", size)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", big)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}
