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
	"text/template/parse"
	"time"

	"github.com/notifyd/notifyd/sdk/wire"
)

// payloadTemplate is a payload compiled once per job: the JSON encoding of the
// payload cut into literal byte runs and the templated string leaves between
// them, so rendering a recipient is appending bytes and executing only the
// leaves that contain "{{" (a million recipients make this the hot path).
type payloadTemplate struct {
	segments []segment
	budget   *renderBudget // the bounds of one recipient's render (render.go)
	dynamic  bool          // some leaf is a template; otherwise every recipient gets the same bytes
	usesData bool          // some leaf may read .data: decode each recipient's data
}

type segment struct {
	literal []byte
	tmpl    *template.Template // nil for a literal
	fast    []fastPart         // the template as text and field lookups, when it is only that
	path    string             // where the leaf sits, for errors: text, buttons[0].label
}

// fastPart is a piece of a template made only of text and {{.a.b}} actions.
type fastPart struct {
	text  string
	field []string // nil for text
}

// Template variable names: what a payload template sees.
const (
	varRecipient = "recipient"
	varData      = "data"
	varFireTime  = "fire_time"
	varSchedule  = "schedule"
)

// newVars is the map templates execute over; the caller sets recipient and
// data per recipient and reuses it (templates do not keep it).
func newVars(fireTime time.Time, schedule string) map[string]any {
	return map[string]any{varRecipient: "", varData: nil, varFireTime: fireTime, varSchedule: schedule}
}

// compilePayload parses every templated string leaf of payload. A parse error
// names the leaf's path.
func compilePayload(payload map[string]any) (*payloadTemplate, error) {
	if len(payload) == 0 {
		return nil, fmt.Errorf("payload is empty")
	}
	if raw, err := json.Marshal(payload); err == nil {
		// Held to its bounds as Postgres prints it back too, as every other
		// jsonb is: a campaign's, a config schedule's and a stored job's
		// (numbers stay json.Number, as written) alike.
		n, problem := wire.JSONReadBack(raw)
		switch {
		case len(raw) > MaxTemplateBytes:
			return nil, fmt.Errorf("payload template is %d bytes, at most %d", len(raw), MaxTemplateBytes)
		case problem != "":
			return nil, fmt.Errorf("payload %s", problem)
		case n > MaxTemplateReadBytes:
			return nil, fmt.Errorf("payload template reads back as %d bytes, at most %d (jsonb writes numbers in decimal and a space after each ':' and ',')",
				n, MaxTemplateReadBytes)
		}
	}
	budget := &renderBudget{}
	funcs := templateFuncs(budget)
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
			t, err := template.New(path).Option("missingkey=error").Funcs(funcs).Parse(v)
			if err != nil {
				return nil, fmt.Errorf("payload %s: %w", path, err)
			}
			// Calls first: they refuse the names the range bounds add.
			if err := boundCalls(t); err != nil {
				return nil, fmt.Errorf("payload %s: %w", path, err)
			}
			boundRanges(t)
			leaves = append(leaves, segment{tmpl: t, path: path, fast: fastParts(t)})
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
	p := &payloadTemplate{dynamic: len(leaves) > 0, budget: budget}
	for _, l := range leaves {
		if mentionsData(l.tmpl.Root) {
			p.usesData = true
		}
	}
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

// render appends the payload's JSON for one recipient to buf. The payload
// may take at most limit bytes and MaxRangeIterations range iterations;
// past either, or on any template error, render fails for this recipient
// alone (the error wraps errRenderBound for a bound).
func (p *payloadTemplate) render(buf []byte, vars map[string]any, limit int) ([]byte, error) {
	start := len(buf)
	b := p.budget
	b.reset(limit)
	for i := range p.segments {
		s := &p.segments[i]
		if s.tmpl == nil {
			buf = append(buf, s.literal...)
			continue
		}
		left := limit - (len(buf) - start)
		b.out.Reset()
		b.outLeft = left
		fast, err := s.renderFast(b, vars)
		if err == nil && !fast {
			b.out.Reset()
			b.outLeft = left
			if err = s.tmpl.Execute(b, vars); err == nil {
				err = b.err // a bound a range stopped at
			}
		}
		if err != nil {
			return buf[:start], fmt.Errorf("render payload %s for %q: %w", s.path, vars[varRecipient], err)
		}
		if strings.IndexByte(b.out.String(), 0) >= 0 { // the fast path writes data as it is
			return buf[:start], fmt.Errorf("render payload %s for %q: the rendered payload contains a NUL character, which notifyd cannot store: %w",
				s.path, vars[varRecipient], errRenderBound)
		}
		buf = wire.AppendJSONString(buf, b.out.String())
		if len(buf)-start > limit {
			return buf[:start], fmt.Errorf("render payload %s for %q: the payload passes %d bytes, the payload bound (http.max_payload_bytes): %w",
				s.path, vars[varRecipient], limit, errRenderBound)
		}
	}
	if len(buf)-start > limit {
		return buf[:start], fmt.Errorf("rendered payload is %d bytes, over the payload bound of %d (http.max_payload_bytes): %w",
			len(buf)-start, limit, errRenderBound)
	}
	return buf, nil
}

// fastParts returns the template as text and field lookups if that is all it
// is ("Quiz for {{.recipient}}: {{.data.title}}"), else nil.
func fastParts(t *template.Template) []fastPart {
	var parts []fastPart
	for _, n := range t.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			parts = append(parts, fastPart{text: string(n.Text)})
		case *parse.ActionNode:
			p := n.Pipe
			if len(p.Decl) > 0 || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
				return nil
			}
			f, ok := p.Cmds[0].Args[0].(*parse.FieldNode)
			if !ok {
				return nil
			}
			parts = append(parts, fastPart{field: f.Ident})
		default:
			return nil
		}
	}
	return parts
}

// renderFast evaluates a text-and-fields template by map lookups into b's
// output, held to its bound as it writes (an error past it). It handles
// only the plain case — every step a map, every value a string or a JSON
// number — and reports false for anything else (a missing key, a method, a
// nil), which text/template then executes with its own rules and errors, so
// both paths print the same.
func (s *segment) renderFast(b *renderBudget, vars map[string]any) (bool, error) {
	if s.fast == nil {
		return false, nil
	}
	for _, p := range s.fast {
		out := p.text
		if p.field != nil {
			var v any = vars
			for _, name := range p.field {
				m, ok := v.(map[string]any)
				if !ok {
					return false, nil
				}
				if v, ok = m[name]; !ok {
					return false, nil
				}
			}
			switch v := v.(type) {
			case string:
				out = v
			case json.Number:
				out = string(v)
			default:
				return false, nil
			}
		}
		if err := b.writeString(out); err != nil {
			return false, err
		}
	}
	return true, nil
}

// mentionsData reports whether a template may read .data. It is
// conservative: a bare dot, $, a sub-template or a chain may reach anything.
func mentionsData(n parse.Node) bool {
	switch n := n.(type) {
	case nil:
		return false
	case *parse.FieldNode:
		return len(n.Ident) > 0 && n.Ident[0] == varData
	case *parse.VariableNode:
		return len(n.Ident) == 1 || n.Ident[1] == varData || n.Ident[0] != "$"
	case *parse.DotNode, *parse.ChainNode, *parse.TemplateNode:
		return true
	case *parse.ListNode:
		if n == nil {
			return false
		}
		for _, c := range n.Nodes {
			if mentionsData(c) {
				return true
			}
		}
	case *parse.ActionNode:
		return mentionsData(n.Pipe)
	case *parse.PipeNode:
		if n == nil {
			return false
		}
		for _, c := range n.Cmds {
			if mentionsData(c) {
				return true
			}
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			if mentionsData(a) {
				return true
			}
		}
	case *parse.IfNode:
		return mentionsData(n.Pipe) || mentionsData(n.List) || mentionsData(n.ElseList)
	case *parse.RangeNode:
		return mentionsData(n.Pipe) || mentionsData(n.List) || mentionsData(n.ElseList)
	case *parse.WithNode:
		return mentionsData(n.Pipe) || mentionsData(n.List) || mentionsData(n.ElseList)
	}
	return false
}

// dataDecoder turns recipients' JSON data into what templates see. One
// decoder reads a whole chunk's data as a stream (one allocation of decoder
// state a chunk, not one a recipient); numbers stay json.Number so 1000000
// renders as written, not 1e+06.
type dataDecoder struct {
	dec *json.Decoder
}

// newDataDecoder reads the data of rows, in order; a row without data reads
// as an empty object.
func newDataDecoder(rows [][]byte) *dataDecoder {
	n := 0
	for _, r := range rows {
		n += len(r) + 1
	}
	buf := make([]byte, 0, n+2*len(rows))
	for _, r := range rows {
		if len(r) == 0 {
			r = []byte("{}")
		}
		buf = append(append(buf, r...), '\n')
	}
	d := json.NewDecoder(bytes.NewReader(buf))
	d.UseNumber()
	return &dataDecoder{dec: d}
}

// next decodes the next row's data.
func (d *dataDecoder) next() (any, error) {
	var v any
	if err := d.dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode recipient data: %w", err)
	}
	return v, nil
}

// decodeData decodes one recipient's data.
func decodeData(raw []byte) (any, error) {
	return newDataDecoder([][]byte{raw}).next()
}
