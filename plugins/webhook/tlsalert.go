package main

import (
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// refusedHandshake is a send ended by a TLS alert refusing this host's
// handshake (sdk.RefusedTLS): final, and never replayed within the call.
type refusedHandshake struct{ error }

func (e refusedHandshake) Unwrap() error { return e.error }

// alertBook carries a TLS alert from the connection that read it to the
// request it failed. In TLS 1.3 a receiver refuses a client's certificate
// (or its lack of one) after the client's handshake is done, so the alert
// is the first read of the answer, and fasthttp reports every error of that
// read as io.EOF (ResponseHeader.tryRead): the alert is lost, the request
// replayed as on a stale connection. replayConn writes the alert here under
// its addresses; alertTransport, on the same goroutine, takes it by the
// addresses fasthttp records in the response (Response.ParseNetConn).
type alertBook struct {
	mu sync.Mutex
	m  map[string]bookedAlert
}

type bookedAlert struct {
	err error
	at  time.Time
}

// maxBookedAlerts bounds the alerts kept: one read while a body was
// streamed, after its request had its answer, is never taken.
const maxBookedAlerts = 1024

// bookedAlertTTL: an alert older than this is not the current request's.
const bookedAlertTTL = time.Minute

var alerts alertBook

func alertKey(local, remote net.Addr) string {
	if local == nil || remote == nil {
		return ""
	}
	return local.String() + ">" + remote.String()
}

func (b *alertBook) put(key string, err error) {
	if key == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil || len(b.m) >= maxBookedAlerts {
		b.m = make(map[string]bookedAlert)
	}
	b.m[key] = bookedAlert{err, time.Now()}
}

func (b *alertBook) take(key string) error {
	if key == "" {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	a, ok := b.m[key]
	if !ok {
		return nil
	}
	delete(b.m, key)
	if time.Since(a.at) > bookedAlertTTL {
		return nil
	}
	return a.err
}

// alertTransport is fasthttp's transport, with a request whose connection
// read a refusing TLS alert failed by that alert (refusedHandshake), not
// replayed.
type alertTransport struct{}

func (alertTransport) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (bool, error) {
	retry, err := fasthttp.DefaultTransport.RoundTrip(hc, req, resp)
	if err != nil && hc.IsTLS {
		if alert := alerts.take(alertKey(resp.LocalAddr(), resp.RemoteAddr())); alert != nil {
			return false, refusedHandshake{alert}
		}
	}
	return retry, err
}
