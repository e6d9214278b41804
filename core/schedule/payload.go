package schedule

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"
)

// payloadTemplate is a payload compiled once per job: the JSON encoding of the
// payload cut into literal byte runs and the templated string leaves between
// them, so rendering a recipient is appending bytes and executing only the
// leaves that contain "{{" (a million recipients make this the hot path).
type payloadTemplate struct {
	segments []segment
	dynamic  bool // some leaf is a template; otherwise every recipient gets the same bytes
}

type segment struct {
	literal []byte
	tmpl    *template.Template // nil for a literal
	path    string             // where the leaf sits, for errors: text, buttons[0].label
}

// templateVars is what a payload template sees.
type templateVars struct {
	Recipient string
	Data      any
	FireTime  time.Time
	Schedule  string
}

func (v templateVars) asMap() map[string]any {
	return map[string]any{"recipient": v.Recipient, "data": v.Data, "fire_time": v.FireTime, "schedule": v.Schedule}
}

// compilePayload parses every templated string leaf of payload. A parse error
// names the leaf's path.
func compilePayload(payload map[string]any) (*payloadTemplate, error) {
	if len(payload) == 0 {
		return nil, fmt.Errorf("payload is empty")
	}
	nonce := make([]byte, 12)
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("compile payload: %w", err)
	}
	marker := "notifyd-tmpl-" + hex.EncodeToString(nonce) + "-"
	var leaves []segment
	var walk func(v any, path string) (any, error)
	walk = func(v any, path string) (any, error) {
		switch v := v.(type) {
		case string:
			if !strings.Contains(v, "{{") {
				return v, nil
			}
			t, err := template.New(path).Option("missingkey=error").Parse(v)
			if err != nil {
				return nil, fmt.Errorf("payload %s: %w", path, err)
			}
			leaves = append(leaves, segment{tmpl: t, path: path})
			return marker + strconv.Itoa(len(leaves)-1), nil
		case map[string]any:
			out := make(map[string]any, len(v))
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys) // leaves numbered in a stable order
			for _, k := range keys {
				p := k
				if path != "" {
					p = path + "." + k
				}
				w, err := walk(v[k], p)
				if err != nil {
					return nil, err
				}
				out[k] = w
			}
			return out, nil
		case []any:
			out := make([]any, len(v))
			for i, e := range v {
				w, err := walk(e, fmt.Sprintf("%s[%d]", path, i))
				if err != nil {
					return nil, err
				}
				out[i] = w
			}
			return out, nil
		default:
			return v, nil
		}
	}
	marked, err := walk(payload, "")
	if err != nil {
		return nil, err
	}
	encoded, err := json.Marshal(marked)
	if err != nil {
		return nil, fmt.Errorf("payload is not JSON-encodable: %w", err)
	}
	// Cut the encoding at each quoted marker; the random nonce cannot occur
	// in the operator's own text.
	p := &payloadTemplate{dynamic: len(leaves) > 0}
	quoted := []byte(`"` + marker)
	for {
		i := bytes.Index(encoded, quoted)
		if i < 0 {
			p.segments = append(p.segments, segment{literal: encoded})
			break
		}
		rest := encoded[i+len(quoted):]
		end := bytes.IndexByte(rest, '"')
		if end < 0 {
			return nil, fmt.Errorf("compile payload: unterminated marker")
		}
		n, err := strconv.Atoi(string(rest[:end]))
		if err != nil || n >= len(leaves) {
			return nil, fmt.Errorf("compile payload: marker %q malformed", rest[:end])
		}
		p.segments = append(p.segments, segment{literal: encoded[:i]}, leaves[n])
		encoded = rest[end+1:]
	}
	return p, nil
}

// render appends the payload's JSON for one recipient to buf.
func (p *payloadTemplate) render(buf []byte, vars templateVars) ([]byte, error) {
	var (
		m   map[string]any
		out strings.Builder
	)
	for _, s := range p.segments {
		if s.tmpl == nil {
			buf = append(buf, s.literal...)
			continue
		}
		if m == nil {
			m = vars.asMap()
		}
		out.Reset()
		if err := s.tmpl.Execute(&out, m); err != nil {
			return buf, fmt.Errorf("render payload %s for %q: %w", s.path, vars.Recipient, err)
		}
		buf = appendJSONString(buf, out.String())
	}
	return buf, nil
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced.
func appendJSONString(buf []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// decodeData turns a recipient's JSON data into what templates see. Numbers
// stay json.Number so 1000000 renders as written, not 1e+06.
func decodeData(raw []byte) (any, error) {
	if len(raw) == 0 {
		return map[string]any{}, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode recipient data: %w", err)
	}
	return v, nil
}
