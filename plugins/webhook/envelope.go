package main

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// errBadPayload is a payload that is not JSON; no retry can fix it.
var errBadPayload = errors.New("payload is not valid JSON")

// appendEnvelope appends the JSON envelope
//
//	{"id":…,"channel":…,"recipient":…,"payload":…,"attempt":…,"created_at":…}
//
// to dst. It is written by hand rather than with encoding/json because it runs
// once per notification on the 20k/s path: the payload is copied as the raw
// JSON it already is, and nothing is reflected over or allocated beyond dst.
func appendEnvelope(dst []byte, m *sdk.Message) ([]byte, error) {
	payload := m.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	} else if !json.Valid(payload) {
		return dst, errBadPayload
	}
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendInt(dst, m.ID, 10)
	dst = append(dst, `,"channel":`...)
	dst = sdk.AppendJSONString(dst, m.Channel)
	dst = append(dst, `,"recipient":`...)
	dst = sdk.AppendJSONString(dst, m.Recipient)
	dst = append(dst, `,"payload":`...)
	dst = append(dst, payload...)
	dst = append(dst, `,"attempt":`...)
	dst = strconv.AppendInt(dst, int64(m.Attempt), 10)
	dst = append(dst, `,"created_at":`...)
	if m.CreatedAt.IsZero() {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '"')
		dst = m.CreatedAt.UTC().AppendFormat(dst, time.RFC3339Nano)
		dst = append(dst, '"')
	}
	return append(dst, '}'), nil
}

// envelopeSize is a generous guess of the envelope's length, so that building
// it needs a single allocation.
func envelopeSize(m *sdk.Message) int {
	return 128 + len(m.Payload) + 2*(len(m.Channel)+len(m.Recipient))
}
