package httpguard

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestProxies_ClientIPAndHTTPS(t *testing.T) {
	t.Parallel()
	p, err := ParseProxies([]string{"10.0.0.0/8", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseProxies([]string{"nonsense"}); err == nil || !strings.Contains(err.Error(), "http.trusted_proxies[0]") {
		t.Errorf("ParseProxies(nonsense) = %v, want an error naming the key", err)
	}
	req := func(remote, xff, proto string) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		if proto != "" {
			r.Header.Set("X-Forwarded-Proto", proto)
		}
		return r
	}
	tests := []struct {
		name, remote, xff, proto, wantIP string
		wantHTTPS                        bool
	}{
		{"direct client", "192.0.2.7:5000", "", "", "192.0.2.7", false},
		{"untrusted peer's headers are ignored", "192.0.2.7:5000", "198.51.100.1", "https", "192.0.2.7", false},
		{"trusted proxy", "10.1.2.3:443", "198.51.100.1", "https", "198.51.100.1", true},
		{"a forged hop before the proxy's", "10.1.2.3:443", "203.0.113.9, 198.51.100.1", "https", "198.51.100.1", true},
		{"chain of trusted proxies", "[::1]:443", "198.51.100.1, 10.9.9.9", "HTTPS", "198.51.100.1", true},
		{"trusted proxy over http", "10.1.2.3:80", "198.51.100.1", "http", "198.51.100.1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := req(tt.remote, tt.xff, tt.proto)
			if got := p.ClientIP(r); got != tt.wantIP {
				t.Errorf("ClientIP = %s, want %s", got, tt.wantIP)
			}
			if got := p.HTTPS(r); got != tt.wantHTTPS {
				t.Errorf("HTTPS = %v, want %v", got, tt.wantHTTPS)
			}
		})
	}
}

func TestThrottle(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	th := NewThrottle(3)
	th.now = func() time.Time { return now }
	for range 3 {
		if th.Blocked("a") != 0 {
			t.Fatal("blocked before 3 failures")
		}
		th.Fail("a")
	}
	if got := th.Blocked("a"); got != time.Minute {
		t.Errorf("after 3 failures Blocked = %v, want the rest of the minute", got)
	}
	if th.Blocked("b") != 0 {
		t.Error("another client is blocked too")
	}
	now = now.Add(time.Minute)
	if th.Blocked("a") != 0 {
		t.Error("still blocked after the window")
	}
	t.Run("memory stays bounded under a flood of addresses", func(t *testing.T) {
		f := NewThrottle(3)
		f.MaxClients = 100
		for i := range 10_000 {
			f.Fail(strings.Repeat("x", i%50) + string(rune('a'+i%26)) + time.Duration(i).String())
		}
		if n := len(f.clients); n > 100 {
			t.Errorf("%d clients remembered, want ≤ 100", n)
		}
	})
}

// Concurrent large bodies beyond the in-flight bound wait, then are refused
// with 503 and Retry-After; the ones admitted are read whole.
func TestInflight(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var admitted sync.WaitGroup
	h := NewInflight(2<<20, 1<<20, 2<<20, 200*time.Millisecond, func(*http.Request) string { return "one" }).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !serving(w, r) {
			return
		}
		admitted.Done()
		<-release // hold the body's bytes
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	body := strings.Repeat("x", 1<<20)
	results := make(chan int, 3)
	admitted.Add(2)
	for range 2 {
		go func() {
			res, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
			if err != nil {
				results <- 0
				return
			}
			res.Body.Close()
			results <- res.StatusCode
		}()
	}
	admitted.Wait() // 2 MiB in flight: the bound
	res, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Errorf("third 1 MiB body: %d (Retry-After %q), want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
	close(release)
	for range 2 {
		if got := <-results; got != http.StatusOK {
			t.Errorf("an admitted request got %d, want 200", got)
		}
	}
}

// One client holds at most its share of the in-flight bytes, so another
// client's body is still read: a client that opened its connections as
// bodies declared large and never sent held the whole bound, and everyone
// else's request with a body got 503.
func TestInflight_clientShare(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var admitted sync.WaitGroup
	const total, body, share = 4 << 20, 1 << 20, 2 << 20 // a client's share: 2 bodies
	h := NewInflight(total, body, share, 200*time.Millisecond, func(r *http.Request) string { return r.Header.Get("X-Client") }).Wrap(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !serving(w, r) {
				return
			}
			if r.Header.Get("X-Client") == "greedy" {
				select {
				case <-release:
				default:
					admitted.Done()
					<-release // hold the body's bytes
				}
			}
			_, _ = io.Copy(io.Discard, r.Body)
		}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func(client string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(strings.Repeat("x", body)))
		req.Header.Set("X-Client", client)
		// A connection of its own each: one answered 503 without its body
		// read is closed by the server.
		res, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			t.Logf("POST as %s: %v", client, err)
			return 0
		}
		res.Body.Close()
		return res.StatusCode
	}
	results := make(chan int, 2)
	admitted.Add(2)
	for range 2 {
		go func() { results <- post("greedy") }()
	}
	admitted.Wait() // the greedy client holds its share
	if got := post("greedy"); got != http.StatusServiceUnavailable {
		t.Errorf("the greedy client's third 1 MiB body: %d, want 503 (past its 2 MiB share)", got)
	}
	if got := post("other"); got != http.StatusOK {
		t.Errorf("another client's 1 MiB body while the greedy one holds its share: %d, want 200", got)
	}
	close(release)
	for range 2 {
		if got := <-results; got != http.StatusOK {
			t.Errorf("an admitted request got %d, want 200", got)
		}
	}
	if got := post("greedy"); got != http.StatusOK {
		t.Errorf("the greedy client once its bodies were read: %d, want 200 (its share freed)", got)
	}
}

// serving is a handler's credential check passed: the request takes its
// whole body's share (Serving), or is answered 503.
func serving(w http.ResponseWriter, r *http.Request) bool {
	if err := Serving(r.Context()); err != nil {
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return false
	}
	return true
}

// Before a request has shown a credential (Serving) it holds, and may read,
// PreCredentialBody of its body, whatever it declares: slow requests
// declaring 1 MiB that no one has vouched for held the whole bound. Past
// it, a read fails as http.MaxBytesReader's does; once it serves someone,
// its whole body is read.
func TestInflight_beforeCredential(t *testing.T) {
	t.Parallel()
	const total = 1 << 20 // one declared body
	held, release := make(chan struct{}), make(chan struct{})
	h := NewInflight(total, total, total, 200*time.Millisecond, func(*http.Request) string { return "one" }).Wrap(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/served" && !serving(w, r) {
				return
			}
			if r.URL.Path == "/hold" {
				held <- struct{}{}
				<-release
				return
			}
			n, err := io.Copy(io.Discard, r.Body)
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				http.Error(w, fmt.Sprintf("read %d, over %d", n, tooBig.Limit), http.StatusRequestEntityTooLarge)
				return
			}
			fmt.Fprintf(w, "read %d", n)
		}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer close(release) // before Close, which waits for the handlers
	post := func(path string, n int) (int, string) {
		res, err := http.Post(srv.URL+path, "text/plain", strings.NewReader(strings.Repeat("x", n)))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, strings.TrimSpace(string(b))
	}
	// Fifteen requests declaring the whole bound, none vouched for, hold
	// 64 KiB each: a request that is vouched for is still read whole.
	for range 15 {
		go func() {
			if res, err := http.Post(srv.URL+"/hold", "text/plain", strings.NewReader(strings.Repeat("x", total))); err == nil {
				res.Body.Close()
			}
		}()
		<-held
	}
	if code, body := post("/served", 64<<10); code != http.StatusOK || body != fmt.Sprint("read ", 64<<10) {
		t.Errorf("a vouched-for 64 KiB body while 15 unvouched 1 MiB ones wait: %d %q, want it read", code, body)
	}
	if code, body := post("/", PreCredentialBody); code != http.StatusOK || body != fmt.Sprint("read ", PreCredentialBody) {
		t.Errorf("an unvouched body of PreCredentialBody: %d %q, want it read", code, body)
	}
	if code, body := post("/", PreCredentialBody+1); code != http.StatusRequestEntityTooLarge || body != fmt.Sprintf("read %d, over %d", PreCredentialBody, PreCredentialBody) {
		t.Errorf("an unvouched body one byte past PreCredentialBody: %d %q, want it refused as over %d", code, body, PreCredentialBody)
	}
}

func TestClientShare(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		total            int64
		perClient, conns int
		want             int64
	}{
		{64 << 20, 64, 256, 16 << 20},  // the defaults: a quarter
		{64 << 20, 256, 256, 64 << 20}, // no per-client cap of its own
		{64 << 20, 300, 256, 64 << 20},
		{64 << 20, 0, 256, 64 << 20},
		{10, 1, 3, 3},
	} {
		if got := ClientShare(c.total, c.perClient, c.conns); got != c.want {
			t.Errorf("ClientShare(%d, %d, %d) = %d, want %d", c.total, c.perClient, c.conns, got, c.want)
		}
	}
}
