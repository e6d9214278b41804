package sdk

import (
	"crypto/tls"
	"reflect"
)

// refusedAlerts are the TLS alerts (RFC 8446 §6.2) by which a receiver
// refuses this host's TLS configuration: a client certificate it requires
// and the client does not have (certificate_required in TLS 1.3,
// handshake_failure or bad_certificate in 1.2), one it does not trust, no
// cipher suite, server name or protocol in common (no version in common,
// protocol_version, finalTransportError words itself). Each comes back the
// same on every attempt until an operator changes one side, so the message
// is not retried. An alert a receiver sends for a fault of the moment
// (internal_error) or a damaged record (bad_record_mac, decode_error) is
// retried, as is a handshake the network cuts (no alert).
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

// RefusedTLS says why err is a TLS alert by which the receiver refused this
// host's handshake for good (a client certificate it requires, one it does
// not trust, no settings in common), or "" when it is none. ClassifyHTTP
// makes such a failure PERMANENT; a client other than net/http (fasthttp)
// can ask it of its own errors. The alert is found by its type anywhere in
// err's chain — tls.AlertError, or crypto/tls's unexported alert type that
// a remote alert carries (under a *net.OpError "remote error"), read by
// reflection as a uint8 of package crypto/tls — never by the error's text.
func RefusedTLS(err error) string {
	code, ok := tlsAlert(err)
	if !ok {
		return ""
	}
	name, final := refusedAlerts[code]
	if !final {
		return ""
	}
	return "the receiver refused this host's TLS handshake (alert: " + name +
		"): it requires a client certificate or TLS settings this host does not have"
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
