package schedule

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"sort"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
	"unicode/utf8"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Bounds of payload templates. A template runs once per recipient over data
// the application controls, so one hostile or careless template (three
// nested ranges over a 200-element list render 8 MB; over 2,000 elements the
// renderer ran out of memory, and every instance that took the job over died
// again) must end that recipient's notification FAILED, not the process.
const (
	// MaxTemplateBytes bounds one job's payload template, as JSON.
	MaxTemplateBytes = 64 << 10
	// MaxTemplateReadBytes bounds it as it reads back from jobs.payload:
	// twice the write bound, as for attributes (MaxDataReadBytes), since
	// jsonb writes a space after every ':' and ','. Without it 13,000 × 1e99
	// (64 KiB as written) read back as 1.3 MB, and a page of jobs as 1.3 GB.
	MaxTemplateReadBytes = 2 * MaxTemplateBytes
	// MaxRangeIterations bounds the steps of one recipient's render across
	// every leaf: range iterations and {{template}} calls, the only two ways
	// a template can loop (recursion that halves a list runs 2^n calls at a
	// depth of n, under text/template's own depth limit), and the keys of
	// every map a range sorts before its first iteration (a range that
	// breaks at once still pays for the sort). With the output bound (the
	// payload bound) it bounds a render's work; maxRenderTime bounds its
	// time as well.
	MaxRangeIterations = 100_000
	// maxRenderTime bounds one recipient's render, checked on every step,
	// on each map a range sorts and before each function builds.
	maxRenderTime = time.Second
	// maxFormatWidth bounds a width or precision in printf: fmt pads in
	// memory before anything reaches the output bound.
	maxFormatWidth = 1000
)

// errRenderBound is wrapped by every render error caused by a bound.
var errRenderBound = errors.New("over a render bound")

// renderBudget is one recipient's render allowance: output bytes and range
// iterations, and the bytes its functions build. The template funcs reach it
// through the renderer that owns it.
type renderBudget struct {
	out        strings.Builder
	outLeft    int
	limit      int
	built      int // bytes the template's functions and methods built (funcs.go)
	builtLimit int // RenderMemoryFactor × limit
	iterations int
	started    time.Time
	err        error // the first bound passed (a range stops quietly; render reports it)
}

func (b *renderBudget) reset(outBytes int) {
	b.out.Reset()
	b.outLeft, b.limit = outBytes, outBytes
	b.built, b.builtLimit = 0, RenderMemoryFactor*outBytes
	b.iterations, b.err = 0, nil
	b.started = time.Now()
}

// Write is the output of text/template: it refuses to grow past the bound.
func (b *renderBudget) Write(p []byte) (int, error) {
	if len(p) > b.outLeft {
		return 0, b.outErr()
	}
	if bytes.IndexByte(p, 0) >= 0 {
		return 0, fmt.Errorf("the rendered payload contains a NUL character, which notifyd cannot store: %w", errRenderBound)
	}
	b.outLeft -= len(p)
	return b.out.Write(p)
}

// writeString is Write for the fast path (payload.go), which writes data
// values as they are: held to the same bound as it writes, so 5,900 copies
// of a 60 KB attribute are refused at the fifth, not built first.
func (b *renderBudget) writeString(s string) error {
	if len(s) > b.outLeft {
		return b.outErr()
	}
	b.outLeft -= len(s)
	b.out.WriteString(s)
	return nil
}

func (b *renderBudget) outErr() error {
	return fmt.Errorf("the rendered payload passes the payload bound of %d bytes (http.max_payload_bytes): %w", b.limit, errRenderBound)
}

func (b *renderBudget) iterate() error {
	if b.err != nil {
		return b.err
	}
	b.err = b.step()
	return b.err
}

// steps counts n steps at once: the keys of a map a range sorts before
// its first iteration, which cost their sort whether or not the range goes
// on past the first (a {{break}}). The time is checked on each call.
func (b *renderBudget) steps(n int) error {
	if b.err != nil {
		return b.err
	}
	b.iterations += n
	switch {
	case b.iterations > MaxRangeIterations:
		b.err = fmt.Errorf("more than %d range iterations or template calls (a range over a map counts its keys): %w", MaxRangeIterations, errRenderBound)
	case time.Since(b.started) > maxRenderTime:
		b.err = fmt.Errorf("rendering took more than %s: %w", maxRenderTime, errRenderBound)
	}
	return b.err
}

func (b *renderBudget) step() error {
	b.iterations++
	if b.iterations > MaxRangeIterations {
		return fmt.Errorf("more than %d range iterations or template calls: %w", MaxRangeIterations, errRenderBound)
	}
	// Every step: one step's body may cost tens of milliseconds without
	// calling a function that reads the clock (an eq over 21,000 arguments
	// of 60 KiB each), so a clock read every 256 steps let a render run
	// about 10 s past the bound. Read every step, the render stops one
	// step's body past it, and a body is bounded by the template's size.
	if time.Since(b.started) > maxRenderTime {
		return fmt.Errorf("rendering took more than %s: %w", maxRenderTime, errRenderBound)
	}
	return nil
}

// funcNames of the budget wrappers compile inserts into every range.
const (
	funcRange1 = "notifydRange1"
	funcRange2 = "notifydRange2"
	funcStep   = "notifydStep"
)

// rangeElems and rangePairs iterate as text/template's own range would
// (slices and arrays in order, maps by sorted key, integers from 0), counting
// each iteration against the budget; past it the range stops and the render
// fails.
func rangeElems(b *renderBudget, v any) (iter.Seq[any], error) {
	pairs, err := rangePairs(b, v)
	if err != nil {
		return nil, err
	}
	return func(yield func(any) bool) {
		for _, e := range pairs {
			if !yield(e) {
				return
			}
		}
	}, nil
}

func rangePairs(b *renderBudget, v any) (iter.Seq2[any, any], error) {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Interface || rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return func(func(any, any) bool) {}, nil
		}
		rv = rv.Elem()
	}
	var over func(yield func(any, any) bool) error
	switch rv.Kind() {
	case reflect.Invalid:
		over = func(func(any, any) bool) error { return nil }
	case reflect.Slice, reflect.Array:
		over = func(yield func(any, any) bool) error {
			for i := range rv.Len() {
				if err := b.iterate(); err != nil {
					return err
				}
				if !yield(i, rv.Index(i).Interface()) {
					return nil
				}
			}
			return nil
		}
	case reflect.Map:
		// The keys are sorted before the first iteration, so they count
		// against the budget first: a range that breaks at once still costs
		// its map's sort.
		if err := b.steps(rv.Len()); err != nil {
			return nil, err
		}
		keys := rv.MapKeys()
		if rv.Type().Key().Kind() == reflect.String { // every map JSON decodes to
			sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		} else {
			sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i].Interface()) < fmt.Sprint(keys[j].Interface()) })
		}
		over = func(yield func(any, any) bool) error {
			for _, k := range keys {
				if err := b.iterate(); err != nil {
					return err
				}
				if !yield(k.Interface(), rv.MapIndex(k).Interface()) {
					return nil
				}
			}
			return nil
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := rv.Int()
		over = func(yield func(any, any) bool) error {
			for i := range n {
				if err := b.iterate(); err != nil {
					return err
				}
				if !yield(i, i) {
					return nil
				}
			}
			return nil
		}
	default:
		return nil, fmt.Errorf("range can't iterate over %v", v)
	}
	return func(yield func(any, any) bool) {
		// The budget error surfaces through the next write or iterate;
		// iterate keeps failing once past, so the render fails too.
		_ = over(yield)
	}, nil
}

// boundRanges rewrites every {{range PIPE}} of t into {{range PIPE |
// notifydRange1}} (or 2, when it declares two variables), so each iteration
// counts against the recipient's budget.
func boundRanges(t *template.Template) {
	for _, tt := range t.Templates() {
		if tt.Tree != nil {
			boundRangesIn(tt.Root)
		}
	}
}

func boundRangesIn(n parse.Node) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			boundRangesIn(c)
		}
	case *parse.IfNode:
		boundRangesIn(n.List)
		boundRangesIn(n.ElseList)
	case *parse.WithNode:
		boundRangesIn(n.List)
		boundRangesIn(n.ElseList)
	case *parse.TemplateNode:
		step := &parse.CommandNode{NodeType: parse.NodeCommand, Pos: n.Pos,
			Args: []parse.Node{parse.NewIdentifier(funcStep).SetTree(nil).SetPos(n.Pos)}}
		if n.Pipe == nil {
			n.Pipe = &parse.PipeNode{NodeType: parse.NodePipe, Pos: n.Pos, Line: n.Line}
		}
		n.Pipe.Cmds = append(n.Pipe.Cmds, step)
	case *parse.RangeNode:
		name := funcRange1
		if len(n.Pipe.Decl) == 2 {
			name = funcRange2
		}
		n.Pipe.Cmds = append(n.Pipe.Cmds, &parse.CommandNode{
			NodeType: parse.NodeCommand, Pos: n.Pipe.Pos,
			Args: []parse.Node{parse.NewIdentifier(name).SetTree(nil).SetPos(n.Pipe.Pos)},
		})
		boundRangesIn(n.List)
		boundRangesIn(n.ElseList)
	}
}

// payloadLimit is the bound of one rendered payload: the API's
// http.max_payload_bytes, so a rendered notification is held to what an
// enqueued one is.
func (s *Service) payloadLimit() int {
	if n := s.cfg.HTTP.MaxPayloadBytes; n > 0 && n <= outbox.MaxPayloadBytes {
		return int(n)
	}
	return config.DefaultMaxPayloadBytes
}

// checkRecipient says why a recipient from an audience cannot be stored
// as one ("" when it can): a query audience returns whatever its SQL does.
func checkRecipient(r string) string {
	switch {
	case len(r) > outbox.MaxRecipientLen:
		return fmt.Sprintf("recipient is %d bytes long, at most %d (stored cut here)", len(r), outbox.MaxRecipientLen)
	case !utf8.ValidString(r):
		return "recipient is not valid UTF-8"
	case strings.IndexByte(r, 0) >= 0:
		return "recipient contains a NUL byte"
	}
	return ""
}

// failedFor is the FAILED notification of a member that could not get one:
// a recipient that cannot be stored is cut (valid UTF-8, no NUL), and its
// idempotency key made from a hash of the whole, so two long recipients
// never share a key and re-running the chunk makes no second row.
func failedFor(recipient, reason string) failedRow {
	if checkRecipient(recipient) != "" {
		sum := sha256.Sum256([]byte(recipient))
		return failedForSum(recipient, hex.EncodeToString(sum[:]), reason)
	}
	return failedRow{recipient: recipient, keySuffix: recipient, reason: storableReason(reason)}
}

// storableReason is reason as a FAILED row's last_error can hold it, whatever
// it quotes: a render error may quote a value the template made ("a\x00",
// half of a UTF-8 sequence), which Postgres refuses as text, and the chunk
// that carried it would then fail on every retry. Invalid UTF-8 and NUL
// become U+FFFD, and the whole is cut to the column's bound.
func storableReason(reason string) string {
	reason = wire.Truncate(reason, outbox.MaxErrorLen) // cleaned within the bound, whatever the error quoted
	return wire.Truncate(outbox.StorableText(reason), outbox.MaxErrorLen)
}

// failedForSum is failedFor for a recipient that cannot be stored, given
// the hex SHA-256 of the whole (recipient may be only its beginning, as
// read back within the bound: recipientRow.overSum).
func failedForSum(recipient, sum, reason string) failedRow {
	return failedRow{recipient: wire.Truncate(outbox.StorableText(recipient), outbox.MaxRecipientLen), keySuffix: "sha256:" + sum,
		reason: storableReason(reason)}
}
