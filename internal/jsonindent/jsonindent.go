// Package jsonindent measures what indenting JSON would cost before it is
// indented. json.Indent (and a json.Encoder with SetIndent) puts each level
// of nesting on a line of its own, indented by its depth, so its output
// grows with the square of the nesting: a 6 KB document of arrays 3,000
// deep is 18 MB indented, a 1 MiB one of such chains (within the API's
// payload bound) about 9 GB. The dashboard's notification page and the
// CLI's -o json indent only what Fits.
package jsonindent

// Indent is the indentation Size counts: two spaces a level, no prefix.
const Indent = "  "

// Fits reports whether raw, indented with Indent, is at most twice its
// length plus 64 KiB; it stops counting past that.
func Fits(raw []byte) bool {
	limit := 2*len(raw) + 64<<10
	return Size(raw, limit) <= limit
}

// Size is at least the length of raw indented by json.Indent with Indent
// and no prefix, counted until it passes limit: every object or array
// opened or closed and every comma starts a new line indented by its
// depth, every colon gets a space. One pass, no allocation.
func Size(raw []byte, limit int) int {
	n, depth := len(raw), 0
	inString, escaped := false, false
	for _, c := range raw {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			n += 1 + 2*depth
		case '}', ']':
			depth = max(depth-1, 0)
			n += 1 + 2*depth
		case ',':
			n += 1 + 2*depth
		case ':':
			n++
		}
		if n > limit {
			return n
		}
	}
	return n
}
