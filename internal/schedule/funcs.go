package schedule

import (
	"fmt"
	"iter"
	"reflect"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
)

// The memory bound of a render: every value a template builds (a function's
// string, a method's result) is charged, before it is built when its size
// can be known and always after, against one allowance per recipient. A
// template of a few hundred bytes that doubles a string per variable reached
// gigabytes and killed the daemon again at every takeover (issue 26).
const (
	// RenderMemoryFactor times the payload bound is what one recipient's
	// render may build: 1 MiB at the default http.max_payload_bytes, 4 MiB
	// at its largest. The output itself is held to the payload bound.
	RenderMemoryFactor = 4
)

// templateFunc is a function payload templates may call. wrap is nil for a
// text/template builtin kept as it is, because it builds nothing in
// proportion to its input: it returns one of its arguments or a part of one
// (slice shares the bytes), a bool or an int. Otherwise wrap is the function
// templates get instead, charging the budget for what it builds.
type templateFunc struct {
	name string
	wrap func(b *renderBudget) any
}

// templateFuncList is every name a payload template may call. compile
// refuses any other (boundCalls), so a builtin that a later Go adds to
// text/template is refused until it is listed here with its bound, and so is
// "call": no value a template sees is a function.
var templateFuncList = []templateFunc{
	{name: "and"}, {name: "or"}, {name: "not"}, // builtins: and/or short-circuit only as themselves
	{name: "eq"}, {name: "ne"}, {name: "lt"}, {name: "le"}, {name: "gt"}, {name: "ge"},
	{name: "index"}, {name: "slice"}, {name: "len"},
	{name: "print", wrap: func(b *renderBudget) any {
		return func(args ...any) (string, error) { return b.print("print", args, false) }
	}},
	{name: "println", wrap: func(b *renderBudget) any {
		return func(args ...any) (string, error) { return b.print("println", args, true) }
	}},
	{name: "printf", wrap: func(b *renderBudget) any { return b.printf }},
	{name: "html", wrap: func(b *renderBudget) any {
		return func(args ...any) (string, error) { return b.escape("html", 5, args, template.HTMLEscaper) }
	}},
	{name: "js", wrap: func(b *renderBudget) any {
		return func(args ...any) (string, error) { return b.escape("js", 6, args, template.JSEscaper) }
	}},
	{name: "urlquery", wrap: func(b *renderBudget) any {
		return func(args ...any) (string, error) { return b.escape("urlquery", 3, args, template.URLQueryEscaper) }
	}},
}

// funcBuilt is the step boundCalls puts after every method call that takes
// arguments (.fire_time.Format $layout): what the method built is charged.
const funcBuilt = "notifydBuilt"

// boundErr is a memory bound's error: it names the bound and wraps errRenderBound.
func (b *renderBudget) boundErr(fn string, n int) error {
	return fmt.Errorf("%s would build %d bytes, more than the %d left of the %d bytes one render may build (the memory bound: %d× http.max_payload_bytes): %w",
		fn, n, max(b.builtLimit-b.built, 0), b.builtLimit, RenderMemoryFactor, errRenderBound)
}

// reserve refuses to build n bytes past the budget; build charges them.
// Both check the clock, so a template calling functions without looping is
// held to maxRenderTime too.
func (b *renderBudget) reserve(fn string, n int) error {
	if time.Since(b.started) > maxRenderTime {
		return fmt.Errorf("rendering took more than %s: %w", maxRenderTime, errRenderBound)
	}
	if n < 0 || n > b.builtLimit-b.built {
		return b.boundErr(fn, n)
	}
	return nil
}

func (b *renderBudget) charge(fn string, n int) error {
	if err := b.reserve(fn, n); err != nil {
		return err
	}
	b.built += n
	return nil
}

// print is fmt.Sprint (ln: Sprintln) once its arguments' size fits: strings
// are joined into one exact allocation, anything else through fmt.
func (b *renderBudget) print(fn string, args []any, ln bool) (string, error) {
	size, allStrings := len(args)+1, true // the spaces and newline Sprintln adds
	left := b.builtLimit - b.built
	for _, a := range args {
		if s, ok := a.(string); ok {
			size += len(s)
		} else {
			allStrings = false
			size += valueBound(reflect.ValueOf(a), 1, 0, left-size, 0)
		}
		if size > left {
			return "", b.boundErr(fn, size)
		}
	}
	if err := b.reserve(fn, size); err != nil {
		return "", err
	}
	var s string
	switch {
	case allStrings:
		var sb strings.Builder
		sb.Grow(size)
		for i, a := range args {
			if ln && i > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(a.(string))
		}
		if ln {
			sb.WriteByte('\n')
		}
		s = sb.String()
	case ln:
		s = fmt.Sprintln(args...)
	default:
		s = fmt.Sprint(args...)
	}
	return s, b.charge(fn, len(s))
}

// printf is fmt.Sprintf once the worst case fits: every verb padded to the
// largest width or precision in the format, every argument byte escaped 5×
// ("% #x" writes "0x41 " for "A"), every element of a list or map padded
// (fmt pads each), a reused argument ("%[1]s") counted for every verb.
func (b *renderBudget) printf(format string, args ...any) (string, error) {
	if strings.Contains(format, "*") {
		return "", fmt.Errorf("printf: a * width or precision is not allowed in payload templates: %w", errRenderBound)
	}
	pad, n := 0, 0
	for _, r := range format {
		if r >= '0' && r <= '9' {
			n = n*10 + int(r-'0')
			if n > maxFormatWidth {
				return "", fmt.Errorf("printf: a width or precision over %d: %w", maxFormatWidth, errRenderBound)
			}
			pad = max(pad, n)
			continue
		}
		n = 0
	}
	verbs := strings.Count(format, "%")
	// Per verb: its padding, a float's 309 integer digits, and fmt's own
	// "%!v(MISSING)" or "%!(BADINDEX)".
	size := len(format) + verbs*(pad+330+16)
	left := b.builtLimit - b.built
	reused := strings.Contains(format, "[")
	largest := 0
	for _, a := range args {
		if size > left {
			break
		}
		n := valueBound(reflect.ValueOf(a), 5, pad, left-size, 0) + 64 // 64: "%!(EXTRA type=…)"
		largest = max(largest, n)
		if !reused {
			size += n
		}
	}
	if reused {
		size += (verbs + len(args)) * largest
	}
	if err := b.reserve("printf", size); err != nil {
		return "", err
	}
	s := fmt.Sprintf(format, args...)
	return s, b.charge("printf", len(s))
}

// escape is text/template's html, js or urlquery once the worst case fits:
// the arguments printed, then every byte escaped factor times over.
func (b *renderBudget) escape(fn string, factor int, args []any, escaper func(...any) string) (string, error) {
	size := 0
	if s, ok := onlyString(args); ok {
		size = factor * len(s)
	} else {
		left := b.builtLimit - b.built
		for _, a := range args {
			size += valueBound(reflect.ValueOf(a), 1, 0, left-size, 0) + 1
			if size > left {
				return "", b.boundErr(fn, size)
			}
		}
		size += factor * size // the printed arguments, then their escaping
	}
	if err := b.reserve(fn, size); err != nil {
		return "", err
	}
	s := escaper(args...)
	return s, b.charge(fn, len(s))
}

func onlyString(args []any) (string, bool) {
	if len(args) != 1 {
		return "", false
	}
	s, ok := args[0].(string)
	return s, ok
}

// builtValue charges a method's result and passes it on. A method template
// code reaches builds at most a small multiple of its arguments (time.Time's
// Format about twice its layout), so charging after is enough; a value of
// fixed size (a time, a number) is charged as 64 bytes.
func (b *renderBudget) builtValue(v any) (any, error) {
	n := 64
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.String:
		n = rv.Len()
	case reflect.Slice, reflect.Map:
		n = valueBound(rv, 1, 0, b.builtLimit-b.built, 0)
	}
	return v, b.charge("a method call", n)
}

// valueBound is the most bytes fmt writes for v under any verb: each string
// factor times its length, each other leaf a constant, each leaf padded by
// pad, with fmt's brackets and separators. It stops counting past limit.
func valueBound(v reflect.Value, factor, pad, limit, depth int) int {
	leaf := 24 // a number, a bool, <nil> under %v
	if factor > 1 {
		leaf = 64 // any verb: a bad verb's "%!d(json.Number=…)"
	}
	if depth > 100 {
		return limit + 1
	}
	switch v.Kind() {
	case reflect.Invalid:
		return leaf + pad
	case reflect.String:
		return factor*v.Len() + leaf + pad
	case reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return 2*330 + leaf + pad // a float's integer digits; twice for a complex
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return leaf + pad
		}
		return valueBound(v.Elem(), factor, pad, limit, depth+1)
	case reflect.Slice, reflect.Array:
		n := leaf
		for i := range v.Len() {
			if n += valueBound(v.Index(i), factor, pad, limit-n, depth+1) + 2; n > limit {
				return n
			}
		}
		return n
	case reflect.Map:
		n := leaf
		for it := v.MapRange(); it.Next(); {
			n += valueBound(it.Key(), factor, pad, limit-n, depth+1) + valueBound(it.Value(), factor, pad, limit-n, depth+1) + 2
			if n > limit {
				return n
			}
		}
		return n
	case reflect.Struct:
		// time.Time and the like: their String, or their fields.
		return 512 + pad
	default:
		return leaf + pad
	}
}

// templateFuncs are the functions every payload template parses with: the
// range wrappers (bound to a budget per template instance), the wrappers of
// templateFuncList and the method charge.
func templateFuncs(b *renderBudget) template.FuncMap {
	m := template.FuncMap{
		funcRange1: func(v any) (iter.Seq[any], error) { return rangeElems(b, v) },
		funcRange2: func(v any) (iter.Seq2[any, any], error) { return rangePairs(b, v) },
		// funcStep passes a {{template}} call's argument through, counting
		// the call against the budget.
		funcStep: func(args ...any) (any, error) {
			if err := b.iterate(); err != nil {
				return nil, err
			}
			if len(args) == 0 {
				return nil, nil
			}
			return args[len(args)-1], nil
		},
		funcBuilt: b.builtValue,
	}
	for _, f := range templateFuncList {
		if f.wrap != nil {
			m[f.name] = f.wrap(b)
		}
	}
	return m
}

// boundCalls checks every tree of t before it runs: each function it names
// must be in templateFuncList, and each node a kind this file knows (a node
// a later Go adds is refused until it is looked at). After every method call
// that takes arguments it puts funcBuilt, so what the method built is
// charged.
func boundCalls(t *template.Template) error {
	for _, tt := range t.Templates() {
		if tt.Tree == nil || tt.Root == nil {
			continue
		}
		if err := boundCallsIn(tt.Root); err != nil {
			return fmt.Errorf("template %q: %w", tt.Name(), err)
		}
	}
	return nil
}

func boundCallsIn(n parse.Node) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := boundCallsIn(c); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		return boundCallsIn(n.Pipe)
	case *parse.IfNode:
		return boundBranch(&n.BranchNode)
	case *parse.RangeNode:
		return boundBranch(&n.BranchNode)
	case *parse.WithNode:
		return boundBranch(&n.BranchNode)
	case *parse.TemplateNode:
		return boundCallsIn(n.Pipe)
	case *parse.PipeNode:
		if n == nil {
			return nil
		}
		cmds := make([]*parse.CommandNode, 0, len(n.Cmds))
		for i, c := range n.Cmds {
			if err := boundCallsIn(c); err != nil {
				return err
			}
			cmds = append(cmds, c)
			// A field, chain or variable with fields may be a method; given
			// arguments (or the pipeline's value) it may build a value.
			switch a := c.Args[0].(type) {
			case *parse.FieldNode, *parse.ChainNode:
			case *parse.VariableNode:
				if len(a.Ident) < 2 {
					continue
				}
			default:
				continue
			}
			if len(c.Args) > 1 || i > 0 {
				cmds = append(cmds, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: c.Pos,
					Args: []parse.Node{parse.NewIdentifier(funcBuilt).SetTree(nil).SetPos(c.Pos)}})
			}
		}
		n.Cmds = cmds
	case *parse.CommandNode:
		for _, a := range n.Args {
			if err := boundCallsIn(a); err != nil {
				return err
			}
		}
	case *parse.ChainNode:
		return boundCallsIn(n.Node)
	case *parse.IdentifierNode:
		if !slices.ContainsFunc(templateFuncList, func(f templateFunc) bool { return f.name == n.Ident }) {
			return fmt.Errorf("function %q is not allowed in payload templates (allowed: %s)", n.Ident, allowedFuncs())
		}
	case *parse.TextNode, *parse.CommentNode, *parse.BreakNode, *parse.ContinueNode,
		*parse.FieldNode, *parse.VariableNode, *parse.DotNode, *parse.NilNode,
		*parse.BoolNode, *parse.NumberNode, *parse.StringNode:
	default:
		return fmt.Errorf("%s is not allowed in payload templates", n)
	}
	return nil
}

func boundBranch(n *parse.BranchNode) error {
	if err := boundCallsIn(n.Pipe); err != nil {
		return err
	}
	if err := boundCallsIn(n.List); err != nil {
		return err
	}
	return boundCallsIn(n.ElseList)
}

func allowedFuncs() string {
	names := make([]string, len(templateFuncList))
	for i, f := range templateFuncList {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}
