package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk/client"
)

// TestClient_CallerClientStillBounded gives the client an
// *http.Client of the caller's own (for its TLS or proxy, as WithHTTPClient
// says) with no Timeout, and a context without a deadline, against a server
// that answers 200 and then trickles its body for ever. DefaultTimeout
// "bounds one API call when the caller's context has no deadline of its
// own": the call must end with an error, where it used to wait for ever.
func TestClient_CallerClientStillBounded(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"channels":[`))
		w.(http.Flusher).Flush()
		for {
			select {
			case <-stop:
				return
			case <-r.Context().Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			if _, err := w.Write([]byte(" ")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) })
	c, err := client.New(srv.URL, "t", client.WithHTTPClient(&http.Client{Transport: &http.Transport{}}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Channels(context.Background())
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "/v1/channels") {
			t.Errorf("Channels = %v, want an error naming the call", err)
		}
	case <-time.After(client.DefaultTimeout + 2*time.Minute):
		t.Fatalf("Channels still waiting %v past DefaultTimeout (%v)", 2*time.Minute, client.DefaultTimeout)
	}
}

// TestClient_AddressQueryOrFragment gives New an address with a query
// or a fragment (`--addr 'notifyd:8080/?env=prod'`, a URL pasted from a
// browser). Each call's path was appended after it, so every call went to
// the address's own path with the API path in the query or the fragment:
// GET /healthz reached "/" and a server answering 200 there passed for a
// healthy notifyd. New must refuse such an address, naming it.
func TestClient_AddressQueryOrFragment(t *testing.T) {
	t.Parallel()
	paths := make(chan string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case paths <- r.URL.Path:
		default:
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	for _, addr := range []string{srv.URL + "/?env=prod", srv.URL + "#top", srv.URL + "/base?"} {
		c, err := client.New(addr, "t")
		if err == nil {
			err = c.Health(context.Background())
			var got string
			select {
			case got = <-paths:
			default:
			}
			t.Errorf("New(%q) accepted it; Health = %v, the server saw path %q for /healthz", addr, err, got)
			continue
		}
		if !strings.Contains(err.Error(), addr) {
			t.Errorf("New(%q) = %v, want the address named", addr, err)
		}
	}
	// A path prefix (a reverse proxy's mount point) is still an address.
	if _, err := client.New(srv.URL+"/notifyd/", "t"); err != nil {
		t.Errorf("New with a path prefix: %v", err)
	}
}
