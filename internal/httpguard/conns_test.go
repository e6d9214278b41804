package httpguard

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// When every connection is serving a request nothing can be closed: a new
// one waits for a request to finish, and past AdmitWait is answered 503
// with Retry-After rather than left waiting.
func TestConns_Busy(t *testing.T) {
	t.Parallel()
	g := NewConns(2, 2, nil)
	g.wait = 500 * time.Millisecond
	release := make(chan struct{})
	busy := make(chan struct{}, 2)
	srv := &http.Server{ConnState: g.ConnState, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			busy <- struct{}{}
			<-release
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(g.Listener(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "http://" + ln.Addr().String()
	fresh := func() *http.Client {
		return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	}
	done := make(chan error, 2)
	for range 2 {
		go func() {
			res, err := fresh().Get(url + "/slow")
			if err == nil {
				res.Body.Close()
			}
			done <- err
		}()
	}
	<-busy
	<-busy
	res, err := fresh().Get(url + "/fast")
	if err != nil {
		t.Fatalf("a third connection while both are busy: %v, want a 503 answer", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Errorf("a third connection while both are busy: %d (Retry-After %q) %s, want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	close(release)
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("a busy request: %v", err)
		}
	}
	if res, err := fresh().Get(url + "/fast"); err != nil || res.StatusCode != 200 {
		t.Errorf("once they finished: %v %v, want 200", res, err)
	} else {
		res.Body.Close()
	}
	deadline := time.Now().Add(30 * time.Second)
	for g.Open() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still counted after every one closed", g.Open())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// With ConnContext on the server, a connection serves someone only once its
// handler says so (Serving): one whose request has not (no credential yet)
// is closed to admit a new connection, as an idle one is, while one that
// has is left to finish.
func TestConns_ServingOnceSaid(t *testing.T) {
	t.Parallel()
	g := NewConns(2, 2, nil)
	g.wait = 500 * time.Millisecond
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	busy := make(chan struct{}, 4)
	srv := &http.Server{ConnState: g.ConnState, ConnContext: g.ConnContext, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/served" {
			_ = Serving(r.Context())
		}
		if r.URL.Path != "/fast" {
			busy <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(g.Listener(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "http://" + ln.Addr().String()
	fresh := func() *http.Client {
		return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	}
	get := func(path string) (int, error) {
		res, err := fresh().Get(url + path)
		if err != nil {
			return 0, err
		}
		defer res.Body.Close()
		return res.StatusCode, nil
	}
	for _, path := range []string{"/unserved", "/unserved"} {
		go func() { _, _ = get(path) }()
	}
	<-busy
	<-busy
	if code, err := get("/fast"); err != nil || code != 200 {
		t.Fatalf("a third connection while both hold requests that serve nobody: %d %v, want 200", code, err)
	}
	// One of them was closed for it; the other still holds its slot. Two
	// that serve someone fill the server: the next waits, then 503.
	go func() { _, _ = get("/served") }()
	<-busy
	go func() { _, _ = get("/served") }()
	<-busy
	if code, err := get("/fast"); err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("a third connection while both serve someone: %d %v, want 503", code, err)
	}
}
