package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
)

// reachTransport turns a failure to connect to notifyd into an
// *unreachableError naming the address tried and how to change it: a
// newcomer's first "connection refused" should say where the CLI looked.
type reachTransport struct{ base http.RoundTripper }

func (t reachTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	var op *net.OpError
	if err != nil && r.Context().Err() == nil && errors.As(err, &op) && op.Op == "dial" {
		return nil, &unreachableError{addr: r.URL.Scheme + "://" + r.URL.Host, err: err}
	}
	return resp, err
}

// unreachableError is a connection to notifyd that could not be made.
type unreachableError struct {
	addr string
	err  error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach notifyd at %s (set --addr or %s): %s", e.addr, envAddr, dialCause(e.err))
}

func (e *unreachableError) Unwrap() error { return e.err }

// dialCause is the heart of a dial error ("connection refused", "lookup
// nohost: no such host"), without the addresses the message already names.
func dialCause(err error) string {
	var op *net.OpError
	if !errors.As(err, &op) || op.Err == nil {
		return err.Error()
	}
	var sys *os.SyscallError
	if errors.As(op.Err, &sys) {
		return sys.Err.Error()
	}
	return op.Err.Error()
}

// plainError is what the CLI prints for err: an unreachable notifyd alone,
// without the client's request and URL wrapped around it (the address is
// in the message already); each line printable, since an error may quote a
// server's or a stored text (a job's error, a refusal).
func plainError(err error) error {
	var u *unreachableError
	if errors.As(err, &u) {
		err = u
	}
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = printable(l)
	}
	return errors.New(strings.Join(lines, "\n"))
}
