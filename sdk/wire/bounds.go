package wire

import (
	"bytes"
	"encoding/json"
	"errors"
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

// OverResultNote is the result stored, in its place, for a provider's
// result of n bytes, past MaxResultBytes.
func OverResultNote(n int) []byte {
	return fmt.Appendf(nil, `{"notifyd_error":"the provider's result was %d bytes, over the %d-byte bound; not stored"}`,
		n, MaxResultBytes)
}

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

// Bounds on an error message's text, the API's answers and the dashboard's
// pages alike: each request value it quotes, and the whole. Quoting escapes
// a value (a 1 MiB channel of DEL characters answered 5 MiB), and a page
// escapes it again.
const (
	MaxQuotedValue  = 4 << 10
	MaxErrorMessage = 16 << 10
)

// Truncate cuts s to at most n bytes on a UTF-8 boundary, marking the cut:
// how every door and the outbox quote back text of unbounded length.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = " …[truncated]"
	cut := max(n-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// EscapeControls is s safe to write to a terminal: every C0 control
// character, DEL and every C1 control character written as a Go escape
// (ESC as \x1b, CR as \r, U+009B as \u009b) and each byte of invalid
// UTF-8 as \xNN; everything else, backslashes included, as it is. Text a
// client stores (a recipient, a provider's error) or a server answers is
// printed through it, so what it holds (OSC 52 writing the clipboard, a
// screen clear, a carriage return that overwrites the line) is shown, never
// obeyed.
func EscapeControls(s string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if isControl(r) || (r == utf8.RuneError && n == 1) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	b := make([]byte, 0, len(s)+16)
	b = append(b, s[:i]...)
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = append(b, '\\', 'x', hexDigits[s[i]>>4], hexDigits[s[i]&0xf])
		case isControl(r):
			q := strconv.QuoteRune(r) // '\x1b', '\r', '\u009b'
			b = append(b, q[1:len(q)-1]...)
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return string(b)
}

// isControl: C0, DEL and C1, which terminals act on rather than show.
func isControl(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r < 0xa0)
}

// CheckJSON rejects what jsonb cannot hold: invalid JSON, and the \u0000
// escape that JSON allows but Postgres refuses.
func CheckJSON(b json.RawMessage) error {
	_, err := checkJSON(b)
	return err
}

// checkJSON is CheckJSON, answering JSONReadBack's size too.
func checkJSON(b json.RawMessage) (readBack int, err error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return 0, fmt.Errorf("is empty, want a JSON value")
	}
	if !utf8.Valid(b) {
		return 0, fmt.Errorf("is not valid UTF-8")
	}
	if !json.Valid(b) {
		var syn *json.SyntaxError
		if err := json.Unmarshal(b, new(json.RawMessage)); errors.As(err, &syn) {
			return 0, fmt.Errorf("is not valid JSON (at byte %d): %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
		}
		return 0, fmt.Errorf("is not valid JSON (it ends too soon)")
	}
	if p := JSONEscapeProblem(b); p != "" {
		return 0, fmt.Errorf("%s", p)
	}
	n, p := JSONReadBack(b)
	if p != "" {
		return n, fmt.Errorf("%s", p)
	}
	return n, nil
}

// CheckPayload is CheckJSON, and holds b to limit bytes as written and to
// MaxPayloadBytes as it reads back from jsonb (JSONReadBack: numbers in
// decimal, a space after each ':' and ','): the read-back form is what the
// pipeline carries to a plugin, and what the claim reads only within
// MaxPayloadBytes.
func CheckPayload(b json.RawMessage, limit int) error {
	if len(b) > limit {
		return fmt.Errorf("is %d bytes, at most %d", len(b), limit)
	}
	n, err := checkJSON(b)
	if err != nil {
		return err
	}
	if n > MaxPayloadBytes {
		return fmt.Errorf("reads back as %d bytes, at most %d (jsonb writes numbers in decimal and a space after each ':' and ',')", n, MaxPayloadBytes)
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

// MaxNumberChars bounds one JSON number as it reads back. jsonb keeps a
// number as Postgres' numeric, which stores 1e100000 in a few bytes and
// prints it as 100,001 digits (and 0e-16000 as 16,002 characters), so a
// number is measured in its decimal form, not as it was written: 1e21 counts
// 22 characters, 1.5e-7 counts 11. 100 holds every integer and every
// decimal an application writes (a float64 prints in at most 24), and keeps
// the worst case, "1e99," read back as 101 bytes, a bounded factor of what
// it was written as.
const MaxNumberChars = 100

// JSONNumberProblem says which number of valid JSON b reads back past
// MaxNumberChars, naming its path ("" when every number fits).
func JSONNumberProblem(b []byte) string {
	_, p := JSONReadBack(b)
	return p
}

// JSONReadBack is an upper bound of the bytes valid JSON b occupies when
// Postgres reads it back as jsonb text: numbers in their decimal form, a
// space after every ':' and ',', no insignificant whitespace (a string never
// grows: jsonb only undoes escapes). problem names the first number past
// MaxNumberChars, with its path and byte offset; it is "" when there is none.
// The scan is linear in len(b) and allocates only for the problem's path
// (and for nesting deeper than 16).
func JSONReadBack(b []byte) (size int, problem string) {
	// The open containers: the path of a problem. It runs on every payload
	// enqueued and every provider result settled, so a frame keeps its key
	// as bytes of b, made a string only for a problem's path, and the
	// first 16 frames live on the stack.
	var frames [16]pathFrame
	stack := frames[:0]
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '"':
			start := i
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			size += i - start + 1
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
				stack[n-1].key = b[start+1 : min(i, len(b))]
				stack[n-1].wantKey = false
			}
			continue
		case '{', '[':
			stack = append(stack, pathFrame{object: c == '{', wantKey: c == '{'})
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case ',':
			size++ // jsonb writes ", "
			if n := len(stack); n > 0 {
				stack[n-1].index++
				stack[n-1].wantKey = stack[n-1].object
			}
		case ':':
			size++ // and ": "
		}
		if c == '-' || (c >= '0' && c <= '9') {
			start := i
			for i+1 < len(b) && numberByte(b[i+1]) {
				i++
			}
			n := numberChars(b[start : i+1])
			if n > MaxNumberChars && problem == "" {
				problem = fmt.Sprintf("has a number at %s (byte %d) that reads back as %d characters, at most %d: "+
					"Postgres keeps numbers in decimal, so %s is stored as its digits",
					jsonPath(stack), start, n, MaxNumberChars, shorten(b[start:i+1], 24))
			}
			size += n
			continue
		}
		size++
	}
	return size, problem
}

type pathFrame struct {
	object, wantKey bool
	key             []byte // as written, escapes and all
	index           int
}

// jsonPath renders the path of open containers: $.a.b[3].
func jsonPath(stack []pathFrame) string {
	var sb strings.Builder
	sb.WriteString("$")
	for _, f := range stack {
		if key := string(f.key); f.object {
			if key != "" && plainKey(key) {
				sb.WriteString("." + key)
			} else {
				sb.WriteString("[" + strconv.Quote(key) + "]")
			}
		} else {
			sb.WriteString("[" + strconv.Itoa(f.index) + "]")
		}
	}
	return sb.String()
}

func plainKey(k string) bool {
	for _, r := range k {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return len(k) <= 64
}

func shorten(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}

func numberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// numberChars is the length of JSON number literal as Postgres' numeric
// prints it: sign, integer digits (at least one), and dscale fraction digits,
// where dscale = fraction digits written − exponent, at least 0. Exponents
// are clamped (past ±10⁹ they are refused as numeric anyway), so the sum
// cannot overflow.
func numberChars(lit []byte) int {
	neg := 0
	if len(lit) > 0 && lit[0] == '-' {
		neg, lit = 1, lit[1:]
	}
	mant, exp := lit, 0
	if k := bytes.IndexAny(lit, "eE"); k >= 0 {
		mant = lit[:k]
		e := lit[k+1:]
		sign := 1
		if len(e) > 0 && (e[0] == '+' || e[0] == '-') {
			if e[0] == '-' {
				sign = -1
			}
			e = e[1:]
		}
		for _, d := range e {
			if exp < 1_000_000_000 {
				exp = exp*10 + int(d-'0')
			}
		}
		exp *= sign
	}
	intPart, frac := mant, []byte(nil)
	if k := bytes.IndexByte(mant, '.'); k >= 0 {
		intPart, frac = mant[:k], mant[k+1:]
	}
	intDigits := max(1, len(intPart)+exp)
	if len(bytes.Trim(mant, "0.")) == 0 {
		intDigits = 1 // zero prints as 0, whatever its exponent
	}
	dscale := max(0, len(frac)-exp)
	n := neg + intDigits
	if dscale > 0 {
		n += 1 + dscale
	}
	return n
}
