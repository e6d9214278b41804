package main

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"

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
	dst = appendJSONString(dst, m.Channel)
	dst = append(dst, `,"recipient":`...)
	dst = appendJSONString(dst, m.Recipient)
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

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaped the way encoding/json
// escapes it (minus HTML escaping, which a webhook body does not need):
// quotes, backslashes and control characters escaped, invalid UTF-8 replaced
// by U+FFFD, U+2028/U+2029 escaped so the body is also valid JavaScript.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
