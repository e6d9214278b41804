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
