package main

import (
	"crypto/tls"
	"net"
	"reflect"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// refusedAlerts are the TLS alerts (RFC 8446 §6.2) by which a receiver
// refuses this host's TLS configuration: a client certificate it requires
// and the plugin does not have (certificate_required in TLS 1.3,
// handshake_failure or bad_certificate in 1.2), one it does not trust, no
// cipher suite, server name or protocol in common (no version in common,
// protocol_version, sdk.ClassifyHTTP words itself). Each comes
// back the same on every attempt until an operator changes one side, so the
// message is not retried. An alert a receiver sends for a fault of the
// moment (internal_error) or a damaged record (bad_record_mac,
// decode_error) is retried, as is a handshake the network cuts (no alert).
var refusedAlerts = map[uint8]string{
	40:  "handshake failure",
	42:  "bad certificate",
	43:  "unsupported certificate",
	44:  "certificate revoked",
	45:  "certificate expired",
	46:  "certificate unknown",
	48:  "unknown certificate authority",
	49:  "access denied",
	71:  "insufficient security",
	112: "unrecognized name",
	116: "certificate required",
	120: "no application protocol",
}

// refusedTLS says why err is a TLS alert refusing this host's handshake,
// or "" when it is none. The alert is found by its type anywhere in err's
// chain: tls.AlertError, or crypto/tls's unexported alert type that a
// remote alert carries (a *net.OpError "remote error" over it), read by
// reflection as a uint8 of package crypto/tls — never by the error's text.
func refusedTLS(err error) string {
	code, ok := tlsAlert(err)
	if !ok {
		return ""
	}
	name, final := refusedAlerts[code]
	if !final {
		return ""
	}
	return "the receiver refused this host's TLS handshake (alert: " + name +
		"): it requires a client certificate or TLS settings this plugin does not have"
}

// tlsAlert finds the code of a TLS alert in err's chain.
func tlsAlert(err error) (uint8, bool) {
	for err != nil {
		if a, ok := err.(tls.AlertError); ok {
			return uint8(a), true
		}
		if t := reflect.TypeOf(err); t.PkgPath() == "crypto/tls" && t.Name() == "alert" && t.Kind() == reflect.Uint8 {
			return uint8(reflect.ValueOf(err).Uint()), true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if code, ok := tlsAlert(e); ok {
					return code, true
				}
			}
			return 0, false
		default:
			return 0, false
		}
	}
	return 0, false
}

// refusedHandshake is a send ended by a TLS alert refusing this host's
// handshake (refusedTLS): final, and never replayed within the call.
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
