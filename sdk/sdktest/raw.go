package sdktest

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
)

// RawServer is a provider on 127.0.0.1 that answers every request with
// answer written as it is — a status line, headers and body of the test's
// choosing, garbled if it likes — and then holds the connection open,
// saying nothing more, until the test ends. It returns the URL to send to.
// For the answers no well-behaved server writes, which a plugin must still
// survive: a 101 Switching Protocols nobody asked for (its body is the
// connection itself), a status code of 000, headers that never end.
func RawServer(t testing.TB, answer string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				_, _ = io.WriteString(c, answer)
				<-done
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/send"
}
