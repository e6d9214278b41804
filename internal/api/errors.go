package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/notifyd/notifyd/internal/httpguard"
	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Error is an answer other than success: an HTTP status, a code from the
// client package (wire.CodeInvalid, …) and a message that names the field
// or parameter at fault. Handlers return it; anything else they return is
// logged and answered 500 without its text.
type Error struct {
	Status  int
	Code    string
	Message string
}

// Error is the answer in one line: status, code and message.
func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// errorf builds an Error. A message quotes values of the request (a
// channel, an external id, a time), and quoting escapes them: a 1 MiB
// channel of DEL characters answered 5 MiB. Every string argument is cut
// to wire.MaxQuotedValue bytes before it is formatted and the message to
// wire.MaxErrorMessage, so an error answer's size and cost are bounded whatever
// it quotes.
func errorf(status int, code, format string, args ...any) *Error {
	cut := args
	for i, a := range args {
		if s, ok := a.(string); ok && len(s) > wire.MaxQuotedValue {
			if &cut[0] == &args[0] {
				cut = append([]any(nil), args...)
			}
			cut[i] = wire.Truncate(s, wire.MaxQuotedValue)
		}
	}
	return &Error{Status: status, Code: code, Message: wire.Truncate(fmt.Sprintf(format, cut...), wire.MaxErrorMessage)}
}

// badRequest: the request cannot be read (JSON syntax, a wrong JSON type, an
// unknown field, an unparseable query or path parameter).
func badRequest(format string, args ...any) *Error {
	return errorf(http.StatusBadRequest, wire.CodeBadRequest, format, args...)
}

// invalid: well-formed, but a value is unacceptable (a missing field, an
// unknown channel, a payload over the limit).
func invalid(format string, args ...any) *Error {
	return errorf(http.StatusUnprocessableEntity, wire.CodeInvalid, format, args...)
}

func notFound(format string, args ...any) *Error {
	return errorf(http.StatusNotFound, wire.CodeNotFound, format, args...)
}

func conflict(format string, args ...any) *Error {
	return errorf(http.StatusConflict, wire.CodeConflict, format, args...)
}

func unavailable(format string, args ...any) *Error {
	return errorf(http.StatusServiceUnavailable, wire.CodeUnavailable, format, args...)
}

// refusal is a service's refusal as the API answers it: 404, 409, 400, 501
// and 503 by its kind, 422 for an invalid value.
func refusal(se *service.Error) *Error {
	switch se.Kind {
	case service.NotFound:
		return notFound("%s", se.Message)
	case service.Conflict:
		return conflict("%s", se.Message)
	case service.Unreadable:
		return badRequest("%s", se.Message)
	case service.Unsupported:
		return errorf(http.StatusNotImplemented, wire.CodeNotImplemented, "%s", se.Message)
	case service.Unavailable:
		return unavailable("%s", se.Message)
	}
	return invalid("%s", se.Message)
}

// writeJSON answers status with v as JSON. It escapes only what JSON must:
// json.Marshal's HTML escapes wrote each <, > and & as six bytes, so a page
// of dead letters within its 16 MiB (outbox.MaxPageBytes) answered up to six
// times that, past what sdk/client reads (client.MaxAnswerBytes). An answer
// is application/json with nosniff, never HTML.
func writeJSON(w http.ResponseWriter, status int, v any) {
	status, b := encodeJSON(status, v)
	writeEncoded(w, status, b)
}

// encodeJSON is v as writeJSON answers it, and the status to answer it
// with (a 500 for an encoding that failed).
func encodeJSON(status int, v any) (int, *bytes.Buffer) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only a bug gets here (every answer type encodes); say so plainly.
		status = http.StatusInternalServerError
		b.Reset()
		_ = enc.Encode(wire.ErrorBody{Error: wire.ErrorDetail{Code: wire.CodeInternal, Message: "encode answer: " + err.Error()}})
	}
	return status, &b
}

func writeEncoded(w http.ResponseWriter, status int, b *bytes.Buffer) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = b.WriteTo(w)
}

// holdAnswer holds n bytes, an answer's read bound, of the bound on answers
// in flight (httpguard.HoldAnswer) for r until it has answered; the error
// is a *httpguard.Busy. Every route that reads rows whose size a client or
// an application's SQL controls holds its bound: a page (httpguard.PageCharge)
// and one row read alone (a notification with its attempt log is ~9 MiB at
// its largest) alike. It answers with writeAnswer.
func holdAnswer(r *http.Request, n int64) (release func(), err error) {
	return httpguard.HoldAnswer(r.Context(), n)
}

// answerHeld answers r with what read returns, read while r holds bound of
// the bound on answers in flight (holdAnswer) and written with status
// (writeAnswer): the shape of every route that reads one row, or a page,
// whose size a client or an application's SQL controls.
func answerHeld[T any](w http.ResponseWriter, r *http.Request, bound int64, status int, read func(context.Context) (T, error)) error {
	release, err := holdAnswer(r, bound)
	if err != nil {
		return err
	}
	defer release()
	v, err := read(r.Context())
	if err != nil {
		return err
	}
	writeAnswer(w, r, status, v)
	return nil
}

// writeAnswer is writeJSON for an answer read under holdAnswer: once it is
// encoded, the request holds the encoded answer's size instead of its read
// bound (httpguard.Encoded: less for small rows, more for text JSON
// escapes) while it is written, for as long as its client takes to read
// it.
func writeAnswer(w http.ResponseWriter, r *http.Request, status int, v any) {
	status, b := encodeJSON(status, v)
	httpguard.Encoded(r.Context(), int64(b.Len()))
	writeEncoded(w, status, b)
}

// writeError answers e as {"error": {"code", "message"}}.
func writeError(w http.ResponseWriter, e *Error) {
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="notifyd"`)
	}
	writeJSON(w, e.Status, wire.ErrorBody{Error: wire.ErrorDetail{Code: e.Code, Message: e.Message}})
}
