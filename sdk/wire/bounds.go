package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The bounds of what the outbox stores. Every entrance (the API, the CLI,
// EnqueueTx, schedule and campaign rendering, provider verdicts) is held to
// them, so a value the database cannot index or a reader cannot page through
// is refused where it enters, with the field named, rather than failing a
// batch deep in the pipeline. docs/config.md ("Bounds") lists them.
const (
	// MaxInsertBatch is the most notifications one Insert takes: one
	// statement, a few MB of parameters.
	MaxInsertBatch = 10_000

	// MaxChannelLen, MaxRecipientLen and MaxIdempotencyKeyLen bound the
	// indexed text columns in bytes. A btree entry must stay under 2,704
	// bytes: a 3,200-byte recipient once failed every settle of its row.
	MaxChannelLen        = 200
	MaxRecipientLen      = 1024
	MaxIdempotencyKeyLen = 512

	// MaxPayloadBytes is the ceiling of a payload however it arrives; the
	// API's http.max_payload_bytes (default 256 KiB) may only lower it.
	// Rendered payloads are held to http.max_payload_bytes as well.
	MaxPayloadBytes = 1 << 20

	// MaxReasonLen bounds an operator's pause reason.
	MaxReasonLen = 1024

	// MaxErrorLen bounds last_error and an attempt's error text: a longer
	// provider message is cut (on a UTF-8 boundary) and marked.
	MaxErrorLen = 4096
	// MaxProviderCodeLen bounds an attempt's provider code.
	MaxProviderCodeLen = 256
	// MaxResultBytes bounds a provider's result (the Voyage plugin's own
	// default result cap). A larger one is not stored: result then holds a
	// note saying so, and the verdict stands.
	MaxResultBytes = 4 << 20
)

// NameRE is what a channel, schedule or instance name must match.
var NameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// CheckText rejects what Postgres text cannot hold (invalid UTF-8, NUL),
// saying which ("is not valid UTF-8"): every door checks the text it takes
// with it.
func CheckText(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("is not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("contains a NUL byte")
	}
	return nil
}

// CheckJSON rejects what jsonb cannot hold: invalid JSON, and the \u0000
// escape that JSON allows but Postgres refuses.
func CheckJSON(b json.RawMessage) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return fmt.Errorf("is empty, want a JSON value")
	}
	if !utf8.Valid(b) {
		return fmt.Errorf("is not valid UTF-8")
	}
	if !json.Valid(b) {
		return fmt.Errorf("is not valid JSON")
	}
	if p := JSONEscapeProblem(b); p != "" {
		return fmt.Errorf("%s", p)
	}
	if p := JSONNumberProblem(b); p != "" {
		return fmt.Errorf("%s", p)
	}
	return nil
}

// JSONEscapeProblem says what in valid JSON b Postgres cannot store ("" when
// nothing): a \u0000 escape (jsonb and text refuse NUL) or an unpaired
// surrogate escape (jsonb refuses it; encoding/json would silently turn it
// into U+FFFD). An escape counts only when its backslash is not itself
// escaped (an odd run of backslashes before the u).
func JSONEscapeProblem(b []byte) string {
	hex4 := func(i int) (rune, bool) {
		if i+4 > len(b) {
			return 0, false
		}
		v, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(`\u`))
		if j < 0 {
			return ""
		}
		j += i
		i = j + 2
		run := 0
		for k := j - 1; k >= 0 && b[k] == '\\'; k-- {
			run++
		}
		if run%2 == 1 {
			continue
		}
		v, ok := hex4(j + 2)
		switch {
		case !ok:
		case v == 0:
			return fmt.Sprintf(`contains \u0000 (a NUL character), which Postgres cannot store (byte %d)`, j)
		case v >= 0xD800 && v <= 0xDBFF:
			lo, ok := rune(0), j+8 <= len(b) && b[j+6] == '\\' && b[j+7] == 'u'
			if ok {
				lo, ok = hex4(j + 8)
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Sprintf(`has an unpaired surrogate escape \u%04X (byte %d)`, v, j)
			}
			i = j + 12
		case v >= 0xDC00 && v <= 0xDFFF:
			return fmt.Sprintf(`has an unpaired surrogate escape \u%04X (byte %d)`, v, j)
		}
	}
}

// JSONNumberProblem says which number of valid JSON b Postgres' numeric (what
// jsonb keeps numbers as) cannot hold: an exponent or a run of digits past
// its range (1e999999 is valid JSON, and was refused only by the insert).
// "" when every number fits.
func JSONNumberProblem(b []byte) string {
	const maxDigits, maxExp = 100_000, 100_000
	inString, escaped := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '-' || (c >= '0' && c <= '9'):
			start, digits := i, 0
			for i < len(b) && (b[i] >= '0' && b[i] <= '9' || b[i] == '-' || b[i] == '+' || b[i] == '.') {
				if b[i] >= '0' && b[i] <= '9' {
					digits++
				}
				i++
			}
			if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
				j := i + 1
				if j < len(b) && (b[j] == '+' || b[j] == '-') {
					j++
				}
				exp := 0
				for ; j < len(b) && b[j] >= '0' && b[j] <= '9'; j++ {
					if exp <= maxExp {
						exp = exp*10 + int(b[j]-'0')
					}
				}
				if exp > maxExp {
					return fmt.Sprintf("has a number whose exponent is past what Postgres can store (byte %d)", start)
				}
				i = j
			}
			if digits > maxDigits {
				return fmt.Sprintf("has a number of %d digits, past what Postgres can store (byte %d)", digits, start)
			}
			i--
		}
	}
	return ""
}
