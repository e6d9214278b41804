package sdk

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// Redaction bounds.
const (
	// Redacted replaces a secret in redacted text.
	Redacted = "[redacted]"
	// MinSecretLen is the shortest value a Redactor treats as a secret: a
	// shorter one cannot be told from ordinary words in a provider's answer
	// ("json", "1") and is no real secret either.
	MinSecretLen = 6
	// MaxRetiredSecrets bounds the secrets a Redactor keeps after they were
	// retired (rotated tokens): the oldest are forgotten first. Secrets in use
	// are never forgotten. 1,024 Kakao access tokens, refreshed at most every
	// 6 h, are eight months of one process.
	MaxRetiredSecrets = 1024
)

// Redactor replaces known secret values (tokens, header values, URL
// credentials) in text that leaves the plugin: a verdict's Detail, a log
// line. A receiver may echo what it was sent — its error page quoting the
// request's headers or URL — and that echo must not carry a credential into
// notifyd's status, dead-letter list or logs.
//
// The zero value is ready to use; a Redactor is safe for concurrent use.
type Redactor struct {
	mu      sync.RWMutex
	pinned  map[string]int // in use: Add count minus Retire count
	retired []string       // no longer in use, oldest first
}

// Add makes secrets redacted for as long as they are in use. Values shorter
// than MinSecretLen are ignored. Adding a value twice needs two Retires.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pinned == nil {
		r.pinned = map[string]int{}
	}
	for _, s := range secrets {
		for _, v := range variants(s) {
			r.pinned[v]++
		}
	}
}

// Retire marks secrets no longer in use (a rotated token): they stay
// redacted, among the last MaxRetiredSecrets retired, since an old value may
// still be echoed back or logged.
func (r *Redactor) Retire(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range secrets {
		for _, v := range variants(s) {
			n, ok := r.pinned[v]
			if !ok {
				continue
			}
			if n > 1 {
				r.pinned[v] = n - 1
				continue
			}
			delete(r.pinned, v)
			r.retired = slices.DeleteFunc(r.retired, func(old string) bool { return old == v })
			r.retired = append(r.retired, v)
			if over := len(r.retired) - MaxRetiredSecrets; over > 0 {
				r.retired = slices.Delete(r.retired, 0, over)
			}
		}
	}
}

// Redact replaces every secret known to r, and every one of extra (secrets
// of this one call, such as a recipient URL's credentials), with Redacted.
//
// A secret is found as it is, and escaped inside a string literal by
// whatever encoder echoed it (JSON's escapes in any of their spellings —
// PHP's "\/", Python's "\u00e4" — and "\xHH"): the span that spells it is
// replaced.
//
// Text cut short and marked so with a trailing "…" (as ClassifyHTTP quotes a
// body) may end in the first part of a secret; that part, when it is at
// least minPartial bytes, is replaced too.
func (r *Redactor) Redact(text string, extra ...string) string {
	var all []string
	for _, s := range extra {
		all = append(all, variants(s)...)
	}
	if r != nil {
		r.mu.RLock()
		for s := range r.pinned {
			all = append(all, s)
		}
		all = append(all, r.retired...)
		r.mu.RUnlock()
	}
	var found []string
	for _, s := range all {
		if strings.Contains(text, s) {
			found = append(found, s)
		}
	}
	// Longest first, so a secret that contains another is replaced whole.
	slices.SortFunc(found, func(a, b string) int { return len(b) - len(a) })
	for _, s := range found {
		text = strings.ReplaceAll(text, s, Redacted)
	}
	var plain *unescaped
	if strings.IndexByte(text, '\\') >= 0 {
		// Echoed inside a string literal, a secret may come back escaped
		// by the provider's encoder, whichever it is: found in the
		// decoded text. Only Go's JSON form was known (variants), and a
		// Basic credential with a "/" came back from PHP's json_encode
		// whole but for a backslash.
		plain = unescape(text)
		text = plain.redact(text, all)
		if plain.changed {
			plain = unescape(text)
		}
	}
	if head, cut := strings.CutSuffix(text, "…"); cut {
		at := len(head)
		for _, s := range all {
			if i, ok := partialAt(head, s); ok && i < at {
				at = i
			}
			if plain == nil {
				continue
			}
			// The start of an escaped secret: plain.b ends with head's
			// decoding, then the "…".
			if i, ok := partialAt(string(plain.b[:len(plain.b)-len("…")]), s); ok && plain.from[i] < at {
				at = plain.from[i]
			}
		}
		if at < len(head) {
			text = head[:at] + Redacted + "…"
		}
	}
	return text
}

// unescaped is a text with its string-literal escapes decoded — JSON's
// (\", \\, \/, \b, \f, \n, \r, \t, \uXXXX and surrogate pairs) and \xHH,
// \' — and, for each byte of the result, the span of the text it came
// from.
type unescaped struct {
	b        []byte
	from, to []int
	changed  bool // set by redact
}

func unescape(text string) *unescaped {
	u := &unescaped{b: make([]byte, 0, len(text)), from: make([]int, 0, len(text)), to: make([]int, 0, len(text))}
	hex := func(s string) (rune, bool) {
		v, err := strconv.ParseUint(s, 16, 32)
		return rune(v), err == nil
	}
	var buf [utf8.UTFMax]byte
	for i := 0; i < len(text); {
		out, n := buf[:1], 0 // what text[i:i+n] decodes to; n 0: a plain byte
		switch c := text[min(i+1, len(text)-1)]; {
		case text[i] != '\\' || i+1 == len(text):
		case c == '"' || c == '\\' || c == '/' || c == '\'':
			out[0], n = c, 2
		case strings.IndexByte("bfnrt", c) >= 0:
			out[0], n = "\b\f\n\r\t"[strings.IndexByte("bfnrt", c)], 2
		case c == 'x' && i+4 <= len(text):
			if v, ok := hex(text[i+2 : i+4]); ok {
				out[0], n = byte(v), 4
			}
		case c == 'u' && i+6 <= len(text):
			r, ok := hex(text[i+2 : i+6])
			if !ok {
				break
			}
			n = 6
			if utf16.IsSurrogate(r) && i+12 <= len(text) && text[i+6:i+8] == `\u` {
				if lo, ok := hex(text[i+8 : i+12]); ok && utf16.DecodeRune(r, lo) != utf8.RuneError {
					r, n = utf16.DecodeRune(r, lo), 12
				}
			}
			out = utf8.AppendRune(buf[:0], r)
		}
		if n == 0 {
			out[0], n = text[i], 1
		}
		for _, c := range out {
			u.b, u.from, u.to = append(u.b, c), append(u.from, i), append(u.to, i+n)
		}
		i += n
	}
	return u
}

// redact replaces in text (the text u decodes) every span whose decoding is
// one of secrets.
func (u *unescaped) redact(text string, secrets []string) string {
	type span struct{ from, to int }
	var spans []span
	plain := string(u.b)
	for _, s := range secrets {
		for at := 0; s != ""; {
			i := strings.Index(plain[at:], s)
			if i < 0 {
				break
			}
			i += at
			spans = append(spans, span{u.from[i], u.to[i+len(s)-1]})
			at = i + len(s)
		}
	}
	if len(spans) == 0 {
		return text
	}
	slices.SortFunc(spans, func(a, b span) int { return a.from - b.from })
	var sb strings.Builder
	last := 0
	for _, sp := range spans {
		switch {
		case sp.to <= last: // inside the one replaced last
			continue
		case sp.from < last: // overlapping it: the two become one
			last = sp.to
			continue
		}
		sb.WriteString(text[last:sp.from])
		sb.WriteString(Redacted)
		last = sp.to
	}
	sb.WriteString(text[last:])
	u.changed = true
	return sb.String()
}

// minPartial is the shortest start of a secret that Redact removes from the
// end of cut text: fewer bytes give away next to nothing, and would match
// ordinary words.
const minPartial = 4

// partialAt finds where text ends with the start of secret (at least
// minPartial bytes of it, not all of it).
func partialAt(text, secret string) (int, bool) {
	from := max(0, len(text)-(len(secret)-1))
	for i := from; i+minPartial <= len(text); i++ {
		j := strings.Index(text[i:], secret[:minPartial])
		if j < 0 {
			return 0, false
		}
		i += j
		if strings.HasPrefix(secret, text[i:]) {
			return i, true
		}
	}
	return 0, false
}

// variants are the forms in which a secret may come back: as sent, and
// escaped inside a JSON string (a receiver echoing the request as JSON).
func variants(s string) []string {
	if len(s) < MinSecretLen {
		return nil
	}
	out := []string{s}
	if b, err := json.Marshal(s); err == nil {
		if esc := string(b[1 : len(b)-1]); esc != s {
			out = append(out, esc)
		}
	}
	return out
}

// URLSecrets are the secrets a URL may carry: the user name and password of
// its user info (and the Basic credential an HTTP client makes of them), and
// the value of every query parameter, each both decoded and as written. For
// Redactor.Add.
func URLSecrets(u *url.URL) []string {
	if u == nil {
		return nil
	}
	var out []string
	if u.User != nil {
		out = append(out, u.User.Username())
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw)
		}
		user, pw, _ := strings.Cut(u.User.String(), ":") // as written: escaped
		out = append(out, user, pw)
		// HTTP clients send user info as Basic authorization.
		pw, _ = u.User.Password()
		out = append(out, base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pw)))
	}
	for _, pair := range strings.Split(u.RawQuery, "&") {
		raw := pair // a bare "?token" is a value too
		if _, v, ok := strings.Cut(pair, "="); ok {
			raw = v
		}
		out = append(out, raw)
		if dec, err := url.QueryUnescape(raw); err == nil {
			out = append(out, dec)
		}
	}
	return out
}

// HeaderSecrets are the secrets a configured header value may carry: the
// value itself and, for an "<scheme> <credential>" value such as
// "Bearer abc…", the credential alone (and for Basic, the password it
// encodes). For Redactor.Add.
func HeaderSecrets(value string) []string {
	out := []string{value}
	scheme, cred, ok := strings.Cut(strings.TrimSpace(value), " ")
	if !ok {
		return out
	}
	cred = strings.TrimSpace(cred)
	out = append(out, cred)
	if strings.EqualFold(scheme, "Basic") {
		if dec, err := base64.StdEncoding.DecodeString(cred); err == nil {
			userPass := string(dec)
			out = append(out, userPass)
			if _, pw, ok := strings.Cut(userPass, ":"); ok {
				out = append(out, pw)
			}
		}
	}
	return out
}

// RedactURL prints a URL for an error message or a log line without its
// credentials: the password of its user info (and a user name given without
// one, which is then a token), every query value and an opaque part become
// "xxxxx"; the fragment is dropped. Something that does not parse is not echoed at all.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return redactedURL(u)
}

// urlInText is a URL as it appears in an error message: up to a quote,
// backquote, space or angle bracket.
var urlInText = regexp.MustCompile("[A-Za-z][A-Za-z0-9+.-]*://[^\\s\"'`<>]+")

// RedactURLs applies RedactURL to every URL in text that carries user info
// or a query, such as a parser's error quoting its input ("parse
// \"redis://u:pw@h/%zz\": invalid URL escape"). For error messages that
// may quote a configured URL.
func RedactURLs(text string) string {
	return urlInText.ReplaceAllStringFunc(text, func(u string) string {
		if !strings.ContainsAny(u, "@?") {
			return u
		}
		return RedactURL(u)
	})
}

func redactedURL(u *url.URL) string {
	c := *u
	if c.User != nil {
		if _, ok := c.User.Password(); ok {
			c.User = url.UserPassword(c.User.Username(), "xxxxx")
		} else {
			c.User = url.User("xxxxx")
		}
	}
	if c.RawQuery != "" {
		pairs := strings.Split(c.RawQuery, "&")
		for i, pair := range pairs {
			if key, _, ok := strings.Cut(pair, "="); ok {
				pairs[i] = key + "=xxxxx"
			} else if pair != "" {
				pairs[i] = "xxxxx"
			}
		}
		c.RawQuery = strings.Join(pairs, "&")
	}
	if c.Opaque != "" {
		c.Opaque = "xxxxx"
	}
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}
