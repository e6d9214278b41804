package sdk

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"strings"
)

// finalTransportError says why err is a failure no retry can fix, or "" when
// it is worth retrying. Only the receiver's operator (a new certificate) or
// notifyd's (a corrected URL) can end these, so retrying would just park the
// message until its attempts run out.
//
// Both net/http's and fasthttp's errors are recognised: they wrap the same
// crypto/tls and crypto/x509 types. The text checks catch the same errors
// after a client flattened them into a string.
func finalTransportError(err error) string {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		insecure x509.InsecureAlgorithmError
		roots    x509.SystemRootsError
		record   tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &unknown):
		return "the receiver's TLS certificate is signed by an authority this host does not trust"
	case errors.As(err, &hostname):
		return "the receiver's TLS certificate is not valid for this host name"
	case errors.As(err, &invalid):
		return "the receiver's TLS certificate is not valid (expired, not yet valid or not for server use)"
	case errors.As(err, &insecure), errors.As(err, &verify), errors.As(err, &roots):
		return "the receiver's TLS certificate cannot be verified"
	case errors.Is(err, http.ErrSchemeMismatch), errors.As(err, &record):
		return "the receiver does not speak TLS on this https:// URL (plain HTTP?)"
	}
	if why := RefusedTLS(err); why != "" {
		return why
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "x509: "), strings.Contains(msg, "tls: failed to verify certificate"):
		return "the receiver's TLS certificate cannot be verified"
	case strings.Contains(msg, http.ErrSchemeMismatch.Error()),
		strings.Contains(msg, "tls: first record does not look like a TLS handshake"):
		return "the receiver does not speak TLS on this https:// URL (plain HTTP?)"
	case strings.Contains(msg, "tls: protocol version not supported"), // its alert, or ours
		strings.Contains(msg, "tls: server selected unsupported protocol version"):
		// crypto/tls's remote alert type is unexported: its text is all
		// there is. A receiver on TLS 1.0 or 1.1 stays there until its
		// operator upgrades it.
		return "the receiver and this host share no TLS version (it offers only ones this host refuses, such as TLS 1.0 or 1.1)"
	}
	return ""
}
